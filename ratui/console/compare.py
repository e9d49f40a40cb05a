"""Two runs of one pipeline side by side: what each run took per phase, what it wrote, the schema changes its write
made, its quality results and what it read. Textual-free: built from the run records the controller returns
(`controller.get_run(run_id)`; engine/state/history.py says what a record holds).

The older run is A, the newer B; every difference is B against A ("+1.20s": B took longer).

What the history records, and so what can be compared: the phases' durations (`phases`) and final states
(`phase_status`), the run's rows written, status, error and warnings; the write phase's outcome (`write`: rows,
files added / removed / rewritten / kept, the table's rows after it, the schema changes it made, delete files);
the quality results (status and violations per test); the inputs a successful run read (`inputs`: each source
table's metadata pointer on main, each landing zone's files). What it does not record is said in `missing`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ratui.console.diffs import SHORT
from ratui.console.format import fmt_count, fmt_ms, fmt_time, outcome
from ratui.engine.vocabulary import PHASE_TITLES, PHASES, parse_time

# tone of a row: how B compares with A ("" says nothing either way)
BETTER, WORSE, CHANGED, SAME = "better", "worse", "changed", "same"

# the write phase's counts, as recorded in a run's `write` (WriteOutcome.to_dict()), with their labels
WRITE_FIELDS = (
    ("rows_written", "rows written"),
    ("files_added", "files added"),
    ("files_removed", "files removed"),
    ("files_rewritten", "  of them rewritten"),
    ("files_kept", "files kept"),
    ("delete_files_added", "delete files added"),
    ("rows_deleted_by_position", "rows deleted by position"),
    ("table_rows", "table rows after"),
)

QUALITY_RANK = {"passed": 0, "warned": 1, "failed": 2, "error": 2}


@dataclass(frozen=True)
class Row:
    label: str
    a: str
    b: str
    change: str = ""
    tone: str = ""  # BETTER | WORSE | CHANGED | SAME | ""


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""  # said under the title (why the section is empty, what it means)


@dataclass
class Comparison:
    pipeline: str
    a: dict[str, Any]  # the older run's record
    b: dict[str, Any]  # the newer run's record
    sections: list[Section]
    missing: list[str]  # what the history does not record (said on the screen)

    def section(self, title: str) -> Section:
        return next(s for s in self.sections if s.title == title)


class CompareError(ValueError):
    """The two runs cannot be compared (a run not found, two pipelines): the message says which."""


# --------------------------------------------------------------------------------------------- loading


def load(get_run: Callable[[str], dict[str, Any] | None], run_a: str, run_b: str) -> Comparison:
    """Read both runs (in a worker: `get_run` is the controller's) and compare them."""
    records = []
    for run_id in (run_a, run_b):
        record = get_run(run_id)
        if record is None:
            raise CompareError(f"no run '{run_id}' in the history (removed by the reaper?)")
        records.append(record)
    return compare(*records)


def previous_run(runs_page: Callable[..., Any], run: dict[str, Any], filter_for: Callable[[str], Any],
                 page_size: int = 200) -> dict[str, Any] | None:
    """The run of the same pipeline just before `run` in the history's order (newest first), or None.

    `runs_page(page, size, filter)` is the controller's; `filter_for(pipeline)` makes its RunFilter. The filter
    matches pipelines by substring, so each row's pipeline is checked exactly."""
    pipeline = run["pipeline"]
    page, seen = 0, False
    while True:
        data = runs_page(page, page_size, filter_for(pipeline))
        for row in data.rows:
            if seen and row["pipeline"] == pipeline:
                return row
            if row["id"] == run["id"]:
                seen = True
        if page >= data.pages - 1 or not data.rows:
            return None
        page += 1


# -------------------------------------------------------------------------------------------- comparing


def compare(first: dict[str, Any], second: dict[str, Any]) -> Comparison:
    """Side-by-side rows for two runs of one pipeline (in either order: the older becomes A)."""
    if first.get("pipeline") != second.get("pipeline"):
        raise CompareError(f"runs of different pipelines: {first.get('pipeline')} and {second.get('pipeline')}; "
                           "compare two runs of one pipeline")
    a, b = sorted((first, second), key=_start_order)
    missing: list[str] = []
    sections = [_run_section(a, b), _phases_section(a, b, missing), _write_section(a, b, missing),
                _schema_section(a, b, missing), _quality_section(a, b), _inputs_section(a, b, missing)]
    diff = _diff_section(a, b, missing)
    if diff is not None:  # runs from before ratui kept diffs have none: no section for them
        sections.insert(4, diff)
    missing.append("the table's schema itself (its columns and types) is not stored per run: only the changes a "
                   "write made are (write.schema_changes)")
    return Comparison(a["pipeline"], a, b, sections, missing)


def _start_order(record: dict[str, Any]) -> tuple[str, str]:
    return (record.get("started_at") or record.get("queued_at") or "", record.get("id") or "")


def _decoded(record: dict[str, Any], key: str) -> Any:
    value = record.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _number_change(a: int | None, b: int | None, fmt: Callable[[int], str] = fmt_count,
                   lower_is_better: bool | None = None, percent: bool = False) -> tuple[str, str]:
    if a is None or b is None:
        return "", ""
    delta = b - a
    if delta == 0:
        return "same", SAME
    sign = "+" if delta > 0 else "−"
    text = f"{sign}{fmt(abs(delta))}"
    if percent and a:
        text += f" ({sign}{abs(delta) / a:.0%})"
    if lower_is_better is None:
        return text, CHANGED
    return text, (BETTER if (delta < 0) == lower_is_better else WORSE)


def fmt_delta_ms(ms: int) -> str:
    """A difference of durations: '40 ms' below a second (fmt_ms would say 0.04s), else as fmt_ms."""
    return f"{ms} ms" if ms < 1000 else fmt_ms(ms)


def _status(record: dict[str, Any]) -> str:
    return outcome(record.get("status"), record.get("warnings") or 0, record.get("reason"),
                   record.get("error_code"))


def _run_section(a: dict[str, Any], b: dict[str, Any]) -> Section:
    section = Section("Run")
    section.rows.append(Row("run", a["id"], b["id"]))
    section.rows.append(Row("started (UTC)", fmt_time(a.get("started_at") or a.get("queued_at")),
                            fmt_time(b.get("started_at") or b.get("queued_at")), _time_apart(a, b)))
    sa, sb = _status(a), _status(b)
    tone = SAME if sa == sb else (BETTER if _status_rank(sb) < _status_rank(sa) else WORSE)
    section.rows.append(Row("outcome", sa, sb, "" if sa == sb else "changed", tone))
    for key, label in (("trigger", "trigger"), ("strategy", "strategy"), ("run_type", "run type")):
        va, vb = a.get(key) or "-", b.get(key) or "-"
        section.rows.append(Row(label, va, vb, "" if va == vb else "changed", SAME if va == vb else CHANGED))
    change, tone = _number_change(a.get("duration_ms"), b.get("duration_ms"), fmt_delta_ms, lower_is_better=True,
                                  percent=True)
    section.rows.append(Row("duration", fmt_ms(a.get("duration_ms")), fmt_ms(b.get("duration_ms")), change, tone))
    change, tone = _number_change(a.get("rows_written"), b.get("rows_written"))
    section.rows.append(Row("rows written (to main)", fmt_count(a.get("rows_written")),
                            fmt_count(b.get("rows_written")), change, tone))
    change, tone = _number_change(a.get("warnings") or 0, b.get("warnings") or 0, lower_is_better=True)
    section.rows.append(Row("quality warnings", str(a.get("warnings") or 0), str(b.get("warnings") or 0), change,
                            tone))
    ea, eb = a.get("error_code") or "-", b.get("error_code") or "-"
    if ea != "-" or eb != "-":
        section.rows.append(Row("error", ea, eb, "" if ea == eb else "changed", SAME if ea == eb else CHANGED))
    return section


def _status_rank(word: str) -> int:
    return {"success": 0, "unchanged": 0, "warned": 1, "upstream": 2, "cancelled": 2, "failed": 3}.get(word, 2)


def _time_apart(a: dict[str, Any], b: dict[str, Any]) -> str:
    ta = parse_time(a.get("started_at") or a.get("queued_at"))
    tb = parse_time(b.get("started_at") or b.get("queued_at"))
    if ta is None or tb is None:
        return ""
    seconds = int((tb - ta).total_seconds())
    if seconds < 120:
        return f"{seconds}s later"
    if seconds < 7200:
        return f"{seconds // 60}m later"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h later"
    return f"{seconds // 86400}d later"


def _phases_section(a: dict[str, Any], b: dict[str, Any], missing: list[str]) -> Section:
    section = Section("Phases")
    pa, pb = _decoded(a, "phases") or {}, _decoded(b, "phases") or {}
    sa, sb = _decoded(a, "phase_status") or {}, _decoded(b, "phase_status") or {}
    if not pa and not pb:
        section.note = "neither run recorded its phases (it ended before its first phase)"
        return section
    for name in PHASES:
        if name not in pa and name not in pb:
            continue
        change, tone = _number_change(pa.get(name), pb.get(name), fmt_delta_ms, lower_is_better=True, percent=True)
        section.rows.append(Row(PHASE_TITLES[name], _phase_cell(pa, sa, name), _phase_cell(pb, sb, name),
                                change, tone))
    if (pa and not sa) or (pb and not sb):
        missing.append("phase states (done / failed / cancelled) are not recorded for "
                       + _runs_named(a if pa and not sa else None, b if pb and not sb else None)
                       + " (runs recorded before ratui kept phase_status): a phase is shown with its time only")
    return section


def _phase_cell(phases: dict[str, int], states: dict[str, str], name: str) -> str:
    if name not in phases:
        return "not run"
    state = states.get(name)
    text = fmt_ms(phases[name])
    return text if state in (None, "done") else f"{text} {state}"


def _runs_named(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    names = [f"run {r['id']}" for r in (a, b) if r is not None]
    return " and ".join(names)


def _write_section(a: dict[str, Any], b: dict[str, Any], missing: list[str]) -> Section:
    section = Section("Write")
    wa, wb = _decoded(a, "write"), _decoded(b, "write")
    if not wa and not wb:
        section.note = "neither run recorded a write (no write phase finished, or runs from before ratui kept it)"
        missing.append("what each write did (files added / removed, rows): not recorded for "
                       + _runs_named(a, b))
        return section
    if not wa or not wb:
        missing.append("what the write did: not recorded for "
                       + _runs_named(a if not wa else None, b if not wb else None)
                       + " (it ended before its write phase)")
    wa, wb = wa or {}, wb or {}
    va, vb = wa.get("strategy") or "-", wb.get("strategy") or "-"
    section.rows.append(Row("strategy", va, vb, "" if va == vb else "changed", SAME if va == vb else CHANGED))
    for key, label in WRITE_FIELDS:
        xa, xb = wa.get(key), wb.get(key)
        if not xa and not xb and key in ("files_rewritten", "delete_files_added", "rows_deleted_by_position"):
            continue  # nothing of the kind on either side
        change, tone = _number_change(xa, xb)
        section.rows.append(Row(label, fmt_count(xa) if wa else "-", fmt_count(xb) if wb else "-", change, tone))
    if wa.get("created") or wb.get("created"):
        section.rows.append(Row("created the table", "yes" if wa.get("created") else "no",
                                "yes" if wb.get("created") else "no"))
    return section


def _schema_section(a: dict[str, Any], b: dict[str, Any], missing: list[str]) -> Section:
    section = Section("Schema changes")
    wa, wb = _decoded(a, "write") or {}, _decoded(b, "write") or {}
    ca, cb = list(wa.get("schema_changes") or []), list(wb.get("schema_changes") or [])
    if not wa and not wb:
        section.note = "not recorded (no write recorded for either run)"
        return section
    if not ca and not cb:
        section.note = "none: neither write changed the table's columns"
        return section
    for change in dict.fromkeys(ca + cb):
        in_a, in_b = change in ca, change in cb
        section.rows.append(Row(change, "yes" if in_a else ("-" if not wa else "no"),
                                "yes" if in_b else ("-" if not wb else "no"), "", CHANGED))
    return section


def _diff_section(a: dict[str, Any], b: dict[str, Any], missing: list[str]) -> Section | None:
    """Each run's data diff against its target (engine/run/data_diff.py): its counts, gate verdict and each column's
    NULLs, distinct values and sums after the run."""
    da, db = _decoded(a, "diff"), _decoded(b, "diff")
    if not da and not db:
        return None
    section = Section("Data diff")
    if not da or not db:
        missing.append("a data diff: not recorded for " + _runs_named(a if not da else None, b if not db else None)
                       + " (it ended before its diff, or ran before ratui kept diffs)")
    da, db = da or {}, db or {}

    def number(label: str, xa: Any, xb: Any, lower_is_better: bool | None = None) -> None:
        change, tone = _number_change(xa, xb, lower_is_better=lower_is_better)
        section.rows.append(Row(label, fmt_count(xa) if xa is not None else "-",
                                fmt_count(xb) if xb is not None else "-", change, tone))

    ma, mb = _diff_method(da), _diff_method(db)
    section.rows.append(Row("computed", ma, mb, "" if ma == mb else "changed", SAME if ma == mb else CHANGED))
    for key, label in (("rows_before", "rows before"), ("rows_after", "rows after"), ("added", "rows added"),
                       ("removed", "rows removed"), ("changed", "rows changed")):
        if da.get(key) is not None or db.get(key) is not None:
            number(label, da.get(key), db.get(key))
    ga, gb = _gate_outcome(da), _gate_outcome(db)
    if ga != "-" or gb != "-":
        tone = SAME if ga == gb else (WORSE if gb.startswith("failed") else BETTER if ga.startswith("failed")
                                      else CHANGED)
        section.rows.append(Row("gate", ga, gb, "" if ga == gb else "changed", tone))
    ca = {c["name"]: c for c in da.get("columns") or []}
    cb = {c["name"]: c for c in db.get("columns") or []}
    for name in list(dict.fromkeys([*cb, *ca])):
        xa, xb = ca.get(name) or {}, cb.get(name) or {}
        number(f"{name}: NULLs", xa.get("nulls_after"), xb.get("nulls_after"), lower_is_better=True)
        if xa.get("distinct_after") is not None or xb.get("distinct_after") is not None:
            number(f"{name}: distinct", xa.get("distinct_after"), xb.get("distinct_after"))
        sa, sb = xa.get("sum_after"), xb.get("sum_after")
        if sa is not None or sb is not None:
            same = str(sa) == str(sb)
            section.rows.append(Row(f"{name}: sum", str(sa) if sa is not None else "-",
                                    str(sb) if sb is not None else "-", "" if same else "changed",
                                    SAME if same else CHANGED))
    section.note = "each run against its target as its branch forked; columns: after the run"
    return section


def _diff_method(diff: dict[str, Any]) -> str:
    if not diff:
        return "-"
    return SHORT.get(diff.get("method"), "file stats")


def _gate_outcome(diff: dict[str, Any]) -> str:
    gate = diff.get("gate") or {}
    if gate.get("failed"):
        return f"failed ({len(gate['failed'])})"
    return f"passed ({len(gate['passed'])})" if gate.get("passed") else "-"


def _quality_section(a: dict[str, Any], b: dict[str, Any]) -> Section:
    section = Section("Quality")
    qa = {q["test"]: q for q in a.get("quality") or []}
    qb = {q["test"]: q for q in b.get("quality") or []}
    if not qa and not qb:
        section.note = "no quality results in either run (no tests, or neither run got to its quality phase)"
        return section
    tests = sorted(set(qa) | set(qb), key=lambda t: (-max(QUALITY_RANK.get((qa.get(t) or {}).get("status"), 0),
                                                          QUALITY_RANK.get((qb.get(t) or {}).get("status"), 0)), t))
    for test in tests:
        ra, rb = qa.get(test), qb.get(test)
        change, tone = "", ""
        if ra and rb:
            ka, kb = QUALITY_RANK.get(ra.get("status"), 1), QUALITY_RANK.get(rb.get("status"), 1)
            if kb < ka:
                change, tone = ("fixed" if kb == 0 else f"now {rb.get('status')}"), BETTER
            elif kb > ka:
                change, tone = f"now {rb.get('status')}", WORSE
            else:
                change, tone = _number_change(ra.get("violations") or 0, rb.get("violations") or 0,
                                              lower_is_better=True)
                if tone == SAME:
                    change = ""
        elif rb:
            change, tone = "new", CHANGED
        else:
            change, tone = "not run", CHANGED
        severity = (rb or ra or {}).get("severity") or ""
        section.rows.append(Row(f"{test} [{severity}]" if severity else test, _quality_cell(ra), _quality_cell(rb),
                                change, tone))
    return section


def _quality_cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    status = result.get("status") or "?"
    violations = result.get("violations") or 0
    return f"{status} ({violations:,})" if violations else status


def _inputs_section(a: dict[str, Any], b: dict[str, Any], missing: list[str]) -> Section:
    section = Section("Inputs")
    ia, ib = _decoded(a, "inputs"), _decoded(b, "inputs")
    if not ia and not ib:
        section.note = "recorded for successful runs only (what change detection compares)"
        return section
    ia, ib = ia or {}, ib or {}
    ta, tb = ia.get("tables") or {}, ib.get("tables") or {}
    for ref in sorted(set(ta) | set(tb)):
        same = ref in ta and ref in tb and ta[ref] == tb[ref]
        section.rows.append(Row(f"table {ref}", "read" if ref in ta else "-", "read" if ref in tb else "-",
                                "same snapshot" if same else ("other snapshot" if ref in ta and ref in tb else ""),
                                SAME if same else CHANGED))
    za, zb = ia.get("zones") or {}, ib.get("zones") or {}
    for zone in sorted(set(za) | set(zb)):
        da, db = za.get(zone), zb.get(zone)
        if isinstance(da, dict) or isinstance(db, dict):  # a large zone is recorded as its file count and a hash
            count_a = da.get("files") if isinstance(da, dict) else len(da or [])
            count_b = db.get("files") if isinstance(db, dict) else len(db or [])
            same = zone in za and zone in zb and da == db
            section.rows.append(Row(f"landing {zone} (files)", f"{count_a:,}" if zone in za else "-",
                                    f"{count_b:,}" if zone in zb else "-",
                                    "same files" if same else ("other files" if zone in za and zone in zb else ""),
                                    SAME if same else CHANGED))
            continue
        fa = {tuple(map(str, f)) for f in da or []}
        fb = {tuple(map(str, f)) for f in db or []}
        if zone in za and zone in zb:
            new, gone = len(fb - fa), len(fa - fb)
            change = "same files" if not new and not gone else f"+{new} new, −{gone} gone"
            tone = SAME if not new and not gone else CHANGED
        else:
            change, tone = "", CHANGED
        section.rows.append(Row(f"landing {zone} (files)", str(len(fa)) if zone in za else "-",
                                str(len(fb)) if zone in zb else "-", change, tone))
    if not ia or not ib:
        missing.append("the inputs read are recorded for successful runs only: not for "
                       + _runs_named(a if not ia else None, b if not ib else None))
    return section
