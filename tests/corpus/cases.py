"""The corpus of bad inputs: one declarative `Case` per input, run through the installed `ratui` command.

Each case is applied to its own copy of the base state (tests/corpus/base/ after one successful run), or, for a
runtime case (`batch` set), to the one shared copy of its batch: every runtime case brings its own pipeline
(and landing zone) with unique names, so the cases of a batch cannot interfere and one `ratui run` (one JVM)
serves them all.

Placeholders, replaced when a case is applied:
    {outside}   a folder outside the project (per case; per batch for runtime cases)
    {root}      the project folder
    {empty}     (argv and api code only) an empty folder without ratui.yaml

A Python API case (`api` set) runs its code in a fresh interpreter with `p = ratui.open(project)` and `ratui`
imported (`{empty}` in the code opens that folder instead: the code then does its own `ratui.open`); the coded
error it raises is reported like `--json` reports one, and exit 2.

`spec` says where the expected behaviour comes from: "today" (it worked when the case was written) or
"building" (the behaviour was being built when the case was written; see the task's spec).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

NS = "shop"
P = f"{NS}/pipelines"
L = f"{NS}/landing"

BASE_SETTINGS = """\
namespace: shop
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
"""

CHECK = ("check", "--json")
RUN = ("run", "--json")


def parquet_bytes(columns: Mapping[str, pa.Array | list]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table(dict(columns)), buf)
    return buf.getvalue()


# files the base template gets when it is materialized (binary: generated, not committed)
BASE_GENERATED: dict[str, bytes] = {
    f"{L}/products/products_1.parquet": parquet_bytes({
        "product_id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "name": ["anvil", "bolt", "crate", "drill", "easel"],
        "price": [10.5, 0.25, 7.0, 55.0, 23.75],
    }),
}


@dataclass(frozen=True)
class Batch:
    """One `ratui` invocation (one JVM) shared by every runtime case naming it."""

    id: str
    argv: tuple[str, ...]  # the run (with `select`, its cases' pipelines are appended as selectors)
    expect_exit: int  # the argv must hold --json: results are read from its objects
    before: tuple[tuple[str, ...], ...] = ()  # CLI steps before the run (they start no JVM)
    settings: str | None = None  # replaces ratui.yaml
    select: bool = False  # select the pipelines of its cases by name (else: no selector, everything runs)
    notes: str = ""


BATCHES: dict[str, Batch] = {b.id: b for b in (
    Batch("main", RUN, 1, before=(("landing", "reset", "events_reset", "e1.jsonl"),),
          notes="every runtime case that needs no flag, setting or selector; `landing reset` runs first"),
    Batch("selected", ("run", "--full-refresh", "--json"), 1, select=True, settings=BASE_SETTINGS + (
        "landing:\n  bad_rows: skip\n  columns: union\n"
        "  zones:\n    lost: {url: 's3://nobucket/lost', endpoint_url: 'http://127.0.0.1:9'}\n"
        "paths:\n  allow_outside:\n    - {outside}\n"),
        notes="its cases' pipelines selected by name, --full-refresh, lenient landing settings and "
              "paths.allow_outside; a broken pipeline outside the selection"),
    Batch("spark-refuses", RUN, 1, select=True,
          settings=BASE_SETTINGS + "    spark.sql.codegen.cache.maxEntries: -1\n",
          notes="a Spark setting of ratui.yaml that Spark itself refuses when it starts"),
    Batch("class-missing", RUN, 1, select=True,
          settings=BASE_SETTINGS + "    spark.serializer: com.example.nosuch.Serializer\n",
          notes="a Spark setting of ratui.yaml naming a class no jar on Spark's classpath carries"),
    Batch("jvm-refuses", RUN, 1, select=True,
          settings=BASE_SETTINGS + "    spark.driver.extraJavaOptions: -Dx=1 -XX:-BytecodeVerificationRemote\n",
          notes="a Java option of ratui.yaml the JVM refuses: it does not start at all"),
)}


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # relpath -> content (a/b/README makes dir b)
    delete: tuple[str, ...] = ()
    symlinks: Mapping[str, str] = field(default_factory=dict)  # relpath -> target
    outside: Mapping[str, str | bytes] = field(default_factory=dict)  # files written under {outside}
    argv: tuple[str, ...] = CHECK  # `--project {root}` is added unless argv has --project
    expect_exit: int | tuple[int, ...] = 2
    expect_code: str | None = None  # exact, or a prefix ending in "-" (any code of that family)
    expect_file: str | None = None  # project-relative suffix of the file the error names
    expect_line: int | None = None  # None: not asserted
    also: tuple[tuple[str, str], ...] = ()  # further (code, file suffix) errors that must be reported too
    batch: str | None = None  # runtime: the batch it belongs to
    pipeline: str | None = None  # runtime: the table key whose run the case asserts
    expect_status: str = "failed"  # runtime
    expect_notes: tuple[str, ...] = ()  # runtime: one note starts with the first and holds the others ("re:" regex)
    expect_warnings: int | None = None  # runtime: quality warnings
    expect_rows: tuple[dict, ...] | None = None  # runtime: the table's rows on main afterwards (any order)
    expect_row_count: int | None = None
    expect_stderr: tuple[str, ...] = ()  # substrings stderr must hold
    never_shown: tuple[str, ...] = ()  # substrings neither stdout nor stderr may hold (a secret of the case's files)
    prepare: Callable | None = None  # prepare(root, outside) after files are written
    scenario: str | None = None  # a bespoke test in test_corpus.py
    api: str | None = None  # Python API: this code runs with `p = ratui.open({root})` (conftest.API_RUNNER), not argv
    fingerprint: bool = True  # main's tables unchanged (False when the case breaks the catalog itself)
    spec: str = "today"  # "today" | "building"
    notes: str = ""
    # a request to `ratui serve` on the base state (scenario "rest"): (method, ref, path after /v1, body); the
    # answer must be `expect_http` in the Iceberg REST error shape with `expect_code`, main and the branch unchanged
    rest: tuple[str, str, str, bytes | dict | list | None] | None = None
    expect_http: int | None = None

    @property
    def runtime(self) -> bool:
        return self.batch is not None


def sql(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def _csv(*rows: str) -> str:
    return "\n".join(rows) + "\n"


def pipe(layer: str, name: str, text: str | bytes, file: str = "pipeline.sql") -> dict[str, str | bytes]:
    return {f"{P}/{layer}/{name}/{file}": text}


def zone_pipe(name: str, zone: str, select: str = "*", extra: str = "") -> dict[str, str]:
    return pipe("bronze", name, sql("-- @merge_strategy: full_refresh", *([extra] if extra else []),
                                    f"SELECT {select} FROM {{{{ landing_zone('{zone}') }}}}"))


def _key(name: str, layer: str = "bronze") -> str:
    return f"{NS}.{layer}.{name}"


def _merge(*parts: Mapping) -> dict:
    out: dict = {}
    for part in parts:
        out.update(part)
    return out


def _delete_processed(zone: str) -> Callable:
    def prepare(root, outside) -> None:
        processed = root / L / zone / "_processed"
        files = [p for p in processed.glob("*/*") if p.is_file()]
        assert files, f"the base run archived nothing under {processed}"
        for p in files:
            p.unlink()
    return prepare


def _seed_runs(n: int) -> Callable:
    """n finished runs in the history, so `ratui runs --json` writes far more than a pipe buffer holds."""
    def prepare(root, outside) -> None:
        import sqlite3
        import uuid

        conn = sqlite3.connect(root / ".ratui" / "ratui.db")
        try:
            columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
            row = conn.execute("SELECT * FROM runs ORDER BY rowid LIMIT 1").fetchone()
            assert row, "the base state has no runs"
            template = dict(zip(columns, row))
            rows = []
            for i in range(n):
                values = dict(template, id=f"seed{i:06d}{uuid.uuid4().hex[:6]}")
                rows.append(tuple(values[c] for c in columns))
            conn.executemany(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             rows)
            conn.commit()
        finally:
            conn.close()
    return prepare


def _garbage_db(root, outside) -> None:
    state = root / ".ratui"
    for name in ("ratui.db-wal", "ratui.db-shm"):
        (state / name).unlink(missing_ok=True)
    (state / "ratui.db").write_bytes(b"this is not a database\x00\xff\xfe" * 200)


def _damage_a_data_file(table: str) -> Callable:
    def prepare(root, outside) -> None:
        files = sorted((root / NS / "warehouse").glob(f"{table}*/data/**/*.parquet"))
        assert files, f"the base run wrote no data file of {table}"
        files[0].write_bytes(b"overwritten behind ratui's back\n")
    return prepare


def _damage_compile_cache(how: str) -> Callable:
    """The compile cache (.ratui/compile-cache.json) as a crash, a disk or a hand could leave it."""
    def prepare(root, outside) -> None:
        import json
        import subprocess
        import sys

        cache = root / ".ratui" / "compile-cache.json"
        if not cache.is_file():  # the base state's own compile made one; make sure, with this case's files too
            subprocess.run([sys.executable, "-m", "ratui", "check", "--project", str(root)], capture_output=True)
        if how == "not json":
            cache.write_bytes(b'{"format": 1, "entries": {"abc\xff')
        elif how == "wrong shapes":
            data = json.loads(cache.read_text())
            for entry in data["entries"].values():
                entry.update(refs=42, zones={"a": 1}, ref_lines=[], error={"code": "RAT-NOPE-1"}, config=[1])
            cache.write_text(json.dumps(data))
        elif how == "a folder":
            cache.unlink()
            (cache / "inside").mkdir(parents=True)
    return prepare


PNG_GARBAGE = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\xff\xfe\xfd" + bytes(range(256)) * 4
ELF_GARBAGE = b"\x7fELF\x02\x01\x01\x00" + bytes(range(255, -1, -1)) * 8
GOOD_PQ = parquet_bytes({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})


CASES: list[Case] = [
    # ------------------------------------------------------------------------------------------ annotations
    Case("ann-unknown-key", "annotations",
         pipe("bronze", "ann_unknown", sql("-- @merge_strategy: full_refresh", "-- @uniqe_key: id",
                                           "SELECT 1 AS id")),
         expect_code="RAT-CFG-002", expect_file=f"{P}/bronze/ann_unknown/pipeline.sql", expect_line=2),
    Case("ann-empty-unique-key", "annotations",
         pipe("bronze", "ann_empty_key", sql("-- @merge_strategy: incremental", "-- @unique_key:",
                                             "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_empty_key/pipeline.sql", expect_line=2,
         expect_stderr=("has no value",), spec="building",
         notes="its own error at its own line, not 'incremental needs a unique_key' at line 1"),
    Case("ann-duplicate", "annotations",
         pipe("bronze", "ann_dup", sql("-- @merge_strategy: full_refresh", "-- @tags: daily",
                                       "-- @merge_strategy: append_only", "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_dup/pipeline.sql", expect_line=3),
    Case("ann-unknown-strategy", "annotations",
         pipe("bronze", "ann_strategy", sql("-- @description: upserts", "-- @merge_strategy: upsert",
                                            "SELECT 1 AS id")),
         expect_code="RAT-CFG-001", expect_file=f"{P}/bronze/ann_strategy/pipeline.sql", expect_line=2),
    Case("ann-incremental-without-key", "annotations",
         pipe("bronze", "ann_nokey", sql("-- @merge_strategy: incremental", "SELECT 1 AS id")),
         expect_code="RAT-CFG-003", expect_file=f"{P}/bronze/ann_nokey/pipeline.sql", expect_line=1),
    Case("ann-after-body", "annotations",
         pipe("bronze", "ann_late", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id",
                                        "-- @tags: daily")),
         expect_code="RAT-CFG-009", expect_file=f"{P}/bronze/ann_late/pipeline.sql", expect_line=3),
    Case("ann-bad-boolean", "annotations",
         pipe("bronze", "ann_bool", sql("-- @merge_strategy: full_refresh", "-- @archive_landing_zones: maybe",
                                        "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_bool/pipeline.sql", expect_line=2),
    Case("ann-bad-partition-by", "annotations",
         pipe("bronze", "ann_part", sql("-- @merge_strategy: full_refresh", "-- @partition_by: week(ts)",
                                        "SELECT 1 AS id, current_timestamp() AS ts")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_part/pipeline.sql", expect_line=2),
    Case("ann-bad-landing-mode", "annotations",
         pipe("bronze", "ann_mode", sql("-- @merge_strategy: append_only", "-- @landing_mode: newest",
                                        "SELECT * FROM {{ landing_zone('orders') }}")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_mode/pipeline.sql", expect_line=2),
    Case("ann-snapshot-without-partition-column", "annotations",
         pipe("bronze", "ann_snap", sql("-- @merge_strategy: snapshot", "SELECT 1 AS id")),
         expect_code="RAT-CFG-004", expect_file=f"{P}/bronze/ann_snap/pipeline.sql", expect_line=1),
    Case("ann-incremental-by-time-without-time-column", "time ranges",
         pipe("bronze", "ann_ibt", sql("-- @merge_strategy: incremental_by_time", "-- @batch: day",
                                       "SELECT 1 AS id")),
         expect_code="RAT-CFG-011", expect_file=f"{P}/bronze/ann_ibt/pipeline.sql", expect_line=1, spec="building"),
    Case("ann-incremental-by-time-bad-batch", "time ranges",
         pipe("bronze", "ann_ibt_batch", sql("-- @merge_strategy: incremental_by_time", "-- @time_column: ts",
                                             "-- @batch: week", "SELECT TIMESTAMP '2026-01-01' AS ts")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_ibt_batch/pipeline.sql", expect_line=3,
         spec="building"),
    Case("ann-unique-key-not-a-column", "annotations",
         pipe("bronze", "ann_badkey", sql("-- @merge_strategy: incremental", "-- @unique_key: order id",
                                          "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_badkey/pipeline.sql", expect_line=2),
    Case("ann-bad-max-row-change", "annotations",
         pipe("bronze", "ann_rowchange", sql("-- @merge_strategy: full_refresh", "-- @max_row_change: lots",
                                             "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_rowchange/pipeline.sql", expect_line=2,
         expect_stderr=("percentage",), spec="building"),
    Case("ann-max-null-increase-without-limit", "annotations",
         pipe("bronze", "ann_nullinc", sql("-- @merge_strategy: full_refresh", "-- @max_null_increase: email",
                                           "SELECT 1 AS id, 'a' AS email")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/ann_nullinc/pipeline.sql", expect_line=2,
         spec="building"),

    # ------------------------------------------------------------------------------------------ config.yaml
    Case("cfg-yaml-syntax", "config.yaml",
         _merge(pipe("bronze", "cfg_syntax", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_syntax/config.yaml": "merge_strategy: full_refresh\ntags: [daily\n"
                                                       "description: never closed\n"}),
         expect_code="RAT-CFG-006", expect_file=f"{P}/bronze/cfg_syntax/config.yaml", expect_line=3),
    Case("cfg-yaml-list", "config.yaml",
         _merge(pipe("bronze", "cfg_list", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_list/config.yaml": "- merge_strategy: full_refresh\n- tags: daily\n"}),
         expect_code="RAT-CFG-006", expect_file=f"{P}/bronze/cfg_list/config.yaml"),
    Case("cfg-yaml-scalar", "config.yaml",
         _merge(pipe("bronze", "cfg_scalar", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_scalar/config.yaml": "just a sentence, not a mapping\n"}),
         expect_code="RAT-CFG-006", expect_file=f"{P}/bronze/cfg_scalar/config.yaml"),
    Case("cfg-yaml-unknown-key", "config.yaml",
         _merge(pipe("bronze", "cfg_key", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_key/config.yaml": "merge_strategy: full_refresh\nowner: data-team\n"}),
         expect_code="RAT-CFG-002", expect_file=f"{P}/bronze/cfg_key/config.yaml"),
    Case("cfg-yaml-unknown-strategy", "config.yaml",
         _merge(pipe("bronze", "cfg_strategy", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_strategy/config.yaml": "merge_strategy: merge\n"}),
         expect_code="RAT-CFG-001", expect_file=f"{P}/bronze/cfg_strategy/config.yaml"),
    Case("cfg-yaml-unknown-key-at-its-line", "config.yaml",
         _merge(pipe("bronze", "cfg_key_line", "SELECT 1 AS id\n"),
                {f"{P}/bronze/cfg_key_line/config.yaml": "description: orders\nmerge_strategy: full_refresh\n"
                                                         "uniqe_key: id\n"}),
         expect_code="RAT-CFG-002", expect_file=f"{P}/bronze/cfg_key_line/config.yaml", expect_line=3,
         spec="building", notes="named at the key's line (the schema's YAML reader), with the nearest key"),
    Case("cfg-yaml-null-increase-over-100", "config.yaml",
         _merge(pipe("bronze", "cfg_nullinc", "SELECT 1 AS id, 'a' AS email\n"),
                {f"{P}/bronze/cfg_nullinc/config.yaml": "description: people\nmax_null_increase:\n  email: 150%\n"}),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/cfg_nullinc/config.yaml", expect_line=2,
         spec="building"),

    # ------------------------------------------------------------------------------------------ ratui.yaml
    Case("ratui-yaml-syntax", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "merge:\n  retries: 3\n    backoff_ms: 10\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=9),
    Case("ratui-yaml-unknown-key", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + "sparks:\n  master: local[1]\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml"),
    Case("ratui-yaml-wrong-type", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + "merge:\n  retries: three\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml"),
    # the warm engine's settings: a yes/no that is not one, an idle time of nothing (BASE_SETTINGS is 7 lines)
    Case("ratui-yaml-engine-warm-maybe", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + "engine:\n  warm: maybe\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8),
    Case("ratui-yaml-engine-idle-zero", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "engine:\n  idle_minutes: 0\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8),
    # its bounds: a memory bound no engine fits in, a count of commands of nothing, a count that is text
    Case("ratui-yaml-engine-memory-tiny", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "engine:\n  max_memory_mb: 100\n"},
         expect_code="RAT-ENG-005", expect_file="ratui.yaml", expect_line=8),
    # schedules (RAT-SCH): a cron with a seconds field, one that is garbage, a time zone that is none, a name used
    # twice, a selector that selects nothing; and a pipeline's own schedule with a bad cron
    Case("schedule-cron-six-fields", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "schedules:\n  - name: nightly\n    select: gold.revenue\n    cron: '0 6 * * * *'\n")},
         expect_code="RAT-SCH-001", expect_file="ratui.yaml", expect_line=10, spec="building"),
    Case("schedule-cron-garbage", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "schedules:\n  - {name: nightly, select: gold.revenue, cron: every morning}\n")},
         expect_code="RAT-SCH-001", expect_file="ratui.yaml", expect_line=8, spec="building"),
    Case("schedule-bad-timezone", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "schedules:\n  - name: nightly\n    select: gold.revenue\n    cron: '0 6 * * *'\n"
        "    timezone: Europe/Atlantis\n")},
         expect_code="RAT-SCH-002", expect_file="ratui.yaml", expect_line=11, spec="building"),
    Case("schedule-duplicate-name", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "schedules:\n  - {name: nightly, select: gold.revenue, cron: '0 6 * * *'}\n"
        "  - {name: nightly, select: silver.orders, cron: '0 7 * * *'}\n")},
         expect_code="RAT-SCH-003", expect_file="ratui.yaml", expect_line=9, spec="building"),
    Case("schedule-selects-nothing", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "schedules:\n  - {name: nightly, select: gold.no_such_table+, cron: '0 6 * * *'}\n")},
         expect_code="RAT-SCH-004", expect_file="ratui.yaml", expect_line=8, spec="building"),
    Case("schedule-pipeline-bad-cron", "config.yaml", {"shop/pipelines/gold/revenue/config.yaml": (
        "schedule:\n  cron: '0 6 * * * *'\n")},
         expect_code="RAT-SCH-001", expect_file="gold/revenue/config.yaml", expect_line=1, spec="building"),
    # alerts (RAT-ALR): a rule naming a channel not declared, an event that is none, a URL written where its variable's
    # name goes (a secret in the file: refused, never echoed), a channel with two addresses, a select of nothing
    Case("alerts-undeclared-channel", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK}\n  rules:\n    - {on: failure, notify: [opz]}\n")},
         expect_code="RAT-ALR-002", expect_file="ratui.yaml", expect_line=11, spec="building"),
    Case("alerts-unknown-event", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK}\n  rules:\n    - {on: failed, notify: [ops]}\n")},
         expect_code="RAT-ALR-001", expect_file="ratui.yaml", expect_line=11, spec="building"),
    Case("alerts-url-in-the-file", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: 'https://hooks.example.com/services/T0/B0/s3cr3tvalue'}\n")},
         expect_code="RAT-ALR-003", expect_file="ratui.yaml", expect_line=9, spec="building",
         never_shown=("s3cr3tvalue",)),
    Case("alerts-channel-two-addresses", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK, command: [notify-ops]}\n")},
         expect_code="RAT-ALR-003", expect_file="ratui.yaml", expect_line=9, spec="building"),
    Case("alerts-after-on-a-failure-rule", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK}\n  rules:\n"
        "    - on: failure\n      notify: [ops]\n      after: 30m\n")},
         expect_code="RAT-ALR-002", expect_file="ratui.yaml", expect_line=13, spec="building"),
    Case("alerts-stuck-after-not-a-duration", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK}\n  rules:\n"
        "    - {on: stuck, after: forever, notify: [ops]}\n")},
         expect_code="RAT-CFG-005", expect_file="ratui.yaml", expect_line=11, spec="building"),
    Case("alerts-rule-selects-nothing", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + (
        "alerts:\n  channels:\n    ops: {url_env: OPS_HOOK}\n  rules:\n"
        "    - {on: failure, select: gold.no_such_table, notify: [ops]}\n")},
         expect_code="RAT-ALR-002", expect_file="ratui.yaml", expect_line=11, spec="building"),
    # freshness (a pipeline's bound on its table's age): not a duration; an error bound shorter than the warning
    Case("freshness-not-a-duration", "annotations", {"shop/pipelines/gold/revenue/pipeline.sql": (
        "-- @freshness: soon\nSELECT 1 AS x\n")},
         expect_code="RAT-CFG-005", expect_file="gold/revenue/pipeline.sql", expect_line=1, spec="building"),
    Case("freshness-error-before-warn", "config.yaml", {"shop/pipelines/gold/revenue/config.yaml": (
        "tags: [daily]\nfreshness: {warn_after: 2d, error_after: 1h}\n")},
         expect_code="RAT-CFG-005", expect_file="gold/revenue/config.yaml", expect_line=2, spec="building"),
    Case("ratui-yaml-engine-commands-zero", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "engine:\n  idle_minutes: 5\n  max_commands: 0\n"},
         expect_code="RAT-ENG-005", expect_file="ratui.yaml", expect_line=9),
    Case("ratui-yaml-engine-commands-text", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "engine:\n  max_commands: many\n"},
         expect_code="RAT-ENG-005", expect_file="ratui.yaml", expect_line=8),
    Case("ratui-yaml-list", "ratui.yaml", {"ratui.yaml": "- namespace: shop\n- spark: {}\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml"),
    Case("ratui-yaml-zero-threads", "ratui.yaml", {"ratui.yaml": BASE_SETTINGS + "run:\n  threads: 0\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml"),
    Case("ratui-yaml-bad-namespace", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS.replace("namespace: shop", "namespace: Shop Floor")},
         expect_code="RAT-PRJ-001", expect_file="ratui.yaml"),
    Case("ratui-yaml-python-isolation-unknown", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "python:\n  isolation: sandbox\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building"),
    Case("ratui-yaml-python-memory-too-small", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "python:\n  memory_mb: 16\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building"),
    Case("ratui-yaml-spark-key-without-prefix", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "    executor.memory: 1g\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml"),
    Case("ratui-yaml-bad-landing-setting", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "landing:\n  bad_rows: explode\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml",
         notes="bad_rows takes fail|skip; an unknown value is an error (passes today as an unknown key)"),

    Case("ratui-yaml-spark-setting-refused", "ratui.yaml",
         pipe("bronze", "spark_refused", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id")),
         batch="spark-refuses", pipeline=_key("spark_refused"), expect_exit=1, expect_code="RAT-CFG-007",
         expect_file="ratui.yaml", expect_line=7,
         notes="Spark accepts the key but not its value: the run fails at the setting's line, not as a bug"),

    Case("ratui-yaml-bad-jit", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS.replace("spark:\n", "spark:\n  jit: fast\n")},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml",
         notes="spark.jit takes auto|quick|full; anything else is refused before any JVM starts"),
    Case("ratui-yaml-connect-retry-zero", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS.replace("spark:\n", "spark:\n  connect_retry_seconds: 0\n")},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=3,
         notes="a Connect call that never retries would fail a run on the first dropped packet: 1 or more seconds"),
    Case("ratui-yaml-java-option-refused", "ratui.yaml",
         pipe("bronze", "jvm_refused", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id")),
         batch="jvm-refuses", pipeline=_key("jvm_refused"), expect_exit=1, expect_code="RAT-SPK-002",
         expect_file="ratui.yaml", expect_line=7,
         notes="the JVM exits before Spark is up: its own reason at the option's line, not a bug of ratui"),

    Case("ratui-yaml-spark-class-missing", "ratui.yaml",
         pipe("bronze", "class_missing", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id")),
         batch="class-missing", pipeline=_key("class_missing"), expect_exit=1, expect_code="RAT-SPK-004",
         expect_file="ratui.yaml", expect_line=7, spec="building",
         notes="a serializer whose jar Spark lacks: the class named, at the setting's line; not the pipeline's "
               "fault nor a bug of ratui (RAT-RUN-002)"),
    Case("ratui-yaml-s3-zone-not-a-url", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "landing:\n  zones:\n    orders: https://bucket.example.com/orders\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", spec="building"),
    Case("ratui-yaml-s3-unknown-option", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "landing:\n  s3:\n    endpoint: http://127.0.0.1:9000\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", spec="building",
         notes="the option is endpoint_url; an unknown one is an error with a did-you-mean hint"),
    Case("ratui-yaml-zone-unknown-option", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "landing:\n  zones:\n    orders:\n      url: s3://bucket/orders\n"
                                        "      endpont_url: http://127.0.0.1:9000\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=11,
         spec="building", notes="an unknown key four levels deep: its own line and the nearest declared key"),
    Case("ratui-yaml-remote-and-master", "ratui.yaml",
         {"ratui.yaml": BASE_SETTINGS + "  remote: sc://127.0.0.1:15002\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", spec="building"),
    Case("ratui-yaml-remote-not-connect-url", "ratui.yaml",
         {"ratui.yaml": "namespace: shop\nspark:\n  remote: http://127.0.0.1:15002\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", spec="building"),

    # ------------------------------------------------------------------------------------------ catalog
    # ratui.yaml's catalog section (the embedded catalog or a Nessie server): refused when the settings are read,
    # before any catalog, server or JVM is touched. Faults of a real server: tests/cli/test_nessie_cli.py.
    Case("catalog-type-unknown", "catalog", {"ratui.yaml": BASE_SETTINGS + "catalog: {type: hive}\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=7, spec="building",
         notes="sqlite or nessie; the nearest one is suggested"),
    Case("catalog-nessie-without-uri", "catalog", {"ratui.yaml": BASE_SETTINGS + "catalog:\n  type: nessie\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=7, spec="building",
         notes="a Nessie catalog needs its URI: refused at the section's line, the hint shows one"),
    Case("catalog-uri-not-http", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  type: nessie\n  uri: ftp://ratui:pw@nessie.example.com/api/v2\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=9, spec="building",
         notes="only http(s); the message names the scheme, never the rest (a URL may hold a password)"),
    Case("catalog-uri-not-text", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  type: nessie\n  uri: 19120\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=9, spec="building"),
    Case("catalog-unknown-key", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  type: nessie\n  uri: http://127.0.0.1:19120/api/v2\n"
                                        "  username: ratui\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=10, spec="building",
         notes="type, uri and token only (a bearer token: no user name); the nearest key is suggested"),
    Case("catalog-sqlite-with-uri", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  type: sqlite\n  uri: http://127.0.0.1:19120/api/v2\n"},
         expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=9, spec="building",
         notes="a URI with the embedded catalog would be ignored silently: refused at its line instead"),
    Case("catalog-token-without-nessie", "catalog", {"ratui.yaml": BASE_SETTINGS + "catalog:\n  token: abc123\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building",
         notes="no type means the embedded catalog, which takes no token"),
    Case("catalog-warehouse-without-nessie", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  warehouse: /mnt/lake\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building",
         notes="the embedded catalog keeps its tables in the project: a warehouse there would be ignored silently"),
    Case("catalog-warehouse-unknown-scheme", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  warehouse: gs://lake/tables\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building",
         notes="ratui has a connector for s3:// only: refused at its line, never a 'No FileSystem for scheme' later"),
    Case("catalog-warehouse-s3-without-bucket", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  warehouse: s3:///tables\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building"),
    Case("catalog-s3-key-without-secret", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  warehouse: s3://lake/tables\n  s3:\n"
                                        "    access_key_id: AKIAEXAMPLEKEY\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=10, spec="building",
         notes="a key without its secret: refused at its line, the value never echoed"),
    Case("catalog-s3-without-s3-warehouse", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  s3: {endpoint_url: 'http://127.0.0.1:9000'}\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=8, spec="building",
         notes="how to reach an s3:// warehouse, with no s3:// warehouse: would be ignored silently"),
    Case("catalog-s3-unknown-key", "catalog",
         {"ratui.yaml": BASE_SETTINGS + "catalog:\n  warehouse: s3://lake/tables\n  s3:\n"
                                        "    endpoint: http://127.0.0.1:9000\n"},
         argv=RUN, expect_code="RAT-CFG-007", expect_file="ratui.yaml", expect_line=10, spec="building",
         notes="endpoint_url is the key (boto3's name); the nearest one is suggested"),

    # ------------------------------------------------------------------------------------------ templates
    Case("tpl-syntax-error", "templates",
         pipe("bronze", "tpl_syntax", sql("-- @merge_strategy: full_refresh", "SELECT *",
                                          "FROM {{ ref('bronze.raw_orders') }", "WHERE 1 = 1")),
         expect_code="RAT-TPL-001", expect_file=f"{P}/bronze/tpl_syntax/pipeline.sql", expect_line=3),
    Case("tpl-ref-not-literal", "templates",
         pipe("silver", "tpl_ref_var", sql("{% set source = 'bronze.raw_orders' %}",
                                           "SELECT * FROM {{ ref(source) }}")),
         expect_code="RAT-TPL-003", expect_file=f"{P}/silver/tpl_ref_var/pipeline.sql", expect_line=2),
    Case("tpl-ref-malformed", "templates",
         pipe("silver", "tpl_ref_bad", sql("-- @merge_strategy: full_refresh", "SELECT *",
                                           "FROM {{ ref('raw_orders') }}")),
         expect_code="RAT-TPL-003", expect_file=f"{P}/silver/tpl_ref_bad/pipeline.sql", expect_line=3),
    Case("tpl-ref-unknown-table", "templates",
         pipe("silver", "tpl_ref_unknown", sql("SELECT * FROM {{ ref('bronze.raw_orderz') }}")),
         expect_code="RAT-DAG-002", expect_file=f"{P}/silver/tpl_ref_unknown/pipeline.sql"),
    *[Case(f"compile-cache-{how.replace(' ', '-')}", "compile cache",
           pipe("silver", "cache_ref", sql("-- @merge_strategy: full_refresh", "SELECT *",
                                           "FROM {{ ref('bronze.raw_orderz') }}")),
           prepare=_damage_compile_cache(how), expect_code="RAT-DAG-002",
           expect_file=f"{P}/silver/cache_ref/pipeline.sql", expect_line=3,
           notes=f"the compile cache is {how}: compiled past, every error still found at its line")
      for how in ("not json", "wrong shapes", "a folder")],
    Case("tpl-cycle", "templates",
         _merge(pipe("silver", "cycle_a", sql("SELECT * FROM {{ ref('silver.cycle_b') }}")),
                pipe("silver", "cycle_b", sql("SELECT * FROM {{ ref('silver.cycle_a') }}"))),
         expect_code="RAT-DAG-001", expect_file=f"{P}/silver/cycle_a/pipeline.sql",
         also=(("RAT-DAG-001", f"{P}/silver/cycle_b/pipeline.sql"),)),
    Case("tpl-unknown-landing-zone", "templates", zone_pipe("tpl_zone", "order"),
         expect_code="RAT-LND-001", expect_file=f"{P}/bronze/tpl_zone/pipeline.sql"),
    Case("tpl-undefined-variable", "templates",
         pipe("bronze", "tpl_undefined", sql("-- @merge_strategy: full_refresh",
                                             "SELECT id, '{{ run_startd_at }}' AS loaded_at",
                                             "FROM VALUES (1) AS t(id)")),
         expect_code="RAT-TPL-002", expect_file=f"{P}/bronze/tpl_undefined/pipeline.sql", expect_line=2,
         spec="building"),
    Case("tpl-unknown-filter", "templates",
         pipe("bronze", "tpl_filter", sql("-- @merge_strategy: full_refresh",
                                          "SELECT '{{ run_started_at | shout }}' AS loaded_at")),
         expect_code="RAT-TPL-005", expect_file=f"{P}/bronze/tpl_filter/pipeline.sql", expect_line=2,
         spec="building"),
    Case("tpl-unknown-test", "templates",
         pipe("bronze", "tpl_test", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id",
                                        "{% if watermark_value is recent %}WHERE 1 = 1{% endif %}")),
         expect_code="RAT-TPL-005", expect_file=f"{P}/bronze/tpl_test/pipeline.sql", expect_line=3,
         spec="building"),

    # ------------------------------------------------------------------------------------------ SQL
    Case("sql-table-without-ref", "SQL",
         pipe("gold", "sql_noref", sql("-- @merge_strategy: full_refresh", "SELECT o.status, count(*) AS n",
                                       "FROM silver.orders AS o", "GROUP BY o.status")),
         expect_code="RAT-DAG-006", expect_file=f"{P}/gold/sql_noref/pipeline.sql", expect_line=3,
         spec="building"),
    Case("sql-qualified-table-without-ref", "SQL",
         pipe("gold", "sql_noref_ns", sql("-- @merge_strategy: full_refresh", "SELECT o.order_id, r.amount",
                                          "FROM {{ ref('silver.orders') }} AS o",
                                          "JOIN shop.bronze.raw_orders AS r ON r.order_id = o.order_id")),
         expect_code="RAT-DAG-006", expect_file=f"{P}/gold/sql_noref_ns/pipeline.sql", expect_line=4,
         spec="building"),
    Case("sql-folder-without-pipeline-file", "SQL",
         {f"{P}/bronze/sql_nofile/config.yaml": "merge_strategy: full_refresh\n",
          f"{P}/bronze/sql_nofile/pipline.sql": "SELECT 1 AS id\n"},
         expect_code="RAT-PRJ-004", expect_file=f"{P}/bronze/sql_nofile", notes="pipline.sql: a typo"),
    Case("sql-empty-file", "SQL", pipe("bronze", "sql_empty", ""),
         expect_code="RAT-PRJ-007", expect_file=f"{P}/bronze/sql_empty/pipeline.sql", spec="building"),
    Case("sql-comments-only", "SQL",
         pipe("bronze", "sql_comments", sql("-- @merge_strategy: full_refresh", "-- TODO: write the query",
                                            "", "/* later */")),
         expect_code="RAT-PRJ-007", expect_file=f"{P}/bronze/sql_comments/pipeline.sql", spec="building"),
    # --------------------------------------------------------------------------------------- data diff gates
    # runtime: a gate naming a column the table lacks is an error even on the table's first run (gates themselves
    # apply from the second: RAT-RUN-009 is tested in tests/engine/run/test_data_diff.py)
    Case("diff-gate-unknown-column", "data diff gates",
         pipe("bronze", "diff_column", sql("-- @merge_strategy: full_refresh", "-- @max_null_increase: emial 10%",
                                           "SELECT id, email FROM VALUES (1, 'a@x') AS t(id, email)")),
         batch="main", pipeline=_key("diff_column"), expect_code="RAT-CFG-010",
         expect_file=f"{P}/bronze/diff_column/pipeline.sql", expect_line=2, spec="building"),

    Case("time-range-rows-outside-the-interval", "time ranges",
         pipe("bronze", "ibt_outside", sql("-- @merge_strategy: incremental_by_time", "-- @time_column: ts",
                                           "-- @batch: day", "SELECT 1 AS id, TIMESTAMP '2020-01-01 00:00:00' AS ts")),
         batch="main", pipeline=_key("ibt_outside"), expect_code="RAT-WRT-011", spec="building",
         notes="a plain run fills the last complete day; a row of 2020 is outside it: refused, main unchanged"),

    # runtime: Spark errors carry the line of pipeline.sql
    Case("sql-syntax-error", "SQL",
         pipe("bronze", "sql_syntax", sql("-- @merge_strategy: full_refresh", "SELECT id",
                                          "FROM VALUES (1), (2) AS t(id)", "WHERE id = = 1")),
         batch="main", pipeline=_key("sql_syntax"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_syntax/pipeline.sql", expect_line=4, spec="building"),
    Case("sql-unknown-column", "SQL",
         pipe("bronze", "sql_column", sql("-- @merge_strategy: full_refresh", "SELECT",
                                          "    id,", "    amount_eur", "FROM VALUES (1, 2.5) AS t(id, amount)")),
         batch="main", pipeline=_key("sql_column"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_column/pipeline.sql", expect_line=4, spec="building"),
    Case("sql-bad-cast-ansi", "SQL",
         pipe("bronze", "sql_cast", sql("-- @merge_strategy: full_refresh", "SELECT id,",
                                        "    CAST(code AS INT) AS code", "FROM VALUES (1, 'x1') AS t(id, code)")),
         batch="main", pipeline=_key("sql_cast"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_cast/pipeline.sql", expect_line=3, spec="building"),
    Case("sql-division-by-zero", "SQL",
         pipe("bronze", "sql_div", sql("-- @merge_strategy: full_refresh", "SELECT id,",
                                       "    total / (id - 1) AS share", "FROM VALUES (1, 10) AS t(id, total)")),
         batch="main", pipeline=_key("sql_div"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_div/pipeline.sql", expect_line=3, spec="building"),
    Case("sql-unknown-function", "SQL",
         pipe("bronze", "sql_func", sql("-- @merge_strategy: full_refresh", "SELECT id,",
                                        "    frobnicate(id) AS f", "FROM VALUES (1) AS t(id)")),
         batch="main", pipeline=_key("sql_func"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_func/pipeline.sql", expect_line=3, spec="building"),
    Case("sql-error-line-through-template", "SQL",
         pipe("bronze", "sql_tpl_line", sql("-- @merge_strategy: full_refresh", "SELECT id",
                                            "{%- if true %}", "  , 1 AS one", "{%- endif %}",
                                            "  , missing_col", "FROM VALUES (1) AS t(id)")),
         batch="main", pipeline=_key("sql_tpl_line"), expect_code="RAT-SQL-001",
         expect_file=f"{P}/bronze/sql_tpl_line/pipeline.sql", expect_line=6, spec="building",
         notes="whitespace control moves the SQL up two lines: the error is on template line 6, SQL line 4"),
    # runtime: results the write phase refuses
    Case("sql-unique-key-missing", "SQL",
         pipe("bronze", "wrt_key", sql("-- @merge_strategy: incremental", "-- @unique_key: order_id",
                                       "SELECT 1 AS id, 'a' AS status")),
         batch="main", pipeline=_key("wrt_key"), expect_code="RAT-WRT-001",
         expect_file=f"{P}/bronze/wrt_key/pipeline.sql"),
    Case("sql-watermark-missing", "SQL",
         pipe("bronze", "wrt_watermark", sql("-- @merge_strategy: incremental", "-- @unique_key: id",
                                             "-- @watermark_column: updated_at", "SELECT 1 AS id, 'a' AS status")),
         batch="main", pipeline=_key("wrt_watermark"), expect_code="RAT-WRT-002",
         expect_file=f"{P}/bronze/wrt_watermark/pipeline.sql"),
    Case("sql-null-typed-column", "SQL",
         pipe("bronze", "wrt_null", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id, NULL AS note")),
         batch="main", pipeline=_key("wrt_null"), expect_code="RAT-WRT-004",
         expect_file=f"{P}/bronze/wrt_null/pipeline.sql"),
    Case("sql-column-name-backtick", "SQL",
         pipe("bronze", "wrt_backtick", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS `odd``name`")),
         batch="main", pipeline=_key("wrt_backtick"), expect_code="RAT-WRT-010",
         expect_file=f"{P}/bronze/wrt_backtick/pipeline.sql", spec="building"),
    Case("sql-duplicate-columns", "SQL",
         pipe("bronze", "wrt_dup", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id, 2 AS ID")),
         batch="main", pipeline=_key("wrt_dup"), expect_code="RAT-WRT-005",
         expect_file=f"{P}/bronze/wrt_dup/pipeline.sql"),
    Case("sql-calls-reflect", "SQL",
         pipe("bronze", "sql_reflect", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id,",
                                           "  reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY') AS k")),
         batch="main", pipeline=_key("sql_reflect"), expect_code="RAT-ISO-006",
         expect_file=f"{P}/bronze/sql_reflect/pipeline.sql", expect_line=3, spec="building",
         notes="a static Java method call reads the JVM's environment: refused at its line before Spark sees it"),
    Case("sql-transform-using", "SQL",
         pipe("bronze", "sql_transform", sql("-- @merge_strategy: full_refresh",
                                             "SELECT TRANSFORM(id) USING 'cat' AS (id)", "FROM range(3)")),
         batch="main", pipeline=_key("sql_transform"), expect_code="RAT-ISO-006",
         expect_file=f"{P}/bronze/sql_transform/pipeline.sql", expect_line=2, spec="building",
         notes="TRANSFORM ... USING runs a program"),

    # ------------------------------------------------------------------------------------------ names
    Case("name-uppercase", "names", pipe("bronze", "RawOrders", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/RawOrders"),
    Case("name-space", "names", pipe("bronze", "raw orders", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/raw orders"),
    Case("name-unicode", "names", pipe("bronze", "commandes_reçues", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/commandes_reçues"),
    Case("name-too-long", "names", pipe("bronze", "a" * 129, "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/{'a' * 129}"),
    Case("name-leading-digit", "names", pipe("bronze", "2024_orders", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/2024_orders"),
    Case("name-dot", "names", pipe("bronze", "raw.orders", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/raw.orders",
         notes="a dot would make the table key shop.bronze.raw.orders ambiguous"),
    Case("name-shell-metacharacters", "names", pipe("bronze", "x;rm -rf $HOME", "SELECT 1 AS id\n"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/x;rm -rf $HOME"),
    Case("name-namespace-uppercase", "names", {"Shop2/pipelines/bronze/x/pipeline.sql": "SELECT 1 AS id\n"},
         expect_code="RAT-PRJ-001", expect_file="Shop2"),
    Case("name-unknown-layer", "names", {f"{P}/platinum/x/pipeline.sql": "SELECT 1 AS id\n"},
         expect_code="RAT-PRJ-002", expect_file=f"{P}/platinum"),
    Case("name-invalid-zone-name", "names", zone_pipe("name_zone", "Orders 2024"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/name_zone/pipeline.sql"),

    # ------------------------------------------------------------------------------------------ landing files
    Case("lnd-mixed-formats", "landing files",
         _merge(zone_pipe("lnd_mixed", "mixed"), {f"{L}/mixed/m1.csv": _csv("id", "1"),
                                                   f"{L}/mixed/m2.jsonl": '{"id": 2}\n'}),
         batch="main", pipeline=_key("lnd_mixed"), expect_code="RAT-LND-003", expect_file=f"{L}/mixed"),
    Case("lnd-unsupported-extension", "landing files",
         _merge(zone_pipe("lnd_xlsx", "sheets"), {f"{L}/sheets/s1.csv": _csv("id", "1"),
                                                   f"{L}/sheets/report.xlsx": b"PK\x03\x04" + PNG_GARBAGE}),
         batch="main", pipeline=_key("lnd_xlsx"), expect_code="RAT-LND-004",
         expect_file=f"{L}/sheets/report.xlsx"),
    Case("lnd-only-ignored-files", "landing files",
         _merge(zone_pipe("lnd_ignored", "ignored_only"), {f"{L}/ignored_only/_samples/s.csv": _csv("id", "1"),
                                                           f"{L}/ignored_only/.hidden.csv": _csv("id", "2"),
                                                           f"{L}/ignored_only/draft.csv~": _csv("id", "3")}),
         batch="main", pipeline=_key("lnd_ignored"), expect_code="RAT-LND-002", expect_file=f"{L}/ignored_only"),
    Case("lnd-csv-header-reordered", "landing files",
         _merge(zone_pipe("lnd_reorder", "reorder", "CAST(id AS INT) AS id, CAST(name AS STRING) AS name"),
                {f"{L}/reorder/f1.csv": _csv("id,name", "1,ann", "2,bob"),
                 f"{L}/reorder/f2.csv": _csv("name,id", "cid,3")}),
         batch="main", pipeline=_key("lnd_reorder"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}, {"id": 3, "name": "cid"}),
         spec="building", notes="columns load by name, not by position"),
    Case("lnd-csv-other-columns", "landing files",
         _merge(zone_pipe("lnd_othercols", "othercols"),
                {f"{L}/othercols/a1.csv": _csv("id,name", "1,ann"), f"{L}/othercols/a2.csv": _csv("id,name", "2,bob"),
                 f"{L}/othercols/a3.csv": _csv("id,name,extra", "3,cid,x")}),
         batch="main", pipeline=_key("lnd_othercols"), expect_code="RAT-LND-006",
         expect_file=f"{L}/othercols/a3.csv", expect_line=1, spec="building"),
    Case("lnd-csv-duplicate-header", "landing files",
         _merge(zone_pipe("lnd_duphead", "dupheader"), {f"{L}/dupheader/d1.csv": _csv("id,name,id", "1,ann,2")}),
         batch="main", pipeline=_key("lnd_duphead"), expect_code="RAT-LND-006",
         expect_file=f"{L}/dupheader/d1.csv", expect_line=1, spec="building"),
    Case("lnd-csv-header-backtick", "landing files",
         _merge(zone_pipe("lnd_backtick", "backtick"), {f"{L}/backtick/b1.csv": _csv("id,na`me", "1,ann")}),
         batch="main", pipeline=_key("lnd_backtick"), expect_code="RAT-LND-006",
         expect_file=f"{L}/backtick/b1.csv", expect_line=1, spec="building",
         notes="a backtick in a column name would break the quoting of every query over the zone"),
    Case("lnd-csv-too-few-fields", "landing files",
         _merge(zone_pipe("lnd_few", "fewfields"),
                {f"{L}/fewfields/f1.csv": _csv("id,name,qty", "1,ann,3", "2,bob", "3,cid,5")}),
         batch="main", pipeline=_key("lnd_few"), expect_code="RAT-LND-007",
         expect_file=f"{L}/fewfields/f1.csv", expect_line=3, spec="building"),
    Case("lnd-csv-too-many-fields", "landing files",
         _merge(zone_pipe("lnd_many", "manyfields"),
                {f"{L}/manyfields/f1.csv": _csv("id,name", "1,ann", "2,bob", "3,cid,surplus")}),
         batch="main", pipeline=_key("lnd_many"), expect_code="RAT-LND-007",
         expect_file=f"{L}/manyfields/f1.csv", expect_line=4, spec="building"),
    Case("lnd-jsonl-invalid-line", "landing files",
         _merge(zone_pipe("lnd_badjson", "badjson"),
                {f"{L}/badjson/j1.jsonl": '{"id": 1, "name": "ann"}\n{"id": 2, "name": "bob"\n'
                                          '{"id": 3, "name": "cid"}\n'}),
         batch="main", pipeline=_key("lnd_badjson"), expect_code="RAT-LND-007",
         expect_file=f"{L}/badjson/j1.jsonl", expect_line=2, spec="building"),
    Case("lnd-jsonl-no-line-parses", "landing files",
         _merge(zone_pipe("lnd_nojson", "nojson"),
                {f"{L}/nojson/j1.jsonl": "id: 1, name: ann\nid: 2, name: bob\n"}),
         batch="main", pipeline=_key("lnd_nojson"), expect_code="RAT-LND-007",
         expect_file=f"{L}/nojson/j1.jsonl", expect_line=1, spec="building"),
    Case("lnd-json-pretty-printed-documents", "landing files",
         _merge(zone_pipe("lnd_jsondoc", "jsondoc"),
                {f"{L}/jsondoc/one.json": '{\n  "id": 1,\n  "name": "ann"\n}\n',
                 f"{L}/jsondoc/many.json": '[\n  {"id": 2, "name": "bob"},\n'
                                           '  {"id": 3, "name": "cid", "vip": true}\n]\n',
                 f"{L}/jsondoc/lines.jsonl": '{"id": 4, "name": "dan"}\n'}),
         batch="main", pipeline=_key("lnd_jsondoc"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann", "vip": None}, {"id": 2, "name": "bob", "vip": None},
                      {"id": 3, "name": "cid", "vip": True}, {"id": 4, "name": "dan", "vip": None}),
         spec="building", notes="a pretty-printed object is a row, an array of objects a row each, beside JSON lines"),
    Case("lnd-json-broken-document", "landing files",
         _merge(zone_pipe("lnd_jsonbroken", "jsonbroken"),
                {f"{L}/jsonbroken/doc.json": '[\n  {"id": 1, "name": "ann"},\n  {"id": 2, "name": "bob",}\n]\n'}),
         batch="main", pipeline=_key("lnd_jsonbroken"), expect_code="RAT-LND-007",
         expect_file=f"{L}/jsonbroken/doc.json", expect_line=3, spec="building"),
    Case("lnd-csv-semicolon-export", "landing files",
         _merge(zone_pipe("lnd_semicolon", "semicolon"),
                {f"{L}/semicolon/s1.csv": "\ufeffid;name;price\r\n1;ann;2.5\r\n2;bob;3\r\n".encode(),
                 f"{L}/semicolon/s2.csv": "id,name,price\n3,cid,4.25\n"}),
         batch="main", pipeline=_key("lnd_semicolon"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann", "price": 2.5}, {"id": 2, "name": "bob", "price": 3.0},
                      {"id": 3, "name": "cid", "price": 4.25}),
         spec="building", notes="a spreadsheet's export with semicolons lands in its columns, beside a comma file"),
    Case("lnd-csv-header-repeated-inside", "landing files",
         _merge(zone_pipe("lnd_headagain", "headagain"),
                {f"{L}/headagain/h1.csv": _csv("id,name", "1,ann", "id,name", "2,bob")}),
         batch="main", pipeline=_key("lnd_headagain"), expect_code="RAT-LND-007",
         expect_file=f"{L}/headagain/h1.csv", expect_line=3, spec="building",
         notes="two exports pasted together: the second header is a row that does not parse, not a silent row"),
    Case("lnd-csv-typed-columns-and-a-blank-line", "landing files",
         _merge(zone_pipe("lnd_typed", "typedcsv"),
                {f"{L}/typedcsv/t1.csv": _csv("id,price,day,at,ok,big", "1,2.5,2024-01-01,2024-01-02 10:00:00,true,1",
                                              "", "2,3,2024-02-29,2024-03-01T23:59:59,FALSE,3000000000")}),
         batch="main", pipeline=_key("lnd_typed"), expect_status="success",
         expect_rows=({"id": 1, "price": 2.5, "day": "2024-01-01", "at": "2024-01-02T10:00:00+00:00", "ok": True,
                       "big": 1},
                      {"id": 2, "price": 3.0, "day": "2024-02-29", "at": "2024-03-01T23:59:59+00:00", "ok": False,
                       "big": 3000000000}),
         spec="building", notes="numbers, days, instants and booleans land typed; an empty line is no row"),
    Case("lnd-csv-windows-export", "landing files",
         _merge(zone_pipe("lnd_crlf", "crlfcsv"),
                {f"{L}/crlfcsv/w1.csv": "\ufeffid,name,day\r\n1,ann,2024-01-01\r\n2,bob,2024-01-02\r\n".encode()}),
         batch="main", pipeline=_key("lnd_crlf"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann", "day": "2024-01-01"}, {"id": 2, "name": "bob", "day": "2024-01-02"}),
         spec="building", notes="a byte-order mark and CRLF line ends: left to Spark's own reading, same types"),
    Case("lnd-csv-mixed-kinds-stay-text", "landing files",
         _merge(zone_pipe("lnd_mixedkinds", "mixedkinds"),
                {f"{L}/mixedkinds/m1.csv": _csv("id,at,code", "1,2024-01-01,7", "2,2024-01-02 10:00:00,N/A",
                                                '3,2024-01-03,"0,5"')}),
         batch="main", pipeline=_key("lnd_mixedkinds"), expect_status="success",
         expect_rows=({"id": 1, "at": "2024-01-01T00:00:00+00:00", "code": "7"},
                      {"id": 2, "at": "2024-01-02T10:00:00+00:00", "code": "N/A"},
                      {"id": 3, "at": "2024-01-03T00:00:00+00:00", "code": "0,5"}),
         spec="building", notes="days with instants are instants (a day at midnight, UTC); numbers with text (and a "
         "quoted comma) keep every value as written"),
    Case("lnd-csv-binary-garbage", "landing files",
         _merge(zone_pipe("lnd_binary", "binarycsv"),
                {f"{L}/binarycsv/a_ok.csv": _csv("id,name", "1,ann"), f"{L}/binarycsv/b_image.csv": PNG_GARBAGE}),
         batch="main", pipeline=_key("lnd_binary"), expect_code="RAT-LND-008",
         expect_file=f"{L}/binarycsv/b_image.csv", spec="building"),
    Case("lnd-csv-not-utf8", "landing files",
         _merge(zone_pipe("lnd_latin1", "latin1"),
                {f"{L}/latin1/l1.csv": "id,name\n1,José\n2,Zoë\n".encode("latin-1")}),
         batch="main", pipeline=_key("lnd_latin1"), expect_code="RAT-LND-008",
         expect_file=f"{L}/latin1/l1.csv", spec="building"),
    Case("lnd-jsonl-binary-garbage", "landing files",
         _merge(zone_pipe("lnd_binjson", "binjson"),
                {f"{L}/binjson/a_ok.jsonl": '{"id": 1}\n', f"{L}/binjson/b_blob.jsonl": ELF_GARBAGE}),
         batch="main", pipeline=_key("lnd_binjson"), expect_code="RAT-LND-008",
         expect_file=f"{L}/binjson/b_blob.jsonl", spec="building"),
    Case("lnd-parquet-damaged", "landing files",
         _merge(zone_pipe("lnd_damaged", "damagedpq"),
                {f"{L}/damagedpq/p1.parquet": GOOD_PQ, f"{L}/damagedpq/p2.parquet": GOOD_PQ[: len(GOOD_PQ) // 2]}),
         batch="main", pipeline=_key("lnd_damaged"), expect_code="RAT-LND-008",
         expect_file=f"{L}/damagedpq/p2.parquet", spec="building"),
    Case("lnd-parquet-conflicting-types", "landing files",
         _merge(zone_pipe("lnd_pqtypes", "pqtypes"),
                {f"{L}/pqtypes/p1.parquet": parquet_bytes({"id": pa.array([1], pa.int64())}),
                 f"{L}/pqtypes/p2.parquet": parquet_bytes({"id": pa.array([2], pa.int64())}),
                 f"{L}/pqtypes/p3.parquet": parquet_bytes({"id": pa.array(["three"], pa.string())})}),
         batch="main", pipeline=_key("lnd_pqtypes"), expect_code="RAT-LND-006",
         expect_file=f"{L}/pqtypes/p3.parquet", spec="building"),
    Case("lnd-csv-zero-bytes", "landing files",
         _merge(zone_pipe("lnd_emptycsv", "emptycsv"),
                {f"{L}/emptycsv/c1.csv": _csv("id,name", "1,ann"), f"{L}/emptycsv/c2.csv": b""}),
         batch="main", pipeline=_key("lnd_emptycsv"), expect_status="success",
         expect_notes=("RAT-LND-009", "c2.csv"), expect_row_count=1, spec="building"),
    Case("lnd-parquet-zero-bytes", "landing files",
         _merge(zone_pipe("lnd_emptypq", "emptypq"),
                {f"{L}/emptypq/p1.parquet": GOOD_PQ, f"{L}/emptypq/p2.parquet": b""}),
         batch="main", pipeline=_key("lnd_emptypq"), expect_status="success",
         expect_notes=("RAT-LND-009", "p2.parquet"), expect_row_count=2, spec="building"),
    Case("lnd-file-name-colon", "landing files",
         _merge(zone_pipe("lnd_colon", "name_colon"),
                {f"{L}/name_colon/2024-01-01T10:00:00.csv": _csv("id,name", "1,ann", "2,bob")}),
         batch="main", pipeline=_key("lnd_colon"), expect_status="success", expect_row_count=2, spec="building"),
    Case("lnd-file-name-glob-brackets", "landing files",
         _merge(zone_pipe("lnd_brackets", "name_brackets"),
                {f"{L}/name_brackets/[1].csv": _csv("id,name", "1,ann", "2,bob"),
                 f"{L}/name_brackets/1.csv": _csv("id,name", "3,cid")}),
         batch="main", pipeline=_key("lnd_brackets", ), expect_status="success",
         expect_rows=({"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}, {"id": 3, "name": "cid"}),
         spec="building", notes="as a glob, [1].csv would match 1.csv: each file must be read exactly once"),
    Case("lnd-file-name-glob-star", "landing files",
         _merge(zone_pipe("lnd_star", "name_star"),
                {f"{L}/name_star/a*b?.csv": _csv("id,name", "1,ann"),
                 f"{L}/name_star/axxbz.csv": _csv("id,name", "2,bob")}),
         batch="main", pipeline=_key("lnd_star"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}), spec="building"),
    Case("lnd-file-name-newline", "landing files",
         _merge(zone_pipe("lnd_newline", "name_newline"), {f"{L}/name_newline/ok.csv": _csv("id,name", "1,ann"),
                                                           f"{L}/name_newline/two\nlines.csv": _csv("id,name", "2,b")}),
         expect_code="RAT-LND-012", expect_file=f"{L}/name_newline", spec="building",
         notes="a line break in a file name would break every listing of the ledger: named, with the fix (rename "
               "it), when the project compiles (the compiler lists every local zone), never a crash"),
    Case("lnd-file-name-not-utf8", "landing files",
         _merge(zone_pipe("lnd_latin1_name", "name_latin1"),
                {f"{L}/name_latin1/ok.csv": _csv("id,name", "1,ann"),
                 f"{L}/name_latin1/" + os.fsdecode(b"caf\xe9.csv"): _csv("id,name", "2,bob")}),
         expect_code="RAT-LND-012", expect_file=f"{L}/name_latin1", spec="building",
         notes="a name in Latin-1 bytes (an old Windows share): SQLite cannot store it as text"),
    Case("lnd-symlink-loop", "landing files",
         _merge(zone_pipe("lnd_loop", "name_loop"), {f"{L}/name_loop/ok.csv": _csv("id,name", "1,ann")}),
         symlinks={f"{L}/name_loop/loop.csv": "loop.csv"},
         expect_code="RAT-LND-008", expect_file=f"{L}/name_loop/loop.csv", spec="building",
         notes="a symlink to itself: its own coded error, not an OSError"),
    Case("lnd-file-name-space-unicode-percent", "landing files",
         _merge(zone_pipe("lnd_unicode", "name_unicode"),
                {f"{L}/name_unicode/données du jour 100%.csv": _csv("id,name", "1,ann", "2,bob", "3,cid")}),
         batch="main", pipeline=_key("lnd_unicode"), expect_status="success", expect_row_count=3,
         spec="building"),
    Case("lnd-bad-rows-skip", "landing files",
         _merge(zone_pipe("lnd_skip_csv", "skip_csv"),
                {f"{L}/skip_csv/rows.csv": _csv("id,name", "11,ann", "13,bob,surplus", "15,cid", "17", "19,dan")}),
         batch="selected", pipeline=_key("lnd_skip_csv"), expect_status="success",
         expect_notes=("RAT-LND-007", r"re:\b2\b"),
         expect_rows=({"id": 11, "name": "ann"}, {"id": 15, "name": "cid"}, {"id": 19, "name": "dan"}),
         spec="building", notes="2 bad rows (lines 3 and 5): the note counts them"),
    Case("lnd-bad-rows-skip-jsonl", "landing files",
         _merge(zone_pipe("lnd_skip_json", "skip_json"),
                {f"{L}/skip_json/lines.jsonl": '{"id": 11}\n{"id": 14\n{"id": 15}\n{oops}\n{"id": 17}\n'
                                               '[1, \n{"id": 19}\n'}),
         batch="selected", pipeline=_key("lnd_skip_json"), expect_status="success",
         expect_notes=("RAT-LND-007", r"re:\b3\b"), expect_rows=({"id": 11}, {"id": 15}, {"id": 17}, {"id": 19}),
         spec="building", notes="3 bad lines (2, 4 and 6): the note counts them"),
    Case("lnd-columns-union", "landing files",
         _merge(zone_pipe("lnd_union", "union_csv"),
                {f"{L}/union_csv/u1.csv": _csv("id,name", "1,ann"),
                 f"{L}/union_csv/u2.csv": _csv("id,city", "2,Oslo")}),
         batch="selected", pipeline=_key("lnd_union"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann", "city": None}, {"id": 2, "name": None, "city": "Oslo"}),
         spec="building"),

    Case("lnd-s3-unreachable", "landing files", zone_pipe("lnd_s3_down", "lost"),
         batch="selected", pipeline=_key("lnd_s3_down"), expect_code="RAT-S3-", expect_file="s3://nobucket/lost/",
         spec="building", notes="an object-store zone whose endpoint nothing listens at: RAT-S3-002 where the "
                                "environment has no AWS credentials (botocore asks for them before it connects), "
                                "RAT-S3-001 where it has some; nothing loaded either way"),

    # ------------------------------------------------------------------------------------------ landing ledger
    Case("ledger-reset-reloads", "landing ledger", batch="main", pipeline=_key("raw_events_reset"),
         expect_status="success", expect_row_count=8, spec="building",
         notes="e1.jsonl (4 rows) was loaded by the base run; the batch's `ratui landing reset events_reset "
               "e1.jsonl` makes it loadable again, so the run is not skipped and appends it again"),
    Case("ledger-full-refresh-new-files", "landing ledger",
         {f"{L}/refresh_new/r2.jsonl": '{"id": 4, "note": "new4"}\n{"id": 5, "note": "new5"}\n'},
         batch="selected", pipeline=_key("refresh_new"), expect_status="success",
         expect_row_count=5, spec="building", notes="r1 (3 rows, loaded by the base run) + r2 (2 rows, new)"),
    Case("ledger-full-refresh-archived-files", "landing ledger",
         {f"{L}/refresh_archive/a2.csv": _csv("id,note", "4,arch4", "5,arch5")},
         batch="selected", pipeline=_key("refresh_archive"), expect_status="success", expect_row_count=5,
         spec="building",
         notes="a1 (3 rows) is in _processed/ since the base run; a2 (2 rows) is new"),
    Case("ledger-full-refresh-file-deleted", "landing ledger",
         {f"{L}/gone_zone/g2.csv": _csv("id,note", "4,gone4")}, delete=(f"{L}/gone_zone/g1.csv",),
         batch="selected", pipeline=_key("refresh_gone_zone"), expect_code="RAT-LND-005",
         expect_file=f"{L}/gone_zone/g1.csv", spec="building"),
    Case("ledger-full-refresh-processed-file-deleted", "landing ledger",
         {f"{L}/gone_archive/h2.csv": _csv("id,note", "4,garch4")}, prepare=_delete_processed("gone_archive"),
         batch="selected", pipeline=_key("refresh_gone_archive"), expect_code="RAT-LND-005", expect_file="h1.csv",
         spec="building",
         notes="the ledger says h1.csv was archived under _processed/{run}/; it is gone"),

    # ------------------------------------------------------------------------------------------ schema changes
    Case("schema-string-to-int", "schema changes",
         pipe("bronze", "schema_str2int", sql("-- @merge_strategy: append_only",
                                              "SELECT * FROM VALUES (3, 30) AS t(id, code)")),
         batch="main", pipeline=_key("schema_str2int"), expect_code="RAT-WRT-003",
         expect_file=f"{P}/bronze/schema_str2int/pipeline.sql"),
    Case("schema-int-to-string", "schema changes",
         pipe("bronze", "schema_int2str", sql("-- @merge_strategy: append_only",
                                              "SELECT * FROM VALUES (3, 'thirty') AS t(id, qty)")),
         batch="main", pipeline=_key("schema_int2str"), expect_code="RAT-WRT-003",
         expect_file=f"{P}/bronze/schema_int2str/pipeline.sql"),
    Case("schema-timestamp-to-date", "schema changes",
         pipe("bronze", "schema_ts2date", sql("-- @merge_strategy: append_only",
                                              "SELECT 2 AS id, DATE '2024-01-02' AS seen_at")),
         batch="main", pipeline=_key("schema_ts2date"), expect_code="RAT-WRT-003",
         expect_file=f"{P}/bronze/schema_ts2date/pipeline.sql"),
    Case("schema-boolean-to-int", "schema changes",
         pipe("bronze", "schema_bool2int", sql("-- @merge_strategy: append_only", "SELECT 2 AS id, 1 AS flag")),
         batch="main", pipeline=_key("schema_bool2int"), expect_code="RAT-WRT-003",
         expect_file=f"{P}/bronze/schema_bool2int/pipeline.sql"),
    Case("schema-key-type-change", "schema changes",
         pipe("bronze", "schema_key_type", sql("-- @merge_strategy: incremental", "-- @unique_key: id",
                                               "SELECT * FROM VALUES (3, 3) AS t(id, v)")),
         batch="main", pipeline=_key("schema_key_type"), expect_code="RAT-WRT-003",
         expect_file=f"{P}/bronze/schema_key_type/pipeline.sql"),
    Case("schema-added-column-evolves", "schema changes",
         pipe("bronze", "schema_add_col", sql("-- @merge_strategy: append_only",
                                              "SELECT 2 AS id, 'b' AS code, CAST(9.5 AS DOUBLE) AS score")),
         batch="main", pipeline=_key("schema_add_col"), expect_status="success",
         expect_rows=({"id": 1, "code": "a", "score": None}, {"id": 2, "code": "b", "score": 9.5})),
    Case("schema-int-widens-to-long", "schema changes",
         pipe("bronze", "schema_widen", sql("-- @merge_strategy: append_only",
                                            "SELECT CAST(2 AS INT) AS id, CAST(5000000000 AS BIGINT) AS qty")),
         batch="main", pipeline=_key("schema_widen"), expect_status="success",
         expect_rows=({"id": 1, "qty": 7}, {"id": 2, "qty": 5000000000})),
    Case("schema-full-refresh-rebuilds", "schema changes",
         pipe("bronze", "schema_rebuild", sql("-- @merge_strategy: full_refresh",
                                              "SELECT * FROM VALUES (1, 100) AS t(id, code)")),
         batch="main", pipeline=_key("schema_rebuild"), expect_status="success",
         expect_rows=({"id": 1, "code": 100},)),

    # ------------------------------------------------------------------------------------------ quality tests
    Case("quality-bad-severity", "quality tests",
         {f"{P}/silver/orders/tests/quality/sev.sql": sql("-- @severity: fatal", "SELECT * FROM {{ this }}")},
         expect_code="RAT-CFG-005", expect_file=f"{P}/silver/orders/tests/quality/sev.sql", expect_line=1),
    Case("quality-unknown-annotation", "quality tests",
         {f"{P}/silver/orders/tests/quality/owner.sql": sql("-- @severity: warn", "-- @owner: data-team",
                                                            "SELECT * FROM {{ this }} WHERE amount < 0")},
         expect_code="RAT-CFG-002", expect_file=f"{P}/silver/orders/tests/quality/owner.sql", expect_line=2),
    Case("quality-empty-file", "quality tests", {f"{P}/silver/orders/tests/quality/todo.sql": "\n\n"},
         expect_code="RAT-PRJ-007", expect_file=f"{P}/silver/orders/tests/quality/todo.sql", spec="building"),
    Case("quality-ref-unknown-table", "quality tests",
         {f"{P}/silver/orders/tests/quality/orphans.sql": sql(
             "SELECT * FROM {{ this }}", "WHERE customer_id NOT IN (SELECT id FROM {{ ref('bronze.customerz') }})")},
         expect_code="RAT-DAG-002", expect_file=f"{P}/silver/orders/tests/quality/orphans.sql", expect_line=2,
         spec="building"),
    Case("quality-table-without-ref", "quality tests",
         {f"{P}/silver/orders/tests/quality/reconcile.sql": sql(
             "SELECT o.* FROM {{ this }} AS o", "LEFT JOIN bronze.raw_orders AS r ON r.order_id = o.order_id",
             "WHERE r.order_id IS NULL")},
         expect_code="RAT-DAG-006", expect_file=f"{P}/silver/orders/tests/quality/reconcile.sql", expect_line=2,
         spec="building"),
    Case("quality-template-syntax", "quality tests",
         {f"{P}/silver/orders/tests/quality/broken.sql": sql("-- @severity: error",
                                                             "SELECT * FROM {{ this } WHERE amount < 0")},
         expect_code="RAT-TPL-001", expect_file=f"{P}/silver/orders/tests/quality/broken.sql", expect_line=2),
    Case("quality-error-finds-rows", "quality tests",
         _merge(pipe("bronze", "q_gate", sql("-- @merge_strategy: full_refresh",
                                             "SELECT * FROM VALUES (1, 5), (2, -5) AS t(id, amount)")),
                {f"{P}/bronze/q_gate/tests/quality/no_negative.sql": sql(
                    "-- @severity: error", "SELECT * FROM {{ this }} WHERE amount < 0")}),
         batch="main", pipeline=_key("q_gate"), expect_code="RAT-RUN-003",
         expect_file=f"{P}/bronze/q_gate/tests/quality/no_negative.sql"),
    Case("quality-sql-error", "quality tests",
         _merge(pipe("bronze", "q_sqlerr", sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id")),
                {f"{P}/bronze/q_sqlerr/tests/quality/typo.sql": sql("SELECT * FROM {{ this }}",
                                                                    "WHERE amout < 0")}),
         batch="main", pipeline=_key("q_sqlerr"), expect_code="RAT-RUN-003",
         expect_file=f"{P}/bronze/q_sqlerr/tests/quality/typo.sql"),
    Case("quality-warn-finds-rows", "quality tests",
         _merge(pipe("bronze", "q_warn", sql("-- @merge_strategy: full_refresh",
                                             "SELECT * FROM VALUES (1, 5), (2, -5) AS t(id, amount)")),
                {f"{P}/bronze/q_warn/tests/quality/negative.sql": sql(
                    "-- @severity: warn", "SELECT * FROM {{ this }} WHERE amount < 0")}),
         batch="main", pipeline=_key("q_warn"), expect_status="success", expect_warnings=1, expect_row_count=2),

    # ------------------------------------------------------------------------------------------ path escapes
    Case("path-pipeline-folder-symlink-out", "path escapes",
         symlinks={f"{P}/bronze/escaped": "{outside}/escaped"},
         outside={"escaped/pipeline.sql": "SELECT 1 AS id\n"},
         expect_code="RAT-PTH-001", expect_file=f"{P}/bronze/escaped", spec="building"),
    Case("path-pipeline-sql-symlink-out", "path escapes",
         {f"{P}/bronze/pth_sql/config.yaml": "merge_strategy: full_refresh\n"},
         symlinks={f"{P}/bronze/pth_sql/pipeline.sql": "{outside}/pipeline.sql"},
         outside={"pipeline.sql": "SELECT 1 AS id\n"},
         expect_code="RAT-PTH-001", expect_file=f"{P}/bronze/pth_sql/pipeline.sql", spec="building"),
    Case("path-config-yaml-symlink-out", "path escapes",
         pipe("bronze", "pth_cfg", "SELECT 1 AS id\n"),
         symlinks={f"{P}/bronze/pth_cfg/config.yaml": "{outside}/config.yaml"},
         outside={"config.yaml": "merge_strategy: full_refresh\n"},
         expect_code="RAT-PTH-001", expect_file=f"{P}/bronze/pth_cfg/config.yaml", spec="building"),
    Case("path-quality-test-symlink-out", "path escapes",
         symlinks={f"{P}/silver/orders/tests/quality/shared.sql": "{outside}/shared.sql"},
         outside={"shared.sql": "SELECT * FROM {{ this }} WHERE amount < 0\n"},
         expect_code="RAT-PTH-001", expect_file=f"{P}/silver/orders/tests/quality/shared.sql", spec="building"),
    Case("path-zone-folder-symlink-out", "path escapes", zone_pipe("pth_zone", "ext_zone"),
         symlinks={f"{L}/ext_zone": "{outside}/zone"}, outside={"zone/x.csv": _csv("id", "1")},
         expect_code="RAT-PTH-001", expect_file=f"{L}/ext_zone", spec="building"),
    Case("path-landing-file-symlink-out", "path escapes",
         _merge(zone_pipe("pth_file", "pth_files"), {f"{L}/pth_files/ok.csv": _csv("id", "1")}),
         symlinks={f"{L}/pth_files/secret.csv": "{outside}/secret.csv"}, outside={"secret.csv": _csv("id", "2")},
         expect_code="RAT-PTH-001", expect_file=f"{L}/pth_files/secret.csv", spec="building"),
    Case("path-landing-file-symlink-absolute", "path escapes",
         _merge(zone_pipe("pth_abs", "pth_abs"), {f"{L}/pth_abs/ok.csv": _csv("id", "1")}),
         symlinks={f"{L}/pth_abs/passwd.csv": "/etc/passwd"},
         expect_code="RAT-PTH-001", expect_file=f"{L}/pth_abs/passwd.csv", spec="building"),
    Case("path-landing-zone-dotdot", "path escapes", zone_pipe("pth_dotdot", "../orders"),
         expect_code="RAT-PRJ-001", expect_file=f"{P}/bronze/pth_dotdot/pipeline.sql"),
    Case("path-ref-dotdot", "path escapes",
         pipe("silver", "pth_ref", sql("SELECT * FROM {{ ref('../../etc.passwd') }}")),
         expect_code="RAT-TPL-003", expect_file=f"{P}/silver/pth_ref/pipeline.sql", expect_line=1),
    Case("path-sql-reads-a-file-by-path", "path escapes",
         pipe("bronze", "pth_sql_file", sql("-- @merge_strategy: full_refresh",
                                            "SELECT value FROM text.`{outside}/secret.txt`")),
         outside={"secret.txt": "the neighbour's secret\n"},
         expect_code="RAT-DAG-006", expect_file=f"{P}/bronze/pth_sql_file/pipeline.sql", expect_line=2,
         expect_stderr=("landing_zone(",), spec="building",
         notes="refused at compile time; the hint points at a landing zone, never at ref('text./...')"),
    Case("path-symlinks-inside-are-fine", "path escapes",
         _merge(zone_pipe("pth_inside", "linked_orders"),
                {f"{NS}/shared/inside.sql": sql("-- @merge_strategy: full_refresh", "SELECT 1 AS id")}),
         symlinks={f"{L}/linked_orders": "orders",
                   f"{P}/bronze/pth_inside_sql/pipeline.sql": "{root}/shop/shared/inside.sql"},
         expect_exit=0, spec="building",
         notes="a zone folder and a pipeline.sql symlinked to places inside the project compile"),
    Case("path-allow-outside-compiles", "path escapes",
         _merge(zone_pipe("pth_allowed", "ext_allowed"),
                {"ratui.yaml": BASE_SETTINGS + "paths:\n  allow_outside:\n    - {outside}\n"}),
         symlinks={f"{L}/ext_allowed": "{outside}/zone"}, outside={"zone/x.csv": _csv("id", "1")},
         expect_exit=0, spec="building"),
    Case("path-allow-outside-runs", "path escapes", zone_pipe("pth_allowed_run", "ext_allowed_run"),
         symlinks={f"{L}/ext_allowed_run": "{outside}/zone_run"},
         outside={"zone_run/x.csv": _csv("id,name", "1,ann", "2,bob")},
         batch="selected", pipeline=_key("pth_allowed_run"), expect_status="success",
         expect_rows=({"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}), spec="building"),

    # ------------------------------------------------------------------------------------------ moved projects
    Case("moved-copy-reads-and-writes-only-itself", "moved projects", scenario="moved", expect_exit=0,
         spec="building", notes="the batches run in copies of the base state, a project that ran in place: once "
                                "they are done the base's warehouse files keep their bytes and mtimes, none added"),
    Case("moved-original-deleted", "moved projects", scenario="moved", expect_exit=0, spec="building",
         notes="the selected batch's project (a copy that ran) is copied and deleted: in the second copy every "
               "table reads back as before (through ratui's catalog), and one `ratui run` rewrites gold.revenue "
               "from silver.orders and answers a new pipeline's query counting the rows of three tables"),

    # ------------------------------------------------------------------------------------------ unreadable files
    Case("unreadable-pipeline-sql-not-utf8", "unreadable files",
         pipe("bronze", "unr_latin1", "-- @description: café\nSELECT 1 AS id\n".encode("latin-1")),
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_latin1/pipeline.sql"),
    Case("unreadable-config-yaml-not-utf8", "unreadable files",
         _merge(pipe("bronze", "unr_cfg", "SELECT 1 AS id\n"),
                {f"{P}/bronze/unr_cfg/config.yaml": "description: café\n".encode("latin-1")}),
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_cfg/config.yaml"),
    Case("unreadable-ratui-yaml-not-utf8", "unreadable files",
         {"ratui.yaml": (BASE_SETTINGS + "# réglages\n").encode("latin-1")},
         expect_code="RAT-PRJ-006", expect_file="ratui.yaml"),
    Case("unreadable-quality-test-not-utf8", "unreadable files",
         {f"{P}/silver/orders/tests/quality/latin.sql": "-- ¿qué?\nSELECT * FROM {{ this }}\n".encode("latin-1")},
         expect_code="RAT-PRJ-006", expect_file=f"{P}/silver/orders/tests/quality/latin.sql"),
    Case("unreadable-pipeline-py-binary", "unreadable files", pipe("bronze", "unr_bin", ELF_GARBAGE, "pipeline.py"),
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_bin/pipeline.py"),
    Case("unreadable-pipeline-sql-is-a-directory", "unreadable files",
         {f"{P}/bronze/unr_dir/pipeline.sql/README.txt": "a folder where the file should be\n"},
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_dir/pipeline.sql", spec="building",
         notes="today: RAT-PRJ-004 'has neither pipeline.sql nor pipeline.py', which hides the real problem"),
    Case("unreadable-config-yaml-is-a-directory", "unreadable files",
         _merge(pipe("bronze", "unr_cfgdir", "SELECT 1 AS id\n"),
                {f"{P}/bronze/unr_cfgdir/config.yaml/README.txt": "a folder\n"}),
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_cfgdir/config.yaml", spec="building",
         notes="today the folder is silently ignored"),
    Case("unreadable-quality-test-is-a-directory", "unreadable files",
         {f"{P}/silver/orders/tests/quality/folder.sql/README.txt": "a folder\n"},
         expect_code="RAT-PRJ-006", expect_file=f"{P}/silver/orders/tests/quality/folder.sql"),
    Case("unreadable-pipeline-sql-dangling-symlink", "unreadable files",
         {f"{P}/bronze/unr_dangling/config.yaml": "merge_strategy: full_refresh\n"},
         symlinks={f"{P}/bronze/unr_dangling/pipeline.sql": "moved_away.sql"},
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_dangling/pipeline.sql", spec="building"),
    Case("unreadable-config-yaml-dangling-symlink", "unreadable files",
         pipe("bronze", "unr_cfglink", "SELECT 1 AS id\n"),
         symlinks={f"{P}/bronze/unr_cfglink/config.yaml": "shared/config.yaml"},
         expect_code="RAT-PRJ-006", expect_file=f"{P}/bronze/unr_cfglink/config.yaml", spec="building",
         notes="today the dangling link is silently ignored"),
    Case("unreadable-landing-file-dangling-symlink", "unreadable files",
         _merge(zone_pipe("unr_zone_link", "dangling_zone"), {f"{L}/dangling_zone/ok.csv": _csv("id", "1")}),
         symlinks={f"{L}/dangling_zone/late.csv": "not_arrived_yet.csv"},
         expect_code="RAT-LND-008", expect_file=f"{L}/dangling_zone/late.csv", spec="building",
         notes="a broken symlink in a zone is neither read nor silently left out"),
    Case("unreadable-damaged-table-data-file", "unreadable files",
         argv=("query", "SELECT count(*) AS n FROM silver.orders"), prepare=_damage_a_data_file("silver/orders"),
         expect_exit=1, expect_code="RAT-SQL-004", expect_stderr=("not a Parquet file",), fingerprint=False,
         spec="building", notes="the cause Spark gives (the file, 'not a Parquet file'), never a py4j object id"),
    Case("unreadable-garbage-database", "unreadable files", argv=("runs",), prepare=_garbage_db,
         expect_exit=(1, 2), expect_code="RAT-", expect_file=".ratui/ratui.db", fingerprint=False, spec="building",
         notes="any coded error naming the database (the code is not specified)"),

    # ------------------------------------------------------------------------------------------ CLI misuse
    Case("cli-unknown-command", "CLI misuse", argv=("frobnicate",), expect_code="RAT-CLI-001", spec="building"),
    Case("cli-engine-unknown-action", "CLI misuse", argv=("engine", "restart"), expect_code="RAT-CLI-001"),
    Case("cli-engine-logs-zero-lines", "CLI misuse", argv=("engine", "logs", "-n", "0"), expect_code="RAT-CLI-001"),
    Case("cli-watch-unknown-branch", "CLI misuse", argv=("watch", "--ref", "nosuch"), expect_code="RAT-CAT-002",
         expect_exit=1),
    Case("cli-unknown-option", "CLI misuse", argv=("run", "--frobnicate"), expect_code="RAT-CLI-001",
         spec="building"),
    Case("cli-bad-status", "CLI misuse", argv=("runs", "--status", "exploded"), expect_code="RAT-CLI-001",
         spec="building"),
    Case("cli-limit-zero", "CLI misuse", argv=("runs", "--limit", "0"), expect_code="RAT-CLI-001", spec="building"),
    Case("cli-threads-zero", "CLI misuse", argv=("run", "--threads", "0"), expect_code="RAT-CLI-001",
         spec="building"),
    Case("cli-limit-not-a-number", "CLI misuse", argv=("runs", "--limit", "many"), expect_code="RAT-CLI-001",
         spec="building"),
    Case("cli-landing-reset-without-zone", "CLI misuse", argv=("landing", "reset"), expect_code="RAT-CLI-001",
         spec="building"),
    Case("cli-query-without-sql", "CLI misuse", argv=("query",), expect_code="RAT-CLI-001", spec="building"),
    Case("cli-query-syntax-error", "CLI misuse", argv=("query", "SELECT *\nFROM bronze.raw_orders\nWHERE = 1"),
         expect_exit=1, expect_code="RAT-SQL-004", expect_stderr=("line 3",),
         notes="an ad-hoc query's error is coded and names the line Spark points at"),
    Case("cli-query-unknown-ref", "CLI misuse", argv=("query", "SELECT 1", "--ref", "no-such-branch"),
         expect_exit=1, expect_code="RAT-CAT-002"),
    Case("cli-web-port-out-of-range", "CLI misuse", argv=("web", "--port", "70000"), expect_code="RAT-WEB-002",
         notes="checked before any server starts"),
    Case("cli-web-remote-host-without-allow-remote", "CLI misuse", argv=("web", "--host", "0.0.0.0"),
         expect_code="RAT-WEB-004", expect_stderr=("--allow-remote",),
         notes="a console reachable from the network only when asked for; nothing listens"),
    Case("cli-web-max-sessions-zero", "CLI misuse", argv=("web", "--max-sessions", "0"),
         expect_code="RAT-CLI-001", notes="at least one session"),
    Case("cli-web-token-too-short", "CLI misuse", argv=("web", "--token", "abc123"), expect_code="RAT-WEB-005",
         expect_stderr=("at least 16",), notes="the message says what is wrong without echoing the token"),
    Case("cli-web-certfile-without-keyfile", "CLI misuse", argv=("web", "--certfile", "ratui.yaml"),
         expect_code="RAT-WEB-006", expect_stderr=("--keyfile",)),
    Case("cli-landing-zone-in-two-namespaces", "CLI misuse",
         {"acme/landing/orders/o.csv": "id\n1\n",
          "acme/pipelines/bronze/acme_orders/pipeline.sql":
              "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('orders') }}\n"},
         argv=("landing", "reset", "orders"), expect_code="RAT-LND-011",
         expect_stderr=("acme.orders, shop.orders",), spec="building",
         notes="a zone two namespaces have is named with its namespace; nothing is reset"),
    Case("cli-show-unknown-run", "CLI misuse", argv=("show", "nosuch"), expect_code="RAT-RUN-004"),
    # the branch workflow: every mistake is refused before anything changes (main's fingerprint is checked too)
    Case("cli-branch-reserved-name", "CLI misuse", argv=("branch", "create", "run-mine"), expect_exit=1,
         expect_code="RAT-CAT-012", notes="run-* and publish-* branches are ratui's own"),
    Case("cli-branch-bad-name", "CLI misuse", argv=("branch", "create", "../up"), expect_exit=1,
         expect_code="RAT-CAT-006"),
    Case("cli-branch-create-without-name", "CLI misuse", argv=("branch", "create"), expect_code="RAT-CLI-001"),
    Case("cli-branch-delete-main", "CLI misuse", argv=("branch", "delete", "main"), expect_exit=1,
         expect_code="RAT-CAT-004"),
    Case("cli-merge-unknown-branch", "CLI misuse", argv=("merge", "no-such-branch"), expect_exit=1,
         expect_code="RAT-CAT-002"),
    Case("cli-merge-main-into-main", "CLI misuse", argv=("merge", "main"), expect_exit=1, expect_code="RAT-CAT-007"),
    Case("cli-undo-with-an-unknown-option", "CLI misuse", argv=("undo", "--all"), expect_code="RAT-CLI-001",
         notes="undo walks back one action at a time; nothing is undone"),
    Case("cli-undo-dry-run-changes-nothing", "CLI misuse", argv=("undo", "--dry-run"), expect_exit=0,
         notes="the base state's last run's merge would be undone: said, main unchanged (the fingerprint)"),
    Case("cli-diff-unknown-ref", "CLI misuse", argv=("diff", "no-such-branch"), expect_exit=1,
         expect_code="RAT-CAT-002"),
    Case("cli-log-unknown-table", "CLI misuse", argv=("log", "no_such_table"), expect_exit=1,
         expect_code="RAT-CAT-005"),
    Case("cli-rollback-unknown-target", "CLI misuse", argv=("rollback", "--to", "nosuch"), expect_exit=1,
         expect_code="RAT-CAT-010", notes="neither a run that merged into main nor a commit of main"),
    Case("cli-rollback-without-target", "CLI misuse", argv=("rollback", "clean_orders"), expect_code="RAT-CLI-001"),
    Case("cli-backfill-start-after-end", "time ranges",
         argv=("backfill", "revenue", "--start", "2026-04-01", "--end", "2026-01-01", "--json"),
         expect_code="RAT-BKF-002", spec="building", notes="refused before any branch or JVM"),
    Case("cli-backfill-bad-date", "time ranges",
         argv=("backfill", "revenue", "--start", "2026-02-30", "--end", "2026-04-01", "--json"),
         expect_code="RAT-BKF-001", spec="building"),
    Case("cli-backfill-no-time-range-pipeline", "time ranges",
         argv=("backfill", "revenue", "--start", "2026-01-01", "--end", "2026-04-01", "--json"),
         expect_code="RAT-BKF-003", spec="building", notes="revenue is full_refresh: nothing to backfill"),
    Case("cli-run-on-unknown-ref", "CLI misuse", argv=("run", "--ref", "no-such-branch"), expect_exit=1,
         expect_code="RAT-CAT-002", notes="refused before any branch or JVM"),
    Case("cli-run-on-a-past-state", "CLI misuse", argv=("run", "--ref", "main@abcdef12"), expect_exit=1,
         expect_code="RAT-CAT-007", notes="a past state can be read, never written"),
    Case("cli-query-at-not-a-time", "CLI misuse", argv=("query", "SELECT 1", "--at", "last tuesday"),
         expect_code="RAT-CLI-001"),
    Case("cli-query-at-before-history", "CLI misuse", argv=("query", "SELECT 1", "--at", "2001-01-01"),
         expect_exit=1, expect_code="RAT-CAT-010"),
    Case("cli-query-unknown-commit", "CLI misuse", argv=("query", "SELECT 1", "--ref", "main@0123456789"),
         expect_exit=1, expect_code="RAT-CAT-010"),
    Case("cli-cancel-unknown-run", "CLI misuse", argv=("cancel", "nosuch", "--wait", "0"), expect_code="RAT-RUN-004"),
    Case("cli-project-without-ratui-yaml", "CLI misuse", argv=("run", "--project", "{empty}"),
         expect_code="RAT-PRJ-005"),
    Case("cli-unknown-selector", "CLI misuse", argv=("run", "--json", "raw_orderz"), expect_code="RAT-DAG-003"),
    Case("cli-bad-selector-kind", "CLI misuse", argv=("run", "--json", "layr:silver"), expect_code="RAT-DAG-004"),
    # schedules: pausing one the project does not have; a runner's health port out of range
    Case("cli-schedule-pause-unknown", "CLI misuse", argv=("schedule", "pause", "nightly", "--json"),
         expect_code="RAT-SCH-005", spec="building"),
    Case("cli-up-health-port-out-of-range", "CLI misuse", argv=("up", "--json", "--health-port", "70000"),
         expect_code="RAT-SCH-006", spec="building"),
    # alerts: a test message to a channel the project does not declare
    Case("cli-alerts-test-unknown-channel", "CLI misuse", argv=("alerts", "test", "pager", "--json"),
         expect_code="RAT-ALR-004", spec="building"),
    Case("cli-closed-pipe", "CLI misuse", argv=("runs", "--json", "--limit", "5000"), prepare=_seed_runs(1500),
         scenario="closed_pipe", expect_exit=141,
         notes="`ratui runs --json | head -1`: the reader goes away; exit 141 (README), quietly: no traceback"),

    # ------------------------------------------------------------------------------------------ column lineage
    Case("lineage-malformed-name", "column lineage", argv=("lineage", "silver..orders"), expect_code="RAT-LIN-001",
         notes="`ratui lineage TABLE[.COLUMN]`: nothing is read before the name parses"),
    Case("lineage-unknown-table", "column lineage", argv=("lineage", "silver.ordrs.amount"),
         expect_code="RAT-LIN-002", expect_stderr=("silver.orders",), notes="did you mean the nearest table"),
    Case("lineage-unknown-layer", "column lineage", argv=("lineage", "platinum.orders.amount", "--json"),
         expect_code="RAT-LIN-002", notes="--json reports the coded error as JSON"),
    Case("lineage-unknown-column", "column lineage", argv=("lineage", "silver.orders.amont"),
         expect_code="RAT-LIN-003", expect_stderr=("amount",), notes="did you mean the nearest column"),
    Case("lineage-unknown-zone", "column lineage", argv=("lineage", "landing.nowhere.id"), expect_code="RAT-LIN-002"),
    Case("lineage-python-pipeline-column", "column lineage",
         pipe("gold", "py_lineage", sql("# @merge_strategy: full_refresh", "def run(ctx):",
                                        "    return ctx.ref('silver.orders')"), "pipeline.py"),
         argv=("lineage", "gold.py_lineage.amount"), expect_code="RAT-LIN-004", expect_stderr=("silver.orders",),
         notes="a Python pipeline's lineage is table-level only: the error names the tables it reads"),
    Case("lineage-without-name", "column lineage", argv=("lineage",), expect_code="RAT-CLI-001"),

    # ------------------------------------------------------------------------------------------ compile gate
    Case("gate-run-reports-every-error", "compile gate",
         _merge(pipe("bronze", "gate_a", sql("-- @merge_strategy: upsert", "SELECT 1 AS id")),
                pipe("silver", "gate_b", sql("SELECT * FROM {{ ref('bronze.gate_a') }", ""))),
         argv=RUN, expect_code="RAT-CFG-001", expect_file=f"{P}/bronze/gate_a/pipeline.sql", expect_line=1,
         also=(("RAT-TPL-001", f"{P}/silver/gate_b/pipeline.sql"),)),
    Case("gate-run-text-error-and-hint", "compile gate",
         pipe("bronze", "gate_text", sql("-- @tags: daily", "-- @merge_strategy: upsert", "SELECT 1 AS id")),
         argv=("run",), expect_code="RAT-CFG-001", expect_file=f"{P}/bronze/gate_text/pipeline.sql", expect_line=2),
    Case("gate-unselected-broken-pipeline-warns", "compile gate",
         pipe("bronze", "broken_elsewhere", sql("-- @merge_strategy: upsert", "SELECT 1 AS id")),
         batch="selected", expect_status="success", expect_stderr=("warning:", "RAT-CFG-001", "broken_elsewhere"),
         spec="building", notes="the batch selects its cases' pipelines; this broken one, outside the selection, is "
                                "only a warning on stderr (also under --json) and the selected ones run"),

    # ------------------------------------------------------------------------------------------ Python pipelines
    Case("py-syntax-error", "Python pipelines",
         pipe("bronze", "py_syntax", sql("# @merge_strategy: full_refresh", "", "", "def run(ctx)",
                                         "    return ctx.sql('SELECT 1 AS id')"), "pipeline.py"),
         expect_code="RAT-PY-002", expect_file=f"{P}/bronze/py_syntax/pipeline.py", expect_line=4, spec="building"),
    Case("py-no-run-function", "Python pipelines",
         pipe("bronze", "py_norun", sql("# @merge_strategy: full_refresh", "", "", "def build(ctx):",
                                        "    return ctx.sql('SELECT 1 AS id')"), "pipeline.py"),
         expect_code="RAT-PY-003", expect_file=f"{P}/bronze/py_norun/pipeline.py", spec="building"),
    Case("py-run-not-a-function", "Python pipelines",
         pipe("bronze", "py_runvar", sql("# @merge_strategy: full_refresh", "run = 'SELECT 1 AS id'"), "pipeline.py"),
         expect_code="RAT-PY-003", expect_file=f"{P}/bronze/py_runvar/pipeline.py", spec="building"),
    Case("py-both-pipeline-files", "Python pipelines",
         _merge(pipe("bronze", "py_both", "SELECT 1 AS id\n"),
                pipe("bronze", "py_both", "def run(ctx):\n    return ctx.sql('SELECT 1 AS id')\n", "pipeline.py")),
         expect_code="RAT-PRJ-003", expect_file=f"{P}/bronze/py_both"),
    Case("py-ref-unknown-table", "Python pipelines",
         pipe("silver", "py_ref", sql("def run(ctx):", "    return ctx.ref('bronze.raw_orderz')"), "pipeline.py"),
         expect_code="RAT-DAG-002", expect_file=f"{P}/silver/py_ref/pipeline.py"),
    Case("py-unknown-annotation", "Python pipelines",
         pipe("bronze", "py_ann", sql("# @merge_stratgy: append_only", "def run(ctx):",
                                      "    return ctx.sql('SELECT 1 AS id')"), "pipeline.py"),
         expect_code="RAT-CFG-002", expect_file=f"{P}/bronze/py_ann/pipeline.py", expect_line=1),
    Case("py-raises", "Python pipelines",
         pipe("bronze", "py_raises", sql("# @merge_strategy: full_refresh", "", "", "def run(ctx):",
                                         "    rows = ctx.sql('SELECT 1 AS id')",
                                         "    raise ValueError('the upstream feed is empty')"), "pipeline.py"),
         batch="main", pipeline=_key("py_raises"), expect_code="RAT-PY-001",
         expect_file=f"{P}/bronze/py_raises/pipeline.py", expect_line=6, spec="building"),
    Case("py-missing-import", "Python pipelines",
         pipe("bronze", "py_import", sql("# @merge_strategy: full_refresh", "import ratui_corpus_no_such_module",
                                         "", "", "def run(ctx):", "    return ctx.sql('SELECT 1 AS id')"),
              "pipeline.py"),
         batch="main", pipeline=_key("py_import"), expect_code="RAT-PY-001",
         expect_file=f"{P}/bronze/py_import/pipeline.py", expect_line=2, spec="building"),
    Case("py-raises-in-helper", "Python pipelines",
         pipe("bronze", "py_helper", sql("# @merge_strategy: full_refresh", "", "", "def parse(value):",
                                         "    return int(value)", "", "", "def run(ctx):",
                                         "    parse('not a number')", "    return ctx.sql('SELECT 1 AS id')"),
              "pipeline.py"),
         batch="main", pipeline=_key("py_helper"), expect_code="RAT-PY-001",
         expect_file=f"{P}/bronze/py_helper/pipeline.py", expect_line=5, spec="building",
         notes="the innermost frame of the user's file"),
    Case("py-returns-not-a-dataframe", "Python pipelines",
         pipe("bronze", "py_list", sql("# @merge_strategy: full_refresh", "def run(ctx):",
                                       "    return [{'id': 1}]"), "pipeline.py"),
         batch="main", pipeline=_key("py_list"), expect_code="RAT-PY-003",
         expect_file=f"{P}/bronze/py_list/pipeline.py", spec="building"),
    Case("py-dataframe-fails-on-spark", "Python pipelines",
         pipe("bronze", "py_lazy", sql("# @merge_strategy: full_refresh", "def run(ctx):",
                                       "    return ctx.sql(\"SELECT CAST(s AS INT) AS id FROM VALUES ('x') AS t(s)\")"),
              "pipeline.py"),
         batch="main", pipeline=_key("py_lazy"), expect_code="RAT-PY-004",
         expect_file=f"{P}/bronze/py_lazy/pipeline.py", spec="building",
         notes="the DataFrame is lazy: it fails when Spark computes it, after run() returned"),
    Case("py-isolation-unknown", "Python pipelines",
         pipe("bronze", "py_iso", sql("# @merge_strategy: full_refresh", "# @isolation: strict", "def run(ctx):",
                                      "    return ctx.sql('SELECT 1 AS id')"), "pipeline.py"),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/py_iso/pipeline.py", expect_line=2, spec="building"),
    Case("sql-isolation-annotation", "Python pipelines",
         pipe("bronze", "sql_iso", sql("-- @merge_strategy: full_refresh", "-- @isolation: process", "SELECT 1 AS id")),
         expect_code="RAT-CFG-005", expect_file=f"{P}/bronze/sql_iso/pipeline.sql", expect_line=2, spec="building",
         notes="isolation is a Python pipeline's: a SQL one runs on ratui's Spark"),
    Case("py-reads-outside-the-project", "Python pipelines",
         pipe("bronze", "py_passwd", sql("# @merge_strategy: full_refresh", "def run(ctx):",
                                         "    users = open('/etc/passwd').read()",
                                         "    return ctx.sql('SELECT 1 AS id')"), "pipeline.py"),
         batch="main", pipeline=_key("py_passwd"), expect_code="RAT-ISO-006",
         expect_file=f"{P}/bronze/py_passwd/pipeline.py", expect_line=3, spec="building",
         notes="confined (the default): Landlock refuses the read; the run fails at the line, main unchanged"),
    Case("py-sys-exit", "Python pipelines",
         pipe("gold", "zz_py_exit", sql("# @merge_strategy: full_refresh", "import sys", "", "",
                                        "def run(ctx):", "    sys.exit(1)"), "pipeline.py"),
         batch="selected", pipeline=_key("zz_py_exit", "gold"), expect_code="RAT-PY-001",
         expect_file=f"{P}/gold/zz_py_exit/pipeline.py", expect_line=6, spec="building",
         notes="gold.zz_* runs last in its batch, and exit status 1 is the batch's own: a process that dies here "
               "costs only this case its result"),
]


def _rest(id: str, method: str, ref: str, path: str, body, status: int, code: str, notes: str = "") -> Case:
    """A bad request to the Iceberg REST catalog (`ratui serve`), on branch "dev" of the base state unless `ref`."""
    return Case(id, "REST catalog", scenario="rest", rest=(method, ref, path, body), expect_http=status,
                expect_code=code, spec="building", notes=notes)


RAW = f"/namespaces/{NS}%1Fbronze/tables/raw_products"  # a table of the base state
CASES += [
    _rest("rest-malformed-json", "POST", "dev", "/namespaces", b'{"namespace": ["x"', 400, "RAT-REST-008"),
    _rest("rest-unknown-update-action", "POST", "dev", RAW,
          {"requirements": [], "updates": [{"action": "explode-table"}]}, 400, "RAT-REST-008",
          notes="one unknown action refuses the whole commit"),
    _rest("rest-body-not-an-object", "POST", "dev", "/transactions/commit", [1, 2], 400, "RAT-REST-008"),
    _rest("rest-table-name-dotdot", "POST", "dev", f"/namespaces/{NS}%1Fbronze/tables",
          {"name": "..", "schema": {"type": "struct", "fields": []}}, 400, "RAT-REST-009"),
    _rest("rest-table-name-slash", "GET", "dev", f"/namespaces/{NS}%1Fbronze/tables/raw%2F..%2Fproducts", None, 400,
          "RAT-REST-009", notes="an encoded '/' reaches the name check instead of routing elsewhere"),
    _rest("rest-rename-to-dotted-name", "POST", "dev", "/tables/rename",
          {"source": {"namespace": [NS, "bronze"], "name": "raw_products"},
           "destination": {"namespace": [NS, "bronze"], "name": "a.b"}}, 400, "RAT-REST-009"),
    _rest("rest-namespace-with-dot", "POST", "dev", "/namespaces", {"namespace": ["a.b"]}, 400, "RAT-REST-009"),
    _rest("rest-unknown-ref", "GET", "nope", "/namespaces", None, 404, "RAT-CAT-002"),
    _rest("rest-unknown-commit", "GET", "main@abcdef123456", "/namespaces", None, 404, "RAT-CAT-010"),
    _rest("rest-unknown-table", "GET", "dev", f"/namespaces/{NS}%1Fbronze/tables/nothing_here", None, 404,
          "RAT-REST-005"),
    _rest("rest-huge-body", "POST", "dev", "/namespaces", b'{"namespace": ["' + b"x" * (9 * 1024 * 1024) + b'"]}',
          413, "RAT-REST-010", notes="refused on its Content-Length, before it is read"),
    _rest("rest-wrong-method", "PUT", "dev", "/namespaces", {"namespace": ["x"]}, 405, "RAT-REST-016"),
    _rest("rest-unknown-route", "GET", "dev", "/namespaces/shop/views", None, 404, "RAT-REST-016"),
    _rest("rest-write-to-main", "POST", "main", f"/namespaces/{NS}%1Fbronze/tables",
          {"name": "from_outside", "schema": {"type": "struct", "fields": []}}, 403, "RAT-REST-006"),
    _rest("rest-metadata-path-outside", "POST", "dev", RAW,
          {"requirements": [], "updates": [{"action": "set-properties",
                                            "updates": {"write.metadata.path": "/ratui-rest-outside"}}]},
          400, "RAT-PTH-002", notes="the server writes the new metadata file through the project's path rules"),
    _rest("rest-purge", "DELETE", "dev", RAW + "?purgeRequested=true", None, 406, "RAT-REST-015",
          notes="data files are shared between refs: a drop only ever removes the pointer"),
]

# ---------------------------------------------------------------------------------------------- Python API
# `import ratui`: every bad input is a coded exception (ratui.RatuiError), raised before any Spark or branch.
def _api(id: str, code: str, expect_code: str, notes: str = "", **kw) -> Case:
    return Case(id, "Python API", api=code, expect_code=expect_code, spec="building", notes=notes, **kw)


CASES += [
    _api("api-open-not-a-project", "ratui.open('{empty}')", "RAT-PRJ-005", notes="no ratui.yaml there or above"),
    _api("api-open-not-a-path", "ratui.open(42)", "RAT-API-002"),
    _api("api-closed-project", "p.close()\np.table('silver.orders')", "RAT-API-001"),
    _api("api-closed-project-table", "t = p.table('silver.orders')\np.close()\nt.to_arrow()", "RAT-API-001",
         notes="a table of a closed project is closed too"),
    _api("api-unknown-table", "p.table('silver.orderz')", "RAT-CAT-005"),
    _api("api-table-name-not-a-string", "p.table(['silver.orders'])", "RAT-API-002"),
    _api("api-unknown-ref", "p.table('silver.orders', ref='no-such-branch')", "RAT-CAT-002"),
    _api("api-unknown-commit", "p.table('silver.orders', ref='main@0123456789')", "RAT-CAT-010"),
    _api("api-at-before-history", "p.table('silver.orders', at='2001-01-01')", "RAT-CAT-010"),
    _api("api-at-not-a-time", "p.table('silver.orders', at='last tuesday')", "RAT-API-002"),
    _api("api-scan-bad-filter", "p.table('silver.orders').scan(filter='amount >')", "RAT-API-005"),
    _api("api-scan-unknown-column", "p.table('silver.orders').scan(columns=['nope'])", "RAT-API-005"),
    _api("api-negative-limit", "p.table('silver.orders').to_arrow(limit=-1)", "RAT-API-002"),
    _api("api-history-bad-limit", "p.history(limit='ten')", "RAT-API-002"),
    _api("api-unknown-selector", "p.run('raw_orderz')", "RAT-DAG-003", notes="nothing runs, no JVM"),
    _api("api-bad-selector-kind", "p.run('layr:silver')", "RAT-DAG-004"),
    _api("api-selector-not-a-string", "p.run(42)", "RAT-API-002"),
    _api("api-run-wait-not-a-bool", "p.run('raw_orders', wait='no')", "RAT-API-002"),
    _api("api-run-on-unknown-ref", "p.run('raw_orders', ref='no-such-branch')", "RAT-CAT-002"),
    _api("api-run-on-a-past-state", "p.run('raw_orders', ref='main@abcdef12')", "RAT-CAT-007"),
    _api("api-run-broken-pipeline", "p.run('api_broken')", "RAT-RUN-008",
         files=pipe("bronze", "api_broken", sql("-- @merge_strategy: upsert", "SELECT 1 AS id")),
         expect_file=f"{P}/bronze/api_broken/pipeline.sql", expect_line=1,
         notes="the selected pipeline's first error is named; nothing runs"),
    _api("api-sql-unknown-ref", "p.sql('SELECT 1', ref='no-such-branch')", "RAT-CAT-002",
         notes="checked when the query is made, before Spark"),
    _api("api-sql-that-writes", "p.sql('DROP TABLE silver.orders').to_arrow()", "RAT-ACC-002",
         notes="the API's SQL only reads: refused before Spark starts"),
    _api("api-branch-reserved-name", "p.branch('run-123')", "RAT-CAT-012"),
    _api("api-branch-bad-name", "p.branch('bad name!')", "RAT-CAT-006"),
    _api("api-merge-unknown-branch", "p.merge('no-such-branch', into='main')", "RAT-CAT-002"),
    _api("api-get-unknown-run", "p.get_run('nosuchrun')", "RAT-RUN-004"),
]

CASES_BY_ID = {c.id: c for c in CASES}
assert len(CASES_BY_ID) == len(CASES), "case ids must be unique"
