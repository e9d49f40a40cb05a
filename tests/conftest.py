"""Shared fixtures: one SparkSession for the whole test run, and throwaway projects on disk."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tests.module_order import Recorder, longest_first, recorded

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"

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


def pytest_configure(config):
    if config.getoption("--record-module-times") and not hasattr(config, "workerinput"):
        _recorders.append(Recorder())


def pytest_collection_modifyitems(config, items):
    longest_first(items, recorded())


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
