"""Column lineage against real tables: after the sample has run on Spark (the session's `local_sample`), every
pipeline's lineage names exactly the columns Spark wrote to its Iceberg table, in order, and the Python pipeline's
(table-level) columns are its table's. No Spark of its own: it reads what the shared session fixture wrote."""

from __future__ import annotations

from ratui.engine.facade.engine import Engine


def test_lineage_names_the_columns_spark_wrote(local_sample):
    engine = Engine.open(local_sample["root"])
    try:
        lineage = engine.column_lineage()
        for key in local_sample["keys"]:
            table = lineage.table(key)
            written = [c.lower() for c in local_sample["columns"][key]]
            assert [c.column for c in table.columns] == written, key
            if table.kind == "python":
                assert {c.kind for c in table.columns} == {"table-level"}, key
            else:
                assert not table.problem and "unresolved" not in {c.kind for c in table.columns}, key
        events = lineage.table("ecommerce.landing.events")
        assert [c.column for c in events.columns] == ["customer_id", "event_id", "event_ts", "event_type",
                                                      "product_id", "session_id"]
    finally:
        engine.close()
