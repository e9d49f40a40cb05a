"""How Spark is reached, without a server: addresses, what a user is shown, what counts as a cancellation, and the
coded error when nothing listens where ratui.yaml says Spark is (the server-backed tests are test_cluster.py and
test_connect.py)."""

from __future__ import annotations

import socket

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.spark import addresses, session as spark_mod
from ratui.engine.spark import errors as spark_errors
from ratui.engine.spark.errors import error_message


def test_addresses_and_what_a_user_is_shown():
    assert addresses.remote_address("sc://10.1.2.3:15010/;token=abc") == ("10.1.2.3", 15010)
    assert addresses.remote_address("sc://spark-host") == ("spark-host", 15002)
    assert addresses.display_url("sc://10.1.2.3:15010/;token=abc;user_id=x") == "sc://10.1.2.3:15010"
    assert addresses.master_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert addresses.master_addresses("spark://a") == [("a", 7077)]
    assert addresses.is_loopback("127.0.0.1") and addresses.is_loopback("localhost")
    assert not addresses.is_loopback("192.0.2.1")


def test_connect_errors_read_like_classic_ones():
    text = ("(org.apache.spark.SparkSQLException) [OPERATION_CANCELED] Operation has been canceled. SQLSTATE: HY008\n\n"
            "JVM stacktrace:\norg.apache.spark.SparkSQLException\n\tat org.apache.spark.sql.connect.X")
    assert error_message(Exception(text)) == "[OPERATION_CANCELED] Operation has been canceled. SQLSTATE: HY008"
    assert spark_errors.is_cancellation(Exception(text))
    classic = "Job 3 cancelled part of cancelled job group 2611231200aa [SPARK_JOB_CANCELLED]"
    assert spark_errors.is_cancellation(Exception(classic))
    assert not spark_errors.is_cancellation(Exception("[DIVIDE_BY_ZERO] Division by zero."))
    assert error_message(Exception("[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.; line 1 pos 14")) == \
        "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found."
    gone = ('<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n\tdetails = '
            '"failed to connect to all addresses; last error: Connection refused"\n\tdebug_error_string = "x"\n>')
    assert error_message(Exception(gone)) == ("Spark Connect server unreachable (UNAVAILABLE): "
                                              "failed to connect to all addresses; last error: Connection refused")
    assert spark_errors.is_unreachable(Exception(gone)) and not spark_errors.is_cancellation(Exception(gone))
    assert not spark_errors.is_unreachable(Exception("[DIVIDE_BY_ZERO] Division by zero."))


def test_nothing_listening_is_a_coded_error_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(RatuiError) as caught:
            addresses.check_reachable("127.0.0.1", port, "Spark master spark://127.0.0.1:1", "spark.master")
    assert caught.value.code == spark_errors.UNREACHABLE_CODE
    assert "not reachable" in caught.value.message and "spark.master" in (caught.value.hint or "")


def test_the_local_session_says_where_it_runs(spark):
    assert not spark_mod.is_remote()
    assert spark_mod.describe() == "local[2], 2 cores"


def test_a_jvm_that_did_not_start_is_reported_with_its_reason_not_a_warning_before_it(tmp_path):
    """The JVM's output holds a class-archive warning first and the exception that stopped it after: the error
    names the exception (a warning on stderr is never reported as the reason)."""
    from ratui.engine.project.settings import Settings

    out = tmp_path / "jvm.out"
    out.write_text(
        "ratui: starting Spark's JVM (local[*])\n"
        "[0.112s][warning][cds,dynamic] Unable to use shared archive. The top archive failed to load: /x.jsa\n"
        "WARNING: Using incubator modules: jdk.incubator.vector\n"
        'Exception in thread "main" org.apache.spark.SparkException: Remote cannot be specified with master and/or '
        "deploy mode.\n"
        "\tat org.apache.spark.deploy.SparkSubmitArguments.error(SparkSubmitArguments.scala:670)\n")
    error = spark_errors.jvm_not_started(Settings(root=tmp_path, namespace="demo"),
                                       RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited"), out, 0)
    assert error.code == "RAT-SPK-002"
    assert error.message == ("Spark's JVM did not start: org.apache.spark.SparkException: Remote cannot be specified "
                             "with master and/or deploy mode.")
    out.write_text("Unrecognized VM option 'BytecodeVerificationRemote'\n"
                   "Error: Could not create the Java Virtual Machine.\n"
                   "Error: A fatal exception has occurred. Program will exit.\n")
    error = spark_errors.jvm_not_started(Settings(root=tmp_path, namespace="demo"),
                                       RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited"), out, 0)
    assert error.message == "Spark's JVM did not start: Unrecognized VM option 'BytecodeVerificationRemote'"


def test_a_jvm_exception_through_py4j_is_named_by_its_message_and_root_cause():
    """Py4J's "An error occurred while calling o91.collectToPython." says nothing to a person: the message is the
    Java exception's own, with its root cause, or where to look when Spark gave none."""

    class Py4JJavaError(Exception):
        pass

    text = ("An error occurred while calling o79.collectToPython.\n"
            ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
            "file:///p/data/a.parquet.  SQLSTATE: KD001\n"
            "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(Errors.scala:1)\n"
            "Caused by: org.apache.spark.SparkException: Job aborted\n"
            "Caused by: java.lang.RuntimeException: file:/p/data/a.parquet is not a Parquet file. "
            "Expected magic number at tail, but found [97, 103, 101, 10]\n"
            "\tat org.apache.parquet.hadoop.ParquetFileReader.readFooter(ParquetFileReader.java:1)\n")
    message = error_message(Py4JJavaError(text))
    assert message.startswith("[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///p/data/a.parquet")
    assert message.endswith("(cause: file:/p/data/a.parquet is not a Parquet file. Expected magic number at tail, "
                            "but found [97, 103, 101, 10])")
    assert "o79" not in message
    bare = error_message(Py4JJavaError("An error occurred while calling o12.sql.\n"))
    assert bare == "Spark gave no reason here: see .ratui/logs/spark.log (the newest ERROR lines)"


def test_one_reading_of_positions_and_of_cancellations():
    """Spark's positions ("(line 2, pos 7)" from the parser, "line 2 pos 7" from the analyzer) are read in one
    place; a cancellation is known by PySpark 4's error condition where the error has one, by its words otherwise."""
    assert spark_errors.error_position("[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'. (line 2, pos 7)") == (2, 7)
    assert spark_errors.error_position("cannot resolve `y`; line 3 pos 11") == (3, 11)
    assert spark_errors.error_position("no position here") == (None, None)

    class Conditioned(Exception):
        def __init__(self, condition):
            super().__init__("the job stopped")
            self.condition = condition

        def getCondition(self):  # noqa: N802 - PySpark's name
            return self.condition

    assert spark_errors.is_cancellation(Conditioned("SPARK_JOB_CANCELLED"))
    assert spark_errors.is_cancellation(Conditioned("OPERATION_CANCELED"))
    assert not spark_errors.is_cancellation(Conditioned("TABLE_OR_VIEW_NOT_FOUND"))
    assert spark_errors.is_cancellation(RuntimeError("Job 3 cancelled because SparkContext was shut down: cancelled "
                                                  "job group run-1"))  # a Py4J error: its words
