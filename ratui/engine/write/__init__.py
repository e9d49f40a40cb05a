"""Writing a result into its table: the six strategies, file pruning, table preparation, file writing and commits."""
