"""The pure compile step: discovery, configuration, templating and the graph. No Spark here."""

from __future__ import annotations

import pytest

from ratui.engine.project.compiler import compile_project
from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import load_settings

SELECT = "SELECT 1 AS id\n"


def codes(compiled, key=None):
    if key:
        return [e.code for e in compiled.pipelines[key].errors]
    return [e.code for e in compiled.all_errors()]


def only_error(compiled, key):
    errors = compiled.pipelines[key].errors
    assert len(errors) == 1, errors
    return errors[0]


# ------------------------------------------------------------------------------------------- discovery


def test_discovers_namespaces_layers_and_pipelines(make_project):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": SELECT,
        "demo/pipelines/silver/b/pipeline.sql": "SELECT * FROM {{ ref('bronze.a') }}",
        "other/pipelines/gold/c/pipeline.sql": "SELECT * FROM {{ ref('demo.silver.b') }}",
        "demo/landing/z/x.csv": "a\n1\n",
    })
    compiled = compile_project(root)
    assert sorted(compiled.pipelines) == ["demo.bronze.a", "demo.silver.b", "other.gold.c"]
    assert compiled.all_errors() == []
    assert compiled.pipelines["other.gold.c"].refs == ("demo.silver.b",)
    assert compiled.graph.order() == ["demo.bronze.a", "demo.silver.b", "other.gold.c"]


@pytest.mark.parametrize("name", ["Bad", "1abc", "has space", "a" * 129, "dot.name"])
def test_invalid_pipeline_names_are_errors(make_project, name):
    root = make_project({f"demo/pipelines/bronze/{name}/pipeline.sql": SELECT})
    compiled = compile_project(root)
    assert "RAT-PRJ-001" in codes(compiled)


def test_name_of_128_characters_is_fine(make_project):
    name = "a" * 128
    root = make_project({f"demo/pipelines/bronze/{name}/pipeline.sql": SELECT})
    assert codes(compile_project(root)) == []


def test_unknown_layer_is_an_error_with_suggestion(make_project):
    root = make_project({"demo/pipelines/silvr/x/pipeline.sql": SELECT})
    compiled = compile_project(root)
    (error,) = compiled.errors
    assert error.code == "RAT-PRJ-002"
    assert "silver" in error.hint and "silvr" in error.file


def test_both_or_neither_pipeline_file_is_an_error(make_project):
    root = make_project({
        "demo/pipelines/bronze/both/pipeline.sql": SELECT,
        "demo/pipelines/bronze/both/pipeline.py": "def run(ctx):\n    return ctx.sql('select 1')\n",
        "demo/pipelines/bronze/neither/config.yaml": "description: nothing here\n",
        "demo/pipelines/bronze/fine/pipeline.sql": SELECT,
    })
    compiled = compile_project(root)
    assert only_error(compiled, "demo.bronze.both").code == "RAT-PRJ-003"
    assert only_error(compiled, "demo.bronze.neither").code == "RAT-PRJ-004"
    assert compiled.pipelines["demo.bronze.fine"].ok  # one broken pipeline does not hide the rest


# ----------------------------------------------------------------------------------------- configuration


def test_annotation_beats_config_yaml_beats_default(make_project):
    root = make_project({
        "demo/pipelines/bronze/x/pipeline.sql":
            "-- @merge_strategy: incremental\n-- @unique_key: a, b\nSELECT 1 AS a, 2 AS b\n",
        "demo/pipelines/bronze/x/config.yaml":
            "merge_strategy: append_only\ndescription: from yaml\ntags: daily, finance\n",
    })
    config = compile_project(root).pipelines["demo.bronze.x"].config
    assert config.merge_strategy == "incremental"
    assert config.unique_key == ("a", "b")
    assert config.description == "from yaml"
    assert config.tags == ("daily", "finance")
    assert config.watermark_column is None
    assert config.origin["merge_strategy"] == "annotation"
    assert config.origin["description"] == "config.yaml"
    assert config.origin["partition_column"] == "default"


def test_every_seed_annotation_is_recognised(make_project):
    text = (
        "-- @merge_strategy: incremental\n-- @unique_key: id\n-- @watermark_column: ts\n-- @description: d\n"
        "-- @partition_column: day\n-- @archive_landing_zones: true\n-- @scd_valid_from: vf\n"
        "-- @scd_valid_to: vt\n-- @materialized: table\n-- @tags: a,b\nSELECT 1 AS id\n"
    )
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": text})
    config = compile_project(root).pipelines["demo.bronze.x"].config
    assert (config.watermark_column, config.partition_column, config.archive_landing_zones) == ("ts", "day", True)
    assert (config.scd_valid_from, config.scd_valid_to, config.materialized) == ("vf", "vt", "table")


def test_misspelt_strategy_is_an_error_never_full_refresh(make_project):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": "-- @merge_strategy: incremntal\nSELECT 1 AS id\n"})
    compiled = compile_project(root)
    error = only_error(compiled, "demo.bronze.x")
    assert error.code == "RAT-CFG-001"
    assert "incremental" in error.hint
    assert error.file.endswith("pipeline.sql") and error.line == 1
    assert compiled.pipelines["demo.bronze.x"].config is None


def test_misspelt_strategy_in_config_yaml_names_that_file(make_project):
    root = make_project({
        "demo/pipelines/bronze/x/pipeline.sql": SELECT,
        "demo/pipelines/bronze/x/config.yaml": "merge_strategy: apend_only\n",
    })
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-CFG-001" and error.file.endswith("config.yaml") and "append_only" in error.hint


def test_unknown_annotation_suggests_nearest(make_project):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": "-- @uniqe_key: id\nSELECT 1 AS id\n"})
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-CFG-002" and "unique_key" in error.hint and error.line == 1


def test_unknown_config_yaml_key_suggests_nearest(make_project):
    root = make_project({
        "demo/pipelines/bronze/x/pipeline.sql": SELECT,
        "demo/pipelines/bronze/x/config.yaml": "watermark_colum: ts\n",
    })
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-CFG-002" and "watermark_column" in error.hint


@pytest.mark.parametrize("strategy", ["incremental", "delete_insert", "scd2"])
def test_keyed_strategy_without_unique_key_is_an_error(make_project, strategy):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": f"-- @merge_strategy: {strategy}\nSELECT 1 AS id\n"})
    assert only_error(compile_project(root), "demo.bronze.x").code == "RAT-CFG-003"


@pytest.mark.parametrize("key", ["unique_key", "merge_strategy", "watermark_column", "tags", "description"])
def test_an_empty_annotation_is_its_own_error_at_its_own_line(make_project, key):
    first = "-- @merge_strategy: incremental\n" if key != "merge_strategy" else "-- @description: x\n"
    root = make_project({"demo/pipelines/bronze/a/pipeline.sql": f"{first}-- @{key}:   \n{SELECT}"})
    error = only_error(compile_project(root), "demo.bronze.a")
    assert (error.code, error.line) == ("RAT-CFG-005", 2)
    assert error.message == f"annotation '@{key}' has no value"


def test_an_empty_key_in_config_yaml_is_named_at_its_line(make_project):
    root = make_project({"demo/pipelines/bronze/a/pipeline.sql": "-- @merge_strategy: incremental\n" + SELECT,
                         "demo/pipelines/bronze/a/config.yaml": "description: orders\nunique_key:\n"})
    error = only_error(compile_project(root), "demo.bronze.a")
    assert (error.code, error.line, error.file.endswith("config.yaml")) == ("RAT-CFG-005", 2, True)
    assert "'unique_key' in config.yaml has no value" in error.message


def test_snapshot_without_partition_column_is_an_error(make_project):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": "-- @merge_strategy: snapshot\nSELECT 1 AS id\n"})
    assert only_error(compile_project(root), "demo.bronze.x").code == "RAT-CFG-004"


def test_annotation_after_the_body_is_an_error(make_project):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": "SELECT 1 AS id\n-- @merge_strategy: append_only\n"})
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-CFG-009" and error.line == 2


def test_bad_boolean_and_broken_yaml(make_project):
    root = make_project({
        "demo/pipelines/bronze/x/pipeline.sql": "-- @archive_landing_zones: maybe\nSELECT 1 AS id\n",
        "demo/pipelines/bronze/y/pipeline.sql": SELECT,
        "demo/pipelines/bronze/y/config.yaml": "merge_strategy: [unclosed\n",
    })
    compiled = compile_project(root)
    assert only_error(compiled, "demo.bronze.x").code == "RAT-CFG-005"
    assert only_error(compiled, "demo.bronze.y").code == "RAT-CFG-006"


def test_quality_test_severity_is_validated(make_project):
    root = make_project({
        "demo/pipelines/bronze/x/pipeline.sql": SELECT,
        "demo/pipelines/bronze/x/tests/quality/a.sql":
            "-- @severity: warn\nSELECT * FROM {{ this }} WHERE id IS NULL\n",
        "demo/pipelines/bronze/x/tests/quality/b.sql": "-- @severity: critical\nSELECT 1\n",
    })
    pipeline = compile_project(root).pipelines["demo.bronze.x"]
    assert [t.severity for t in pipeline.tests if not t.error] == ["warn"]
    assert [e.code for e in pipeline.errors] == ["RAT-CFG-005"]


# -------------------------------------------------------------------------------------------- templating


def test_template_syntax_error_names_file_and_line(make_project):
    root = make_project({"demo/pipelines/bronze/x/pipeline.sql": "SELECT 1 AS id\n{% if %}\n"})
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-TPL-001" and error.line == 2 and error.file.endswith("pipeline.sql")


def test_ref_needs_a_literal_and_a_valid_name(make_project):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": "{% set t = 'bronze.b' %}SELECT * FROM {{ ref(t) }}",
        "demo/pipelines/bronze/b/pipeline.sql": "SELECT * FROM {{ ref('nolayer') }}",
        "demo/pipelines/bronze/c/pipeline.sql": "SELECT * FROM {{ ref('platinum.x') }}",
    })
    compiled = compile_project(root)
    for key in ("demo.bronze.a", "demo.bronze.b", "demo.bronze.c"):
        assert only_error(compiled, key).code == "RAT-TPL-003"


def test_refs_inside_conditionals_count_as_dependencies(make_project):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": SELECT,
        "demo/pipelines/bronze/b/pipeline.sql": SELECT,
        "demo/pipelines/silver/c/pipeline.sql": (
            "SELECT * FROM {{ ref('bronze.a') }}\n{% if is_incremental() %}UNION ALL SELECT * FROM "
            "{{ ref('bronze.b') }}{% endif %}\n"),
    })
    assert set(compile_project(root).pipelines["demo.silver.c"].refs) == {"demo.bronze.a", "demo.bronze.b"}


def test_unknown_landing_zone_is_a_compile_error(make_project):
    root = make_project({
        "demo/landing/orders/a.csv": "id\n1\n",
        "demo/pipelines/bronze/x/pipeline.sql": "SELECT * FROM {{ landing_zone('order') }}",
    })
    error = only_error(compile_project(root), "demo.bronze.x")
    assert error.code == "RAT-LND-001" and "orders" in error.hint


# ------------------------------------------------------------------------------------------------- graph


def test_cycle_shows_the_path(make_project):
    root = make_project({
        "demo/pipelines/silver/a/pipeline.sql": "SELECT * FROM {{ ref('silver.b') }}",
        "demo/pipelines/silver/b/pipeline.sql": "SELECT * FROM {{ ref('silver.a') }}",
        "demo/pipelines/bronze/ok/pipeline.sql": SELECT,
    })
    compiled = compile_project(root)
    error = only_error(compiled, "demo.silver.a")
    assert error.code == "RAT-DAG-001"
    assert "demo.silver.a -> demo.silver.b -> demo.silver.a" in error.message
    assert only_error(compiled, "demo.silver.b").code == "RAT-DAG-001"
    assert compiled.graph.order() == ["demo.bronze.ok"]


def test_self_ref_is_a_cycle(make_project):
    root = make_project({"demo/pipelines/silver/a/pipeline.sql": "SELECT * FROM {{ ref('silver.a') }}"})
    error = only_error(compile_project(root), "demo.silver.a")
    assert error.code == "RAT-DAG-001" and "this" in error.hint


def test_unknown_ref_names_both_tables(make_project):
    root = make_project({"demo/pipelines/silver/a/pipeline.sql": "SELECT * FROM {{ ref('bronze.missing') }}"})
    error = only_error(compile_project(root), "demo.silver.a")
    assert error.code == "RAT-DAG-002"
    assert "demo.silver.a" in error.message and "demo.bronze.missing" in error.message


@pytest.fixture
def graph_project(make_project):
    return compile_project(make_project({
        "demo/pipelines/bronze/orders/pipeline.sql": "-- @tags: daily\nSELECT 1 AS id\n",
        "demo/pipelines/bronze/customers/pipeline.sql": SELECT,
        "demo/pipelines/silver/orders_clean/pipeline.sql":
            "-- @tags: daily, finance\nSELECT * FROM {{ ref('bronze.orders') }}",
        "demo/pipelines/gold/revenue/pipeline.sql": (
            "SELECT * FROM {{ ref('silver.orders_clean') }} JOIN {{ ref('bronze.customers') }} USING (id)"),
        "demo/pipelines/gold/other/pipeline.sql": SELECT,
        "shop/pipelines/gold/revenue/pipeline.sql": SELECT,
    }))


def test_order_is_deterministic_and_topological(graph_project):
    order = graph_project.graph.order()
    position = order.index
    assert position("demo.bronze.orders") < position("demo.silver.orders_clean") < position("demo.gold.revenue")
    assert order.index("demo.bronze.customers") < order.index("demo.gold.revenue")
    assert order == graph_project.graph.order()
    assert order[:2] == ["demo.bronze.customers", "demo.bronze.orders"]  # ties: by layer, then name


@pytest.mark.parametrize("selectors, expected", [
    (["orders_clean"], ["demo.silver.orders_clean"]),
    (["silver.orders_clean"], ["demo.silver.orders_clean"]),
    (["demo.gold.revenue"], ["demo.gold.revenue"]),
    (["gold.revenue"], ["demo.gold.revenue"]),  # layer.name means the default namespace
    (["+orders_clean"], ["demo.bronze.orders", "demo.silver.orders_clean"]),
    (["orders_clean+"], ["demo.silver.orders_clean", "demo.gold.revenue"]),
    (["+demo.gold.revenue"], ["demo.bronze.customers", "demo.bronze.orders", "demo.silver.orders_clean",
                              "demo.gold.revenue"]),
    (["layer:silver"], ["demo.silver.orders_clean"]),
    (["tag:daily"], ["demo.bronze.orders", "demo.silver.orders_clean"]),
    (["customers", "tag:finance"], ["demo.bronze.customers", "demo.silver.orders_clean"]),
    (["namespace:shop"], ["shop.gold.revenue"]),
])
def test_selectors(graph_project, selectors, expected):
    assert graph_project.select(selectors) == expected


@pytest.mark.parametrize("selector, code", [
    ("nothing", "RAT-DAG-003"),
    ("layer:platinum", "RAT-DAG-004"),
    ("colour:red", "RAT-DAG-004"),
    ("revenue", "RAT-DAG-005"),  # demo.gold.revenue and shop.gold.revenue
    ("tag:never", "RAT-DAG-003"),
    ("++", "RAT-DAG-004"),
])
def test_bad_selectors(graph_project, selector, code):
    with pytest.raises(RatuiError) as info:
        graph_project.select([selector])
    assert info.value.code == code


def test_no_selector_selects_everything(graph_project):
    assert len(graph_project.select([])) == 6


# ---------------------------------------------------------------------------------------------- settings


def test_unknown_setting_in_ratui_yaml(tmp_path):
    (tmp_path / "ratui.yaml").write_text("namespace: demo\nsaprk:\n  master: local[1]\n")
    with pytest.raises(RatuiError) as info:
        load_settings(tmp_path)
    assert info.value.code == "RAT-CFG-007" and "spark" in info.value.hint


def test_spark_settings_come_from_ratui_yaml(tmp_path):
    (tmp_path / "ratui.yaml").write_text(
        "namespace: demo\nspark:\n  master: spark://cluster:7077\n  config:\n    spark.executor.memory: 8g\n")
    settings = load_settings(tmp_path)
    assert settings.spark_master == "spark://cluster:7077"
    assert settings.spark_config["spark.executor.memory"] == "8g"
    assert settings.spark_config["spark.sql.shuffle.partitions"] == "4"  # default kept
