"""The follower's picture of the project tree: every file and folder under each namespace's pipelines/ and
ratui.yaml, by size and modification time; hidden names, __pycache__ and editors' droppings left out, so a swap
file coming and going is not a change and a saved template is. And its baseline of the state database: what start()
found, so a commit right after it is news."""

from __future__ import annotations

import os

from ratui.console.follow import project_fingerprint


def test_the_tree_as_the_follower_sees_it(tmp_path):
    root = tmp_path
    (root / "ratui.yaml").write_text("namespace: demo\n")
    sql = root / "demo/pipelines/bronze/raw/pipeline.sql"
    (sql.parent / "tests/quality").mkdir(parents=True)
    sql.write_text("SELECT 1")
    (sql.parent / "tests/quality/t.sql").write_text("SELECT 1 WHERE false")
    (root / "demo/landing/zone").mkdir(parents=True)  # not pipelines: not followed
    (root / "demo/landing/zone/a.csv").write_text("id\n1\n")
    (root / ".ratui").mkdir()
    (root / "notes").mkdir()  # no pipelines/ folder: not a namespace
    before = project_fingerprint(root)
    assert set(before) == {"ratui.yaml", "demo/pipelines/", "demo/pipelines/bronze/", "demo/pipelines/bronze/raw/",
                           "demo/pipelines/bronze/raw/pipeline.sql", "demo/pipelines/bronze/raw/tests/",
                           "demo/pipelines/bronze/raw/tests/quality/", "demo/pipelines/bronze/raw/tests/quality/t.sql"}
    assert before["demo/pipelines/bronze/raw/pipeline.sql"][0] == len("SELECT 1")

    for dropping in (".pipeline.sql.swp", "pipeline.sql~", "x.tmp", ".hidden"):
        (sql.parent / dropping).write_text("x")
    (sql.parent / "__pycache__").mkdir()
    (sql.parent / "__pycache__/m.pyc").write_bytes(b"x")
    assert project_fingerprint(root) == before

    sql.write_text("SELECT 2")  # the same size: the time tells
    stamp = before["demo/pipelines/bronze/raw/pipeline.sql"][1] + 1_000_000_000
    os.utime(sql, ns=(stamp, stamp))
    after = project_fingerprint(root)
    assert after != before and after["demo/pipelines/bronze/raw/pipeline.sql"] == (8, stamp)


def test_a_commit_right_after_start_is_news(tmp_path):
    """The follower's baseline is the database as start() found it: a commit made as soon as start() has returned
    (before the follower's first poll) is reported, not taken for the baseline."""
    import sqlite3
    import threading

    from ratui.console.follow import Follower, StateItem

    db = tmp_path / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    seen = threading.Event()
    items: list[StateItem] = []

    def post(item: StateItem) -> None:
        items.append(item)
        seen.set()

    follower = Follower(tmp_path, db, post, lambda: 0).start()
    try:
        with sqlite3.connect(db) as conn:  # another writer, at once
            conn.execute("INSERT INTO t VALUES (1)")
        assert seen.wait(10), "the commit made right after start() was never reported"
        assert items[0] == StateItem("db", 0)
    finally:
        follower.stop()
