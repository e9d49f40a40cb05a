"""The fork server (isolation/fork_server.py): a confined child forked from the warm template is confined exactly
as an exec'd one. Real template, real fork, real Landlock and seccomp; no Spark: run(ctx) here needs no data (a
plan without tables or zones connects to nothing), so what it tries is reported by printing."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from ratui.engine.isolation import fork_server
from ratui.engine.isolation.levels import kernel_gaps
from ratui.engine.isolation.limits import child_environment
from ratui.engine.isolation.runner import python_reads

pytestmark = pytest.mark.skipif(kernel_gaps() is not None, reason=f"no confinement here: {kernel_gaps()}")

PROBE = '''
import ctypes
import os
import time


def attempt(out, name, fn):
    try:
        out[name] = "open: " + repr(fn())[:200]
    except BaseException as exc:  # noqa: BLE001
        out[name] = "blocked: " + type(exc).__name__


def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) == -1:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "attached"


def run(ctx):
    if {wait}:
        time.sleep(30)
    out = {{}}
    attempt(out, "read outside", lambda: open({secret!r}).read())
    attempt(out, "read the template's environment", lambda: open("/proc/{template}/environ").read())
    attempt(out, "signal the template", lambda: os.kill({template}, 0))
    attempt(out, "ptrace the template", lambda: ptrace({template}))
    attempt(out, "signal a sibling", lambda: os.kill({sibling}, 0))
    attempt(out, "ptrace a sibling", lambda: ptrace({sibling}))
    attempt(out, "own scratch", lambda: open("scratch.txt", "w").write("ok"))
    out["environment"] = sorted(os.environ)
    out["descriptors"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    print(repr(out))
'''


@pytest.fixture
def forks(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-children")  # ratui's environment: never the template's
    fork_server.stop_all()
    forks = fork_server.server(tmp_path / "state")
    assert forks.ready(), forks.error
    yield forks
    fork_server.stop_all()


def fork(forks, tmp_path: Path, name: str, text: str):
    """Fork one child for a run named `name`, send it its plan; (child, report read end)."""
    folder = tmp_path / "runs" / name
    (folder / "scratch").mkdir(parents=True)
    pipeline = tmp_path / "pipelines" / name
    pipeline.mkdir(parents=True)
    read_fd, write_fd = os.pipe()
    try:
        child = forks.fork(child_environment(os.environ, folder / "scratch"), write_fd)
    finally:
        os.close(write_fd)
    plan = {"file": str(pipeline / "pipeline.py"), "text": text, "namespace": "demo", "parent": forks.pid,
            "url": "sc://localhost:9/;token=unused", "port": 9, "level": "confined", "tables": {}, "zones": {},
            "this": None, "run_started_at": "2026-01-01T00:00:00", "watermark_value": None, "incremental": False,
            "scd2": False, "scratch": str(folder / "scratch"), "result": str(folder / "result"),
            "read": [str(p) for p in python_reads(pipeline)], "report_fd": fork_server.REPORT_FD,
            "limits": {"cpu_seconds": 60, "memory_bytes": 2 << 30, "file_bytes": 1 << 26, "open_files": 256}}
    child.stdin.write(json.dumps(plan).encode())
    child.stdin.close()
    return child, read_fd


def reports(read_fd: int) -> list[dict]:
    with os.fdopen(read_fd) as stream:
        return [json.loads(line) for line in stream if line.strip()]


def test_a_forked_child_is_confined_away_from_the_template_and_its_siblings(forks, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    fields = {"secret": str(secret), "template": forks.pid}
    sleeper, sleeper_reports = fork(forks, tmp_path, "sleeper", PROBE.format(wait=True, sibling=0, **fields))
    try:
        child, read_fd = fork(forks, tmp_path, "probe", PROBE.format(wait=False, sibling=sleeper.pid, **fields))
        out = ast.literal_eval(child.stdout.read().decode().strip().splitlines()[-1])
        assert child.wait(30) == 0
        said = reports(read_fd)
    finally:
        os.killpg(sleeper.pid, 9)
        sleeper.wait(30)
        os.close(sleeper_reports)
    level = next(r["level"] for r in said if "level" in r)
    assert level.startswith("confined: landlock-abi") and "seccomp" in level, said
    for attempt in ("read outside", "read the template's environment", "signal the template", "ptrace the template",
                    "signal a sibling", "ptrace a sibling"):
        assert out[attempt].startswith("blocked: "), (attempt, out[attempt])
    assert out["own scratch"] == "open: 2"
    # the run's allow-listed environment, not ratui's; no descriptor of the template's (its socket, its log)
    assert "AWS_SECRET_ACCESS_KEY" not in out["environment"] and "HOME" in out["environment"]
    assert out["descriptors"][:4] == [0, 1, 2, 3]
    # the template's environment holds no secret of ratui's
    assert b"AWS_SECRET_ACCESS_KEY" not in Path(f"/proc/{forks.pid}/environ").read_bytes()


def test_the_template_reports_each_childs_exit_and_a_killed_child(forks, tmp_path):
    ended, read_fd = fork(forks, tmp_path, "ends", "def run(ctx):\n    raise ValueError('no rows')\n")
    assert ended.wait(30) == 0
    assert reports(read_fd)[-1]["error"]["message"] == "ValueError: no rows"
    waiting, read_fd = fork(forks, tmp_path, "waits", "import time\n\ndef run(ctx):\n    time.sleep(60)\n")
    os.kill(waiting.pid, 9)  # as runner.py's kill() does (besides its killpg) when the child has not setsid() yet
    assert waiting.wait(30) == -9
    os.close(read_fd)
