"""What a branch costs to ask about when main has a long history: where the branch came from (change detection on a
branch asks this for each pipeline that has not run there) and which runs it holds (a merge asks this).

    python benchmarks/branch_history.py [MAIN_COMMITS]   # default 20000

Builds a real catalog (SQLite, no Spark) whose main has MAIN_COMMITS commits, a branch with a few commits of its own,
and prints, median of five: the branch's own log (what ratui reads now) against the whole log up to 100,000 commits
(what it read before, and the naive way to find a branch's origin), and the same for a branch of that branch. Timings
are printed, never asserted; check `uptime` first.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    from ratui.engine.run.changes import branch_origin
    from ratui.engine.state.catalog import SqliteBranchCatalog
    from ratui.engine.state.db import open_db

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    root = Path(tempfile.mkdtemp(prefix="ratui-branch-history-"))
    (root / ".ratui").mkdir()
    cat = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    began = time.perf_counter()
    # each commit points at ten tables, as the sample's do
    pointers = json.dumps({f"shop.silver.table_{t}": f"{root}/shop/warehouse/silver/table_{t}/metadata/"
                           f"00042-{t:08d}-0000-0000-0000-000000000000.metadata.json" for t in range(10)})
    with open_db(root / ".ratui" / "ratui.db") as conn:  # main's history, written in one transaction
        head = cat.get_ref("main").head
        for i in range(n):
            commit = f"{i:040x}"
            conn.execute("INSERT INTO catalog_commits (hash, parent, ref, message, created_at, pointers, meta) "
                         "VALUES (?, ?, 'main', ?, '2026-01-01T00:00:00+00:00', ?, ?)",
                         (commit, head, f"run {i}", pointers, json.dumps({"kind": "run", "run_id": f"r{i}"})))
            head = commit
        conn.execute("UPDATE catalog_refs SET head = ? WHERE name = 'main'", (head,))
        conn.commit()
    print(f"main: {n:,} commits (built in {time.perf_counter() - began:.1f} s)")
    cat.create_branch("dev")
    for i in range(3):
        cat.record_commit("dev", f"dev {i}")
    cat.create_branch("feature", from_ref="dev")

    class State:  # what branch_origin reads
        catalog = cat

    for ref in ("dev", "feature"):
        own = timed(partial(cat.log, ref, limit=100_000, own=True))
        whole = timed(partial(cat.log, ref, limit=100_000))
        origin = timed(partial(branch_origin, State, ref))
        print(f"{ref:<8} own log {own * 1000:8.2f} ms   whole log {whole * 1000:8.1f} ms ({whole / own:,.0f}x)   "
              f"branch_origin {origin * 1000:6.2f} ms -> {branch_origin(State, ref)[0]}")


if __name__ == "__main__":
    main()
