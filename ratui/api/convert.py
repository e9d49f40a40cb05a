"""Arrow is the API's eager type; pandas and polars are conversions of it (polars optional: RAT-API-003 without it)."""

from __future__ import annotations

from typing import Any


def to_pandas(data) -> Any:
    return data.to_pandas()


def to_polars(data) -> Any:
    try:
        import polars
    except ImportError:
        from ratui.engine.errors import RatuiError

        raise RatuiError("RAT-API-003", "to_polars() needs the polars package, which is not installed",
                         hint="Install it into this environment: `pip install polars` (or `pip install "
                              "'ratui[test]'`), then call to_polars() again; to_arrow() and to_pandas() need "
                              "nothing more.") from None
    return polars.from_arrow(data)
