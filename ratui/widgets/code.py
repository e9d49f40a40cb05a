"""Source code as the console shows it: highlighted for the current theme, long lines wrapped (never clipped),
and the line an error points at marked."""

from __future__ import annotations

from typing import Iterable

from rich.syntax import Syntax


def code_view(text: str, language: str = "sql", *, dark: bool = True, error_lines: Iterable[int] = ()) -> Syntax:
    return Syntax(text, language, theme="ansi_dark" if dark else "ansi_light", line_numbers=True, word_wrap=True,
                  background_color="default", highlight_lines=set(error_lines))
