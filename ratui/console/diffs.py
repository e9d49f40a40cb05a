"""A run's data diff as the console tells it: the engine's own wording (engine/run/diff_text.py), Textual-free."""

from __future__ import annotations

from ratui.engine.run.diff_text import SHORT, column_rows, counts_text, exact, method_text, sample_text

__all__ = ["SHORT", "column_rows", "counts_text", "exact", "method_text", "sample_text"]
