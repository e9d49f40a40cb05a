"""`ratui backfill` as a user runs it: progress lines, the failed interval listed with its error, exit codes as
`ratui run`'s, `--resume` planning only what failed, one line updated in place on a terminal, and Ctrl-C leaving
every finished interval published and the rest pending."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_SETTINGS, write_files
from tests.engine.run.test_backfill import EVENTS, FACTS
from tests.servers import json_lines, ratui, ratui_background, ratui_env, wait_for


def _project(root: Path, bad: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo"))
    write_files(root, {"demo/pipelines/bronze/events/pipeline.sql": EVENTS.format(bad=bad),
                       "demo/pipelines/silver/facts/pipeline.sql": FACTS})
    out = ratui("run", "--project", str(root), "bronze.events")
    assert out.returncode == 0, out.stdout + out.stderr
    return root


def _done(root: Path) -> list[list[str]]:
    from ratui.engine.project import intervals
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    settings = load_settings(root)
    catalog = open_catalog(catalog_config(settings.catalog or None), settings.db_path, root)
    if not catalog.table_exists("main", "demo.silver.facts"):
        return []
    done = intervals.done_of(catalog.load_table("main", "demo.silver.facts"))
    return [[intervals.iso(a), intervals.iso(b)] for a, b in done]


def test_a_failed_interval_is_listed_exits_1_and_a_resume_plans_only_it(tmp_path):
    root = _project(tmp_path / "proj", bad=161)  # 2026-02-10's data fails the pipeline's assert_true
    out = ratui("backfill", "silver.facts", "--project", str(root), "--start", "2026-02-08", "--end", "2026-02-12")
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "demo.silver.facts: 4 of 4 day interval(s) to run" in lines
    assert any(line.startswith("FAILED    demo.silver.facts [2026-02-10T00:00:00, 2026-02-11T00:00:00)")
               for line in lines), out.stdout
    assert "  3 done, 1 failed, 0 pending of 4 intervals" in "\n".join(lines)
    assert any(line.startswith("failed: demo.silver.facts [2026-02-10T00:00:00, 2026-02-11T00:00:00) run ")
               and "RAT-SQL-" in line for line in lines), out.stdout
    assert lines[-1].startswith("3 interval(s) done, 1 failed, 0 skipped (upstream failed), 0 pending; 12 rows")
    assert _done(root) == [["2026-02-08T00:00:00", "2026-02-10T00:00:00"],
                           ["2026-02-11T00:00:00", "2026-02-12T00:00:00"]]
    again = ratui("backfill", "silver.facts", "--project", str(root), "--start", "2026-02-08", "--end", "2026-02-12",
                  "--resume", "--json")
    assert again.returncode == 1, again.stdout + again.stderr
    objects = json_lines(again.stdout)
    assert objects[0]["event"] == "plan" and objects[0]["to_run"] == 1
    ran = [o for o in objects if "pipeline" in o and "status" in o]
    assert [(o["start"], o["status"]) for o in ran] == [("2026-02-10T00:00:00", "failed")]
    assert objects[-1]["event"] == "summary" and objects[-1]["failed"] == 1


def test_on_a_terminal_one_line_is_updated_in_place(tmp_path):
    root = _project(tmp_path / "proj", bad=-1)
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "ratui", "backfill", "silver.facts", "--project", str(root),
                                "--start", "2026-01-01", "--end", "2026-01-04"], stdout=follower,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=ratui_env())
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the command exited: the terminal's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=300) == 0, process.stderr.read() if process.stderr else ""
    text = b"".join(chunks).decode()
    updates = text.split("\r\x1b[K")
    assert len(updates) >= 4  # the line rewritten after each interval
    assert "[########################] 3 done, 0 failed, 0 pending of 3 intervals; 12 rows;" in updates[-1]
    assert "\n  1 done" not in text.replace("\r\n", "\n")  # not the plain lines a pipe gets


def test_ctrl_c_leaves_finished_intervals_published_and_the_rest_pending(tmp_path):
    root = _project(tmp_path / "proj", bad=-1)
    log = tmp_path / "backfill.log"
    process = ratui_background("backfill", "silver.facts", "--project", str(root), "--start", "2026-01-01",
                               "--end", "2026-03-01", log=log)
    try:
        wait_for(lambda: log.read_text().count("SUCCESS ") >= 2, 300, "two intervals done")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    finished = text.count("SUCCESS ")
    assert 2 <= finished < 59, text
    # every finished interval is on main, from the range's start, and nothing else
    end = f"2026-01-{1 + finished:02d}T00:00:00" if finished < 31 else None
    assert end is not None and _done(root) == [["2026-01-01T00:00:00", end]], (text, _done(root))
    out = ratui("backfill", "silver.facts", "--project", str(root), "--start", "2026-01-01", "--end", "2026-03-01",
                "--resume", "--json", "--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    [plan] = json_lines(out.stdout)
    assert plan["event"] == "plan" and plan["to_run"] == 59 - finished
