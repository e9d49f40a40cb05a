"""Change detection: before a run, decide whether a pipeline needs to run at all, and say why.

    skip         definition and inputs unchanged since its last successful run
    rebuild      first run, or its table is missing on the ref: the table is built from its whole input
    incremental  an upstream table has new snapshots, its landing files changed, or its definition changed
                 (SQL/Python, config.yaml, annotations, quality tests), and the strategy works on increments
                 (incremental, append_only, ...): the run takes in what is new, with the new definition; the rows
                 already in the table stay as they are
    full         the same, for a full_refresh pipeline (it recomputes everything)

The run type says what the run does; the reason says why it runs. A definition that changed is a reason, not a
kind of run: what the run does then is its strategy's ordinary run (`full_refresh` recomputes the table;
`--full-refresh` makes any pipeline do so).

The inputs a run read (upstream tables' metadata locations at its fork point, landing files with size and
mtime) and its definition's hashes are stored with the run, so the next decision compares like with like.
The landing ledger counts too: a file the pipeline has not loaded (a reset, a failed run) makes it run.

Decisions are per ref: on a dev or publish branch the last run that counts is the newest one merged into that
branch, or, before the branch has one, the one its tables came from (merged into the ref it was created from
before it was created).

An invocation asks its `Decider` (the project's state, one per engine), which also decides a whole selection's
unchanged pipelines at once (the pre-pass of a no-op run).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.entry import same_digest
from ratui.engine.landing.zone import open_zone, zone_digest
from ratui.engine.project import intervals
from ratui.engine.project.discovery import Pipeline
from ratui.engine.project.settings import Settings
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.state.project_state import ProjectState


@dataclass(frozen=True)
class Decision:
    key: str
    run_type: str  # skip | rebuild | incremental | full (vocabulary.RUN_TYPES)
    reason: str

    @property
    def runs(self) -> bool:
        return self.run_type != "skip"


def version_of(hashes: dict[str, str]) -> str:
    """One short hash of a whole definition (SQL/Python, config, tests): the pipeline's version."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:12]


def definition_hashes(pipeline: Pipeline) -> dict[str, str]:
    """One hash per definition file, so a decision can name the file that changed."""
    out: dict[str, str] = {}
    if pipeline.file is not None:
        out[pipeline.file.name] = hashlib.sha256(pipeline.text.encode()).hexdigest()[:16]
    config = pipeline.folder / "config.yaml"
    if config.is_file():
        out["config.yaml"] = hashlib.sha256(config.read_bytes()).hexdigest()[:16]
    for test in pipeline.tests:
        out[f"tests/quality/{test.file.name}"] = hashlib.sha256(test.text.encode()).hexdigest()[:16]
    return out


def zone_state(settings: Settings, pipeline: Pipeline, inputs: "DecisionInputs | None" = None) -> dict[str, Any]:
    """Each zone's active files as change detection compares them (a zone that cannot be listed because it is
    not there is empty; a remote one that cannot be reached raises its coded error rather than look unchanged)."""
    state: dict[str, Any] = {}
    for name in pipeline.zones:
        known = inputs.zones.get((pipeline.namespace, name)) if inputs is not None else None
        if known is not None:
            state[name] = known
            continue
        zone = None
        try:
            zone = open_zone(settings, pipeline.namespace, name)
            state[name] = zone_digest(zone.list())
        except Exception:
            if zone is not None and zone.polled:
                raise
            state[name] = []
        if inputs is not None:
            inputs.zones[(pipeline.namespace, name)] = state[name]
    return state


class DecisionInputs:
    """What change detection reads about a ref, read once for many decisions: its table pointers, each zone's
    listing, and (`prefetch`) the last successful runs of many pipelines. One decision makes its own; an
    invocation's pre-pass shares one across all its pipelines (1,500 decisions: one pointer read, not 3,000)."""

    def __init__(self, state: ProjectState, ref: str = MAIN):
        self.state = state
        self.ref = ref
        self._pointers: dict[str, str] | None = None
        self._last: dict[str, dict[str, Any] | None] = {}
        self.zones: dict[tuple[str, str], Any] = {}

    def pointers(self) -> dict[str, str]:
        if self._pointers is None:
            self._pointers = self.state.table_pointers(self.ref)
        return self._pointers

    def last_success(self, key: str) -> dict[str, Any] | None:
        if key not in self._last:
            self._last[key] = last_success_on(self.state, key, self.ref)
        return self._last[key]


def _changed_files(old: dict[str, str], new: dict[str, str]) -> list[str]:
    return sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))


def strategy_run_type(pipeline: Pipeline) -> str:
    """The run type of a run on a table that exists: `full` for a full_refresh pipeline, else `incremental`."""
    strategy = pipeline.config.merge_strategy if pipeline.config else "full_refresh"
    return "full" if strategy == "full_refresh" else "incremental"


def decide(state: ProjectState, pipeline: Pipeline, *, force: bool = False, ref: str = MAIN,
           inputs: DecisionInputs | None = None) -> Decision:
    """`inputs`: what an earlier decision on the same ref already read (an invocation's pre-pass), else read now."""
    key = pipeline.key
    decision = _compare_with_last_success(state, pipeline, strategy_run_type(pipeline), ref,
                                          inputs or DecisionInputs(state, ref))
    if force and not decision.runs:
        return Decision(key, strategy_run_type(pipeline), f"forced ({decision.reason})")
    if not decision.runs and pipeline.config is not None and pipeline.config.merge_strategy == "incremental_by_time":
        due = intervals_due(state, pipeline, ref)
        if due is not None:
            return Decision(key, "incremental", f"intervals due: [{intervals.iso(due[0])}, {intervals.iso(due[1])})")
    return decision


def intervals_due(state: ProjectState, pipeline: Pipeline, ref: str) -> intervals.Range | None:
    """The range of intervals an incremental_by_time pipeline's plain run fills on `ref` now (None: none due)."""
    table = state.catalog.load_table(ref, pipeline.key) if state.catalog.table_exists(ref, pipeline.key) else None
    return intervals.due(pipeline.config, intervals.done_of(table), intervals.utc_now())


def last_success_on(state: ProjectState, key: str, ref: str) -> dict[str, Any] | None:
    """The run whose output `ref` holds for `key`: its newest run there, else (a branch) the newest run merged
    into the ref it was created from before it was, and so on up to main."""
    cutoff = None
    for _ in range(64):  # a chain of branches of branches; never a cycle, but bounded all the same
        last = state.history.last_success(key, ref, merged_before=cutoff)
        if last is not None or ref == MAIN:
            return last
        origin = branch_origin(state, ref)
        if origin is None:
            return None
        ref, cutoff = origin
    return None


def branch_origin(state: ProjectState, ref: str) -> tuple[str, str] | None:
    """(the ref a branch was created from, when), from its creation commit."""
    for commit in state.catalog.log(ref, limit=100_000, own=True):
        if commit.ref == ref and commit.meta.get("kind") == "branch":
            return commit.meta.get("from") or MAIN, commit.created_at
        if commit.ref != ref:
            break
    return None


def _compare_with_last_success(state: ProjectState, pipeline: Pipeline, on_change: str, ref: str,
                               inputs: DecisionInputs) -> Decision:
    """The decision without --force: the pipeline's definition and inputs now against those of its last success
    on `ref` (its upstream tables' pointers, the ledger's unloaded files, its zones' listings)."""
    key = pipeline.key
    last = inputs.last_success(key)
    if last is None or not last.get("fingerprint"):
        return Decision(key, "rebuild", "first run" if ref == MAIN else f"first run on {ref}")
    pointers = inputs.pointers()
    if key not in pointers:
        return Decision(key, "rebuild", f"its table is missing on {ref}")
    changed = _changed_files(json.loads(last["fingerprint"]), definition_hashes(pipeline))
    if changed:
        # the strategy's ordinary run with the new definition: an incremental one takes in what is new (its
        # is_incremental() is true, its watermark read), the rows already written stay as the old one made them
        return Decision(key, on_change, f"definition changed: {', '.join(changed)}")
    read = json.loads(last.get("inputs") or "{}")
    moved = [ref for ref in pipeline.refs if read.get("tables", {}).get(ref) != pointers.get(ref)]
    if moved:
        names = ", ".join(m.split(".", 1)[1] for m in moved)
        return Decision(key, on_change, f"upstream changed: {names}")
    pending = state.ledger.unloaded(pipeline.namespace, pipeline.zones, key, ref) if pipeline.zones else []
    zones_now = None
    if pending and (pipeline.config.landing_mode if pipeline.config else "all") == "all":
        # in landing_mode all the zone folder is the truth: a file removed from it is not to load (the run's
        # ledger sync forgets it); an archived one still is
        try:
            zones_now = zone_state(state.settings, pipeline, inputs)
        except RatuiError as exc:
            return Decision(key, on_change, f"landing zone not listed ({exc.code})")
        present = {(zone, entry[0]) for zone, digest in zones_now.items() for entry in digest}
        pending = [f for f in pending if f.archived or (f.zone, f.file) in present]
    if pending:
        names = ", ".join(f.name for f in pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
        return Decision(key, on_change, f"landing files to load: {names}")
    zones_then = read.get("zones", {})
    try:
        zones_now = zones_now if zones_now is not None else zone_state(state.settings, pipeline, inputs)
    except RatuiError as exc:  # an object store that cannot be listed: run, and let the run say why it failed
        return Decision(key, on_change, f"landing zone not listed ({exc.code})")
    new_files = [z for z in pipeline.zones if not same_digest(zones_then.get(z), zones_now.get(z) or [])]
    if new_files:
        return Decision(key, on_change, f"landing files changed: {', '.join(new_files)}")
    return Decision(key, "skip", f"unchanged since run {last['id']}")


class Decider:
    """Change detection for an invocation: whether each pipeline must run on a ref, and why."""

    def __init__(self, state: ProjectState):
        self._state = state

    def decide(self, pipeline: Pipeline, *, force: bool = False, full_refresh: bool = False,
               ref: str = MAIN) -> Decision:
        if full_refresh:
            return Decision(pipeline.key, "full", "--full-refresh: rebuild from scratch")
        if not pipeline.ok:
            return Decision(pipeline.key, strategy_run_type(pipeline), "definition has errors")  # the run reports them
        return decide(self._state, pipeline, force=force, ref=ref)  # reads the ref for this one decision

    def unchanged(self, compiled: CompiledProject, keys: list[str], *, ref: str = MAIN) -> dict[str, Decision]:
        """key -> its skip decision, for the pipelines of `keys` that are unchanged and whose upstream pipelines in
        `keys` are unchanged too (in dependency order; one read of the ref's pointers and zones for all)."""
        inputs = DecisionInputs(self._state, ref)
        ours = set(keys)
        out: dict[str, Decision] = {}
        for key in compiled.graph.order():
            pipeline = compiled.pipelines.get(key)
            if key not in ours or pipeline is None or not pipeline.ok:
                continue
            if any(up in ours and up not in out for up in compiled.graph.upstream.get(key, ())):
                continue  # an upstream may run first: this one is decided after it, as always
            decision = decide(self._state, pipeline, ref=ref, inputs=inputs)
            if not decision.runs:
                out[key] = decision
        return out
