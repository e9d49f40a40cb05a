"""Another engine reads ratui's tables through Nessie (issue 30): ratui runs a pipeline on a real Nessie server, main
and a dev branch get different rows, and then a separate process, a plain PySpark session with Iceberg's own Spark
runtime and Iceberg's NessieCatalog (nothing of ratui's), reads the table on each ref and finds ratui's rows.

That engine is another Spark than ratui's: Iceberg's newest runtime (1.12.0) is built for Spark 4.1, and Spark 4.3's
connector API refuses its catalog classes (IncompatibleClassChangeError: SparkView implements View, a class there),
so the reader runs PySpark 4.1 from a folder of its own (`pip install --target`; `.ci/run` installs it,
RATUI_READER_PYSPARK points at another). The runtime jar comes from Maven Central (`.ci/run` fetches it with
`mvn dependency:get`; it bundles org.apache.iceberg.nessie.NessieCatalog and Nessie's client); RATUI_ICEBERG_SPARK_JAR
points at another one. The reader's JVM writes to a log file beside the Nessie log, never to the terminal.

Run as a script (`python THIS_FILE JAR URI WAREHOUSE QUERIES_JSON OUT_JSON`), this file is that reader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

ICEBERG = "1.12.0"
RUNTIME = "iceberg-spark-runtime-4.1_2.13"  # Iceberg's runtime for Spark 4.1, Scala 2.13: the reader's Spark
JAR_ENV = "RATUI_ICEBERG_SPARK_JAR"
READER_PYSPARK = "4.1.4"
READER_ENV = "RATUI_READER_PYSPARK"
READ_TIMEOUT = 300

KEY = "shop.bronze.items"
MAIN_ROWS = [(1, "apple", Decimal("1.50"), date(2024, 1, 2)), (2, "pear", Decimal("0.75"), date(2024, 1, 3))]
DEV_ROWS = [(1, "apple", Decimal("1.60"), date(2024, 2, 1)), (3, "plum", Decimal("2.05"), date(2024, 2, 2)),
            (4, "fig", Decimal("3.10"), date(2024, 2, 3))]


def pipeline_sql(rows: list[tuple]) -> str:
    values = ",\n  ".join(f"(CAST({i} AS BIGINT), '{name}', CAST({price} AS DECIMAL(10,2)), DATE'{day.isoformat()}')"
                          for i, name, price, day in rows)
    return f"SELECT * FROM VALUES\n  {values}\nAS t(id, name, price, sold_on)\n"


def as_json(rows: list[tuple]) -> list[list]:
    """Rows as the reader sends them back: decimals and dates as text."""
    return [[v.isoformat() if isinstance(v, date) else str(v) if isinstance(v, Decimal) else v for v in row]
            for row in rows]


def runtime_jar() -> Path | None:
    if os.environ.get(JAR_ENV):
        return Path(os.environ[JAR_ENV])
    m2 = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    jar = m2 / "org/apache/iceberg" / RUNTIME / ICEBERG / f"{RUNTIME}-{ICEBERG}.jar"
    return jar if jar.is_file() else None


def reader_pyspark() -> Path:
    """The folder holding the reader's PySpark (a Spark the runtime jar is built for)."""
    default = Path.home() / ".cache" / "ratui-reader" / f"pyspark-{READER_PYSPARK}"
    return Path(os.environ.get(READER_ENV) or default)


def missing_parts() -> str | None:
    """What the reader lacks, as the command that fetches it; None when it has everything."""
    jar = runtime_jar()
    if jar is None or not jar.is_file():
        return (f"Iceberg's Spark runtime jar is not at {jar or '~/.m2'}: run `mvn -q dependency:get "
                f"-Dartifact=org.apache.iceberg:{RUNTIME}:{ICEBERG} -Dtransitive=false` or set {JAR_ENV}")
    folder = reader_pyspark()
    if not (folder / f"pyspark-{READER_PYSPARK}.dist-info").is_dir():
        return (f"the reader's PySpark {READER_PYSPARK} is not in {folder}: run `python -m pip install --target "
                f"{folder} pyspark=={READER_PYSPARK}` or set {READER_ENV}")
    return None


# ------------------------------------------------------------------------------------------------ the other engine

def spark_settings(jar: str, uri: str, warehouse: str) -> dict[str, str]:
    """What another engine sets to read ratui's tables: Iceberg's SparkCatalog over Iceberg's NessieCatalog, on
    Nessie's API v2 URL, default ref main (a table on another ref is `name@ref`)."""
    return {
        "spark.jars": jar,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",  # CALL ...
        "spark.sql.catalog.nessie": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.nessie.catalog-impl": "org.apache.iceberg.nessie.NessieCatalog",
        "spark.sql.catalog.nessie.uri": uri,
        "spark.sql.catalog.nessie.ref": "main",
        "spark.sql.catalog.nessie.warehouse": warehouse,
    }


def read(jar: str, uri: str, warehouse: str, queries: dict[str, str], out: str) -> None:
    """The reader process: each query's rows (or the error that stopped it) as JSON in `out`. A query named
    "refused:..." is expected to fail: its error message is its result."""
    import pyspark
    from pyspark.sql import SparkSession

    assert pyspark.__version__ == READER_PYSPARK, f"the reader runs PySpark {pyspark.__version__}"

    builder = (SparkSession.builder.master("local[1]").appName("iceberg-nessie-reader")
               .config("spark.driver.memory", "512m").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1"))
    for name, value in spark_settings(jar, uri, warehouse).items():
        builder = builder.config(name, value)
    result: dict[str, object] = {}
    spark = builder.getOrCreate()
    try:
        for name, sql in queries.items():
            if name.startswith("refused:"):
                try:
                    spark.sql(sql).collect()
                    result[name] = "not refused"
                except Exception as e:  # a Py4JJavaError's first line names the call; the next, Java's exception
                    lines = [line for line in str(e).splitlines() if "Exception" in line] or [type(e).__name__]
                    result[name] = lines[0].strip(": ")
                continue
            rows = spark.sql(sql).collect()
            result[name] = as_json([tuple(row) for row in rows])
    except Exception as e:  # the test shows it; the JVM's own output is in the log
        result["error"] = f"{type(e).__name__}: {e}"[:600]
    finally:
        Path(out).write_text(json.dumps(result))
        spark.stop()


# ------------------------------------------------------------------------------------------------ the test

def other_engine_reads(jar: Path, uri: str, warehouse: Path, queries: dict[str, str], log_dir: Path) -> dict:
    from tests.processes import stop_group  # here: the reader runs this file as a script, without the repo's path

    out, log_path = log_dir / "reader.json", log_dir / "reader-jvm.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYTHONPATH"] = str(reader_pyspark())  # its PySpark before the one installed beside ratui
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, __file__, str(jar), uri, warehouse.as_uri(), json.dumps(queries),
                                 str(out)], stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        try:
            proc.wait(timeout=READ_TIMEOUT)
        except subprocess.TimeoutExpired:
            stop_group(proc, 10)  # the reader and its JVM
            pytest.fail(f"the Spark reader did not finish within {READ_TIMEOUT} s; JVM log: {log_path}")
    result = json.loads(out.read_text()) if out.is_file() else {}
    assert proc.returncode == 0 and "error" not in result, (
        f"the Spark reader failed (exit {proc.returncode}): {result.get('error', 'no result')}; JVM log: {log_path}")
    return result


def test_spark_with_icebergs_nessie_catalog_reads_ratuis_tables_on_main_and_a_dev_branch(
        tmp_path: Path, spark, tmp_path_factory: pytest.TempPathFactory) -> None:
    from ratui.engine.ops import branches
    from ratui.engine.project.settings import load_settings
    from ratui.engine.facade.engine import Engine
    from ratui.engine.state.project_state import ProjectState
    from tests.conftest import TEST_SETTINGS
    from tests.nessie_server import nessie_server

    missing = missing_parts()
    if missing:
        pytest.fail(missing)
    jar = runtime_jar()
    assert jar is not None
    logs = tmp_path_factory.mktemp("nessie")
    root = tmp_path / "project"
    sql = root / "shop" / "pipelines" / "bronze" / "items" / "pipeline.sql"
    sql.parent.mkdir(parents=True)
    with nessie_server(logs) as uri:
        (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="shop") +
                                         f"catalog:\n  type: nessie\n  uri: {uri}\n")
        engine = Engine(ProjectState(load_settings(root)))
        sql.write_text(pipeline_sql(MAIN_ROWS))
        (run,) = engine.run(engine.compile().select([KEY]))
        assert run.status == "success", run.error
        branches.create(engine.state, "dev", from_ref="main")
        sql.write_text(pipeline_sql(DEV_ROWS))
        (run,) = engine.run(engine.compile().select([KEY]), ref="dev")
        assert run.status == "success", run.error
        engine.close()

        found = other_engine_reads(jar, uri, root, {
            "main": "SELECT * FROM nessie.shop.bronze.items ORDER BY id",
            "dev": "SELECT * FROM nessie.shop.bronze.`items@dev` ORDER BY id",
            "columns": "DESCRIBE TABLE nessie.shop.bronze.items",
            "gc": "SHOW TBLPROPERTIES nessie.shop.bronze.items ('gc.enabled')",
            # dev still uses main's first files: another engine must not expire snapshots on one branch
            "refused:expire": "CALL nessie.system.expire_snapshots(table => 'shop.bronze.items', "
                              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)",
        }, logs)
    assert found["main"] == as_json(MAIN_ROWS)
    assert found["dev"] == as_json(DEV_ROWS)
    assert [row[:2] for row in found["columns"][:4]] == [
        ["id", "bigint"], ["name", "string"], ["price", "decimal(10,2)"], ["sold_on", "date"]]
    assert found["gc"] == [["gc.enabled", "false"]]
    assert "GC is disabled" in found["refused:expire"], found["refused:expire"]


if __name__ == "__main__":
    read(*sys.argv[1:4], json.loads(sys.argv[4]), sys.argv[5])
