"""Where the catalog and the tables are, and what it costs: the same ratui work on two setups in one process,
interleaved, each figure beside the reference one measured in the same run.

    --compare catalogs (the default): the embedded catalog (SQLite in .ratui/) beside a real Nessie server
    --compare storage: tables on the local disk beside tables in an s3:// warehouse on moto's S3 server (a real
                       HTTP server on the loopback, in its own process: every object goes through S3A, PyIceberg's
                       S3 file system and HTTP), both on the embedded catalog

    /work/main/.venv/bin/python benchmarks/catalogs.py              # 1M rows, 5 repeats
    /work/main/.venv/bin/python benchmarks/catalogs.py --compare storage --rows 10000000 --repeat 3
    /work/main/.venv/bin/python benchmarks/catalogs.py --quick      # small sizes: a smoke test of the script

What it measures (Spark local[2] in this process, started before anything is timed; one Nessie server started
from its runner jar in ~/.m2 with tests/nessie_server.py, in-memory store, on the loopback, emptied between parts):

  warm small run   the bundled sample copied twice (one copy per catalog), run once whole (creates the tables and
                   warms Spark and the catalog), then --repeat rounds of a forced run of the whole sample, and
                   forced runs of bronze.raw_customers (CSV landing read, a full_refresh write, one quality test)
                   and of silver.clean_customers (an incremental merge of the same rows) through ratui's engine;
                   the median, and the median of each run phase
  1% merge         a project with one incremental pipeline (unique_key id, landing_mode new_files) over a Parquet
                   landing zone: a first run loads --rows rows (printed, not compared), then --repeat runs each
                   find one new file of 1% of the rows (half updates spread over the whole key range, half new
                   keys) and merge it; the median run, its branch, commits and merge into main included
  commit latency   the catalog alone, no Spark, in 4 x --repeat rounds after one untimed round: create_branch, a
                   one-table commit (PyIceberg append of 5 rows on the branch, then record_commit), merge into
                   main, delete_branch; the median and 90th percentile of each

The backends alternate within each round (which goes first alternates too). The Nessie server runs with Java's
quick JIT only (tests/nessie_server.py starts it that way) and its in-memory store: a production server with a
persistent store differs. Timings are wall-clock, printed, never asserted; `uptime` is printed first: figures from
a busy machine are not worth keeping.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMPARISONS = {"catalogs": ("embedded", "Nessie"), "storage": ("local disk", "moto S3")}
BACKENDS = COMPARISONS["catalogs"]  # main() sets the pair compared
SMALL = ("bronze.raw_customers", "silver.clean_customers")
PHASES = ("branch", "config", "build", "write", "quality", "resolve")

SPARK = """\
spark:
  master: local[2]
  jit: full
  config:
    spark.driver.memory: 4g
    spark.sql.shuffle.partitions: 4
    spark.default.parallelism: 2
"""

MERGE_PIPELINE = """\
-- @merge_strategy: incremental
-- @unique_key: id
-- @landing_mode: new_files
SELECT id, customer_id, CAST(amount AS DECIMAL(12, 2)) AS amount, status, updated_at
FROM {{ landing_zone('orders') }}
"""


def ratui_yaml(namespace: str, uri: str | None, backend: str = "embedded") -> str:
    """The project's settings on `backend`: `uri` is Nessie's, or moto's endpoint for "moto S3"."""
    text = f"namespace: {namespace}\n{SPARK}"
    if backend == "Nessie":
        return text + f"catalog:\n  type: nessie\n  uri: {uri}\n"
    if backend == "moto S3":
        return text + (f"catalog:\n  warehouse: s3://{new_bucket(uri)}/lake\n  s3:\n    endpoint_url: {uri}\n"
                       "    region: us-east-1\n")
    return text


def new_bucket(endpoint: str) -> str:
    import uuid

    from tests.engine.s3_server import s3_client

    name = f"bench-{uuid.uuid4().hex[:10]}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name


def timed(fn):
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def run_timed(engine, keys: list[str], **options):
    """Seconds of one engine.run of `keys` (every run must succeed), and its results."""
    seconds, results = timed(lambda: engine.run(keys, trigger="bench", **options))
    succeeded(results)
    return seconds, results


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def rounds(repeat: int):
    """(round, backends in this round's order): the first backend alternates from round to round."""
    for i in range(repeat):
        yield i, BACKENDS if i % 2 == 0 else BACKENDS[::-1]


def succeeded(results) -> None:
    bad = [(r.pipeline, r.status, (r.error or {}).get("code"), (r.error or {}).get("message")) for r in results
           if r.status != "success"]
    if bad:
        raise SystemExit(f"a benchmark run did not succeed: {bad}")


class Figures:
    """Seconds per (figure, backend), and run phases (ms) per (figure, backend)."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, list[float]]] = {}
        self.phases: dict[str, dict[str, list[dict[str, int]]]] = {}
        self.latency: set[str] = set()

    def add(self, figure: str, backend: str, seconds: float, phases: dict[str, int] | None = None) -> None:
        self.seconds.setdefault(figure, {}).setdefault(backend, []).append(seconds)
        if phases is not None:
            self.phases.setdefault(figure, {}).setdefault(backend, []).append(phases)


def open_engines(work: Path, name: str, uri: str, build) -> dict:
    """One project per backend under work/{name}-{backend} (`build(folder)` fills it), and its engine."""
    from ratui.engine.facade.engine import Engine

    engines = {}
    for backend in BACKENDS:
        project = work / f"{name}-{backend}"
        namespace = build(project)
        (project / "ratui.yaml").write_text(ratui_yaml(namespace, uri, backend))
        engines[backend] = Engine.open(project)
    return engines


def warm_small(work: Path, uri: str, repeat: int, figures: Figures) -> None:
    def sample(dest: Path) -> str:
        shutil.copytree(ROOT / "sample_project", dest,
                        ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
        return "ecommerce"

    engines = open_engines(work, "sample", uri, sample)
    try:
        every = {}
        for backend, engine in engines.items():  # the first warms Spark for the rest: printed, not compared
            every[backend] = engine.compile().select([])
            seconds, _ = run_timed(engine, every[backend])
            print(f"    first run of the sample on {backend}: {seconds:.2f} s (tables created; not compared: the "
                  f"first one also warms Spark's first queries)", flush=True)
        for _, order in rounds(repeat):
            for backend in order:
                seconds, _ = run_timed(engines[backend], every[backend], force=True)
                figures.add(f"forced run of the whole sample ({len(every[backend])} pipelines)", backend, seconds)
                for key in SMALL:
                    seconds, results = run_timed(engines[backend], [f"ecommerce.{key}"], force=True)
                    figures.add(f"warm small run: {key} forced", backend, seconds, results[0].phases)
    finally:
        for engine in engines.values():
            engine.close()


def landing_batch(first_new: int, n: int, size: int, shift: int):
    """`size // 2` updates of existing keys spread over 0..n, and `size // 2` new keys from `first_new`."""
    import numpy as np

    half = size // 2
    updates = np.arange(half, dtype=np.int64) * max(1, n // half) + 7 + shift
    ids = np.concatenate([updates, np.arange(first_new, first_new + half, dtype=np.int64)])
    return orders(ids, amount=123.45, status="refunded", updated=1_800_000_000 + shift)


def orders(ids, *, amount: float | None = None, status: str | None = None, updated: int = 1_767_225_600):
    import numpy as np
    import pyarrow as pa

    statuses = np.array(["placed", "paid", "shipped", "delivered", "returned"])
    return pa.table({
        "id": ids,
        "customer_id": ids % 100_003,
        "amount": np.full(len(ids), amount) if amount is not None else (ids % 9973) / 100,
        "status": np.full(len(ids), status) if status is not None else statuses[ids % 5],
        "updated_at": pa.array((updated + ids % 86_400 * 60) * 1_000_000, pa.timestamp("us")),
    })


def merge_1pct(work: Path, uri: str, rows: int, repeat: int, figures: Figures) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    base = work / "orders-base.parquet"
    pq.write_table(orders(np.arange(rows, dtype=np.int64)), base, row_group_size=256 * 1024)

    def project(dest: Path) -> str:
        (dest / "bench" / "pipelines" / "silver" / "orders").mkdir(parents=True)
        (dest / "bench" / "pipelines" / "silver" / "orders" / "pipeline.sql").write_text(MERGE_PIPELINE)
        (dest / "bench" / "landing" / "orders").mkdir(parents=True)
        shutil.copy(base, dest / "bench" / "landing" / "orders" / "base.parquet")
        return "bench"

    size = max(2, rows // 100)
    engines = open_engines(work, "merge", uri, project)
    try:
        for backend, engine in engines.items():
            seconds, results = run_timed(engine, ["bench.silver.orders"])
            phases = ", ".join(f"{p} {results[0].phases.get(p, 0)}" for p in PHASES)
            print(f"    first load of {rows:,} rows on {backend}: {seconds:.2f} s (table created; phases ms: "
                  f"{phases}; not compared: one run each, in this order)", flush=True)
        label = f"1% merge into {rows:,} rows ({size // 2:,} updates + {size // 2:,} new keys)"
        for i, order in rounds(repeat):
            batch = landing_batch(rows + i * (size // 2), rows, size, i)
            for backend in order:
                landing = engines[backend].root / "bench" / "landing" / "orders"
                pq.write_table(batch, landing / f"change-{i:03d}.parquet")
                seconds, results = run_timed(engines[backend], ["bench.silver.orders"])
                if results[0].rows_written != size:
                    raise SystemExit(f"{backend}: the merge run wrote {results[0].rows_written} rows, not {size}")
                figures.add(label, backend, seconds, results[0].phases)
        expected = rows + repeat * (size // 2)
        for backend, engine in engines.items():
            _, found, _ = engine.query("SELECT count(*) FROM silver.orders")
            if found[0][0] != expected:
                raise SystemExit(f"{backend}: silver.orders holds {found[0][0]:,} rows, not {expected:,}")
    finally:
        for engine in engines.values():
            engine.close()


def commit_latency(work: Path, uri: str, repeat: int, figures: Figures) -> None:
    import pyarrow as pa

    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    key = "lat.silver.events"
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
    catalogs = {}
    for backend in BACKENDS:
        root = work / f"latency-{backend.replace(' ', '-')}"
        (root / ".ratui").mkdir(parents=True)
        db = root / ".ratui" / "ratui.db"
        if backend == "Nessie":
            catalog = NessieBranchCatalog(uri, db, root)
        elif backend == "moto S3":
            from ratui.engine.storage.s3 import S3Access
            from ratui.engine.storage.warehouse import Warehouse

            bucket = new_bucket(uri)
            catalog = SqliteBranchCatalog(db, root, storage=Warehouse.on_s3(
                root, f"s3://{bucket}/lake", S3Access(bucket, uri, "us-east-1")))
        else:
            catalog = SqliteBranchCatalog(db, root)
        catalog.create_table("main", key, schema, catalog.table_location(key))
        catalog.record_commit("main", f"create {key}")
        catalogs[backend] = catalog

    def cycle(catalog, branch: str, i: int) -> dict[str, float]:
        rows = pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64()), "note": ["x"] * 5}, schema=schema)
        out = {}
        out["create_branch"], _ = timed(lambda: catalog.create_branch(branch))
        out["commit: PyIceberg append of 5 rows"], _ = timed(lambda: catalog.load_table(branch, key).append(rows))
        out["commit: record_commit"], _ = timed(lambda: catalog.record_commit(branch, f"append {i}"))
        out["merge into main"], merged = timed(lambda: catalog.merge(branch))
        if merged.commit is None:
            raise SystemExit(f"{catalog!r}: merging {branch} recorded no commit")
        out["delete_branch"], _ = timed(lambda: catalog.delete_branch(branch))
        out["whole cycle"] = sum(out.values())
        return out

    try:
        for backend in BACKENDS:  # one untimed cycle each: imports, connections, the JIT of Nessie's paths
            cycle(catalogs[backend], "warmup", 10_000)
        for i, order in rounds(repeat):
            for backend in order:
                for name, seconds in cycle(catalogs[backend], f"lat-{i}", i).items():
                    figures.add(f"catalog: {name}", backend, seconds)
                    figures.latency.add(f"catalog: {name}")
    finally:
        for catalog in catalogs.values():
            getattr(catalog, "close", lambda: None)()


def report(figures: Figures) -> None:
    first, second = BACKENDS
    print(f"\n| operation | {first} | {second} | ratio |\n|---|---:|---:|---:|")
    for figure, per in figures.seconds.items():
        e, n = per[first], per[second]
        if figure in figures.latency:
            cell = lambda v: f"{statistics.median(v) * 1000:.1f} ms (p90 {p90(v) * 1000:.1f})"  # noqa: E731
            name = f"{figure}, median of {len(e)}"
        else:
            cell = lambda v: f"{statistics.median(v):.2f} s"  # noqa: E731
            name = figure + (f", median of {len(e)}" if len(e) > 1 else "")
        print(f"| {name} | {cell(e)} | {cell(n)} | {statistics.median(n) / statistics.median(e):.2f}x |")
    print(f"\nrun phases, median ms ({first} / {second}):\n\n| run | {' | '.join(PHASES)} |\n"
          f"|---|{'---:|' * len(PHASES)}")
    for figure, per in figures.phases.items():
        cells = []
        for phase in PHASES:
            e, n = (statistics.median(p.get(phase, 0) for p in per[b]) for b in BACKENDS)
            cells.append(f"{e:.0f} / {n:.0f}")
        print(f"| {figure} | {' | '.join(cells)} |")


@contextmanager
def server(compare: str, work: Path):
    """Nessie (its URI) for the catalogs, moto's S3 server (its endpoint) for the storage: started and stopped."""
    if compare == "catalogs":
        from tests.nessie_server import START_TIMES, nessie_server

        with nessie_server(work / "nessie-log") as uri:
            print(f"Nessie up in {START_TIMES[-1]:.1f} s at {uri}", flush=True)
            yield uri
        return
    from tests.engine.s3_server import moto_server

    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    with moto_server(work / "moto-log") as endpoint:
        print(f"moto's S3 server at {endpoint}", flush=True)
        yield endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="catalogs",
                        help="embedded vs Nessie catalogs, or local vs S3 tables")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs / rounds per figure (median)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the merged table")
    parser.add_argument("--quick", action="store_true", help="small sizes and 2 repeats: a smoke test")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeat = 20_000, 2
    global BACKENDS
    BACKENDS = COMPARISONS[args.compare]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), f"({os.cpu_count()} cores)",
          flush=True)

    import logging

    from ratui.engine.project.settings import load_settings
    from ratui.engine.spark import session as spark_mod
    from tests.nessie_server import reset

    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="ratui-catalogs-"))
    figures = Figures()
    try:
        with server(args.compare, work) as uri:
            (work / "spark").mkdir()
            # the JVM every project of the run shares: with S3's connector when tables go to S3
            (work / "spark" / "ratui.yaml").write_text(ratui_yaml("bench", uri, BACKENDS[1]))
            seconds, _ = timed(lambda: spark_mod.get_spark(load_settings(work / "spark")))
            print(f"Spark up in {seconds:.1f} s (not timed below)", flush=True)
            parts = (("warm small runs", lambda: warm_small(work, uri, args.repeat, figures)),
                     (f"1% merge into {args.rows:,} rows", lambda: merge_1pct(work, uri, args.rows, args.repeat,
                                                                            figures)),
                     ("catalog commit latency", lambda: commit_latency(work, uri, 4 * args.repeat,
                                                                       figures)))
            for name, part in parts:
                seconds, _ = timed(part)
                print(f"  {name}: {seconds:.0f} s", flush=True)
                if args.compare == "catalogs":
                    reset(uri)
        report(figures)
        print("\n" + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
