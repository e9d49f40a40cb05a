"""Interactive speed of the sample project: each ratui figure beside Spark's own floor for the same work, measured in
the same run of this script.

    python benchmarks/interactive.py                 # warm runs, jobs per phase, threads, cold start
    python benchmarks/interactive.py --rounds 5 --skip-cold
    python benchmarks/interactive.py --rounds 5 --only-cold

What it prints:

  warm runs     every sample pipeline forced `--rounds` times in one warm process; per pipeline the median wall
                time of its run (all six phases) beside its floor: plain Spark reading the same inputs (landing
                files with spark.read, upstream tables as their Parquet files), running the pipeline's compiled
                SQL and writing the result once as Parquet, plus its quality queries as one UNION ALL job.
                Also the Spark jobs each phase ran (from Spark's status tracker, by the run's job group).
  threads       the whole sample forced with --threads 1, 2 and 4 (same process, warm, interleaved), and
                whether all produced the same rows
  cold          `ratui run` in a new process, from launch to the first pipeline's result line (ratui's default
                spark.jit auto, and spark.jit full), beside a new process that only starts a SparkSession with
                the same settings (Java's default JIT, and the quick one); `--rounds` interleaved rounds
  driver RSS    the peak RSS of this process

Timings are wall-clock; they are printed, never asserted. Check `uptime` first: figures from a busy machine are
not worth keeping.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"
sys.path.insert(0, str(REPO))


def fresh_copy(base: Path, name: str) -> Path:
    dest = base / name
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


class JobCounter:
    """Spark jobs per phase of each run, read from the status tracker when the phase starts and ends."""

    def __init__(self, engine):
        from ratui.engine.spark import session as spark_mod

        self.tracker = spark_mod.get_spark(engine.settings).sparkContext.statusTracker()
        self.started: dict[tuple[str, str], int] = {}
        self.jobs: dict[str, dict[str, int]] = {}
        engine.subscribe(self.on_event)

    def _count(self, run_id: str) -> int:
        return len(self.tracker.getJobIdsForGroup(run_id))

    def on_event(self, event) -> None:
        from ratui.engine.events import PhaseFinished, PhaseStarted

        if isinstance(event, PhaseStarted):
            self.started[(event.run_id, event.phase)] = self._count(event.run_id)
        elif isinstance(event, PhaseFinished):
            began = self.started.pop((event.run_id, event.phase), 0)
            per = self.jobs.setdefault(event.run_id, {})
            per[event.phase] = per.get(event.phase, 0) + self._count(event.run_id) - began


def floor_of(spark, engine, result, out: Path) -> float:
    """Plain Spark doing a run's work: read its inputs, run its compiled SQL, write Parquet once, then its quality
    queries as one job. Returns seconds (views registered first, untimed)."""
    from ratui.engine.iceberg.read import data_files
    from ratui.engine.locations import local_file
    from ratui.engine.project.names import sql_ident

    run = engine.get_run(result.run_id)
    sql = next(line["message"].split("\n", 1)[1] for line in run["logs"] if line["message"].startswith("compiled SQL"))
    compiled = engine.compile()
    pipeline = compiled.pipelines[result.pipeline]
    session = spark.newSession()
    for ref in pipeline.refs:
        table = engine.load_table("main", ref)
        files = [local_file(table, f.file_path) for f in data_files(table)]
        session.read.parquet(*files).createOrReplaceTempView(sql_ident(*ref.split(".")).strip("`"))
    for zone in pipeline.zones:
        folder = engine.root / pipeline.namespace / "landing" / zone
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
        fmt = files[0].suffix.lstrip(".")
        reader = session.read.options(header=True, inferSchema=True)
        df = (reader.csv([str(p) for p in files]) if fmt == "csv" else
              session.read.json([str(p) for p in files]) if fmt == "jsonl" else
              session.read.parquet(*[str(p) for p in files]))
        df.createOrReplaceTempView(sql_ident(pipeline.namespace, "landing", zone).strip("`"))
    this = sql_ident(*result.pipeline.split("."))
    tests = [q["sql"].replace(this, "`__this`") for q in run["quality"]]
    began = time.monotonic()
    target = out / result.pipeline
    session.sql(sql).write.mode("overwrite").parquet(str(target))
    if tests:
        session.read.parquet(str(target)).createOrReplaceTempView("__this")
        union = " UNION ALL ".join(f"SELECT {i} AS t, COUNT(*) AS n FROM ({t})" for i, t in enumerate(tests))
        session.sql(union).collect()
    return time.monotonic() - began


def warm_runs(base: Path, rounds: int) -> None:
    from ratui.engine.facade.engine import Engine
    from ratui.engine.spark import session as spark_mod

    project = fresh_copy(base, "warm")
    engine = Engine.open(project)
    began = time.monotonic()
    engine.start_spark()
    print(f"Spark session start in-process: {time.monotonic() - began:.2f} s")
    counter = JobCounter(engine)
    spark = spark_mod.get_spark(engine.settings)
    keys = engine.compile().select([])
    first = engine.run(keys)
    assert all(r.status == "success" for r in first), [r.error for r in first if r.status != "success"]
    walls: dict[str, list[float]] = {k: [] for k in keys}
    floors: dict[str, list[float]] = {k: [] for k in keys}
    last = {}
    for _ in range(rounds):
        for r in engine.run(keys, force=True):
            assert r.status == "success", r.error
            walls[r.pipeline].append(r.duration_ms / 1000)
            last[r.pipeline] = r
        for key in keys:
            floors[key].append(floor_of(spark, engine, last[key], base / "floor"))
    print(f"\nwarm forced run of each sample pipeline, median of {rounds} (floor: plain Spark, same inputs, query "
          "written once + quality queries as one job)")
    print(f"{'pipeline':<38} {'strategy':<13} {'ratui s':>8} {'floor s':>8} {'ratio':>6}  jobs per phase")
    ratios = []
    for key in keys:
        wall, floor = statistics.median(walls[key]), statistics.median(floors[key])
        ratios.append(wall / floor)
        jobs = counter.jobs.get(last[key].run_id, {})
        split = " ".join(f"{p}:{n}" for p, n in jobs.items() if n)
        print(f"{key:<38} {last[key].strategy:<13} {wall:8.2f} {floor:8.2f} {wall / floor:5.2f}x  {split}")
    all_walls = [statistics.median(v) for v in walls.values()]
    print(f"median over pipelines: ratui {statistics.median(all_walls):.2f} s, ratio to floor "
          f"{statistics.median(ratios):.2f}x (worst {max(ratios):.2f}x)")
    threads(engine, keys, rounds)
    engine.close()


def threads(engine, keys: list[str], rounds: int) -> None:
    from ratui.engine.iceberg.read import read_table
    from ratui.engine.spark import session as spark_mod

    spark = spark_mod.get_spark(engine.settings)

    def snapshot() -> dict[str, int]:
        return {k: read_table(spark, engine.load_table("main", k)).count() for k in keys}

    # interleaved (1, 2, 4, 1, 2, 4, ...), so a JVM still warming up does not favour the ones measured last
    counts = (1, 2, 4)
    timings: dict[int, list[float]] = {n: [] for n in counts}
    rows: dict[int, dict[str, int]] = {}
    for _ in range(rounds):
        for n in counts:
            began = time.monotonic()
            results = engine.run(keys, force=True, threads=n)
            timings[n].append(time.monotonic() - began)
            assert all(r.status == "success" for r in results), [r.error for r in results if r.status != "success"]
            rows[n] = snapshot()
    serial = statistics.median(timings[1])
    same = all(rows[n] == rows[1] for n in counts)
    print(f"\nwhole sample forced, warm, median of {rounds}: --threads 1 {serial:.2f} s, "
          + ", ".join(f"--threads {n} {statistics.median(timings[n]):.2f} s "
                      f"({statistics.median(timings[n]) / serial:.2f}x of serial)" for n in counts[1:])
          + f"; same rows in every table: {same}")


def _cold_run(base: Path, name: str, jit: str | None) -> tuple[float, float]:
    """A new `ratui run raw_customers` on a fresh copy: (launch to its result line, launch to exit)."""
    project = fresh_copy(base, name)
    if jit:
        settings = project / "ratui.yaml"
        settings.write_text(settings.read_text().replace("spark:\n", f"spark:\n  jit: {jit}\n", 1))
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "run", "--project", str(project), "raw_customers"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    first = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if first is None and "raw_customers" in line and line.startswith("[OK"):
            first = time.monotonic() - began
    proc.wait()
    total = time.monotonic() - began
    if first is None:
        raise SystemExit(f"cold run {name} failed")
    return first, total


def _spark_only(base: Path, name: str, quick: bool) -> float:
    """A new process that only starts a SparkSession with the same settings (quick: with ratui's quick JIT)."""
    script = ("import sys,time; sys.path.insert(0, %r); t=time.monotonic();"
              "from ratui.engine.project.settings import load_settings; from pathlib import Path;"
              "from ratui.engine.spark import session as s, jit; %s s.get_spark(load_settings(Path(%r)));"
              "print(time.monotonic()-t)") % (str(REPO), "jit.expect_small_work('benchmark');" if quick else "",
                                               str(fresh_copy(base, name)))
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return time.monotonic() - began


def cold(base: Path, rounds: int) -> None:
    """Interleaved rounds: ratui's default (spark.jit auto: quick for this small run), ratui with spark.jit: full,
    and the two Spark-only starts; medians."""
    times: dict[str, list[float]] = {"auto": [], "full": [], "spark": [], "spark_quick": []}
    for r in range(rounds):
        times["auto"].append(_cold_run(base, f"cold-auto-{r}", None)[0])
        times["full"].append(_cold_run(base, f"cold-full-{r}", "full")[0])
        times["spark"].append(_spark_only(base, f"spark-{r}", False))
        times["spark_quick"].append(_spark_only(base, f"spark-quick-{r}", True))
    med = {k: statistics.median(v) for k, v in times.items()}
    show = lambda k: f"{med[k]:.2f} s ({', '.join(f'{t:.2f}' for t in times[k])})"  # noqa: E731
    print(f"\ncold `ratui run raw_customers`, launch to its result line, median of {rounds} interleaved rounds:")
    print(f"  ratui (spark.jit auto: quick JIT for this small run) {show('auto')}")
    print(f"  ratui with spark.jit: full                          {show('full')}")
    print(f"  a new process starting only Spark (Java's default JIT) {show('spark')}")
    print(f"  a new process starting only Spark with the quick JIT   {show('spark_quick')}")
    print(f"  ratui - Spark-only start: {med['auto'] - med['spark']:+.2f} s (goal +2 s); against the quick-JIT start "
          f"{med['auto'] - med['spark_quick']:+.2f} s; spark.jit full - Spark-only start "
          f"{med['full'] - med['spark']:+.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="forced runs of the sample per figure (median)")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--only-cold", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, {os.cpu_count()} cores")
    base = Path(tempfile.mkdtemp(prefix="ratui-bench-"))
    try:
        if not args.skip_cold:
            cold(base, args.rounds)
        if args.only_cold:
            return
        warm_runs(base, args.rounds)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\npeak driver (Python) RSS: {rss:.0f} MB")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
