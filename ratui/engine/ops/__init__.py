"""Around the runs: branches and merges, atomic publish, undo, and the reaper with its orphan-file sweep."""
