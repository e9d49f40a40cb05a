"""The documentation site (kind: unit; no JVM, no server): it builds strictly, its generated pages and pictures are
what docs/generate.py writes now, the generator refuses to write untrue pages, and the README stays short with its two
commands.

A broken link, anchor or picture fails `mkdocs build --strict`; a changed CLI option, ratui.yaml or pipeline key,
error hint or console snapshot fails the generator's check until `python docs/generate.py` is run."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import Field

from tests.docs.pages import shell_lines

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/ratui tui --project sample_project"


@pytest.fixture(scope="module")
def generate():
    """docs/generate.py as a module (without writing bytecode into docs/, which the site would publish)."""
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


def run(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {"PYTHONDONTWRITEBYTECODE": "1", "NO_MKDOCS_2_WARNING": "1"}
    import os

    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, **env})


def test_the_site_builds_strictly(tmp_path):
    proc = run(sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
               "--site-dir", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("index.html", "getting-started.html", "reference/cli.html", "reference/settings.html",
                 "reference/pipeline-config.html", "reference/errors.html", "console/index.html"):
        assert (site / page).is_file(), page
    assert (site / "images" / "pipelines.svg").is_file()
    assert not (site / "generate.py").exists() and not (site / "reference_keys.yaml").exists()


def test_the_generated_pages_and_pictures_are_current():
    proc = run(sys.executable, str(DOCS / "generate.py"), "--check")
    assert proc.returncode == 0, "docs/generate.py --check:\n" + proc.stderr[-4000:]


def test_the_check_names_the_page_of_a_changed_error_hint(generate, monkeypatch, tmp_path):
    changed = tmp_path / "errors.yaml"
    text = generate.ERRORS_YAML.read_text(encoding="utf-8")
    hint = re.search(r'^    hint: (.+)$', text, flags=re.MULTILINE)
    changed.write_text(text.replace(hint.group(0), "    hint: A hint the page does not say.", 1), encoding="utf-8")
    monkeypatch.setattr(generate, "ERRORS_YAML", changed)
    problems = generate.differences(generate.outputs())
    assert problems == ["docs/reference/errors.md: stale"]


def test_the_check_names_the_page_of_a_changed_default(generate, monkeypatch):
    from ratui.engine.project import config, settings_schema

    class Reaper(settings_schema.ReaperSection):
        interval_minutes: settings_schema.Positive = 61

    class Settings(settings_schema.SettingsFile):
        reaper: Reaper = Field(default_factory=Reaper)

    hints = typing.get_type_hints(config.PipelineConfig, include_extras=True)
    Pipeline = dataclasses.make_dataclass(
        "Pipeline", [("landing_mode", hints["landing_mode"], dataclasses.field(default="new_files"))],
        bases=(config.PipelineConfig,), frozen=True)

    monkeypatch.setattr(settings_schema, "SettingsFile", Settings)
    assert generate.differences(generate.outputs()) == ["docs/reference/settings.md: stale"]
    assert "default: `61`" in generate.settings_page()
    monkeypatch.setattr(config, "PipelineConfig", Pipeline)
    assert generate.differences(generate.outputs()) == ["docs/reference/settings.md: stale",
                                                        "docs/reference/pipeline-config.md: stale"]


def test_the_check_names_a_stale_or_missing_picture(generate, monkeypatch, tmp_path):
    name, source = generate.PICTURES[0]
    snapshots = tmp_path / "snapshots"
    (snapshots / source).parent.mkdir(parents=True)
    (snapshots / source).write_bytes((generate.SNAPSHOTS / source).read_bytes() + b"\n<!-- redrawn -->\n")
    monkeypatch.setattr(generate, "PICTURES", ((name, source),))
    monkeypatch.setattr(generate, "SNAPSHOTS", snapshots)
    problems = generate.differences(generate.outputs())
    assert f"docs/images/{name}: stale" in problems
    # and every picture no one chooses any more is named for removal
    assert any(p.startswith("docs/images/") and p.endswith("(remove it)") for p in problems)
    (snapshots / source).unlink()
    with pytest.raises(generate.Stop, match="does not exist"):
        generate.outputs()


def test_the_generator_refuses_keys_without_words_and_words_without_keys(generate):
    words = generate._words()
    settings = dict(words["ratui.yaml"])
    del settings["run.threads"]
    with pytest.raises(generate.Stop, match="'run.threads' has no `about`"):
        generate.settings_page(words=settings)
    settings = {**words["ratui.yaml"], "run.fibres": {"about": "no such key", "example": 1}}
    with pytest.raises(generate.Stop, match="run.fibres"):
        generate.settings_page(words=settings)
    pipeline = dict(words["pipeline"])
    del pipeline["landing_mode"]
    with pytest.raises(generate.Stop, match="'landing_mode' has no `about`"):
        generate.config_page(words=pipeline)


def test_the_generator_refuses_an_example_the_schema_refuses(generate):
    words = generate._words()
    settings = {**words["ratui.yaml"], "spark.jit": {**words["ratui.yaml"]["spark.jit"], "example": "fast"}}
    with pytest.raises(generate.Stop, match="example of 'spark.jit' is refused"):
        generate.settings_page(words=settings)
    pipeline = {**words["pipeline"], "max_row_change": {**words["pipeline"]["max_row_change"], "example": "lots"}}
    with pytest.raises(generate.Stop, match="example of 'max_row_change' is refused"):
        generate.config_page(words=pipeline)


def test_every_command_and_option_is_in_the_reference():
    from ratui.cli.main import build_parser

    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name, sub in commands.items():
        assert f"## ratui {name} " in page, name
        for action in sub._actions:
            if action.__class__.__name__ == "_HelpAction":
                continue
            for option in action.option_strings:
                assert f"`{option}" in page or f", {option}" in page, f"ratui {name} {option}"


def test_the_readme_is_short_and_keeps_its_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert f"```sh\n{INSTALL}\n```" in text
    # the line CI runs, found the way .ci/run finds it (its own awk program)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    program = re.search(r"cmd=\$\(awk '(.+?)' README.md\)", ci).group(1)
    proc = subprocess.run(["awk", program, str(README)], capture_output=True, text=True, check=True)
    command = proc.stdout.strip()
    assert command.startswith('python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && ') and "pytest" in command
    assert "<!-- test-command: .ci/run runs exactly the next line -->\n```sh\n" + command + "\n```" in text


def test_the_readme_links_and_picture_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert "docs/images/pipelines.svg" in targets
    missing = [t for t in targets if not t.startswith("http") and not (REPO / t).exists()]
    assert missing == []


def test_ruff_is_clean_on_the_generator_and_these_tests():
    proc = run(sys.executable, "-m", "ruff", "check", "docs", "tests/docs")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_readme_tour_is_part_of_the_page():
    """The README's tour runs commands of the getting-started page only, so its test (test_getting_started.py)
    runs them too."""
    page = set(shell_lines((DOCS / "getting-started.md").read_text(encoding="utf-8")))
    readme_blocks = shell_lines(README.read_text(encoding="utf-8"))
    tour = [line for line in readme_blocks if line.startswith(("ratui ", "python "))]
    assert len(tour) >= 8, tour
    assert [line for line in tour if line not in page] == []
