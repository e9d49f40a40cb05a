"""Another machine's disk, on this one: a mount namespace in which the driver's folders do not exist.

A Spark Connect server or a standalone cluster on another machine cannot read the project, ratui's state folder
(.ratui/), the driver's /tmp or ratui's own code. The slow tests start such servers inside a `HiddenDisk`:

    disk = HiddenDisk.start()                          # /tmp, ratui's checkout and ~/.cache/ratui hidden
    server = start_connect(disk.scratch / "connect", disk=disk)   # with S3A's jars, as docs/team says
    disk.sees(project / "ratui.yaml")                  # False
    control = disk.folder("control")                   # a folder both sides see (the test's instrumentation)
    ...
    server.stop(); disk.stop()

How: `unshare --mount --propagation private` (util-linux; root, which the tests and CI run as) starts a holder
process in a mount namespace of its own, which covers each hidden folder with an empty tmpfs and then sleeps; every
server of the disk runs in that namespace (`nsenter --target HOLDER --mount`). Nothing changes in this process's
mounts, and the namespace's mounts go with its last process. What stays visible inside a hidden folder at the same
path (`keep`: the Python environment, pyspark's distribution in it) is bound back from a copy of the hidden folder
that the holder took before covering it (under `scratch/.stash`, a tmpfs of the namespace alone). `scratch` (under
/var/tmp, which no ratui path names) holds the servers' logs, work and scratch folders, and what a test's
instrumentation writes on both sides (the slow project's control folder): the test reads it from outside.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

READY_SECONDS = 10.0
SCRATCH_PARENT = Path("/var/tmp")


def default_hidden() -> list[Path]:
    """The driver's folders a remote server never sees: /tmp (pytest's tmp_path, every test project, ratui's
    worktrees), ratui's own checkout and the tests' (neither code is on a cluster's machines), ratui's cache."""
    import ratui

    out = [Path(tempfile.gettempdir()), Path(ratui.__file__).resolve().parents[1], Path(__file__).resolve().parents[1],
           Path.home() / ".cache" / "ratui"]
    venv_home = Path(sys.prefix).resolve().parent  # a checkout holding its own venv (the editable install's code)
    if (venv_home / "pyproject.toml").is_file() and (venv_home / "ratui").is_dir():
        out.append(venv_home)
    return [p for p in out if p.exists()]


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths none of the others contains (hiding a folder hides what is in it)."""
    paths = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for path in paths:
        if not any(path == o or o in path.parents for o in out):
            out.append(path)
    return out


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, so no holder outlives a killed test run."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class HiddenDisk:
    def __init__(self, scratch: Path, hidden: list[Path], keep: list[Path]):
        self.scratch = scratch
        self.hidden = _outermost(hidden)
        self.keep = [k.resolve() for k in keep]
        self.stash = scratch / ".stash"
        self.process: subprocess.Popen | None = None

    @classmethod
    def start(cls, hidden: list[Path] | None = None, keep: list[Path] | None = None) -> "HiddenDisk":
        """`hidden`: more folders to hide (besides default_hidden()); `keep`: folders inside hidden ones that stay
        visible (besides this Python's environment, which servers run their Python workers with)."""
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            raise RuntimeError("the hidden-disk tests need util-linux's unshare and nsenter")
        if os.geteuid() != 0:  # never a silent skip: these tests are the proof that Spark needs no local disk
            raise RuntimeError("the hidden-disk tests mount in a namespace of their own: run them as root (CI does)")
        scratch = SCRATCH_PARENT / f"ratui-hidden-{uuid.uuid4().hex[:10]}"
        scratch.mkdir(mode=0o755)
        disk = cls(scratch, [*default_hidden(), *(hidden or [])], [Path(sys.prefix), *(keep or [])])
        try:
            disk._start()
        except BaseException:
            disk.stop()
            raise
        return disk

    # ------------------------------------------------------------------------------------------------ the holder

    def _where(self, path: Path) -> tuple[int, Path] | None:
        """(the index of the hidden folder holding `path`, `path` relative to it), or None when it is visible."""
        path = Path(os.path.abspath(path))
        for i, hidden in enumerate(self.hidden):
            if path == hidden or hidden in path.parents:
                return i, path.relative_to(hidden)
        return None

    def _bind_back(self, path: Path) -> str:
        """Shell lines (in the namespace) that make `path`, inside a hidden folder, visible there again."""
        where = self._where(path)
        if where is None:
            return ":"
        i, rel = where
        source = self.stash / str(i) / rel
        kind = "-d" if path.is_dir() else "-e"
        make = f"mkdir -p {shlex.quote(str(path))}" if path.is_dir() else \
            f"mkdir -p {shlex.quote(str(path.parent))} && touch {shlex.quote(str(path))}"
        return (f"test {kind} {shlex.quote(str(source))} && {make} && "
                f"mount --rbind {shlex.quote(str(source))} {shlex.quote(str(path))}")

    def _start(self) -> None:
        if self._where(self.scratch) is not None:
            raise RuntimeError(f"the scratch folder {self.scratch} is inside a hidden folder")
        ready = self.scratch / ".ready"
        lines = ["set -eu", f"mkdir -p {shlex.quote(str(self.stash))}",
                 f"mount -t tmpfs -o mode=0700,size=1m ratui-stash {shlex.quote(str(self.stash))}"]
        for i, hidden in enumerate(self.hidden):
            copy = shlex.quote(str(self.stash / str(i)))
            lines += [f"mkdir {copy}", f"mount --rbind {shlex.quote(str(hidden))} {copy}",
                      f"mount -t tmpfs -o mode={hidden.stat().st_mode & 0o7777:o} ratui-hidden "
                      f"{shlex.quote(str(hidden))}"]
        lines += [self._bind_back(k) for k in self.keep]
        lines += [f"touch {shlex.quote(str(ready))}", "exec sleep infinity"]
        log = open(self.scratch / "hidden-disk.log", "wb")
        with log:
            self.process = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                                             "\n".join(lines)], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_SECONDS
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the hidden disk's namespace did not start: "
                                   + (self.scratch / "hidden-disk.log").read_text(errors="replace")[-2000:])
            time.sleep(0.05)

    # ------------------------------------------------------------------------------------------------ using it

    def wrap(self, args: list[str]) -> list[str]:
        """`args` run inside the namespace (nsenter execs them: the process is theirs, its group too)."""
        assert self.process is not None and self.process.poll() is None, "the hidden disk is not running"
        return ["nsenter", f"--target={self.process.pid}", "--mount", "--", *args]

    def run(self, script: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.wrap(["sh", "-c", script]), capture_output=True, text=True, timeout=30)

    def sees(self, path: Path) -> bool:
        """Whether a process in the namespace finds `path`."""
        return self.run(f"test -e {shlex.quote(str(path))}").returncode == 0

    def folder(self, name: str) -> Path:
        """A fresh folder both sides see (outside every hidden one)."""
        path = self.scratch / f"{name}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    def stop(self) -> None:
        """The holder goes (the namespace and its mounts with it once the servers are gone), then the scratch."""
        from tests.processes import stop_group

        if self.process is not None and self.process.poll() is None:
            stop_group(self.process)
        shutil.rmtree(self.scratch, ignore_errors=True)
