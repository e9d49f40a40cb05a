"""A pane: a part of a screen that scrolls by keyboard once focused (`tab` reaches it; ↑ ↓, PageUp / PageDown,
Home / End scroll it) and that the palette's "Maximize" (or `m` where a screen binds it) can give the whole
screen. Textual's containers refuse to be maximized; a pane is what a person reads, so it may."""

from __future__ import annotations

from textual.containers import VerticalScroll


class Pane(VerticalScroll):
    ALLOW_MAXIMIZE = True


def toggle_maximize(screen) -> None:
    """`m`: the focused pane fills the screen, or the maximized one goes back (esc does too)."""
    if screen.maximized is not None:
        screen.minimize()
        return
    focused = screen.focused
    if focused is not None:
        screen.maximize(focused)
