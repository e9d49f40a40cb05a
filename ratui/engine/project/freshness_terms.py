"""How fresh a pipeline's table must be (freshness.md in alerts.md): `warn_after` and `error_after`, durations since
the table's last successful run on main.

    -- @freshness: 26h                                  (an annotation: warn after 26 hours)
    -- @freshness: warn 26h, error 50h
    freshness: {warn_after: 26h, error_after: 2d}       (config.yaml)

A duration is a number and a unit: s, m, h, d or w ("90m", "1.5h", "2d"). A refusal is RAT-CFG-005 at the key's
line; `error_after` shorter than `warn_after` is refused (the warning would never be seen).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ratui.engine.project.schema import invalid

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
HINT = "Write freshness as a duration (26h, 90m, 2d) or {warn_after: 26h, error_after: 2d}."


@dataclass(frozen=True)
class Freshness:
    warn_seconds: float | None
    error_seconds: float | None

    def state(self, age_seconds: float | None) -> str:
        """fresh, warn or error; a table never built is in error (or warn, with only warn_after)."""
        if age_seconds is None:
            return "error" if self.error_seconds is not None else "warn"
        if self.error_seconds is not None and age_seconds > self.error_seconds:
            return "error"
        if self.warn_seconds is not None and age_seconds > self.warn_seconds:
            return "warn"
        return "fresh"

    def to_dict(self) -> dict[str, Any]:
        return {"warn_after": describe(self.warn_seconds), "error_after": describe(self.error_seconds)}


def duration(value: Any, where: str = "{where}") -> float:
    text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise invalid(f"{where}: '{str(value)[:40]}' is not a duration (a number and s, m, h, d or w)",
                      "RAT-CFG-005", hint=HINT)
    return float(match.group(1)) * UNITS[match.group(2).lower()]


def describe(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    for unit in ("w", "d", "h", "m"):
        if seconds >= UNITS[unit] and seconds % UNITS[unit] == 0:
            return f"{int(seconds // UNITS[unit])}{unit}"
    return f"{seconds:g}s"


def age_words(seconds: float | None) -> str:
    """An age as people read it: 2.5d, 3.0h, 12.0m, 40s ("-" for none)."""
    if seconds is None:
        return "-"
    for unit in ("d", "h", "m"):
        if seconds >= UNITS[unit]:
            return f"{seconds / UNITS[unit]:.1f}{unit}"
    return f"{seconds:.0f}s"


def pipeline_freshness(value: Any) -> Freshness | None:
    """A pipeline's `freshness`: a duration (warn after it), `warn D, error D` text, or a mapping of warn_after and
    error_after."""
    if value is None:
        return None
    if isinstance(value, dict):
        unknown = [str(key) for key in value if key not in ("warn_after", "error_after")]
        if unknown:
            raise invalid(f"{{where}} takes warn_after and error_after, not '{unknown[0]}'", "RAT-CFG-005", hint=HINT)
        parts = {key: duration(v, f"{{where}}.{key}") for key, v in value.items() if v is not None}
    else:
        parts = {}
        for piece in str(value).split(","):
            words = piece.split()
            if len(words) == 1 and not parts:
                parts["warn_after"] = duration(words[0])
            elif len(words) == 2 and words[0].lower() in ("warn", "error"):
                parts[f"{words[0].lower()}_after"] = duration(words[1])
            else:
                raise invalid(f"{{where}}: '{piece.strip()[:40]}' is not `D`, `warn D` or `error D`", "RAT-CFG-005",
                              hint=HINT)
    found = Freshness(parts.get("warn_after"), parts.get("error_after"))
    if found.warn_seconds is None and found.error_seconds is None:
        raise invalid("{where} needs warn_after or error_after", "RAT-CFG-005", hint=HINT)
    if found.warn_seconds is not None and found.error_seconds is not None and found.error_seconds < found.warn_seconds:
        raise invalid("{where}: error_after is shorter than warn_after (the warning would never be seen)",
                      "RAT-CFG-005", hint=HINT)
    return found
