"""Around the runs: change detection, watch mode, the reaper and its orphan-file sweep."""
