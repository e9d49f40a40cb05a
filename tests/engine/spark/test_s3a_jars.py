"""Spark's S3 connector is one list (ratui/engine/spark/s3a.py CONNECTOR), and everything that names its jars names
that list: ratui's own JVM, the commands the team pages give a user, and the servers the tests start (kind: unit; no
JVM: the servers themselves are started by tests/engine/spark/test_connect.py).

A Connect server set up from the docs once lacked the analytics accelerator Hadoop 3.5's S3A needs, while ratui's
own JVM and the tests' servers had it: every bronze run on that server failed. These tests fail when the lists part.
"""

from __future__ import annotations

import re
from pathlib import Path

from ratui.engine.spark import s3a, server_setup
from tests.docs.pages import shell_lines

REPO = Path(__file__).resolve().parents[3]
TEAM = REPO / "docs" / "team"


def test_the_declared_connector_is_what_hadoops_own_build_of_s3a_names():
    version = s3a.hadoop_version()
    assert version in s3a.CONNECTOR, f"pyspark's Hadoop {version} has no S3A jar list in s3a.CONNECTOR"
    pom = s3a.maven_repo() / f"org/apache/hadoop/hadoop-project/{version}/hadoop-project-{version}.pom"
    assert pom.is_file(), f"{pom} is missing: .ci/run fetches it"
    text = pom.read_text()
    named = {prop: re.search(rf"<{re.escape(prop)}>([^<]+)</", text).group(1) for prop in s3a.POM_VERSIONS}
    hadoop_aws, *others = s3a.CONNECTOR[version]
    assert (hadoop_aws.artifact, hadoop_aws.version) == ("hadoop-aws", version)
    assert [jar.version for jar in others] == [named[prop] for prop in s3a.POM_VERSIONS]


def test_ratuis_own_jvm_takes_every_jar_of_the_list():
    jars = s3a.local_jars()
    assert jars == [jar.path(s3a.maven_repo()) for jar in s3a.connector_jars()] and len(jars) == 3
    conf = s3a.launch_conf({})
    assert conf["spark.jars"].split(",") == [str(j) for j in jars]


def test_a_repository_without_one_of_the_jars_is_no_connector(tmp_path):
    """All of them or none: with one missing ratui asks Spark to fetch the connector rather than start without it."""
    for jar in s3a.connector_jars()[:-1]:
        path = jar.path(tmp_path)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    assert s3a.local_jars(repo=tmp_path) is None


def test_the_docs_fetch_and_give_a_server_every_jar_of_the_list():
    """What the team pages tell a user to fetch and to give a Connect server (`--jars`) is the whole list."""
    wanted = {jar.coordinates for jar in s3a.connector_jars()}
    fetched = set(re.findall(r"-Dartifact=(\S+)", (TEAM / "s3.md").read_text()))
    assert wanted <= fetched, f"docs/team/s3.md does not fetch {sorted(wanted - fetched)}"
    spark_page = (TEAM / "spark.md").read_text()
    given = set(re.findall(r"/([\w.-]+\.jar)\b", spark_page.split("start-connect-server.sh", 1)[0]
                           .rsplit("```sh", 1)[-1]))
    assert {jar.file_name for jar in s3a.connector_jars()} <= given, "the Connect server's --jars lack a jar"
    assert "--jars $JARS" in spark_page


def test_every_command_of_the_team_pages_is_one_the_code_writes_and_the_tests_run():
    """A shell block of docs/team/*.md outside a generated block would be a command no test runs: there is none. The
    generated ones come from server_setup.py and nessie_setup.py, whose scripts tests/servers.py and
    tests/nessie_server.py run."""
    for page in sorted(TEAM.glob("*.md")):
        text = re.sub(r"<!-- generated: ([\w-]+).*?<!-- end: \1 -->", "", page.read_text(), flags=re.DOTALL)
        assert shell_lines(text) == [], f"{page.name} has commands no test runs: {shell_lines(text)}"
    servers = (REPO / "tests" / "servers.py").read_text()
    for script in ("connect_script(", "master_script(", "worker_script(", "loopback_exports("):
        assert f"server_setup.{script}" in servers, script
    assert "nessie_setup.command(" in (REPO / "tests" / "nessie_server.py").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "docs/team/*.md" in ci and "/^mvn /" in ci  # CI fetches the jars by the pages' own lines


def test_the_connect_script_gives_the_server_the_jars_and_nothing_more():
    script = server_setup.connect_script(spark_home="/spark", port=4242, repo="/m2", pools="/p/fair.xml")
    jars = [line.split("=", 1)[1].replace("$JARS,", "") for line in script.splitlines() if line.startswith("JARS=")]
    assert jars == [str(jar.path("/m2")) for jar in s3a.connector_jars()]
    assert script.count("--jars") == 1 and "--packages" not in script
    assert "spark.connect.grpc.binding.port=4242" in script and "spark.ui.enabled=false" in script
    assert "export SPARK_LOCAL_IP=127.0.0.1" in script
    for key, value in server_setup.CONNECT_SERVER_CONF.items():
        assert f"--conf {key}={value}" in script


def test_a_missing_class_names_the_jar_that_carries_it():
    assert s3a.jar_of("software/amazon/s3/analyticsaccelerator/request/ObjectClient").artifact == \
        "analyticsaccelerator-s3"
    assert s3a.jar_of("software.amazon.awssdk.core.SdkBytes").artifact == "bundle"
    assert s3a.jar_of("org.apache.hadoop.fs.s3a.S3AFileSystem").artifact == "hadoop-aws"
    assert s3a.jar_of("org.apache.hadoop.fs.FileSystem") is None


def _connect_failure(status, details: str) -> Exception:
    """What PySpark's Connect client raises for a call a server ended with a bare gRPC status (no Spark error
    info: a JVM Error such as NoClassDefFoundError escapes Spark's own handling): a real gRPC call to a real
    in-process gRPC server that ends the call so, wrapped the way pyspark's client wraps it."""
    from concurrent import futures

    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    def execute(_request, context):
        context.abort(status, details)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "spark.connect.SparkConnectService", {"ExecutePlan": grpc.unary_stream_rpc_method_handler(execute)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_stream("/spark.connect.SparkConnectService/ExecutePlan",
                                        request_serializer=bytes, response_deserializer=bytes)
            try:
                list(call(b"", timeout=30))
            except grpc.RpcError as error:
                return SparkConnectGrpcException(message=str(error), grpc_status_code=error.code())
    finally:
        server.stop(0)
    raise AssertionError("the call did not fail")


def test_a_connect_server_lacking_a_class_of_s3a_is_told_by_the_class_and_its_jar_not_as_a_bug():
    """A Connect server without the analytics accelerator ends the call with gRPC's UNKNOWN and the class's internal
    name alone: that is RAT-S3-005 naming the class, the jar and the fix, not RAT-RUN-002 ("a bug in ratui")."""
    import grpc

    from ratui.engine.spark import errors as spark_errors

    failure = _connect_failure(grpc.StatusCode.UNKNOWN, "software/amazon/s3/analyticsaccelerator/request/ObjectClient")
    error = spark_errors.spark_side_failure(failure)
    assert error is not None and error.code == "RAT-S3-005", error
    assert "software.amazon.s3.analyticsaccelerator.request.ObjectClient" in error.message
    assert "analyticsaccelerator-s3-1.3.1.jar" in error.message
    assert "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1" in (error.hint or "")
    # a class no jar of the connector carries: RAT-SPK-004, naming it
    other = spark_errors.spark_side_failure(_connect_failure(grpc.StatusCode.UNKNOWN, "org/example/NoSuchPlugin"))
    assert other is not None and other.code == "RAT-SPK-004" and "org.example.NoSuchPlugin" in other.message
    # an UNKNOWN that is not a class name is no missing class
    said = spark_errors.spark_side_failure(_connect_failure(grpc.StatusCode.UNKNOWN, "something else went wrong"))
    assert said is None or said.code != "RAT-SPK-004"


def test_a_missing_class_a_spark_setting_of_ratui_yaml_names_points_at_that_line(tmp_path):
    """A class Spark cannot load that ratui.yaml names (a serializer, a catalog plugin): RAT-SPK-004 at the setting's
    line, with the setting named in the hint."""
    import grpc

    from ratui.engine.project.settings import load_settings
    from ratui.engine.spark import errors as spark_errors

    (tmp_path / "ratui.yaml").write_text("namespace: shop\nspark:\n  remote: sc://localhost:15002\n  config:\n"
                                         "    spark.sql.shuffle.partitions: 2\n"
                                         "    spark.serializer: com.example.nosuch.Serializer\n")
    settings = load_settings(tmp_path)
    failure = _connect_failure(grpc.StatusCode.UNKNOWN, "com/example/nosuch/Serializer")
    error = spark_errors.at_class_setting(spark_errors.spark_side_failure(failure), settings)
    assert (error.code, error.file, error.line) == ("RAT-SPK-004", str(tmp_path / "ratui.yaml"), 6), error
    assert "spark.serializer in ratui.yaml names com.example.nosuch.Serializer" in error.hint
