"""The structure's checks, run with the tests so CI fails on a broken one: import contracts (import-linter, the
contracts are in pyproject.toml), lint (ruff) and the engine's types (mypy)."""

from __future__ import annotations

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


def test_no_module_of_ratui_imports_itself_back():
    """No import circle anywhere under ratui/, imports made only for type checking included (grimp, which
    import-linter installs, reads the imports from the source): for every import A -> B, B never reaches A."""
    script = (
        "import grimp\n"
        "graph = grimp.build_graph('ratui', cache_dir=None)\n"
        "for importer in sorted(graph.modules):\n"
        "    for imported in sorted(graph.find_modules_directly_imported_by(importer)):\n"
        "        back = graph.find_shortest_chain(importer=imported, imported=importer)\n"
        "        if back:\n"
        "            print(importer, '->', ' -> '.join(back))\n")
    proc = run(sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "", "import circles:\n" + proc.stdout


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
