"""The structure's checks, run with the tests so CI fails on a broken one: import contracts (import-linter, the
contracts are in pyproject.toml), lint (ruff) and the engine's types (mypy)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_import_contracts_hold():
    proc = run(str(BIN / "lint-imports"), "--no-cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_ruff_is_clean():
    proc = run(sys.executable, "-m", "ruff", "check", "ratui", "tests", "benchmarks")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_engine_type_checks():
    proc = run(sys.executable, "-m", "mypy", "ratui/engine")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# grimp (which import-linter installs) reads the imports from the source, imports made only for type checking
# included; the script adds what it cannot see: importlib.import_module("literal.module") calls (a module loaded by
# name is imported all the same), then reports every import A -> B from which B reaches A back
CIRCLES = """
import ast, pathlib, sys
import grimp

package, folder = sys.argv[1], pathlib.Path(sys.argv[2])
graph = grimp.build_graph(package, cache_dir=None)


def loads_by_name(call):
    func = call.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module"
             and isinstance(func.value, ast.Name) and func.value.id == "importlib") or (
        isinstance(func, ast.Name) and func.id == "import_module")
    if named and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


for path in sorted(folder.rglob("*.py")):
    parts = path.relative_to(folder.parent).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = loads_by_name(node) if isinstance(node, ast.Call) else None
        if target is not None and target in graph.modules and module in graph.modules:
            graph.add_import(importer=module, imported=target, line_number=node.lineno,
                             line_contents="importlib.import_module")
for importer in sorted(graph.modules):
    for imported in sorted(graph.find_modules_directly_imported_by(importer)):
        back = graph.find_shortest_chain(importer=imported, imported=importer)
        if back:
            print(importer, "->", " -> ".join(back))
"""


def import_circles(package: str, folder: Path, path: str | None = None) -> str:
    """Every import circle of `package` (its source in `folder`), one line each; `path`: where Python finds it."""
    env = {**os.environ, "PYTHONPATH": path} if path else None
    proc = subprocess.run([sys.executable, "-c", CIRCLES, package, str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_no_module_of_ratui_imports_itself_back():
    """No import circle anywhere under ratui/, imports made only for type checking and modules loaded by
    importlib.import_module("a.literal.name") included: for every import A -> B, B never reaches A."""
    found = import_circles("ratui", REPO / "ratui")
    assert found == "", "import circles:\n" + found


def test_the_circle_check_sees_a_module_loaded_by_name(tmp_path):
    """A circle closed by importlib.import_module (as landing/reader.py loaded the formats, which imported the
    reader back) fails the check; the same package without that call has none."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "reader.py").write_text("import importlib\n\n\ndef read():\n"
                                       "    return importlib.import_module('circled.fmt').read()\n")
    (package / "fmt.py").write_text("from circled.reader import read as _reader\n\n\ndef read():\n"
                                    "    return _reader\n")
    assert import_circles("circled", package, str(tmp_path)).splitlines() == [
        "circled.fmt -> circled.reader -> circled.fmt", "circled.reader -> circled.fmt -> circled.reader"]
    (package / "reader.py").write_text("def read():\n    return None\n")
    assert import_circles("circled", package, str(tmp_path)) == ""


def test_every_part_of_the_engine_has_its_place_in_the_layers():
    """The engine's parts form a DAG only if every one of them is in the layers contract: a new sub-package or
    top-level module of ratui/engine that is not named there could import anything, and be imported by anything."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    dag = [c for c in contracts if c["name"].startswith("The engine's parts import downward only")]
    assert len(dag) == 1 and dag[0]["type"] == "layers", [c["name"] for c in contracts]
    named = [part.strip() for layer in dag[0]["layers"] for part in layer.split("|")]
    engine = REPO / "ratui" / "engine"
    parts = {f"ratui.engine.{p.name}" for p in engine.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    parts |= {f"ratui.engine.{p.stem}" for p in engine.glob("*.py") if p.stem != "__init__"}
    assert len(named) == len(set(named)), "a part named twice in the layers"
    assert set(named) == parts, f"not in the layers: {sorted(parts - set(named))}; " \
                                f"in the layers but not in ratui/engine: {sorted(set(named) - parts)}"


def test_the_version_ratui_says_is_the_one_it_is_installed_as():
    """`ratui --version`, the warm engine's fingerprint and `ratui engine status` say ratui/version.py's version: it
    must be pyproject.toml's, the one pip installs."""
    import tomllib

    from ratui import __version__

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == __version__
