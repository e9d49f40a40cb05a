"""The compile cache: an unchanged pipeline is not compiled again, and a compile from the cache finds exactly what
a fresh compile finds (edits, a new ratui.yaml, a damaged cache file; what is not content is checked every time)."""

from __future__ import annotations

import json
import os

from ratui.engine.errors import did_you_mean
from ratui.engine.project.compiler import compile_project, recompile

PROJECT = {
    "demo/landing/orders/a.csv": "id\n1\n",
    "demo/pipelines/bronze/raw/pipeline.sql":
        "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('orders') }}",
    "demo/pipelines/bronze/raw/tests/quality/unique.sql": "SELECT id FROM {{ this }} GROUP BY id HAVING COUNT(*) > 1",
    "demo/pipelines/silver/clean/pipeline.sql": "-- @merge_strategy: incremental\n-- @unique_key: id\n"
                                                "SELECT * FROM {{ ref('bronze.raw') }}",
    "demo/pipelines/silver/clean/config.yaml": "description: cleaned\ntags: [a, b]\n",
    "demo/pipelines/silver/clean/tests/quality/in_raw.sql": "SELECT id FROM {{ this }} WHERE id NOT IN "
                                                            "(SELECT id FROM {{ ref('bronze.raw') }})",
    "demo/pipelines/gold/typo/pipeline.sql": "SELECT *\nFROM {{ ref('silver.claen') }}",
    "demo/pipelines/gold/broken/pipeline.sql": "SELECT {{ oops( }}",
    "demo/pipelines/gold/badkey/pipeline.sql": "-- @merge_strategy: incremental\nSELECT 1 AS id",
    "demo/pipelines/gold/direct/pipeline.sql": "SELECT * FROM demo.silver.clean",
    "demo/pipelines/gold/pyth/pipeline.py": "def run(ctx):\n    return ctx.ref('silver.clean')\n",
}


def summary(compiled) -> dict:
    """Everything a compile found, as plain values."""
    out = {}
    for key, p in sorted(compiled.pipelines.items()):
        out[key] = {
            "refs": p.refs, "zones": p.zones, "ref_lines": p.ref_lines,
            "test_refs": [(k, str(f), line) for k, f, line in p.test_refs],
            "config": p.config.to_dict() if p.config else None,
            "origin": dict(p.config.origin) if p.config else None,
            "errors": [(e.code, e.message, e.file, e.line, e.hint) for e in p.errors],
        }
    out["graph"] = {"order": compiled.graph.order(), "upstream": dict(compiled.graph.upstream)}
    out["project errors"] = [(e.code, e.message) for e in compiled.errors]
    return out


def test_a_second_compile_reuses_every_pipeline_and_finds_exactly_the_same(make_project):
    root = make_project(PROJECT)
    fresh = compile_project(root, cache=False)
    first = compile_project(root)
    assert first.reused == 0
    assert (root / ".ratui" / "compile-cache.json").is_file()
    second = compile_project(root)
    assert second.reused == len(PROJECT_PIPELINES)
    assert summary(first) == summary(fresh)
    assert summary(second) == summary(fresh)
    codes = {key: [e.code for e in p.errors] for key, p in second.pipelines.items() if p.errors}
    assert codes == {"demo.gold.typo": ["RAT-DAG-002"], "demo.gold.broken": ["RAT-TPL-001"],
                     "demo.gold.badkey": ["RAT-CFG-003"], "demo.gold.direct": [codes["demo.gold.direct"][0]]}
    assert codes["demo.gold.direct"][0].startswith("RAT-")


PROJECT_PIPELINES = ["bronze.raw", "silver.clean", "gold.typo", "gold.broken", "gold.badkey", "gold.direct",
                     "gold.pyth"]


def test_each_kind_of_edit_is_seen_and_only_the_edited_pipeline_is_compiled_again(make_project):
    root = make_project(PROJECT)
    compile_project(root)
    pipelines = root / "demo" / "pipelines"

    (pipelines / "gold" / "typo" / "pipeline.sql").write_text("SELECT *\nFROM {{ ref('silver.clean') }}")
    compiled = compile_project(root)
    assert compiled.reused == len(PROJECT_PIPELINES) - 1
    assert compiled.pipelines["demo.gold.typo"].errors == []
    assert compiled.graph.upstream["demo.gold.typo"] == ["demo.silver.clean"]

    (pipelines / "silver" / "clean" / "config.yaml").write_text("description: cleaned\nunique_key: [id, other]\n")
    compiled = compile_project(root)
    assert compiled.reused == len(PROJECT_PIPELINES) - 1
    assert compiled.pipelines["demo.silver.clean"].config.unique_key == ("id",)  # the annotation still wins
    assert compiled.pipelines["demo.silver.clean"].config.description == "cleaned"
    assert compiled.pipelines["demo.silver.clean"].config.tags == ()

    (pipelines / "silver" / "clean" / "tests" / "quality" / "in_raw.sql").write_text(
        "SELECT id FROM {{ ref('bronze.nothere') }}")
    compiled = compile_project(root)
    assert [e.code for e in compiled.pipelines["demo.silver.clean"].errors] == ["RAT-DAG-002"]

    (pipelines / "silver" / "clean" / "tests" / "quality" / "in_raw.sql").unlink()
    compiled = compile_project(root)
    assert compiled.pipelines["demo.silver.clean"].errors == []
    assert compiled.pipelines["demo.silver.clean"].test_refs == []
    assert summary(compiled) == summary(compile_project(root, cache=False))


def test_a_new_ratui_yaml_compiles_everything_again(make_project):
    root = make_project(PROJECT)
    compile_project(root)
    settings = root / "ratui.yaml"
    settings.write_text(settings.read_text() + "\n# a comment changes nothing, but the file did change\n")
    assert compile_project(root).reused == 0
    assert compile_project(root).reused == len(PROJECT_PIPELINES)


def test_what_is_not_content_is_checked_on_every_compile(make_project, tmp_path):
    root = make_project(PROJECT)
    assert compile_project(root).pipelines["demo.bronze.raw"].errors == []
    # the zone folder goes: its pipeline did not change, and still the zone is missing
    (root / "demo" / "landing" / "orders" / "a.csv").unlink()
    (root / "demo" / "landing" / "orders").rmdir()
    compiled = compile_project(root)
    assert compiled.reused == len(PROJECT_PIPELINES)
    assert [e.code for e in compiled.pipelines["demo.bronze.raw"].errors] == ["RAT-LND-001"]
    # the same bytes, now through a symlink to a file outside the project: refused, cache or not
    outside = tmp_path / "outside.sql"
    sql = root / "demo" / "pipelines" / "silver" / "clean" / "pipeline.sql"
    outside.write_bytes(sql.read_bytes())
    sql.unlink()
    os.symlink(outside, sql)
    compiled = compile_project(root)
    assert [e.code for e in compiled.pipelines["demo.silver.clean"].errors] == ["RAT-PTH-001"]


def test_a_damaged_or_tampered_cache_file_is_compiled_past(make_project):
    root = make_project(PROJECT)
    expected = summary(compile_project(root, cache=False))
    compile_project(root)
    cache = root / ".ratui" / "compile-cache.json"
    data = json.loads(cache.read_text())
    for entry in data["entries"].values():  # wrong shapes and an unregistered error code
        entry["refs"] = 7
        if entry.get("error"):
            entry["error"]["code"] = "RAT-NOPE-999"
        if entry.get("config"):
            entry["config"]["no_such_key"] = True
    cache.write_text(json.dumps(data))
    assert summary(compile_project(root)) == expected
    for garbage in ("{not json", "[]", json.dumps({"format": 1, "entries": []}), ""):
        cache.write_text(garbage)
        assert summary(compile_project(root)) == expected
    assert compile_project(root).reused == len(PROJECT_PIPELINES)


def test_a_project_whose_state_folder_cannot_be_written_still_compiles(make_project):
    root = make_project(PROJECT)
    (root / ".ratui").write_text("a file where the state folder would be")
    assert summary(compile_project(root)) == summary(compile_project(root, cache=False))


def test_hints_among_thousands_of_names_name_a_few_close_ones():
    names = [f"sales.silver.clean_{i:05d}" for i in range(5000)]
    hint = did_you_mean("sales.silver.clean_00042x", names)
    assert "'sales.silver.clean_00042'" in hint
    assert hint.count("sales.silver.") <= 3 and "5,000 valid names" in hint
    assert "is close" in did_you_mean("zzzz", names)
    small = did_you_mean("brnze", ["bronze", "silver", "gold"])  # a few: all of them, as before
    assert small == "Did you mean 'bronze'? Valid: bronze, gold, silver."


def test_a_watcher_recompiles_only_what_changed_and_finds_what_a_full_compile_finds(make_project):
    root = make_project(PROJECT)
    previous = compile_project(root)
    pipelines = root / "demo" / "pipelines"
    edits = [  # (file, new text): an edit, a cycle across two pipelines, a fix, a broken template, a test
        (pipelines / "gold" / "typo" / "pipeline.sql", "SELECT * FROM {{ ref('silver.clean') }}"),
        (pipelines / "bronze" / "raw" / "pipeline.sql", "SELECT * FROM {{ ref('gold.typo') }}"),
        (pipelines / "bronze" / "raw" / "pipeline.sql", "SELECT * FROM {{ landing_zone('orders') }}"),
        (pipelines / "silver" / "clean" / "pipeline.sql", "SELECT {% if %}"),
        (pipelines / "silver" / "clean" / "tests" / "quality" / "in_raw.sql", "SELECT * FROM {{ ref('x.y') }}"),
    ]
    for path, text in edits:
        path.write_text(text)
        again = recompile(previous, [path])
        assert again is not None
        assert summary(again) == summary(compile_project(root, cache=False)), path
        assert again.pipelines.keys() == previous.pipelines.keys()
        previous = again
    # a new pipeline folder, ratui.yaml, a file outside any pipeline: the whole project is compiled instead
    new = pipelines / "gold" / "fresh" / "pipeline.sql"
    new.parent.mkdir()
    new.write_text("SELECT 1 AS id")
    assert recompile(previous, [new]) is None and recompile(previous, [new.parent]) is None
    assert recompile(previous, [root / "ratui.yaml"]) is None and recompile(previous, [root / "README.md"]) is None
    # a landing file: the pipelines reading its zone are checked again (a file linked in from outside is refused)
    outside = root.parent / "elsewhere.csv"
    outside.write_text("id\n9\n")
    link = root / "demo" / "landing" / "orders" / "linked.csv"
    os.symlink(outside, link)
    again = recompile(compile_project(root), [link])
    assert again is not None
    assert summary(again) == summary(compile_project(root, cache=False))
    assert [e.code for e in again.pipelines["demo.bronze.raw"].errors] == ["RAT-PTH-001"]


def test_check_on_a_large_project_counts_per_namespace_and_layer_and_lists_on_request(tmp_path, capsys):
    """`ratui check` of 450 pipelines (two in three silvers broken): the errors, then a count per namespace and
    layer with the broken ones, the summary last; --list lists every pipeline."""
    from ratui.cli import main as cli_main
    from tests.scale_project import generate_project, plan

    root = generate_project(tmp_path / "big", 450)
    for sql in sorted(root.glob("sales/pipelines/silver/*/pipeline.sql"))[:10]:
        sql.write_text(sql.read_text().replace("') }}", "x') }}", 1))
    assert cli_main(["check", "--project", str(root)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("error[RAT-DAG-002]") == 10 and "Did you mean" in captured.err
    lines = captured.out.splitlines()
    sizes = {ns: {layer: sum(1 for item in items if item[0] == layer) for layer in ("bronze", "silver", "gold")}
             for ns, items in plan(450).items()}
    assert lines[-1].startswith("450 pipeline(s), 10 problem(s)")
    assert len(lines) == 1 + len(sizes)
    sales = next(line for line in lines if line.split()[0] == "sales")
    assert f"{sizes['sales']['silver']} silver (10 broken)" in sales and f"{sizes['sales']['gold']} gold" in sales
    assert cli_main(["check", "--project", str(root), "--list"]) == 2
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 + 450 and listed[0] == "450 pipeline(s), 10 problem(s)"


def test_a_watchers_recompile_keeps_the_other_pipelines_cached(make_project):
    root = make_project(PROJECT)
    previous = compile_project(root)
    path = root / "demo" / "pipelines" / "gold" / "typo" / "pipeline.sql"
    path.write_text("SELECT * FROM {{ ref('silver.clean') }}")
    assert recompile(previous, [path]) is not None
    assert compile_project(root).reused == len(PROJECT_PIPELINES)  # nothing compiled again after the save


def test_a_moved_project_compiles_afresh_and_names_its_new_paths(make_project, tmp_path):
    import shutil

    root = make_project(PROJECT)
    compile_project(root)
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)  # the cache file goes along
    shutil.rmtree(root)
    compiled = compile_project(moved)
    assert compiled.reused == 0
    error = compiled.pipelines["demo.gold.typo"].errors[0]
    assert error.file.startswith(str(moved)) and error.line == 2
    assert summary(compiled) == summary(compile_project(moved, cache=False))


def test_a_killed_writes_temporary_files_are_removed_once_they_are_old(make_project):
    """A compile killed between writing its cache (or outline) to a temporary file and renaming it leaves the
    temporary file behind; the next compile that writes removes such files an hour old, and leaves a younger one
    (another compile's write in flight) and everything else in .ratui/ alone."""
    root = make_project(PROJECT)
    state = root / ".ratui"
    state.mkdir(exist_ok=True)
    old_cache, old_outline, young = state / ".compile-cache-abc", state / ".outline-def", state / ".compile-cache-new"
    other = state / ".compile-cache-keep"
    for path in (old_cache, old_outline, young):
        path.write_text("{partial")
    other.mkdir()  # not a file: not ours to remove
    two_hours_ago = os.stat(young).st_mtime - 7200
    for path in (old_cache, old_outline):
        os.utime(path, (two_hours_ago, two_hours_ago))
    compile_project(root)
    assert not old_cache.exists() and not old_outline.exists()
    assert young.exists() and other.is_dir() and (state / "compile-cache.json").is_file()
