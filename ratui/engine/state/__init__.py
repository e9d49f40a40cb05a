"""The project's state in .ratui/ratui.db: the branch catalog, the run history, the landing ledger, process identity."""
