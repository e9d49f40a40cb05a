"""The engine's facade: the Engine (facade/engine.py), the one door the command line, the console, the Python API
and watch mode use. Each of its modules holds one concern of the door: the project and its compile (project.py),
runs (runs.py), branches and refs (branches.py), landing zones (landing.py), queries and table reads (queries.py),
upkeep (upkeep.py: the reaper and undo). It sits above run/ and ops/ and reaches them; nothing below imports it."""
