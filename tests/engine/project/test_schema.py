"""The declared schemas of ratui.yaml and of a pipeline's config: each refusal is ratui's coded error at the
offending key's line, an unknown key (at any depth) comes with the nearest declared one, and no secret written
in the file or the environment reaches a message or a hint."""

from __future__ import annotations

from dataclasses import fields

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.project.compiler import compile_project
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.project.settings_schema import SettingsFile

SECRET = "s3cr3t-do-not-show"


def settings_error(tmp_path, text: str) -> RatuiError:
    (tmp_path / "ratui.yaml").write_text(text)
    with pytest.raises(RatuiError) as caught:
        load_settings(tmp_path)
    return caught.value


@pytest.mark.parametrize("text, line, message, hint", [
    ("namespace: demo\nlanding:\n  zones:\n    orders:\n      url: s3://b/o\n      endpont_url: http://h\n", 6,
     "unknown setting 'landing.zones.orders.endpont_url'", "Did you mean 'endpoint_url'?"),
    ("namespace: demo\nreaper:\n  interval_minutes: 5\n  snapshot_max_age: 1\n", 4,
     "unknown setting 'reaper.snapshot_max_age'", "Did you mean 'snapshot_max_age_days'?"),
    ("namespace: demo\n\nmerge:\n  retries: three\n", 4, "'merge.retries' must be an integer >= 1, got 'three'", ""),
    ("namespace: demo\nspark:\n  config:\n    spark.a: 1\n    executor.memory: 1g\n", 5,
     "Spark setting 'executor.memory' must start with 'spark.'", ""),
    ("namespace: demo\nspark:\n  master: local[1]\n  remote: sc://h:15002\n", 4,
     "'spark.master' and 'spark.remote' are both set", "Keep spark.master"),
    ("namespace: demo\nlanding:\n  columns: sideways\n", 3, "'landing.columns' must be one of strict, union",
     "Valid: strict, union."),
    ("namespace: demo\nlanding:\n  zones:\n    orders: https://b/o\n", 4,
     "'landing.zones.orders' must be an s3://bucket/prefix URL", "s3://BUCKET/PREFIX"),
    ("namespace: demo\nwatch: [1, 2]\n", 2, "'watch' must be a mapping, got list", ""),
])
def test_a_settings_problem_is_named_at_its_line(tmp_path, text, line, message, hint):
    error = settings_error(tmp_path, text)
    assert (error.code, error.file, error.line) == ("RAT-CFG-007", str(tmp_path / "ratui.yaml"), line)
    assert message in error.message and hint in (error.hint or "")


def test_landing_s3_defaults_are_checked_even_without_a_zone(tmp_path):
    """Before the schema, landing.s3's values were checked only through a zone that used them."""
    error = settings_error(tmp_path, "namespace: demo\nlanding:\n  s3:\n    concurrency: 0\n")
    assert (error.code, error.line) == ("RAT-CFG-007", 4)
    assert error.message == "'landing.s3.concurrency' must be an integer >= 1, got 0"


@pytest.mark.parametrize("text", [
    f"namespace: demo\nspark:\n  remote: http://h:15002/;token={SECRET}\n",
    f"namespace: demo\nlanding:\n  s3:\n    aws_secret_access_key: {SECRET}\n",
    f"namespace: demo\nlanding:\n  zones:\n    z: {{url: s3://b/z, secret_key: {SECRET}}}\n",
    f"namespace: demo\nspark:\n  config:\n    fs.s3a.secret.key: {SECRET}\n",
    f"namespace: demo\nsecrets:\n  token: {SECRET}\n",
])
def test_no_secret_reaches_a_settings_error(tmp_path, text):
    error = settings_error(tmp_path, text)
    assert error.code == "RAT-CFG-007" and error.line
    assert SECRET not in str(error) + (error.hint or "") + error.render()


def test_a_bad_spark_remote_from_the_environment_hides_its_token(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_REMOTE", f"grpc://h:15002/;token={SECRET}")
    error = settings_error(tmp_path, "namespace: demo\n")
    assert error.code == "RAT-CFG-007" and "'spark.remote' must be a Spark Connect URL" in error.message
    assert SECRET not in str(error) + (error.hint or "")
    monkeypatch.setenv("SPARK_REMOTE", f"sc://h:15002/;token={SECRET}")
    error = settings_error(tmp_path, "- namespace: demo\n")  # not a mapping: said so, the variable aside
    assert error.message == "'ratui.yaml' must be a mapping, got list"


def test_the_settings_defaults_are_the_schemas():
    """Settings (built directly by some callers) and the schema declare the same defaults."""
    declared = {field.name: field.default for field in fields(Settings)}
    flat = SettingsFile().flat()
    assert flat and all(declared[key] == value for key, value in flat.items())
    spark = SettingsFile().spark
    assert (declared["spark_jit"], declared["allow_outside"]) == (spark.jit, SettingsFile().paths.allow_outside)


def test_an_unknown_config_yaml_key_is_named_at_its_line(make_project):
    root = make_project({"demo/pipelines/bronze/a/pipeline.sql": "SELECT 1 AS id\n",
                         "demo/pipelines/bronze/a/config.yaml": "description: orders\nuniqe_key: id\n"})
    [error] = compile_project(root).pipelines["demo.bronze.a"].errors
    assert (error.code, error.line, error.file.endswith("config.yaml")) == ("RAT-CFG-002", 2, True)
    assert "Did you mean 'unique_key'?" in error.hint


@pytest.mark.parametrize("files, code, file, line, message", [
    ({"config.yaml": "merge_strategy: incremental\nunique_key: [id, 'order id']\n"},
     "RAT-CFG-005", "config.yaml", 2, "'unique_key' must be a column name, got 'order id'"),
    ({"pipeline.sql": "-- @description: x\n-- @merge_strategy: upsrt\nSELECT 1 AS id\n"},
     "RAT-CFG-001", "pipeline.sql", 2, "unknown merge strategy 'upsrt'"),
    ({"config.yaml": "tags: [daily, 'not ok']\n"}, "RAT-CFG-005", "config.yaml", 1,
     "tag 'not ok' may hold only letters, digits, '_' and '-'"),
    ({"pipeline.sql": "-- @landing_columns: Union\nSELECT 1 AS id\n"}, "RAT-CFG-005", "pipeline.sql", 1,
     "unknown landing_columns 'Union'"),
])
def test_a_config_problem_is_named_where_its_value_was_written(make_project, files, code, file, line, message):
    folder = "demo/pipelines/bronze/a/"
    root = make_project({folder + "pipeline.sql": "SELECT 1 AS id\n", **{folder + k: v for k, v in files.items()}})
    [error] = compile_project(root).pipelines["demo.bronze.a"].errors
    assert (error.code, error.line, error.file.endswith(file), error.message) == (code, line, True, message)


def test_a_blank_column_in_config_yaml_keeps_the_default(make_project):
    root = make_project({"demo/pipelines/bronze/a/pipeline.sql": "SELECT 1 AS id\n",
                         "demo/pipelines/bronze/a/config.yaml": "scd_valid_from: '  '\nwatermark_column: ' '\n"})
    pipeline = compile_project(root).pipelines["demo.bronze.a"]
    assert pipeline.errors == []
    assert (pipeline.config.scd_valid_from, pipeline.config.watermark_column) == ("valid_from", None)
