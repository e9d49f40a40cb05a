"""ratui's version (pyproject.toml says the same; tests/test_code.py checks they agree): a module of its own, so that
a part of ratui that needs it never imports the package's front door (ratui/__init__.py reaches the Python API)."""

__version__ = "0.1.0"
