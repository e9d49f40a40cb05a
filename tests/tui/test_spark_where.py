"""The status line says where Spark runs and with what: local and its cores, a cluster and its executors, a Spark
Connect server (spark/session.py describe(), through the controller)."""

from __future__ import annotations

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for


def test_the_status_line_shows_where_spark_runs(spark, tmp_path):
    app = make_app(copy_sample(tmp_path), spark_state=None)

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: "local[2], 2 cores" in screen_text(app), 30)
            status = screen_text(app).splitlines()[-2]
            assert "● Spark ready" in status and "no runs in flight" in status
            assert status.rstrip().endswith("local[2], 2 cores")

    run(go())


def status_line(app, where: str, size: tuple[int, int]) -> str:
    async def go():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            app.spark_where = where
            await pilot.pause()
            return screen_text(app).splitlines()[-2]

    return run(go())


def test_a_long_description_gives_way_to_the_runs_in_flight(tmp_path):
    root = copy_sample(tmp_path)
    where = "cluster spark://spark-master.example.com:7077, 12 executors, 96 cores"
    status = status_line(make_app(root, spark_state="ready"), where, (80, 24))
    # at 80 columns the runs and the shell's warm engine stay, said briefly, and where Spark runs is cut
    assert "● Spark ready" in status and "no runs" in status and "○ shell engine off" in status
    assert "cluster spark://" in status and status.rstrip().endswith("…")
    status = status_line(make_app(root, spark_state="ready"), where, (160, 24))
    assert flat(status).endswith(where)
    # not started: nothing is said about where it will run (the first paint stays as it was)
    status = status_line(make_app(root, spark_state="idle"), where, (160, 24))
    assert "cluster" not in status
