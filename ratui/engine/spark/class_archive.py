"""The JVM's class data archive: Java maps the classes Spark loads at start-up from a file instead of loading and
verifying them again (-XX:SharedArchiveFile); the first JVM of an installation that works writes it as it exits
(-XX:ArchiveClassesAtExit). Where it lives, its name, who writes it, adopting and pruning archives, and waiting at
exit for this process's JVM when it writes one (never an orphan). session.py asks for the option when it starts a
JVM and registers that wait."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("ratui.spark")

writing: tuple[Path, Path] | None = None  # this process's JVM writes the archive as it exits: its claim and part

#
# A JVM spends much of its start-up loading and verifying classes (Spark SQL loads over ten thousand before a
# first query finishes). Java's class data sharing maps them from an archive instead: the first Spark of a
# machine writes one when it exits (-XX:ArchiveClassesAtExit, with the classes that process used), and every
# later Spark maps it (-XX:SharedArchiveFile). Measured here: session start plus a first small read, write and
# query 15.5-18.0 s without, 10.9-12.2 s with (benchmarks/README.md). The archive lives in the user's cache
# folder, named after the Java runtime and Spark's jars, so an upgrade of either makes a new one; a JVM that
# refuses an archive says so in .ratui/logs/jvm.out and starts without it; a JVM that crashes on a damaged one
# (cut short) makes ratui set the archive aside (.bad) and start Spark again without it; other installations'
# archives that no JVM mapped for UNUSED_ARCHIVE_DAYS are removed. RATUI_JVM_ARCHIVE=0 turns this off.


def archive_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ratui" / "jvm"


def archive_name(jars: Path | None = None, class_path: str = "") -> str | None:
    """A name that changes with the Java runtime and Spark's jars (their folder, names, sizes and times), or None
    when they cannot be found. A virtualenv made again at the same path has new jar files, which the JVM checks
    against the archive (refusing it with a warning when they differ): their times make it a new name. So does a
    project's own class path (spark.driver.extraClassPath), which comes first on the JVM's: one archive for
    every class path, instead of projects with and without one setting each other's archive aside in turn."""
    import hashlib
    import shutil

    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    jars = jars or Path(pyspark.__file__).parent / "jars"
    if not java or not os.path.exists(java) or not jars.is_dir():
        return None
    real = os.path.realpath(java)
    digest = hashlib.sha256()
    # the archive is only valid for the class path it was written with: this installation's jars folder
    digest.update(f"{real}:{os.stat(real).st_mtime_ns}:{pyspark.__version__}:{jars.resolve()}".encode())
    for jar in sorted(jars.iterdir()):
        info = jar.stat()
        digest.update(f"{jar.name}:{info.st_size}:{info.st_mtime_ns}".encode())
    for entry in filter(None, class_path.split(os.pathsep)):
        try:
            info = os.stat(entry)
            digest.update(f"+{os.path.realpath(entry)}:{info.st_size}:{info.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"+{entry}".encode())
    return f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jsa"


def option(class_path: str = "") -> str:
    """The JVM option that maps this machine's class archive, or has this JVM write it as it exits when there is
    none yet and no other live process is writing one. `class_path`: the project's spark.driver.extraClassPath."""
    mode = os.environ.get("RATUI_JVM_ARCHIVE", "1")
    if mode == "0":
        return ""
    try:
        name = archive_name(class_path=class_path)
        if name is None:
            return ""
        folder = archive_dir()
        folder.mkdir(parents=True, exist_ok=True)
        archive = folder / name
        busy = tidy_archives(folder, name)
        prune_other_archives(folder, name)
        if archive.is_file() and archive.stat().st_size > 0:
            mark_used(archive)
            return f"-XX:SharedArchiveFile={archive}"
        if busy or mode == "map":
            # another process will write it (one archive of 100-200 MB at a time), or this process maps only (a
            # console of ratui web, which must not hold its session open while its JVM writes one)
            return ""
        claim, part = folder / f"{name}.{os.getpid()}.claim", folder / f"{name}.{os.getpid()}.part"
        claim.touch()
        global writing
        writing = (claim, part)
        # written under a name of this process's own; a later start adopts it once this process has ended
        return f"-XX:ArchiveClassesAtExit={part}"
    except OSError:  # no home folder, a read-only cache: start without an archive
        return ""


def check_used(archive: Path, jvm_out: Path, offset: int) -> None:
    """A JVM that could not use the archive (written for other jar files or another runtime) says so and starts
    without it: the archive is set aside, so that a later JVM writes one it can use, instead of every start
    going without."""
    try:
        with open(jvm_out, "rb") as out:
            out.seek(offset)
            said = out.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return
    if "Unable to use shared archive" in said:
        set_aside(archive)


def set_aside(archive: Path) -> None:
    """Move an archive a JVM could not start with out of the way (kept as .bad for a look, one at a time)."""
    log.warning("JVM class archive %s could not be used; starting without it", archive)
    try:
        os.replace(archive, archive.with_name(archive.name + ".bad"))
    except OSError:
        pass


# A process that ended this long ago has finished writing its archive (its JVM writes it as it exits).
ARCHIVE_SETTLE_SECONDS = 30.0


def tidy_archives(folder: Path, name: str, now: float | None = None) -> bool:
    """Adopt the archive of an ended process (rename its part into place), remove parts and claims of ended
    processes that are not needed. True when a live process is still to write one."""
    import psutil

    now = time.time() if now is None else now
    busy = False
    for claim in sorted(folder.glob(f"{name}.*.claim")):
        pid_text = claim.name[len(name) + 1:-len(".claim")]
        pid = int(pid_text) if pid_text.isdigit() else -1
        part = folder / f"{name}.{pid_text}.part"
        last = max(claim.stat().st_mtime, part.stat().st_mtime if part.exists() else 0.0)
        if pid > 0 and psutil.pid_exists(pid) or now - last < ARCHIVE_SETTLE_SECONDS:
            busy = True
            continue
        if part.exists():
            settle(part, folder / name)
        claim.unlink(missing_ok=True)
    for part in sorted(folder.glob(f"{name}.*.part")):  # parts whose claim went first (a JVM slow to exit)
        claimed = part.with_name(part.name[:-len(".part")] + ".claim").exists()
        if claimed or now - part.stat().st_mtime < ARCHIVE_SETTLE_SECONDS:
            continue
        settle(part, folder / name)
    return busy


# An archive of another installation (another virtualenv, an older Spark or Java) that no JVM has mapped for this
# long goes (100-200 MB each); so do parts and claims of other installations' ended processes after a day, and
# archives set aside as unusable after a week.
UNUSED_ARCHIVE_DAYS = 30
DAY = 86400.0


def mark_used(archive: Path, now: float | None = None) -> None:
    """Record that a JVM maps the archive (its time, at most once a day), so pruning keeps archives in use."""
    now = time.time() if now is None else now
    try:
        if now - archive.stat().st_mtime > DAY:
            os.utime(archive, (now, now))
    except OSError:
        pass


def prune_other_archives(folder: Path, name: str, now: float | None = None) -> list[Path]:
    """Remove what other installations left in the archive folder and no longer use; returns what went."""
    import psutil

    now = time.time() if now is None else now
    gone = []
    for entry in folder.glob("spark-*.jsa*"):
        if entry.name == name or entry.name.startswith(f"{name}."):
            continue  # this installation's: tidy_archives() looks after them
        try:
            age = now - entry.stat().st_mtime
            suffix = entry.name.rsplit(".", 1)[-1]
            if suffix == "jsa":
                stale = age > UNUSED_ARCHIVE_DAYS * DAY
            elif suffix == "bad":
                stale = age > 7 * DAY
            elif suffix in ("part", "claim"):
                pid_text = entry.name.rsplit(".", 2)[-2]
                alive = pid_text.isdigit() and psutil.pid_exists(int(pid_text))
                stale = age > DAY and not alive
            else:
                continue
            if stale:
                entry.unlink()
                gone.append(entry)
        except OSError:
            continue  # gone already, or not ours to remove
    return gone


def settle(part: Path, archive: Path) -> None:
    """A finished part becomes the archive when there is none yet; otherwise (or when empty) it goes."""
    if part.stat().st_size > 0 and not archive.exists():
        os.replace(part, archive)
    else:
        part.unlink()


ARCHIVE_WAIT_SECONDS = 120.0  # the longest a command waits for its JVM to write the class archive as it exits


def write_in_view(stop: Callable[[], None]) -> None:
    """At exit, when this process's JVM is the one to write the installation's class archive: the command waits for
    it (bounded, the JVM at low priority), saying so on a terminal, instead of returning while an orphaned JVM
    writes 100-200 MB for tens of seconds. `stop` stops the process's Spark first. Ctrl-C, or the bound, stops the
    JVM and drops its part: the next JVM that works writes the archive instead."""
    if writing is None:
        return
    try:
        from pyspark import SparkContext

        process = getattr(SparkContext._gateway, "proc", None)
    except Exception:  # noqa: BLE001 - no classic Spark in this process
        return
    if process is None or process.poll() is not None:
        return
    claim, part = writing
    terminal = sys.stderr is not None and sys.stderr.isatty()

    def say(text: str) -> None:
        if terminal:
            try:
                print(f"ratui: {text}", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass

    began = time.monotonic()
    try:
        os.setpriority(os.PRIO_PROCESS, process.pid, 10)
    except (OSError, AttributeError):
        pass
    say(f"Spark is writing this installation's class archive as it exits (once; later starts are faster); waiting "
        f"up to {ARCHIVE_WAIT_SECONDS:.0f} s, Ctrl-C skips it")
    try:
        try:
            stop()
        except Exception:  # noqa: BLE001 - the JVM exits below all the same
            pass
        try:
            if process.stdin is not None:
                process.stdin.close()  # the JVM's signal to exit (PySpark's launcher watches its stdin)
        except OSError:
            pass
        process.wait(ARCHIVE_WAIT_SECONDS)
        try:  # written and closed: in place now, for the very next start
            if part.exists():
                settle(part, part.with_name(part.name.split(".jsa.", 1)[0] + ".jsa"))
            claim.unlink(missing_ok=True)
        except OSError:
            pass
        say(f"class archive written in {time.monotonic() - began:.1f} s")
    except (KeyboardInterrupt, subprocess.TimeoutExpired) as reason:
        process.kill()
        process.wait()
        for path in (claim, part):
            path.unlink(missing_ok=True)
        say("class archive skipped (" + ("Ctrl-C" if isinstance(reason, KeyboardInterrupt) else "too slow")
            + "): a later run writes it")
