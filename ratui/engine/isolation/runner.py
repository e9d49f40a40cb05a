"""Running one Python pipeline isolated (levels.py): its inputs prepared, its child started, watched and ended.

The run's folder (data_server.runs_root()/RUN) holds three things: `inputs/` (landing zones as Parquet, written
here by ratui's Spark), `result/` (the pipeline's DataFrame, written by the data server) and `scratch/` (the
child's working, home and temporary folder, the only place it may write). Tables are not copied: the child gets
their data and delete files as a plan (iceberg/read.py scan_plan) that the data server reads.

The child runs in its own session with an allow-listed environment; a wall-clock timeout, a cancel or the end of
the run kills its whole process group, so nothing it started outlives the run. Its result is read back by ratui's
Spark as a DataFrame the write phase writes, like an in-process pipeline's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.isolation import data_server, fork_server
from ratui.engine.isolation.levels import Isolation, bwrap
from ratui.engine.project import isolation_levels
from ratui.engine.spark import jit

# what the child prints, at most, into the run's log
PRINT_LINES = 2000


@dataclass
class ChildOutcome:
    level: str | None
    report: dict[str, Any] | None
    exit_code: int | None
    timed_out: bool
    prints: int


def run_folder(state_dir: Path, run_id: str) -> Path:
    return data_server.runs_root(state_dir) / run_id


def sweep_over(state_dir: Path, is_over: Callable[[str], bool]) -> list[str]:
    """Remove the folders of runs that are over (a process killed mid-run leaves its folder behind); returns their
    run ids. A folder whose run is still going, here or in another process, stays."""
    root = data_server.runs_root(state_dir)
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.is_dir() and is_over(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


def python_reads(pipeline_folder: Path) -> list[Path]:
    """What a confined child may read: the Python installation (its standard library and packages, ratui's
    included) and the system's shared libraries (landlock.runtime_read_paths), pyspark's and pyarrow's folders
    (an installation elsewhere), the pipeline's own folder, and the few files name resolution of localhost and CPU
    counting need. Not the project (its state database, ratui.yaml, other pipelines), not the home folder, not
    /proc beyond the child's own entry, not /etc beyond those files."""
    from ratui.engine.isolation.landlock import runtime_read_paths

    paths = list(runtime_read_paths())
    for module in ("pyspark", "pyarrow", "pandas", "numpy"):
        found = getattr(sys.modules.get(module), "__file__", None)
        if found:
            paths.append(Path(os.path.realpath(found)).parent)
    paths.append(pipeline_folder)
    paths += [Path(p) for p in ("/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/resolv.conf",
                                "/etc/gai.conf", "/dev/urandom", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                                "/sys/devices/system/cpu", "/sys/fs/cgroup")]
    return list(dict.fromkeys(paths))


class IsolatedRun:
    """One isolated run(ctx): prepare(), then start() and wait() (cancel() from any thread), then result()."""

    def __init__(self, *, settings, isolation: Isolation, run_id: str, file: Path, text: str, tables_root: Path,
                 log: Callable[[str, str], None]):
        self.settings = settings
        self.tables_root = tables_root  # the folder holding {namespace}/warehouse/ (storage/warehouse.py)
        self.isolation = isolation
        self.run_id = run_id
        self.file = file
        self.text = text
        self.log = log
        self.folder = run_folder(settings.state_dir, run_id)
        self.process: subprocess.Popen | None = None
        self.plan: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------- inputs

    def prepare(self, session, *, tables: dict[str, tuple[Any, str]], zones: dict[str, str], this: str | None,
                namespace: str, run_started_at: str, watermark_value: Any, incremental: bool, scd2: bool) -> None:
        """`tables`: key -> (PyIceberg table on the run's branch, the view name in-process code would use);
        `zones`: zone -> the view ratui's session has over the files this run reads (copied to Parquet here)."""
        from ratui.engine.iceberg.read import scan_plan

        shutil.rmtree(self.folder, ignore_errors=True)
        for sub in ("inputs", "scratch"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        planned = {}
        for key, (table, view) in tables.items():
            planned[key] = {**scan_plan(table), "view": view.strip("`")}
        copied = {}
        for number, (zone, view) in enumerate(sorted(zones.items())):
            where = self.folder / "inputs" / f"zone-{number}"
            session.table(view).write.mode("overwrite").parquet(str(where))
            copied[zone] = {"parquet": str(where), "view": view.strip("`")}
        server = self._server()
        early = data_server.early_start()
        if early is not None and early.ready_at is not None and early.serves(
                server.root, server.reads, server.confined):
            self.log(f"python isolation: the data server was started early ({early.ready_at - early.began_at:.1f} s"
                     f" to start, ready {max(0.0, time.time() - early.ready_at):.1f} s before this run needed it)",
                     "debug")
        self.plan = {
            "file": str(self.file), "text": self.text, "namespace": namespace,
            # in a jail the child's parent is bubblewrap's (its own PID namespace): --die-with-parent covers it
            "parent": None if isolation_levels.BY_NAME[self.isolation.level].jailed else os.getpid(),
            "url": server.url, "port": server.port, "level": self.isolation.level,
            "tables": planned, "zones": copied, "this": this,
            "run_started_at": run_started_at, "watermark_value": watermark_value,
            "incremental": bool(incremental), "scd2": bool(scd2),
            "scratch": str(self.folder / "scratch"), "result": str(self.folder / "result"),
            "read": [str(p) for p in python_reads(self.file.parent)],
            "limits": {"cpu_seconds": self.settings.python_cpu_seconds,
                       "memory_bytes": self.settings.python_memory_mb * 1024 * 1024,
                       "file_bytes": self.settings.python_file_mb * 1024 * 1024,
                       "open_files": self.settings.python_open_files},
        }

    def _server(self) -> data_server.DataServer:
        from ratui.engine.isolation.early import server_reads

        return data_server.data_server(self.settings.root, self.settings.state_dir,
                                       server_reads(self.settings, self.tables_root), self.settings.spark_config,
                                       confined=self.isolation.level in isolation_levels.CONFINED,
                                       java_option=jit.java_option(self.settings))

    # ---------------------------------------------------------------------------------------- the child

    def argv(self, env: dict[str, str]) -> list[str]:
        command = [sys.executable, "-I", "-X", "utf8", "-m", "ratui.engine.isolation.child"]
        if not isolation_levels.BY_NAME[self.isolation.level].jailed:
            return command
        binary = bwrap()
        assert binary is not None
        return [binary, *jail_arguments(self.folder, self.file.parent, env), "--", *command]

    def run(self, check: Callable[[], None]) -> ChildOutcome:
        """Start the child, wait for it within python.timeout, and end its process group whatever happens.
        `check` raises when the run was cancelled (polled while the child runs)."""
        from ratui.engine.isolation.limits import child_environment

        scratch = self.folder / "scratch"
        env = child_environment(os.environ, scratch)
        read_fd, write_fd = os.pipe()
        began = time.time()
        try:
            self.process = self._start(env, scratch, write_fd)
        finally:
            os.close(write_fd)
        reports: list[dict[str, Any]] = []
        reader = threading.Thread(target=_read_reports, args=(read_fd, reports), daemon=True)
        reader.start()
        prints = [0]
        printer = threading.Thread(target=self._read_prints, args=(prints,), daemon=True)
        printer.start()
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(self.plan).encode())
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + self.settings.python_timeout
        timed_out = False
        try:
            while self.process.poll() is None:
                check()
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                try:
                    self.process.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self.kill()
        reader.join(timeout=5)
        printer.join(timeout=5)
        self._log_steps(began, reports)
        level = next((r["level"] for r in reports if "level" in r), None)
        final = next((r for r in reversed(reports) if "ok" in r or "error" in r), None)
        return ChildOutcome(level, final, self.process.returncode, timed_out, prints[0])

    def _start(self, env: dict[str, str], scratch: Path, write_fd: int):
        """The child: forked from the warm template at the confined level (fork_server.py), else a fresh
        process; either way in its own session, with this environment, its report pipe at plan["report_fd"]."""
        forks = self._fork_server()
        if forks is not None:
            try:
                child = forks.fork(env, write_fd)
                self.plan["report_fd"] = fork_server.REPORT_FD
                self.plan["parent"] = forks.pid  # the template, which dies with ratui
                self.log(f"python isolation: child {child.pid} forked from the warm template {forks.pid}", "debug")
                return child
            except OSError as exc:
                self.log(f"python isolation: the fork server could not fork ({exc}): a fresh process", "debug")
        self.plan["report_fd"] = write_fd  # the same number in the child (pass_fds)
        return subprocess.Popen(
            self.argv(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=str(scratch), env=env, start_new_session=True, pass_fds=(write_fd,))

    def _fork_server(self) -> fork_server.ForkServer | None:
        """The fork server, ready, when this run's level may use one (confined: Landlock's scope and seccomp keep
        the child from the template and its siblings; not jail, whose bubblewrap builds its namespaces at exec;
        not process, where nothing would); None otherwise or when it is off (RATUI_FORK_SERVER=0)."""
        if self.isolation.level != "confined" or os.environ.get("RATUI_FORK_SERVER", "1") == "0":
            return None
        forks = fork_server.server(self.settings.state_dir)
        return forks if forks.ready(fork_server.READY_SECONDS) else None

    def _log_steps(self, began: float, reports: list[dict[str, Any]]) -> None:
        """Where the child's time went, in the run's log (debug): each step's end, from the child's start."""
        steps = [(r["step"], float(r["at"])) for r in reports if "step" in r and "at" in r]
        if steps:
            text = ", ".join(f"{name} +{at - began:.2f} s" for name, at in steps)
            self.log(f"python isolation: child steps: {text}", "debug")

    def _read_prints(self, count: list[int]) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if not line.strip():
                continue
            count[0] += 1
            if count[0] <= PRINT_LINES:
                self.log(f"print: {line[:1000]}", "info")
            elif count[0] == PRINT_LINES + 1:
                self.log(f"print: ... (more than {PRINT_LINES} lines: the rest is not kept)", "info")

    def kill(self) -> None:
        """End the child and everything it started (its session's process group)."""
        process = self.process
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)  # nothing of the child's gets a say: it is untrusted code
        except (ProcessLookupError, PermissionError):
            pass
        if process.poll() is None:  # a forked child killed before its setsid() is not its group's leader yet
            try:
                os.kill(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    # ---------------------------------------------------------------------------------------- the result

    def outcome_error(self, outcome: ChildOutcome) -> RatuiError | None:
        """The run's error from how the child ended, or None when it returned a DataFrame."""
        file = str(self.file)
        if outcome.timed_out:
            return RatuiError("RAT-ISO-002", f"run(ctx) ran longer than python.timeout "
                              f"({self.settings.python_timeout} s) and was stopped", file=file)
        report = outcome.report or {}
        if report.get("ok") and (self.folder / "result").is_dir():
            return None
        error = report.get("error")
        if error:
            kind, message, line = error.get("kind"), str(error.get("message", "")), error.get("line")
            if kind == "syntax":
                return RatuiError("RAT-PY-002", message, file=file, line=line)
            if kind == "invalid":
                return RatuiError("RAT-PY-003", message, file=file)
            if kind == "memory" or "can't start new thread" in message:
                return RatuiError("RAT-ISO-003", message, file=file, line=line)
            if kind == "confine":
                return RatuiError("RAT-ISO-001", message, file=file)
            if kind == "server":
                return RatuiError("RAT-ISO-005", message, file=file)
            if _refused_by_kernel(message):
                return RatuiError("RAT-ISO-006", f"run(ctx) reached outside the project: {message}", file=file,
                                  line=line)
            if kind == "spark":
                return RatuiError("RAT-PY-004", message, file=file, line=line)
            return RatuiError("RAT-PY-001", message, file=file, line=line)
        code = outcome.exit_code
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            if sig == signal.SIGXCPU:
                return RatuiError("RAT-ISO-002", f"run(ctx) used more than python.cpu_seconds "
                                  f"({self.settings.python_cpu_seconds} s) of CPU and was stopped", file=file)
            if sig == signal.SIGXFSZ:
                return RatuiError("RAT-ISO-003", f"run(ctx) wrote a file bigger than python.file_mb "
                                  f"({self.settings.python_file_mb} MB) and was stopped", file=file)
            if sig == signal.SIGSYS:
                return RatuiError("RAT-ISO-006", "run(ctx) made a system call the confinement forbids and was "
                                  "stopped", file=file)
            return RatuiError("RAT-ISO-004", f"run(ctx)'s process was killed by {sig.name}", file=file)
        return RatuiError("RAT-ISO-004", f"run(ctx)'s process exited with status {code} without a result",
                          file=file)

    def result(self, session):
        return session.read.parquet(str(self.folder / "result"))

    def remove(self) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def _refused_by_kernel(message: str) -> bool:
    words = ("Permission denied", "Operation not permitted", "EACCES", "EPERM", "PermissionError",
             "AccessDeniedException", "RESTRICTED_MODE", "restrictedMode", "UNSUPPORTED_FEATURE.RESTRICTED",
             "runSQLOnFiles")
    return any(word in message for word in words)


def jail_arguments(folder: Path, pipeline_folder: Path, env: dict[str, str]) -> list[str]:
    """bubblewrap's view of the machine for a jailed child: the system's programs and libraries read-only, the
    Python installation and ratui read-only, the pipeline's folder read-only and the run's folder writable, nothing
    else of the project or the home folder, an empty /tmp; own user, PID, IPC and UTS namespaces; only the
    environment ratui passes (--clearenv); killed with ratui (--die-with-parent), no terminal (--new-session)."""
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--new-session", "--clearenv", "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp"]
    for path in ("/lib", "/lib64", "/bin", "/sbin", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
                 "/etc/resolv.conf", "/etc/gai.conf", "/etc/localtime", "/etc/ld.so.cache"):
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    # ratui's package folder (this file is ratui/engine/isolation/runner.py): not by importing the package, whose
    # lazy names reach the Python API, a layer above the engine
    package = str(Path(os.path.realpath(__file__)).parents[2])
    for path in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package,
                        str(pipeline_folder)}):
        if not path.startswith("/usr/"):
            args += ["--ro-bind", path, path]
    args += ["--bind", str(folder), str(folder), "--chdir", str(folder / "scratch")]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def _read_reports(fd: int, into: list[dict[str, Any]]) -> None:
    with os.fdopen(fd, "rb") as stream:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                into.append(message)
