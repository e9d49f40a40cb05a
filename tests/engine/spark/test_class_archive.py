"""The JVM class archive (spark/session.py): written once by the first Spark of a machine as it exits, adopted by
the next start, then mapped by every later JVM, with nothing left behind by processes that ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ratui.engine.spark.class_archive import (ARCHIVE_SETTLE_SECONDS, DAY, UNUSED_ARCHIVE_DAYS, mark_used,
                                              prune_other_archives, tidy_archives)

NAME = "spark-x.jsa"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_finished_archive_of_an_ended_process_is_adopted(tmp_path):
    pid = dead_pid()
    (tmp_path / f"{NAME}.{pid}.claim").touch()
    (tmp_path / f"{NAME}.{pid}.part").write_bytes(b"archive")
    later = time.time() + ARCHIVE_SETTLE_SECONDS + 1
    assert tidy_archives(tmp_path, NAME, now=later) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]
    assert (tmp_path / NAME).read_bytes() == b"archive"


def test_a_live_process_or_a_part_still_being_written_is_left_alone(tmp_path):
    (tmp_path / f"{NAME}.{os.getpid()}.claim").touch()  # this process: alive
    pid = dead_pid()
    (tmp_path / f"{NAME}.{pid}.claim").touch()
    (tmp_path / f"{NAME}.{pid}.part").write_bytes(b"half")  # ended, but written just now
    assert tidy_archives(tmp_path, NAME) is True
    assert not (tmp_path / NAME).exists()
    assert (tmp_path / f"{NAME}.{pid}.part").read_bytes() == b"half"


def test_leftovers_of_ended_processes_go_once_an_archive_is_in_place(tmp_path):
    (tmp_path / NAME).write_bytes(b"archive")
    a, b = dead_pid(), dead_pid()
    (tmp_path / f"{NAME}.{a}.claim").touch()
    (tmp_path / f"{NAME}.{a}.part").write_bytes(b"second")
    (tmp_path / f"{NAME}.{b}.part").write_bytes(b"")  # its claim already gone, nothing written
    assert tidy_archives(tmp_path, NAME, now=time.time() + ARCHIVE_SETTLE_SECONDS + 1) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]
    assert (tmp_path / NAME).read_bytes() == b"archive"


def _touched(path: Path) -> Path:
    path.touch()
    return path


def _aged(path: Path, days: float) -> Path:
    then = time.time() - days * DAY
    os.utime(path, (then, then))
    return path


def test_archives_other_installations_stopped_using_go_and_the_rest_stay(tmp_path):
    """A virtualenv made again, or an upgrade, leaves its old archive (100-200 MB) behind: it goes once unused for
    UNUSED_ARCHIVE_DAYS; this installation's files, an archive still in use and a live writer's part stay."""
    dead = dead_pid()
    kept = {NAME: 40, f"{NAME}.{dead}.part": 40,  # this installation's: tidy_archives() decides
            "spark-0.9-aaaa.jsa": UNUSED_ARCHIVE_DAYS - 1,  # another installation's, mapped within the month
            f"spark-0.9-bbbb.jsa.{os.getpid()}.part": 3, f"spark-0.9-bbbb.jsa.{os.getpid()}.claim": 3,  # live writer
            "spark-0.9-cccc.jsa.bad": 6, f"spark-0.9-dddd.jsa.{dead}.part": 0.5, "notes.txt": 90}
    stale = {"spark-0.8-eeee.jsa": UNUSED_ARCHIVE_DAYS + 1, f"spark-0.9-ffff.jsa.{dead}.part": 2,
             f"spark-0.9-ffff.jsa.{dead}.claim": 2, "spark-0.9-gggg.jsa.bad": 8}
    for name, days in {**kept, **stale}.items():
        _aged(_touched(tmp_path / name), days)
    gone = prune_other_archives(tmp_path, NAME)
    assert sorted(p.name for p in gone) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_an_archive_a_jvm_maps_counts_as_used_once_a_day(tmp_path):
    archive = _aged(_touched(tmp_path / NAME), 2)
    mark_used(archive)
    assert time.time() - archive.stat().st_mtime < 60
    _aged(archive, 0.5)
    before = archive.stat().st_mtime
    mark_used(archive)
    assert archive.stat().st_mtime == before  # not rewritten on every start


SCRIPT = """
import sys
from pathlib import Path
from ratui.engine.project.settings import load_settings
from ratui.engine.spark import session
spark = session.get_spark(load_settings(Path(sys.argv[1])))
print(spark.range(10).selectExpr("sum(id)").collect()[0][0])
"""


def test_the_next_spark_maps_the_archive_the_first_one_wrote(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), RATUI_JVM_ARCHIVE="1")

    def start(name: str) -> Path:
        project = tmp_path / name
        project.mkdir()
        log = tmp_path / f"{name}-classes.txt"
        (project / "ratui.yaml").write_text(
            "namespace: demo\nspark:\n  master: local[1]\n  config:\n"
            f"    spark.driver.extraJavaOptions: -Xlog:class+load=info:file={log}\n")
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(project)], env=env, capture_output=True, text=True,
                             timeout=300, cwd=Path(__file__).resolve().parents[3])
        assert out.returncode == 0 and out.stdout.strip() == "45", out.stderr[-2000:]
        return log

    start("first")
    folder = cache / "ratui" / "jvm"
    # the first JVM writes its archive as it exits, and the command waits for it (no JVM outlives the command):
    # when it returns, the archive is complete and in place, and no part or claim is left
    [archive] = list(folder.glob("*.jsa"))
    name = archive.name
    assert archive.stat().st_size > 10_000_000
    assert not list(folder.glob("*.part")) and not list(folder.glob("*.claim"))
    assert not [p for p in psutil.process_iter(["cmdline"]) if any(str(folder) in a for a in p.info["cmdline"] or [])]
    assert tidy_archives(folder, name, now=time.time() + ARCHIVE_SETTLE_SECONDS + 1) is False

    log = start("second")
    loaded = log.read_text()
    # classes of Spark itself came from the archive (the dynamic archive is the "top" layer)
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loaded
    assert not list(folder.glob("*.part")) and not list(folder.glob("*.claim"))

    # cut short (a full disk, a copy interrupted): a JVM mapping it crashes; ratui sets it aside and starts without
    archive = folder / name
    data = archive.read_bytes()
    archive.chmod(0o644)
    archive.write_bytes(data[:5_000_000])
    start("third")
    assert not archive.exists() and (folder / f"{name}.bad").exists()
    assert list((tmp_path / "third" / ".ratui" / "logs").glob("hs_err_pid*.log"))  # the crash report, kept


def test_a_garbage_archive_never_stops_spark(tmp_path):
    """An archive that is not one (the JVM refuses its header and starts without it): Spark starts, and nothing is
    written into the folder the user runs ratui from."""
    from ratui.engine.spark.class_archive import archive_name

    cache = tmp_path / "cache"
    folder = cache / "ratui" / "jvm"
    folder.mkdir(parents=True)
    name = archive_name()
    assert name is not None
    damaged = folder / name
    damaged.write_bytes(b"\x00" * 4096)
    project = tmp_path / "p"
    project.mkdir()
    (project / "ratui.yaml").write_text("namespace: demo\nspark:\n  master: local[1]\n")
    work = tmp_path / "cwd"
    work.mkdir()
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), RATUI_JVM_ARCHIVE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(project)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=work)
    assert out.returncode == 0 and out.stdout.strip() == "45", out.stderr[-2000:]
    assert not list(work.iterdir())  # nothing written where the user stood


def test_a_java_option_the_jvm_refuses_is_reported_and_the_archive_stays(tmp_path):
    """A JVM that does not start for a reason of its own (a heap size it cannot read) is not the archive's fault:
    the archive stays in place for the next start, and the error is RAT-SPK-002 at the setting's line, in the JVM's
    own words, not a crash of ratui."""
    from ratui.engine.spark.class_archive import archive_name

    cache = tmp_path / "cache"
    folder = cache / "ratui" / "jvm"
    folder.mkdir(parents=True)
    name = archive_name()
    assert name is not None
    (folder / name).write_bytes(b"\x00" * 4096)  # any archive: the JVM refuses the option before it looks at it
    project = tmp_path / "p"
    project.mkdir()
    (project / "ratui.yaml").write_text("namespace: demo\nspark:\n  master: local[1]\n  config:\n"
                                        "    spark.driver.memory: 2x\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), RATUI_JVM_ARCHIVE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    script = SCRIPT.replace("spark = session.get_spark", "from ratui.engine.errors import RatuiError\n"
                            "try:\n    session.get_spark(load_settings(Path(sys.argv[1])))\n"
                            "except RatuiError as exc:\n    print(exc.code, exc.line, exc.message)\n"
                            "    raise SystemExit(0)\nspark = session.get_spark")
    out = subprocess.run([sys.executable, "-c", script, str(project)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    code, line, message = out.stdout.strip().split(" ", 2)
    assert (code, line) == ("RAT-SPK-002", "5")
    assert "-Xmx2x" in message  # the JVM's own reason
    assert sorted(p.name for p in folder.iterdir()) == [name]  # not set aside as .bad


def test_a_virtualenv_made_again_at_the_same_path_gets_an_archive_of_its_own(tmp_path):
    """Its jars are new files: the JVM refuses an archive written against the old ones (and starts every time
    without one), so their name must change with them, for the next JVM to write a new archive."""
    from ratui.engine.spark.class_archive import archive_name

    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"jar")
    first = archive_name(jars)
    assert first is not None and archive_name(jars) == first  # stable while nothing changes
    os.utime(jars / "spark-core.jar", ns=(1, 1))  # reinstalled: the same name and size, another time
    assert archive_name(jars) != first


def test_a_project_class_path_gets_an_archive_of_its_own(tmp_path):
    """spark.driver.extraClassPath comes first on the JVM's class path, and Java maps an archive only for the class
    path it was written with: without a name of their own, a project with one and a project without would each
    find the other's archive unusable and set it aside (a 200 MB archive written again, every cold start slow)."""
    from ratui.engine.spark.class_archive import archive_name

    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"jar")
    extra = tmp_path / "udfs.jar"
    extra.write_bytes(b"udfs")
    plain = archive_name(jars)
    with_extra = archive_name(jars, class_path=str(extra))
    assert with_extra not in (None, plain)
    assert archive_name(jars, class_path="") == plain
    extra.write_bytes(b"udfs, rebuilt")
    assert archive_name(jars, class_path=str(extra)) not in (plain, with_extra)


def test_an_archive_the_jvm_says_it_cannot_use_is_set_aside_for_a_new_one(tmp_path):
    """Java maps an archive only for the jar files and runtime it was written with; otherwise it warns and starts
    without it. ratui reads that warning in the JVM's output and sets the archive aside, so the next JVM writes
    one it can use rather than every start going without."""
    from ratui.engine.spark.class_archive import check_used

    archive = tmp_path / "spark-x.jsa"
    archive.write_bytes(b"archive")
    out = tmp_path / "jvm.out"
    out.write_text("[0.2s][warning][cds,dynamic] Unable to use shared archive. The top archive failed to load: "
                   f"{archive}\nratui: starting Spark's JVM (local[2]), JIT full (spark.jit full)\n")
    offset = out.stat().st_size  # an earlier JVM's warning: not this one's
    with open(out, "a") as f:
        f.write("WARNING: Using incubator modules: jdk.incubator.vector\n")
    check_used(archive, out, offset)
    assert archive.exists()
    with open(out, "a") as f:
        f.write("[0.2s][warning][cds,dynamic] Unable to use shared archive. The top archive failed to load: "
                f"{archive}\n")
    check_used(archive, out, offset)
    assert not archive.exists() and (tmp_path / "spark-x.jsa.bad").read_bytes() == b"archive"
