"""Which of a pipeline's runs tells its state now. A failure stops being the pipeline's state once the pipeline is
fixed back to the version of its last good run: its definition (SQL or Python, config, tests) hashes to the version
that run recorded, the run whose output the working ref holds. `r` then answers "unchanged since" that run, and the
tree, the layer's count of failures and Quality say what is true: the last good run's state, the failure an earlier
version's. Pure: the runs (History.recent_by_pipeline's rows, newest first) and the versions come from the
controller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ratui.engine.vocabulary import MAIN

FAILED = ("failed", "cancelled")


@dataclass(frozen=True)
class Fix:
    good: dict[str, Any]  # the last good run: the pipeline is its version again
    superseded: tuple[dict[str, Any], ...]  # the failed (or cancelled) runs since, of other versions


def on_ref(run: Mapping[str, Any], ref: str) -> bool:
    return (run.get("ref") or MAIN) == ref


def candidates(recent: Mapping[str, list[dict[str, Any]]], ref: str = MAIN) -> list[str]:
    """The pipelines whose newest run on `ref` failed or was cancelled after a success there: their version now
    decides whether the failure is still their state."""
    out = []
    for key, runs in recent.items():
        mine = [r for r in runs if on_ref(r, ref)]
        if mine and mine[0].get("status") in FAILED and any(r.get("status") == "success" for r in mine):
            out.append(key)
    return out


def fixes(recent: Mapping[str, list[dict[str, Any]]], versions: Mapping[str, str], ref: str = MAIN) -> dict[str, Fix]:
    """pipeline -> its Fix, for each pipeline back at the version of its last good run on `ref` whose failures since
    were of other versions (a failure of the version it has now is its state still: the data, not the code)."""
    out: dict[str, Fix] = {}
    for key, version in versions.items():
        mine = [r for r in recent.get(key, []) if on_ref(r, ref)]
        good_at = next((i for i, r in enumerate(mine) if r.get("status") == "success"), None)
        if not good_at or mine[good_at].get("version") != version:
            continue
        since = mine[:good_at]
        if all(r.get("status") in FAILED and r.get("version") and r.get("version") != version for r in since):
            out[key] = Fix(mine[good_at], tuple(since))
    return out


def state_runs(runs: list[dict[str, Any]], fix: Fix | None) -> list[dict[str, Any]]:
    """The runs that tell the state (newest first): without the failures a fix superseded."""
    if fix is None:
        return runs
    gone = {r.get("id") for r in fix.superseded}
    return [r for r in runs if r.get("id") not in gone]


def superseded_runs(all_fixes: Mapping[str, Fix]) -> set[str]:
    return {r["id"] for fix in all_fixes.values() for r in fix.superseded}


def mark_current(results: list[dict[str, Any]], superseded: set[str]) -> None:
    """Mark each quality result (newest first) `current`: the newest of its pipeline's test whose run was not
    superseded by a fix. The others are earlier results: history, not the state."""
    seen: set[tuple[Any, Any]] = set()
    for q in results:
        key = (q.get("pipeline"), q.get("test"))
        q["current"] = q.get("run_id") not in superseded and key not in seen
        if q["current"]:
            seen.add(key)
