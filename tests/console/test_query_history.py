"""The Query screen's history file: newest last, a repeated query moves to the end, bad lines and an unwritable
folder never stop a query."""

from __future__ import annotations

from ratui.console.data import HISTORY_LIMIT, QueryHistory, table_completions


def test_history_keeps_order_moves_repeats_and_is_bounded(tmp_path):
    history = QueryHistory(tmp_path)
    assert history.load() == []
    history.add("SELECT 1")
    history.add("SELECT 2")
    assert history.add("SELECT 1") == ["SELECT 2", "SELECT 1"]
    for i in range(HISTORY_LIMIT + 5):
        history.add(f"SELECT {i + 10}")
    queries = QueryHistory(tmp_path).load()
    assert len(queries) == HISTORY_LIMIT and queries[-1] == f"SELECT {HISTORY_LIMIT + 14}"


def test_a_damaged_history_file_loses_only_its_bad_lines(tmp_path):
    path = tmp_path / ".ratui" / "query_history.jsonl"
    path.parent.mkdir()
    path.write_text('{"sql": "SELECT 1"}\nnot json\n{"no": "sql"}\n[1, 2]\n{"sql": "SELECT 2"}\n')
    assert QueryHistory(tmp_path).load() == ["SELECT 1", "SELECT 2"]


def test_an_unwritable_history_path_does_not_fail(tmp_path):
    (tmp_path / ".ratui").write_text("a file where the folder should be")
    assert QueryHistory(tmp_path).add("SELECT 1") == ["SELECT 1"]


def test_table_completions_match_short_and_full_names():
    keys = ["shop.silver.orders", "shop.silver.order_items", "shop.gold.revenue", "other.bronze.orders"]
    assert table_completions("silver.ord", keys, "shop") == ["silver.order_items", "silver.orders"]
    assert table_completions("rev", keys, "shop") == ["gold.revenue"]
    assert table_completions("other.", keys, "shop") == ["other.bronze.orders"]
    assert table_completions("nothing", keys, "shop") == []
