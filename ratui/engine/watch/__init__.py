"""Watch mode, above the engine: what to ignore (ignore.py), what a change makes run (plan.py), and the watcher that
runs it through the Engine facade (watcher.py)."""
