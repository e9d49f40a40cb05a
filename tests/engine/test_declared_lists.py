"""Lists declared once and found from one place: each test fails when an entry of its list is not wired everywhere
it must be (the write strategies, the isolation levels, the catalog backends, the landing formats, the pipeline
`ctx` API), and the one formatter of an error with its hint. No Spark, no server."""

from __future__ import annotations

import ast
import inspect
import json
import pkgutil
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from ratui.engine import errors
from ratui.engine.errors import RatuiError, error_text

RATUI = Path(__file__).resolve().parents[2] / "ratui"


def _calls(root: Path):
    """(file, call) for every call in ratui's source under `root`."""
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                yield path, node


# ------------------------------------------------------------------------------------------------ strategies


def test_every_strategy_has_a_writer_a_configuration_and_its_hints():
    from ratui.engine.project import config, strategy_specs
    from ratui.engine.write.strategies import STRATEGIES

    assert tuple(STRATEGIES) == strategy_specs.NAMES
    accepted = TypeAdapter(config.Strategy)
    for spec in strategy_specs.SPECS:
        assert accepted.validate_python(spec.name) == spec.name
        assert not spec.one_row_per_key or spec.needs_key, spec  # one row per key: it has a key
        assert not spec.versions or spec.one_row_per_key, spec  # versions of a key: its open one is the row
    with pytest.raises(ValidationError):
        accepted.validate_python("upsert")
    # every hint that names strategies names them from the specs, whole
    templated = [code for code in errors.CODES if errors.placeholders(code)]
    assert {"RAT-CFG-001", "RAT-CFG-004", "RAT-CFG-008", "RAT-WRT-008", "RAT-WRT-009"} <= set(templated)
    for code in templated:
        hint = strategy_specs.hint(code)
        assert "$" not in hint, (code, hint)
        if "strategies" in errors.placeholders(code):
            assert all(name in hint for name in strategy_specs.NAMES), (code, hint)
    for code, words in (("RAT-CFG-004", [s.name for s in strategy_specs.SPECS if s.needs_partition_column]),
                        ("RAT-WRT-009", [s.name for s in strategy_specs.SPECS if s.versions])):
        assert all(word in strategy_specs.hint(code) for word in words)


def test_no_hint_is_left_with_its_words_unfilled():
    """A code whose hint names declared words is raised with its hint filled in (strategy_error, or a hint of its
    own): never bare, which would be refused (as an unregistered code is)."""
    from ratui.engine.project import strategy_specs

    with pytest.raises(ValueError, match="RAT-CFG-008"):
        RatuiError("RAT-CFG-008", "merge strategy 'x' is not supported yet")
    assert strategy_specs.strategy_error("RAT-CFG-008", "m").hint == strategy_specs.hint("RAT-CFG-008")
    templated = {code for code in errors.CODES if errors.placeholders(code)}
    # what fills the hint in: strategy_error and hint (strategy_specs.py), a choice's validator (its hint is always
    # the nearest valid words: schema.one_of)
    filling = {"strategy_error", "hint", "default_hint", "placeholders", "_choice", "one_of"}
    bare = []
    for path, call in _calls(RATUI):
        codes = [a.value for a in call.args if isinstance(a, ast.Constant) and a.value in templated]
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if codes and name not in filling and not any(k.arg == "hint" for k in call.keywords):
            bare.append(f"{path.relative_to(RATUI.parent)}:{call.lineno} {codes[0]}")
    assert bare == [], bare


# ---------------------------------------------------------------------------------------------- isolation


def test_every_isolation_level_is_accepted_decided_and_given():
    from ratui.engine.isolation import child, levels, runner
    from ratui.engine.project import config, isolation_levels
    from ratui.engine.project.settings_schema import PythonSection

    assert isolation_levels.DEFAULT in isolation_levels.NAMES
    assert PythonSection().isolation == isolation_levels.DEFAULT
    annotation = TypeAdapter(config.Isolation)
    for level in isolation_levels.LEVELS:
        assert PythonSection.model_validate({"isolation": level.name}).isolation == level.name
        assert annotation.validate_python(level.name) == level.name
        assert level.name in isolation_levels.listed()
        decided = levels.decide(level.name, spark_is_local=True, tables_on_disk=True, required=False)
        assert decided.level in isolation_levels.NAMES and decided.requested == level.name
        assert decided.isolated == isolation_levels.BY_NAME[decided.level].in_child
        remote = levels.decide(level.name, spark_is_local=False, tables_on_disk=True, required=False)
        assert remote.level == "none" or not level.in_child
        assert not level.confined or level.in_child, level  # only a child confines itself
        assert not level.jailed or level.confined, level
    for bad in (PythonSection.model_validate, annotation.validate_python):
        with pytest.raises(ValidationError):
            bad({"isolation": "sandbox"} if bad is PythonSection.model_validate else "sandbox")
    assert child.CONFINED == isolation_levels.CONFINED
    # no other list of the levels: the isolation package names them only through the declaration
    for module in (levels, runner, child):
        source = inspect.getsource(module)
        assert '"none", "process"' not in source and '("confined", "jail")' not in source, module.__name__


# ------------------------------------------------------------------------------------------ catalog backends


def test_every_catalog_type_has_a_backend_the_settings_accept(tmp_path):
    from ratui.engine.project import catalog_specs
    from ratui.engine.project.settings_schema import CatalogSection
    from ratui.engine.state.catalog.backends import BACKENDS, backend
    from ratui.engine.state.catalog.base import BranchCatalog
    from ratui.engine.state.catalog.config import catalog_config

    assert tuple(BACKENDS) == catalog_specs.NAMES
    assert CatalogSection().type == catalog_specs.DEFAULT == catalog_config(None, env={}).type
    for spec in catalog_specs.SPECS:
        cls = backend(spec.name)
        assert issubclass(cls, BranchCatalog) and not inspect.isabstract(cls), cls
        assert "opened" in cls.__dict__, f"{cls.__name__} does not say how it opens from ratui.yaml"
        section = {"type": spec.name, **({"uri": "http://nessie:19120/api/v2"} if spec.server else {})}
        assert CatalogSection.model_validate(section).type == spec.name
        assert catalog_config(section, env={}).type == spec.name
        if not spec.server:
            with pytest.raises(ValidationError, match="belongs to"):
                CatalogSection.model_validate({**section, "uri": "http://nessie:19120/api/v2"})
    with pytest.raises(ValidationError):
        CatalogSection.model_validate({"type": "glue"})
    with pytest.raises(RatuiError, match="catalog.type must be one of " + ", ".join(catalog_specs.NAMES)):
        catalog_config({"type": "glue"}, env={})


# -------------------------------------------------------------------------------------------- landing formats


def _sample(tmp_path: Path, fmt: str) -> Path:
    """A small file of format `fmt` whose columns are id and name (every registered format must have one here)."""
    if fmt == "csv":
        path = tmp_path / "a.csv"
        path.write_text("id,name\n1,x\n")
    elif fmt == "json":
        path = tmp_path / "a.jsonl"
        path.write_text(json.dumps({"id": 1, "name": "x"}) + "\n")
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"id": [1], "name": ["x"]}), path)
    else:
        raise AssertionError(f"landing format {fmt} has no sample file in this test: add one")
    return path


def test_every_landing_format_module_is_registered_and_owns_its_reading_and_columns(tmp_path):
    """Each module of landing/formats/ declares FORMAT and is in FORMATS (or is a helper a format module imports);
    a format's own module reads its files and names a file's columns (column lineage asks it, nothing else);
    no format imports the reader back."""
    import importlib

    from ratui.engine.landing import formats
    from ratui.engine.landing.files import ZoneFile
    from ratui.engine.landing.formats import BY_SUFFIX, FORMATS
    from ratui.engine.landing.read_contract import Format

    folder = Path(formats.__file__).parent
    modules = {info.name: importlib.import_module(f"{formats.__name__}.{info.name}")
               for info in pkgutil.iter_modules([str(folder)])}
    declaring = {name: module for name, module in modules.items() if hasattr(module, "FORMAT")}
    assert {m.FORMAT.name for m in declaring.values()} == set(FORMATS)
    for module in declaring.values():
        assert FORMATS[module.FORMAT.name] is module.FORMAT and isinstance(module.FORMAT, Format)
        assert module.FORMAT.read.__module__ == module.__name__ == module.FORMAT.columns.__module__
        assert list(inspect.signature(module.FORMAT.read).parameters) == ["zr", "files"]
    helpers = set(modules) - set(declaring)
    for helper in helpers:  # imported by a format module, or it is a format that forgot its FORMAT
        assert any(f"formats.{helper} import" in inspect.getsource(m) for m in declaring.values()), helper
    suffixes = [s for f in FORMATS.values() for s in f.suffixes]
    assert len(suffixes) == len(set(suffixes)) == len(BY_SUFFIX)
    assert all(s.startswith(".") and s == s.lower() for s in suffixes)
    for fmt in FORMATS.values():
        path = _sample(tmp_path, fmt.name)
        assert fmt.columns(ZoneFile(path, path.name)) == ["id", "name"]
    for module in declaring.values():
        assert "landing.reader" not in inspect.getsource(module), module.__name__
    lineage = (RATUI / "engine" / "project" / "column_lineage.py").read_text() + \
        (RATUI / "engine" / "landing" / "zone_columns.py").read_text()
    assert all(f'"{name}"' not in lineage for name in FORMATS), "a format's case outside its own module"


# -------------------------------------------------------------------------------------------- the ctx API


def test_both_pipeline_contexts_give_every_name_of_the_protocol():
    from ratui.engine.isolation.child import Context
    from ratui.engine.project.pipeline_context import PipelineContext
    from ratui.engine.run.python_pipeline import PythonContext

    in_process = PythonContext(spark=None, _ref=str, _zone=str, this_view=None, run_started_at="t",
                               watermark_value=None, _incremental=False, _scd2=False)
    confined = Context(None, {"namespace": "ns", "tables": {}, "zones": {}, "run_started_at": "t",
                              "watermark_value": None, "incremental": False, "scd2": False})
    members = {name: value for name, value in vars(PipelineContext).items() if not name.startswith("_")}
    assert set(members) >= {"ref", "landing_zone", "sql", "this", "is_incremental", "is_scd2"}
    attributes = set(PipelineContext.__annotations__)
    assert attributes == {"spark", "run_started_at", "watermark_value"}
    for cls, instance in ((PythonContext, in_process), (Context, confined)):
        assert PipelineContext in cls.__mro__
        for name, declared in members.items():
            given = cls.__dict__.get(name)
            assert given is not None, f"{cls.__qualname__} does not give ctx.{name}"
            if isinstance(declared, property):
                assert isinstance(given, property), (cls, name)
                continue
            assert list(inspect.signature(given).parameters) == list(inspect.signature(declared).parameters), \
                (cls, name)
            assert inspect.getdoc(getattr(cls, name)) == inspect.getdoc(declared)  # its docs are the protocol's
        for name in attributes:
            assert hasattr(instance, name), f"{cls.__qualname__} has no ctx.{name}"
    assert in_process.is_incremental() is False and confined.this is None and in_process.this is None


# ------------------------------------------------------------------------------------------ error and hint


def test_an_error_and_its_hint_read_one_way():
    error = RatuiError("RAT-CFG-002", "unknown key x", file="p/pipeline.sql", line=3, hint="Check it.")
    assert error.text() == "RAT-CFG-002 unknown key x\nhint: Check it."
    assert error.text(where=True) == "RAT-CFG-002 p/pipeline.sql:3: unknown key x\nhint: Check it."
    assert error.render() == "error[RAT-CFG-002] p/pipeline.sql:3: unknown key x\n  hint: Check it."
    assert error_text("RAT-X", "m") == "RAT-X m"  # no hint, no hint line
    # the places that show an error as plain text (no styles) call the formatter, never assemble it
    assembled = []
    for root in ("cli", "api", "rest", "web", "console"):
        for path in sorted((RATUI / root).rglob("*.py")) if (RATUI / root).is_dir() else []:
            if "hint: {" in path.read_text(encoding="utf-8"):
                assembled.append(str(path.relative_to(RATUI.parent)))
    for path in sorted(RATUI.glob("app*.py")):
        if "hint: {" in path.read_text(encoding="utf-8"):
            assembled.append(str(path.relative_to(RATUI.parent)))
    assert assembled == [], assembled
