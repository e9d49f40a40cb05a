"""Shared fixtures: one SparkSession for the whole test run, and throwaway projects on disk."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests import kinds
from tests.module_order import Recorder, longest_first, recorded
from tests.unit_guard import GUARD

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"

# Property tests (hypothesis): each run draws new examples (not derandomized: CI explores more cases over time), a
# failing example is kept in a database in a known folder (the checkout's .hypothesis/examples, whatever the current
# folder), so the next local run tries it first, and printed as a @reproduce_failure blob, so a failure that only
# CI met can be replayed from its log. Each test sets its number of examples by what one costs.
hypothesis_settings.register_profile(
    "ratui", database=DirectoryBasedExampleDatabase(str(REPO / ".hypothesis" / "examples")), print_blob=True,
    deadline=None)
hypothesis_settings.load_profile("ratui")

TEST_SETTINGS = """\
namespace: {ns}
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
"""


def pytest_addoption(parser):
    parser.addoption("--record-module-times", action="store_true",
                     help="write each test module's summed duration to tests/module_times.json (tests/module_order.py)")


_recorders: list[Recorder] = []  # one, on the controller, with --record-module-times


KIND = pytest.StashKey[str]()
KIND_MEANINGS = {
    kinds.UNIT: "no JVM, no server (enforced: tests/unit_guard.py); `pytest -m unit` is the short loop",
    kinds.SPARK: "a local Spark: this process's JVM, or a ratui subprocess's",
    kinds.SERVER: "a server beside it: Nessie, moto's S3, a standalone Spark cluster, Spark Connect",
}


def pytest_configure(config):
    # ratui commands run in a process of their own here: a warm engine per throwaway project would leave a JVM per
    # project for engine.idle_minutes (tests/cli/test_warm_engine.py turns it on for its own projects and stops them)
    import os

    os.environ["RATUI_WARM"] = "0"
    for kind, meaning in KIND_MEANINGS.items():
        config.addinivalue_line("markers", f"{kind}: {meaning} (every test has one, from tests/kinds.py)")
    if config.getoption("--record-module-times") and not hasattr(config, "workerinput"):
        _recorders.append(Recorder())
    import tempfile

    GUARD.install(Path(tempfile.mkdtemp(prefix="ratui-tests-")))


def pytest_unconfigure(config):
    if GUARD.tripwire is not None:
        shutil.rmtree(GUARD.tripwire.parent, ignore_errors=True)


PROBLEM = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the kinds
def pytest_collection_modifyitems(config, items):
    """Each test marked with its kind from tests/kinds.py. What is wrong with the table stops the run: here, or,
    in an xdist worker (whose errors the controller does not print), at the controller from the collected ids
    (pytest_xdist_node_collection_finished); a test of a module without a kind gets every kind's marker, so that
    no `-m` leaves it out before the controller sees it, and a test marked by hand fails at its setup."""
    marked = []
    for item in items:
        try:
            kind = kinds.kind_of(item.nodeid)
        except kinds.UnknownModule as unknown:
            item.stash[PROBLEM] = kinds.missing_message([str(unknown)])
            for name in kinds.KINDS:
                item.add_marker(name)
            continue
        if any(item.get_closest_marker(name) is not None for name in kinds.KINDS):
            marked.append(item.nodeid)
            item.stash[PROBLEM] = f"{item.nodeid}: a test's kind comes from tests/kinds.py alone, not a marker"
        item.stash[KIND] = kind
        item.add_marker(kind)
    if not hasattr(config, "workerinput"):
        problem = kinds.collection_problem([item.nodeid for item in items], marked)
        if problem:
            raise pytest.UsageError(problem)
    longest_first(items, recorded())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    problem = kinds.collection_problem(list(ids))
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    with GUARD.setting_up(fixturedef.argname):  # a fixture that starts a JVM or a server is remembered
        return (yield)


def _refused(item, phase: str) -> None:
    refused = GUARD.take_refusals()
    if refused:
        pytest.fail(f"{item.nodeid} is a unit test (tests/kinds.py) but in its {phase}:\n  "
                    + "\n  ".join(refused) + "\nmark its module (or the test, in EXCEPTIONS) spark or server",
                    pytrace=False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if PROBLEM in item.stash:
        pytest.fail(item.stash[PROBLEM], pytrace=False)
    unit = item.stash.get(KIND, None) == kinds.UNIT
    if unit:
        GUARD.take_refusals()
        GUARD.arm()
    try:
        return (yield)
    finally:
        if unit:
            _refused(item, "setup")
            held = GUARD.held_fixtures(item.fixturenames)
            if held:  # set up by an earlier test of another kind: this one would use its JVM or server
                pytest.fail(f"{item.nodeid} is a unit test (tests/kinds.py) but uses {', '.join(held)}, whose "
                            "setup started a JVM or a server", pytrace=False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    unit = item.stash.get(KIND, None) == kinds.UNIT
    try:
        return (yield)
    finally:
        if unit:
            _refused(item, "call")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    GUARD.disarm()  # a fixture's teardown may stop what it started
    try:
        return (yield)
    finally:
        GUARD.put_runtime_back()  # after the fixtures: a monkeypatch of the runtime is undone first


def pytest_runtest_logreport(report):
    for recorder in _recorders:  # on the controller each worker's reports arrive here too
        recorder.add(report.nodeid, report.duration)


def pytest_sessionfinish(session, exitstatus):
    for recorder in _recorders:
        if exitstatus == 0:  # a partial or failed run's times would misorder the next
            recorder.write()


@pytest.fixture(scope="session", autouse=True)
def user_config_home(tmp_path_factory):
    """The console keeps user settings (theme) in the platform's config folder: a throwaway one for the tests,
    the CLI processes they start included, never the real user's."""
    import os

    folder = tmp_path_factory.mktemp("xdg-config")
    old = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = old


@pytest.fixture(scope="session", autouse=True)
def quick_jit():
    """Every JVM the test process starts in local mode (the shared session, data servers) compiles with Java's
    quick compiler only, as ratui's own one-shot runs over small inputs do (spark/jit.py): the suite's data is tiny,
    and on 2 cores the optimising compiler was about half of each JVM's CPU. tests/engine/spark/test_jit.py sets
    the choice back to none for its own tests. The servers the tests start get the quick compiler from
    tests/servers.py (QUICK_JIT)."""
    from ratui.engine.spark import jit

    jit.expect_small_work("the test suite's small data")
    yield
    jit.expect_small_work(None)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The process's SparkSession, started once with small-data settings (every Engine shares it)."""
    from ratui.engine.spark import session as spark_mod
    from ratui.engine.project.settings import load_settings

    from ratui.engine.spark import s3a

    home = tmp_path_factory.mktemp("spark-home")
    # with Hadoop's S3A connector (.ci/run fetches it into ~/.m2): tables on S3 in-process, as a project that names
    # an s3:// warehouse gets it from ratui; each run's session carries its buckets' settings
    jars = s3a.local_jars()
    assert jars is not None, f"no hadoop-aws {s3a.hadoop_version()} and AWS SDK bundle in ~/.m2: run .ci/run"
    connector = "".join(f"    {k}: {v}\n" for k, v in s3a.launch_conf({"spark.jars": ",".join(map(str, jars))}).items())
    (home / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="test") + f"    spark.jars: {','.join(map(str, jars))}\n"
                                     + connector)
    return spark_mod.get_spark(load_settings(home))


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))


@pytest.fixture
def make_project(tmp_path):
    """make_project({"demo/pipelines/bronze/x/pipeline.sql": "..."}, ns="demo") -> project root."""

    def make(files: dict[str, str | bytes], ns: str = "demo", name: str = "proj") -> Path:
        root = tmp_path / name
        root.mkdir(parents=True, exist_ok=True)
        if not (root / "ratui.yaml").exists():
            (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns=ns))
        write_files(root, files)
        return root

    return make


@pytest.fixture
def sample_copy(tmp_path) -> Path:
    """A fresh copy of the bundled sample project (without any state a local run left in the checkout)."""
    dest = tmp_path / "sample"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def nessie_uri(tmp_path_factory):
    """A real Nessie server for the module that asks for it (tests/nessie_server.py): its API v2 base URL. Tests
    that need it empty call tests.nessie_server.reset(uri)."""
    from tests.nessie_server import nessie_server

    with nessie_server(tmp_path_factory.mktemp("nessie")) as uri:
        yield uri


@pytest.fixture(scope="session")
def nessie_sample(spark, tmp_path_factory):
    """The bundled sample run once, through the Engine in this process, on a Nessie server of its own (`catalog:
    {type: nessie}` in its ratui.yaml): {"uri": Nessie's API v2 URL, "root": the project, "results": the run's}.
    tests/engine/run/test_nessie_sample.py checks what the run gave; tests/tui/test_nessie_screens.py goes on with
    it (a full refresh of one table, then that table rolled back to this run's commit: no table's rows change, so
    the two may run in either order)."""
    from ratui.engine.facade.engine import Engine
    from tests.nessie_server import nessie_server

    with nessie_server(tmp_path_factory.mktemp("nessie-sample")) as uri:
        root = tmp_path_factory.mktemp("nessie-sample-project") / "sample"
        shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed",
                                                                      "__pycache__"))
        with open(root / "ratui.yaml", "a") as f:
            f.write(f"catalog:\n  type: nessie\n  uri: {uri}\n")
        engine = Engine.open(root)
        try:
            results = engine.run(engine.compile().select([]))
        finally:
            engine.close()
        yield {"uri": uri, "root": root, "results": results}
