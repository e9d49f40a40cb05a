"""Scale, landing: a zone of 1k, 10k and 100k small CSV files (tests/scale_project.py fill_zone).

For each size (args.files), on a generated project (generate_project(.., 150): one bronze pipeline reads the big
zone, `sales.landing.feed_00000`, shared with a second bronze pipeline as generated), with a fresh ledger:

    listing            the zone's active files (LocalZone.list(): one os.scandir of the folder)
    first sync         the ledger sync of a zone it has never seen (every file digested: the bytes are read)
    no-change sync     the same sync again, nothing changed (listing + ledger sync, what every run pays)
    new-file decision  what change detection asks (engine/run/changes.py): Ledger.unloaded and zone_digest of a
                       fresh listing, on the zone after a sync that saw one new file
    ratui landing      the command line's listing of the ledger (`ratui landing sales.feed_00000 --json`, a
                       process: Python's start included)

Goals (issue 34): the sync of a 100k-file zone <= 5 s, a no-change sync of it <= 1 s (2 cores).

    python benchmarks/scale.py --only landing --files 1000,10000,100000
    python benchmarks/scale_landing.py --files 1000,10000      # this area alone
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.scale import Figure, print_table  # noqa: E402
from tests.scale_project import fill_zone, generate_project  # noqa: E402

NAMESPACE, ZONE, PIPELINE = "sales", "feed_00000", "sales.bronze.raw_00000"
GOALS = {100_000: {"first sync": 5.0, "no-change sync": 1.0}}


CPU: list[float] = []  # the CPU seconds of the last _timed measurement (median): what a loaded machine adds is wait


def _timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    times, cpu, out = [], [], None
    for _ in range(max(1, repeat)):
        began, began_cpu = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
    CPU[:] = [statistics.median(cpu)]
    return statistics.median(times), out


def _cpu() -> str:
    return f"CPU {CPU[0]:.3f} s" if CPU else ""


def project_with_zone(workdir: Path, files: int) -> Path:
    """A generated project whose zone feed_00000 holds `files` files (kept between measurements of one size)."""
    root = workdir / f"zone-{files}"
    zone = root / NAMESPACE / "landing" / ZONE
    if not (root / "ratui.yaml").exists():
        generate_project(root, 150)
        for old in zone.iterdir():
            old.unlink()
        fill_zone(zone, files)
    return root


def loaded(db: Path) -> None:
    """Every row of the zone loaded, as after a run's merge (what a zone of a working pipeline looks like)."""
    import sqlite3

    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE landing_files SET state = 'loaded', attempts = 1, run_id = 'bench'")
    conn.close()


def figures(args: argparse.Namespace, workdir: Path) -> list[Figure]:
    repeat = getattr(args, "repeat", 3)
    out: list[Figure] = []
    workdir.mkdir(parents=True, exist_ok=True)
    for files in args.files:
        out.extend(_at(files, workdir, repeat, keep=bool(getattr(args, "workdir", None))))
    return out


def _at(files: int, workdir: Path, repeat: int, keep: bool) -> list[Figure]:
    from ratui.engine.landing.local import local_zone
    from ratui.engine.landing.zone import zone_digest
    from ratui.engine.state.ledger import Ledger

    out: list[Figure] = []
    goals = GOALS.get(files, {})
    root = project_with_zone(workdir, files)
    db = root / ".ratui" / "ratui.db"
    for stale in db.parent.glob("ratui.db*"):
        stale.unlink()
    ledger = Ledger(db)
    zone = local_zone(root, NAMESPACE, ZONE)

    def sync() -> list:
        return ledger.sync(NAMESPACE, ZONE, PIPELINE, zone.list(), forget_missing=True)

    seconds, listed = _timed(zone.list, repeat)
    out.append(Figure("landing: listing", files, "files", seconds, note=f"{len(listed):,} entries; {_cpu()}"))
    seconds, rows = _timed(sync)
    out.append(Figure("landing: first sync", files, "files", seconds, goals.get("first sync"),
                      note=f"listing + digests + ledger, {len(rows):,} rows; {_cpu()}"))
    loaded(db)
    seconds, rows = _timed(sync, repeat)
    out.append(Figure("landing: no-change sync", files, "files", seconds, goals.get("no-change sync"),
                      note=f"listing + ledger; {_cpu()}"))
    # one new file, seen by a sync: the decision finds it among `files` loaded-or-not rows
    extra = root / NAMESPACE / "landing" / ZONE / "zz-new.csv"
    extra.write_text("id,amount,category,updated_at\n1,1.5,Cat1,2026-01-01 00:00:00\n")
    sync()

    def decide() -> tuple[int, int]:
        pending = ledger.unloaded(NAMESPACE, [ZONE], PIPELINE)
        return len(pending), len(zone_digest(zone.list()))

    seconds, (pending, listed_now) = _timed(decide, repeat)
    out.append(Figure("landing: new-file decision", files, "files", seconds,
                      note=f"Ledger.unloaded ({pending:,} unloaded) + zone_digest ({listed_now:,}); {_cpu()}"))
    extra.unlink()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ratui", "landing", f"{NAMESPACE}.{ZONE}", "-p", str(root),
                           "--json"], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - began
    lines = done.stdout.count("\n")
    out.append(Figure("landing: ratui landing --json", files, "files", seconds,
                      note=f"exit {done.returncode}, {lines:,} lines (a process: Python's start included)"))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir")
    args = parser.parse_args(argv)
    args.files = [int(s) for s in args.files.split(",") if s]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="ratui-scale-landing-") as tmp:
        figures_ = figures(args, Path(args.workdir or tmp))
    print_table(figures_)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
