"""Calls from Python into Spark's JVM (py4j round trips) and CPU per warm forced run of the sample project.

    python benchmarks/jvm_calls.py              # calls of one warm forced run, by the ratui function making them
    python benchmarks/jvm_calls.py --rounds 12  # also JVM and Python CPU per forced round, --threads 1 and 2 in turn

Every call is a round trip through a socket and a reflective call in the JVM, and most leave a Java object whose
release is one more call. The count is exact (py4j's send_command wrapped); the CPU figures come from the JVM process
and this process. Wall times are printed, never asserted; check `uptime` first.
"""

from __future__ import annotations

import argparse
import collections
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def fresh_copy(base: Path) -> Path:
    dest = base / "sample"
    shutil.copytree(REPO / "sample_project", dest,
                    ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def count_calls(engine, keys) -> collections.Counter:
    """One forced run with py4j's send_command wrapped: calls by the innermost ratui function on the stack."""
    import py4j.clientserver as clientserver

    counts: collections.Counter = collections.Counter()
    original = clientserver.JavaClient.send_command

    def send(self, command, *args, **kwargs):
        frame, where = sys._getframe(1), "py4j itself (releasing Java objects)"
        while frame is not None:
            name = frame.f_code.co_filename
            if "/ratui/" in name and "/site-packages/" not in name:
                where = f"{name.split('/ratui/', 1)[1]}:{frame.f_code.co_name}"
                break
            frame = frame.f_back
        counts[where] += 1
        return original(self, command, *args, **kwargs)

    clientserver.JavaClient.send_command = send
    try:
        results = engine.run(keys, force=True)
    finally:
        clientserver.JavaClient.send_command = original
    assert all(r.status == "success" for r in results), [r.error for r in results if r.status != "success"]
    return counts


def cpu_rounds(engine, keys, rounds: int) -> None:
    import psutil

    java = [p for p in psutil.Process().children(recursive=True) if "java" in p.name()]
    jvm = max(java, key=lambda p: p.memory_info().rss)

    def jvm_cpu() -> float:
        t = jvm.cpu_times()
        return t.user + t.system

    def own_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    print(f"\n{'round':>5} {'threads':>7} {'wall s':>7} {'JVM CPU-s':>9} {'Python CPU-s':>12} {'cores busy':>10}")
    for i in range(rounds):
        threads = 1 + i % 2
        j0, p0, t0 = jvm_cpu(), own_cpu(), time.monotonic()
        results = engine.run(keys, force=True, threads=threads)
        wall, j, p = time.monotonic() - t0, jvm_cpu() - j0, own_cpu() - p0
        assert all(r.status == "success" for r in results)
        print(f"{i:>5} {threads:>7} {wall:7.2f} {j:9.2f} {p:12.2f} {(j + p) / wall:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=0, help="forced rounds with CPU figures (threads 1, 2, ...)")
    args = parser.parse_args()
    from ratui.engine.facade.engine import Engine

    base = Path(tempfile.mkdtemp(prefix="ratui-calls-"))
    try:
        engine = Engine.open(fresh_copy(base))
        engine.start_spark()
        keys = engine.compile().select([])
        engine.run(keys)
        engine.run(keys, force=True)  # warm: the JVM has run every query once
        counts = count_calls(engine, keys)
        print(f"py4j calls of one warm forced run of the sample ({len(keys)} pipelines): {sum(counts.values())}")
        for where, n in counts.most_common(15):
            print(f"{n:>7}  {where}")
        if args.rounds:
            cpu_rounds(engine, keys, args.rounds)
        engine.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
