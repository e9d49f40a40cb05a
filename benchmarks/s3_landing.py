"""An S3 landing zone read in place (Spark reads s3:// through S3A) beside staged (objects downloaded to the run's
staging folder, Spark reads them there), in one process and one JVM, against moto's S3 server on 127.0.0.1.

Two zones: many small CSV objects (default 200 of ~1 KB, what csv_types.py types in Python: no Spark inference
or bad-row pass), and a few larger ones (default 4 of ~8 MB: Spark infers their types and checks their rows,
each a pass over the objects). Each pipeline is a full_refresh of its zone, run forced in each mode, the modes
alternating, after one warm-up run of each (the JVM's first S3A reads, JIT); printed per zone and mode:

    first   a run with ratui's memos of inferred schemas and clean bad-row checks emptied (what a new `ratui run`
            process pays once its JVM is up), median
    rerun   a run of the same objects again (the memos are keyed by each object's listed ETag, in place and
            staged alike, so they hit: the edit-and-rerun loop), median
    build   the build phase of the reruns (listing, downloading or not, the byte checks), median
    write   the write phase of the reruns (Spark reads the objects and writes the table), median

Each in-place figure is printed beside the staged one of the same run (its reference). The load average is printed
before and after (`uptime`): on a busy machine the figures mean little.

    python benchmarks/s3_landing.py [--small 200] [--large 4] [--large-mb 8] [--repeat 3]
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
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "engine"))

from s3_server import moto_server, s3_client  # noqa: E402

PIPELINE = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('%s') }}\n"


def small_csv(i: int) -> bytes:
    rows = "".join(f"{i * 20 + r},name-{i}-{r},2025-01-{1 + r % 28:02d},{r * 1.5}\n" for r in range(20))
    return ("id,name,day,amount\n" + rows).encode()


def large_csv(i: int, megabytes: int) -> bytes:
    row = "%d,customer-%d,2025-02-%02d,%d.25,some free text for the row\n"
    lines = ["id,name,day,amount,note\n"]
    size, r = 0, 0
    while size < megabytes << 20:
        line = row % (i * 10_000_000 + r, r % 5000, 1 + r % 28, r % 1000)
        lines.append(line)
        size += len(line)
        r += 1
    return "".join(lines).encode()


def project(root: Path, endpoint: str, bucket: str, mode: str) -> Path:
    for zone in ("small", "large"):
        folder = root / "bench" / "pipelines" / "bronze" / zone
        folder.mkdir(parents=True)
        (folder / "pipeline.sql").write_text(PIPELINE % zone)
    (root / "ratui.yaml").write_text(
        "namespace: bench\nspark:\n  master: local[2]\n  config:\n    spark.sql.shuffle.partitions: 2\n"
        f"landing:\n  s3_read: {mode}\n  s3:\n    endpoint_url: {endpoint}\n  zones:\n"
        f"    small: s3://{bucket}/small\n    large: s3://{bucket}/large\n")
    return root


def forget() -> None:
    """Empty ratui's memos of inferred schemas and clean bad-row checks (landing/read_checks.py), as in a new
    process."""
    from ratui.engine.landing import read_checks

    for memo in (read_checks.INFERRED, read_checks.CLEAN):
        with memo._lock:
            memo._items.clear()


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=4)
    parser.add_argument("--large-mb", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    from ratui.engine.facade.engine import Engine

    print(f"load before: {load()}")
    work = Path(tempfile.mkdtemp(prefix="ratui-s3-landing-bench-"))
    try:
        with moto_server(work / "logs") as endpoint:
            bucket = f"bench-{uuid.uuid4().hex[:8]}"
            client = s3_client(endpoint)
            client.create_bucket(Bucket=bucket)
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: client.put_object(Bucket=bucket, Key=f"small/f{i:05d}.csv",
                                                           Body=small_csv(i)), range(args.small)))
                list(pool.map(lambda i: client.put_object(Bucket=bucket, Key=f"large/g{i:03d}.csv",
                                                           Body=large_csv(i, args.large_mb)), range(args.large)))
            # the in-place project first: the process's one JVM starts with its S3A connector and bucket settings,
            # and the staged project (the same settings but landing.s3_read) runs in that JVM too
            engines = {mode: Engine.open(project(work / mode, endpoint, bucket, mode))
                       for mode in ("in_place", "staged")}
            began = time.monotonic()
            engines["in_place"].start_spark()
            print(f"JVM with S3A up in {time.monotonic() - began:.1f} s; {args.small} small objects "
                  f"({sum(len(small_csv(i)) for i in range(args.small)) / 1e3:.0f} KB), {args.large} large "
                  f"(~{args.large_mb} MB each)")
            figures: dict[tuple[str, str], dict[str, list[float]]] = {}
            expected: dict[str, int] = {}
            for attempt in range(-1, args.repeat):  # -1: the warm-up
                for mode in ("in_place", "staged") if attempt % 2 == 0 else ("staged", "in_place"):
                    for zone in ("small", "large"):
                        slot = figures.setdefault((zone, mode), {"first": [], "rerun": [], "build": [],
                                                                 "write": []})
                        for kind in ("first", "rerun"):
                            if kind == "first":
                                forget()
                            t = time.monotonic()
                            [result] = engines[mode].run([f"bench.bronze.{zone}"], force=True)
                            elapsed = time.monotonic() - t
                            if result.status != "success":
                                raise SystemExit(f"{mode} {zone}: {result.error}")
                            rows = result.rows_written
                            assert expected.setdefault(zone, rows) == rows, (mode, zone, rows, expected[zone])
                            if attempt < 0:
                                continue
                            slot[kind].append(elapsed)
                            if kind == "rerun":
                                slot["build"].append(result.phases.get("build", 0) / 1000)
                                slot["write"].append(result.phases.get("write", 0) / 1000)
            staged_dirs = list((work / "in_place" / ".ratui" / "staging").glob("*/s3"))
            assert not staged_dirs, staged_dirs  # nothing downloaded for the in-place runs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nseconds, median of {args.repeat}; in place beside its reference, staged, from this run")
    print(f"{'zone':7} {'figure':7} {'in place':>9} {'staged':>9} {'in place / staged':>18}")
    for zone in ("small", "large"):
        for figure in ("first", "rerun", "build", "write"):
            a = statistics.median(figures[(zone, "in_place")][figure])
            b = statistics.median(figures[(zone, "staged")][figure])
            print(f"{zone:7} {figure:7} {a:9.2f} {b:9.2f} {a / b if b else float('nan'):17.2f}x")
    for zone in ("small", "large"):
        for kind in ("first", "rerun"):
            a = statistics.median(figures[(zone, "in_place")][kind])
            b = statistics.median(figures[(zone, "staged")][kind])
            print(f"{zone} zone, {kind}: {'in place' if a < b else 'staged'} is faster "
                  f"({min(a, b):.2f} s against {max(a, b):.2f} s)")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
