"""Finding a pipeline by what was typed: every word a part of its key, the best matches first; when nothing
matches, the closest names (a typo). Used by the find dialog (screens/find_pipeline.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


@dataclass
class Found:
    """Pipelines whose names hold what was typed (best first, at most `limit`), how many in all, and when none
    does, the closest names (a typo)."""

    matches: list[str]
    total: int
    close: list[str] = field(default_factory=list)


def find(text: str, keys: Iterable[str], namespace: str | None = None, limit: int = 100) -> Found:
    """The pipelines `text` names. Every word typed must be part of the key (case-insensitive); the name itself
    first, then a name or `layer.name` that starts with it, then the rest, each in key order. Nothing typed: all."""
    keys = list(keys)
    words = text.strip().lower().split()
    if not words:
        return Found(keys[:limit], len(keys))
    whole = " ".join(words)
    ranked: list[tuple[int, str]] = []
    for key in keys:
        low = key.lower()
        if not all(w in low for w in words):
            continue
        name = low.rsplit(".", 1)[-1]
        local = low.split(".", 1)[-1]
        if whole in (low, local, name):
            rank = 0
        elif name.startswith(whole):
            rank = 1
        elif local.startswith(whole) or (namespace and low.startswith(f"{namespace.lower()}.{whole}")):
            rank = 2
        elif whole in name:
            rank = 3
        else:
            rank = 4
        ranked.append((rank, key))
    ranked.sort()
    if ranked:
        return Found([k for _, k in ranked[:limit]], len(ranked))
    return Found([], 0, close_names(whole, keys))


def close_names(text: str, keys: list[str], count: int = 5) -> list[str]:
    """The pipelines whose name (or layer.name, or key, when `text` has dots) is closest to `text`: a typo's likely
    meaning, best first (ties in key order)."""
    from difflib import SequenceMatcher

    text = text.strip().lower()
    dots = text.count(".")
    by_form: dict[str, list[str]] = {}
    for key in sorted(keys):
        low = key.lower()
        form = low if dots >= 2 else low.split(".", 1)[-1] if dots == 1 else low.rsplit(".", 1)[-1]
        by_form.setdefault(form, []).append(key)
    matcher = SequenceMatcher()
    matcher.set_seq2(text)
    scored: list[tuple[float, str]] = []
    for form, same in by_form.items():
        matcher.set_seq1(form)
        if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
            score = matcher.ratio()
            if score >= 0.6:
                scored.extend((-score, key) for key in same)
    scored.sort()
    return [key for _, key in scored[:count]]
