"""ratui: a local lakehouse operations console (Spark + Iceberg + SQLite, in the terminal)."""

__version__ = "0.1.0"
