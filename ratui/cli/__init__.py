"""`ratui` on the command line (main.py); one module per command group."""

from ratui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
