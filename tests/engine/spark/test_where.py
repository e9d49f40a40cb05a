"""How Spark is reached, without a server: addresses, what a user is shown, what counts as a cancellation, and the
coded error when nothing listens where ratui.yaml says Spark is (the server-backed tests are test_cluster.py and
test_connect.py)."""

from __future__ import annotations

import socket

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.spark import session as spark_mod
from ratui.engine.spark.errors import error_message


def test_addresses_and_what_a_user_is_shown():
    assert spark_mod._remote_address("sc://10.1.2.3:15010/;token=abc") == ("10.1.2.3", 15010)
    assert spark_mod._remote_address("sc://spark-host") == ("spark-host", 15002)
    assert spark_mod.display_url("sc://10.1.2.3:15010/;token=abc;user_id=x") == "sc://10.1.2.3:15010"
    assert spark_mod._master_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert spark_mod._master_addresses("spark://a") == [("a", 7077)]
    assert spark_mod._is_loopback("127.0.0.1") and spark_mod._is_loopback("localhost")
    assert not spark_mod._is_loopback("192.0.2.1")


def test_connect_errors_read_like_classic_ones():
    text = ("(org.apache.spark.SparkSQLException) [OPERATION_CANCELED] Operation has been canceled. SQLSTATE: HY008\n\n"
            "JVM stacktrace:\norg.apache.spark.SparkSQLException\n\tat org.apache.spark.sql.connect.X")
    assert error_message(Exception(text)) == "[OPERATION_CANCELED] Operation has been canceled. SQLSTATE: HY008"
    assert spark_mod.is_cancellation(Exception(text))
    classic = "Job 3 cancelled part of cancelled job group 2611231200aa [SPARK_JOB_CANCELLED]"
    assert spark_mod.is_cancellation(Exception(classic))
    assert not spark_mod.is_cancellation(Exception("[DIVIDE_BY_ZERO] Division by zero."))
    assert error_message(Exception("[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.; line 1 pos 14")) == \
        "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found."
    gone = ('<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n\tdetails = '
            '"failed to connect to all addresses; last error: Connection refused"\n\tdebug_error_string = "x"\n>')
    assert error_message(Exception(gone)) == ("Spark Connect server unreachable (UNAVAILABLE): "
                                              "failed to connect to all addresses; last error: Connection refused")
    assert spark_mod.is_unreachable(Exception(gone)) and not spark_mod.is_cancellation(Exception(gone))
    assert not spark_mod.is_unreachable(Exception("[DIVIDE_BY_ZERO] Division by zero."))


def test_nothing_listening_is_a_coded_error_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(RatuiError) as caught:
            spark_mod._check_reachable("127.0.0.1", port, "Spark master spark://127.0.0.1:1", "spark.master")
    assert caught.value.code == spark_mod.UNREACHABLE_CODE
    assert "not reachable" in caught.value.message and "spark.master" in (caught.value.hint or "")


def test_the_local_session_says_where_it_runs(spark):
    assert not spark_mod.is_remote()
    assert spark_mod.describe() == "local[2], 2 cores"
