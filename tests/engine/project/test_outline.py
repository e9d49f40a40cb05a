"""The outline: every full compile (and a watcher's recompile) keeps `.ratui/outline.json`, the little the console's
tree draws before its own compile; reading it gives back exactly what the compile found, and a damaged, foreign,
oversized or wrong-shaped file is no outline (never an error, never a crash)."""

from __future__ import annotations

import json
import shutil

import pytest

from ratui.engine.project import outline
from ratui.engine.project.compiler import compile_project, recompile

from tests.engine.project.test_compile_cache import PROJECT


def test_the_outline_is_what_the_compile_found(make_project):
    root = make_project(PROJECT)
    assert outline.read(root) is None  # never compiled: no outline
    compiled = compile_project(root)
    got = outline.read(root)
    assert got is not None and got.root == str(root.resolve())
    assert list(got.pipelines) == list(compiled.pipelines)
    for key, pipeline in compiled.pipelines.items():
        kept = got.pipelines[key]
        assert (kept.namespace, kept.layer, kept.name) == (pipeline.namespace, pipeline.layer, pipeline.name)
        assert kept.strategy == (pipeline.config.merge_strategy if pipeline.config else None)
        assert kept.error == (pipeline.errors[0].code if pipeline.errors else None)
    # the broken ones keep their first code, the good ones none (from the project as written, see PROJECT)
    assert {k: p.error for k, p in got.pipelines.items() if p.error} == {
        "demo.gold.typo": "RAT-DAG-002", "demo.gold.broken": "RAT-TPL-001", "demo.gold.badkey": "RAT-CFG-003",
        "demo.gold.direct": compiled.pipelines["demo.gold.direct"].errors[0].code}
    assert got.pipelines["demo.silver.clean"].strategy == "incremental"
    assert got.first == compiled.graph.order()[0]
    assert got.problems == tuple((e.code, e.message) for e in compiled.errors)


def test_an_edit_seen_by_a_recompile_or_a_compile_is_in_the_outline_and_an_unchanged_one_is_not_rewritten(
        make_project):
    root = make_project(PROJECT)
    compiled = compile_project(root)
    path = root / ".ratui" / "outline.json"
    stamp = path.stat().st_mtime_ns
    compile_project(root)
    assert path.stat().st_mtime_ns == stamp  # the same outline: not written again

    typo = root / "demo" / "pipelines" / "gold" / "typo" / "pipeline.sql"
    typo.write_text("SELECT *\nFROM {{ ref('silver.clean') }}")
    recompile(compiled, [typo])
    assert outline.read(root).pipelines["demo.gold.typo"].error is None

    shutil.rmtree(typo.parent)
    compile_project(root)
    assert "demo.gold.typo" not in outline.read(root).pipelines


@pytest.mark.parametrize("damage", [
    "not json at all {",
    "[]",
    '{"format": 99}',
    "null",
    "WRONG_ROOT",
    "BAD_KEY",
    "BAD_ROW",
    "BAD_FIRST",
    "BAD_TYPES",
])
def test_a_damaged_or_foreign_outline_is_no_outline(make_project, damage):
    root = make_project(PROJECT)
    compile_project(root)
    path = root / ".ratui" / "outline.json"
    data = json.loads(path.read_text())
    if damage == "WRONG_ROOT":  # a project copied or moved: the outline names the other root
        data["root"] = "/somewhere/else"
    elif damage == "BAD_KEY":
        data["pipelines"][0][0] = "no-dots"
    elif damage == "BAD_ROW":
        data["pipelines"][0] = ["demo.gold.x"]
    elif damage == "BAD_FIRST":
        data["first"] = "demo.gold.nonexistent"
    elif damage == "BAD_TYPES":
        data["pipelines"][0][1] = {"$": "x"}
    text = json.dumps(data) if damage.isupper() else damage
    path.write_text(text)
    assert outline.read(root) is None
    compile_project(root)  # and the next compile writes a good one over it
    assert outline.read(root) is not None


def test_a_moved_project_has_no_outline_until_it_compiles(make_project, tmp_path):
    root = make_project(PROJECT)
    compile_project(root)
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert outline.read(moved) is None
    compile_project(moved)
    assert outline.read(moved).root == str(moved.resolve())


def test_an_outline_that_cannot_be_written_is_no_outline_and_no_error(make_project):
    root = make_project(PROJECT)
    (root / ".ratui").mkdir(exist_ok=True)
    (root / ".ratui" / "outline.json").mkdir()  # a folder where the file goes: cannot be replaced
    compiled = compile_project(root)
    assert compiled.pipelines and outline.read(root) is None
