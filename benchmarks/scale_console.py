"""Scale, the console: launch to the first pipeline painted on projects of args.sizes pipelines with a history of
max(args.runs) runs (the issue's goal: <= 0.5 s at 1,500 pipelines and 1M runs).

    python benchmarks/scale.py --only console                      # 150, 1,500, 15,000 pipelines; 1M runs
    python benchmarks/scale.py --only console --sizes 150,1500 --runs 100000 --repeat 3
    python benchmarks/scale_console.py --child ROOT                # one launch, its marks as JSON

Each launch is a fresh Python process (imports included, as benchmarks/first_paint.py does) running the App
headless at 160x48 with Spark's state pinned; it reads the App's marks (time.perf_counter from the process
start):

    first paint              Textual drew the first frame (the tree not yet filled)
    first pipeline painted   the tree and its first pipeline are on screen, drawn from the last compile's outline
                             (.ratui/outline.json, which the warm-up launch before the measured ones wrote: a
                             user's previous session)
    compiled tree painted    the same after this launch's compile (the reference: what the tree waited for before)
    statuses shown           every shown pipeline has its last status, duration and sparkline
    compile done -> painted  the console's own share: from the project compiled to the tree painted
    (the compile itself is the compiler's: ratui/engine/project/compiler.py; its time is in the notes)

and, in this process, the one history query the tree makes (History.recent_by_pipeline: every pipeline's last 12
finished runs). Medians of args.repeat launches. A 15,000-pipeline project is skipped when generating and seeding
it would take more than SKIP_AFTER seconds (estimated from the smaller sizes).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # as early as possible: the child's launch

import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GOAL = 0.5  # seconds, at 1,500 pipelines (issue 34)
GOAL_SIZE = 1500
SKIP_AFTER = 150.0  # seconds of generating and seeding a project beyond which a size is skipped
SIZE = (160, 48)


def child(root: Path) -> None:
    """One launch: import, start the App headless, wait until every shown pipeline has its statuses."""
    import asyncio

    from ratui.app import RatuiApp

    imported = time.perf_counter()

    async def go() -> dict:
        app = RatuiApp(root, spark_state="idle", reaper_schedule=False)
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.perf_counter() + 600
            while not {"pipelines_ready", "tree_painted"} <= set(app.marks) and time.perf_counter() < deadline:
                if app.boot_error is not None:
                    raise SystemExit(f"the project did not open: {app.boot_error}")
                await asyncio.sleep(0.002)
            await pilot.pause()
            marks = dict(app.marks)
        out = {name: at - T0 for name, at in marks.items()}
        out["imports"] = imported - T0
        return out

    print(json.dumps(asyncio.run(go())))


def _launch(root: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, __file__, "--child", str(root)], capture_output=True, text=True,
                         cwd=REPO, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"console launch failed on {root}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _history_query(root: Path, repeat: int) -> float:
    from ratui.engine.state.history import History

    history = History(root / ".ratui" / "ratui.db")
    try:
        times = []
        for _ in range(max(1, repeat)):
            began = time.perf_counter()
            history.recent_by_pipeline(12)
            times.append(time.perf_counter() - began)
    finally:
        history.close()
    return statistics.median(times)


def figures(args, workdir: Path) -> list:
    sys.path.insert(0, str(REPO))
    from benchmarks.scale import Figure
    from tests.scale_project import all_keys, generate_project, seed_runs

    runs = max(args.runs)
    repeat = max(1, args.repeat)
    out: list[Figure] = []
    per_pipeline = None  # seconds of generating and seeding per pipeline, from the sizes done
    seed_seconds = 0.0
    for size in sorted(args.sizes):
        if per_pipeline is not None and per_pipeline * size + seed_seconds > SKIP_AFTER:
            print(f"[console] {size:,} pipelines skipped: generating it would take about "
                  f"{per_pipeline * size + seed_seconds:.0f} s", flush=True)
            continue
        root = workdir / f"p{size}-r{runs}"
        if not (root / ".ratui" / "ratui.db").exists():
            began = time.perf_counter()
            generate_project(root, size)
            generated = time.perf_counter() - began
            seed_runs(root, runs, pipelines=all_keys(size))
            seed_seconds = time.perf_counter() - began - generated
            per_pipeline = generated / size
            print(f"[console] {size:,} pipelines, {runs:,} runs: generated in {generated:.1f} s, seeded in "
                  f"{seed_seconds:.1f} s", flush=True)
        _launch(root)  # the user's previous session: the compile cache and the outline are there
        launches = [_launch(root) for _ in range(repeat)]

        def median(name: str, since: str | None = None, launches: list[dict] = launches) -> float:
            return statistics.median(m[name] - (m[since] if since else 0.0) for m in launches)

        goal = GOAL if size == GOAL_SIZE else None
        compile_s = median("compiled", "first_paint")
        note = f"{runs:,} runs; compile {median('compiled'):.2f} s from launch; median of {repeat}"
        unit = "pipelines"
        out.append(Figure("console: launch -> first paint", size, unit, median("first_paint"), goal, note))
        out.append(Figure("console: launch -> first pipeline painted", size, unit, median("outline_painted"), goal,
                          f"from the last compile's outline; {note}"))
        out.append(Figure("console: launch -> compiled tree painted", size, unit, median("tree_painted"), None,
                          note))
        out.append(Figure("console: launch -> statuses shown", size, unit, median("pipelines_ready"), None, note))
        out.append(Figure("console: compile done -> tree painted", size, unit, median("tree_painted", "compiled"),
                          None, f"the console's share (compile after first paint: {compile_s:.2f} s)"))
        out.append(Figure("console: last runs of every pipeline (one query)", size, unit,
                          _history_query(root, repeat), None, f"History.recent_by_pipeline(12), {runs:,} runs"))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
