"""The test kinds (tests/kinds.py) and their enforcement (tests/unit_guard.py): every test module has a kind, and a
unit test that starts a JVM or a server fails, whether it starts it in its own process, on a thread, or in a child
process. These tests are unit tests themselves: each makes the attempt and checks the refusal (then takes it, so
that the guard's check after the test does not fail this test for the attempt it was written to make)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests import kinds
from tests.conftest import KIND, pytest_collection_modifyitems
from tests.unit_guard import GUARD, what_starts

TESTS = Path(__file__).resolve().parent


def java_children() -> list[str]:
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.name() == "java":
                found.append(" ".join(process.cmdline()))
        except psutil.Error:
            pass
    return found


def test_every_test_module_has_a_kind_and_every_kind_names_a_module():
    on_disk = {str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py")}
    assert on_disk - set(kinds.MODULES) == set(), "add them to MODULES in tests/kinds.py"
    assert set(kinds.MODULES) - on_disk == set(), "gone from tests/: take them out of tests/kinds.py"
    assert set(kinds.MODULES.values()) <= set(kinds.KINDS)
    assert {k for patterns in kinds.EXCEPTIONS.values() for k in patterns.values()} <= set(kinds.KINDS)
    assert set(kinds.EXCEPTIONS) <= set(kinds.MODULES)


def test_a_tests_kind_is_its_modules_unless_an_exception_names_it(monkeypatch):
    monkeypatch.setattr(kinds, "MODULES", {"tests/x/test_y.py": kinds.SPARK})
    monkeypatch.setattr(kinds, "EXCEPTIONS", {"tests/x/test_y.py": {
        "*[nessie]": kinds.SERVER, "test_nessie_*": kinds.SERVER, "test_nessie_unreachable": kinds.UNIT,
        "test_[a]": kinds.UNIT}})
    assert kinds.kind_of("tests/x/test_y.py::test_merge[sqlite]") == kinds.SPARK
    assert kinds.kind_of("tests/x/test_y.py::test_merge[nessie]") == kinds.SERVER
    assert kinds.kind_of("tests/x/test_y.py::test_nessie_token") == kinds.SERVER
    assert kinds.kind_of("tests/x/test_y.py::test_nessie_unreachable") == kinds.UNIT  # the last match wins
    assert kinds.kind_of("tests/x/test_y.py::test_[a]") == kinds.UNIT  # brackets are literal
    assert kinds.kind_of("tests/x/test_y.py::test_a") == kinds.SPARK
    assert kinds.unused_exceptions(["tests/x/test_y.py::test_merge[nessie]", "tests/x/test_y.py::test_nessie_a"]) \
        == ["tests/x/test_y.py::test_nessie_unreachable", "tests/x/test_y.py::test_[a]"]
    with pytest.raises(kinds.UnknownModule):
        kinds.kind_of("tests/x/test_new.py::test_z")


class _Item:
    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid = nodeid
        self.stash = pytest.Stash()
        self.markers: list[str] = list(markers)

    def add_marker(self, marker: str) -> None:
        self.markers.append(marker)

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None


def test_collection_marks_each_test_with_its_kind_and_refuses_a_module_without_one(pytestconfig, monkeypatch):
    from tests.conftest import PROBLEM

    monkeypatch.delattr(pytestconfig, "workerinput", raising=False)  # as in one process: the problem raised here
    known = _Item("tests/engine/state/test_catalog.py::test_merge_makes_main_see_the_branch_snapshot[nessie]")
    unit = _Item("tests/engine/state/test_catalog.py::test_open_creates_main_and_is_idempotent[sqlite]")
    pytest_collection_modifyitems(pytestconfig, [known, unit])
    assert (known.markers, known.stash[KIND]) == (["server"], "server")
    assert (unit.markers, unit.stash[KIND]) == (["unit"], "unit")

    new = _Item("tests/engine/test_brand_new.py::test_it")
    with pytest.raises(pytest.UsageError) as refused:
        pytest_collection_modifyitems(pytestconfig, [new, known])
    assert "tests/engine/test_brand_new.py" in str(refused.value)
    assert "MODULES in tests/kinds.py" in str(refused.value)
    # in an xdist worker it is the controller that stops the run (from the ids): the test keeps every kind, so no
    # `-m` drops it first, and its setup fails with the same words
    assert new.markers == list(kinds.KINDS) and "MODULES in tests/kinds.py" in new.stash[PROBLEM]
    assert "MODULES in tests/kinds.py" in kinds.collection_problem([new.nodeid, known.nodeid])

    by_hand = _Item("tests/engine/state/test_catalog.py::test_deleting_main_is_refused[sqlite]", "unit")
    with pytest.raises(pytest.UsageError, match="marked by hand"):
        pytest_collection_modifyitems(pytestconfig, [by_hand])
    assert "not a marker" in by_hand.stash[PROBLEM]


def test_the_guard_knows_what_starts_a_jvm_or_a_server():
    assert what_starts(["/usr/lib/jvm/java-17/bin/java", "-version"]) == "a JVM"
    assert what_starts(["/venv/lib/pyspark/./bin/spark-submit", "--conf", "x"]) == "a JVM"
    assert what_starts(["bash", "/opt/spark/sbin/start-master.sh"]) == "a JVM"
    assert what_starts(["/venv/bin/moto_server", "-p", "5000"]) == "a server"
    assert what_starts([sys.executable, "-m", "moto.server", "-p", "5000"]) == "a server"
    assert what_starts([sys.executable, "-m", "ratui", "runs"]) is None
    assert what_starts(["tmux", "new-session", "-d", "java is in the text, not the program"]) is None


def test_a_unit_test_that_starts_spark_in_its_process_is_refused(tmp_path):
    """What a unit test that asks for Spark meets: PySpark's launcher is refused before any JVM starts (ratui's
    start on a thread of its own is refused the same way: the hook is process-wide)."""
    from ratui.engine.project.settings import load_settings
    from ratui.engine.spark import session

    assert GUARD.armed
    before = java_children()  # a JVM an earlier spark test of this worker started is not this test's
    (tmp_path / "ratui.yaml").write_text("namespace: demo\nspark:\n  master: local[1]\n")
    with pytest.raises(Exception) as refused:
        session.get_spark(load_settings(tmp_path))
    assert "a unit test may not start a JVM" in str(refused.value)
    (attempt,) = GUARD.take_refusals()
    assert attempt.startswith("started a JVM in the test's process") and "spark-submit" in attempt
    assert java_children() == before


def test_a_jvm_this_process_already_runs_is_out_of_a_unit_tests_reach():
    """An earlier spark test's session (here a stand-in) is set aside while a unit test runs, so asking for Spark
    means starting one, which is refused; it is put back after the test."""
    from tests.unit_guard import _put_runtime_back, _set_runtime_aside

    from ratui.engine.spark import session

    earlier = object()
    session.RUNTIME.session = earlier  # as if a spark test had started it in this worker
    saved = _set_runtime_aside()
    try:
        assert session.RUNTIME.session is None and not session.RUNTIME.is_started()
    finally:
        _put_runtime_back(saved)
    assert session.RUNTIME.session is earlier
    session.RUNTIME.session = None


def test_a_unit_test_that_monkeypatched_the_runtime_gives_an_earlier_spark_tests_session_back():
    """A unit test may monkeypatch ratui's Spark runtime (test_side_start.py does): its fixtures' teardown restores
    what they saw, the set-aside runtime, so the guard puts the earlier session back only after them (put back
    before, the undo emptied it, and every later spark test of that worker failed to start a second SparkContext).
    Driven through the conftest's own teardown hook, with the guard's state of this very test kept aside."""
    from _pytest.monkeypatch import MonkeyPatch

    from tests.conftest import pytest_runtest_teardown

    from ratui.engine.spark import session

    outer = dict(vars(GUARD)), dict(vars(session.RUNTIME))
    earlier = object()
    try:
        session.RUNTIME.session = earlier  # as if a spark test had started it in this worker
        GUARD.arm()
        fixture = MonkeyPatch()
        fixture.setattr(session.RUNTIME, "session", "the test's stand-in")  # saw None: the runtime set aside
        teardown = pytest_runtest_teardown(None)
        next(teardown)  # the hook's part before the fixtures' teardown
        fixture.undo()  # the fixtures' teardown
        with pytest.raises(StopIteration):
            teardown.send(None)  # the hook's part after them
        assert session.RUNTIME.session is earlier and not GUARD.armed
    finally:
        vars(GUARD).update(outer[0])
        vars(session.RUNTIME).clear()
        vars(session.RUNTIME).update(outer[1])


def test_a_unit_test_that_starts_a_server_is_refused(tmp_path):
    from tests.engine.s3_server import moto_server

    with pytest.raises(PermissionError, match="a unit test may not start a server"):
        with moto_server(tmp_path):
            pass
    (attempt,) = GUARD.take_refusals()
    assert "moto_server" in attempt or "moto.server" in attempt


def test_a_unit_tests_child_process_cannot_start_a_jvm(make_project):
    """`ratui run` in a child process: its JVM would start through JAVA_HOME, the tripwire, which records the call
    and refuses; the run fails and the guard reports the attempt."""
    root = make_project({"demo/pipelines/bronze/one/pipeline.sql": "SELECT 1 AS id\n"})
    before = java_children()  # a JVM an earlier spark test of this worker started is not this test's
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    refusals = GUARD.take_refusals()
    assert refusals and all(r.startswith("a child process started java") for r in refusals), refusals
    assert "org.apache.spark" in refusals[0]
    assert java_children() == before


def test_a_fixture_that_started_a_jvm_is_remembered_and_held_against_a_unit_test(tmp_path):
    """A fixture whose setup starts a JVM or a server (whatever the kind of the test that first asked for it) is
    remembered; a unit test that asks for it later fails, though it would start nothing itself."""
    from tests.engine.s3_server import moto_server

    with pytest.raises(PermissionError):  # refused here (a unit test), but remembered all the same
        with GUARD.setting_up("a_server_fixture"):
            with moto_server(tmp_path):
                pass
    assert len(GUARD.take_refusals()) == 1
    assert "a_server_fixture" in GUARD.starting_fixtures
    try:
        assert GUARD.held_fixtures(["tmp_path", "a_server_fixture"]) == ["a_server_fixture"]
        assert GUARD.held_fixtures(["tmp_path", "make_project"]) == []
    finally:
        GUARD.starting_fixtures.discard("a_server_fixture")
