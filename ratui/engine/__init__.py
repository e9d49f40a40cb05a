"""The ratui engine: compile, run, record. Nothing below this package imports Textual."""
