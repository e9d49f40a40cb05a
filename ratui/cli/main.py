"""The `ratui` command line: the engine headless, for scripts, cron and CI. Each command group is a module of this
package with its parsers (`add_parsers`) and its commands (`COMMANDS`); this one builds the parser from them and runs
a command, turning every failure into a coded error (never a traceback).

Exit codes: 0 every selected run succeeded (warnings allowed); 1 a run failed or was cancelled; 2 a usage,
configuration or compile error, reported before any branch is created.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from ratui.cli.common import (
    EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_USAGE, err as _err,
)
from ratui.engine.errors import ProjectErrors, RatuiError, is_usage_error
from ratui.cli import (
    alerts, backfill, branches, catalog_server, history, landing, lineage, ops, project, query, run, schedules, serve,
    warm,
)

# the groups in the order `ratui --help` lists their commands
GROUPS = (serve, catalog_server, run, backfill, query, history, branches, landing, lineage, ops, schedules, alerts,
          project, warm)
COMMANDS = {name: command for group in GROUPS for name, command in group.COMMANDS.items()}


# the words of the command this thread parses and runs (the warm engine runs its clients' commands, not its argv)
_PARSING = threading.local()


def _words() -> list[str]:
    return getattr(_PARSING, "words", None) or sys.argv[1:]


class _Parser(argparse.ArgumentParser):
    """argparse with coded errors: `error[RAT-CLI-001] ...` (JSON with --json) and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        error = RatuiError("RAT-CLI-001", f"{self.prog}: {message}", hint=f"`{self.prog} --help` lists what it takes.")
        _err(error, "--json" in _words())
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ratui", description="A local lakehouse operations console.")
    from ratui.version import __version__

    parser.add_argument("--version", action="version", version=f"ratui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


# the commands a warm engine runs (ratui/warm/): the ones that need Spark or the opened catalog; the others start
# no JVM and are as quick in a process of their own
WARM_COMMANDS = ("run", "backfill", "query", "diff", "merge", "watch")


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or (words[0].startswith("-") and words[0] not in ("-h", "--help", "--version")):
        words = ["tui", *words]  # `ratui` and `ratui --project DIR` open the console
    args = parse(words)
    if args.command in ("tui", "up"):  # the console and the runner serve the shell's commands (ratui/warm/hosted.py)
        from ratui.warm import served

        served.commands_from(parse, execute)
    if args.command in WARM_COMMANDS and not getattr(args, "no_warm", False):
        from ratui.warm.client import run_warm

        code = run_warm(words, args.project, getattr(args, "json", False))
        if code is not None:
            return code
    code = execute(args)
    _send_pending_alerts()
    return code


def _send_pending_alerts() -> None:
    """The alerts this command's runs caused are sent before it exits (bounded: engine/alerts/dispatch.py); a
    command that ran no alerting Engine has none (the module was never imported)."""
    dispatch = sys.modules.get("ratui.engine.alerts.dispatch")
    if dispatch is not None:
        dispatch.flush_all()


def parse(words: list[str]) -> argparse.Namespace:
    """The command and its options (a usage error is printed and raises SystemExit 2)."""
    parser = build_parser()
    _PARSING.words = words
    return parser.parse_args(words)


def execute(args: argparse.Namespace) -> int:
    """Run a parsed command in this process; every failure becomes a coded error and an exit code."""
    as_json = getattr(args, "json", False)
    try:
        return COMMANDS[args.command](args)
    except RatuiError as exc:
        _err(exc, as_json)
        return EXIT_USAGE if is_usage_error(exc.code) else EXIT_FAILED
    except ProjectErrors as exc:
        for e in exc.errors:
            _err(e, as_json)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:  # never a traceback on the terminal: a coded error, the traceback in a log file
        if _is_database_error(exc):
            _err(RatuiError("RAT-PRJ-008", f"the state database cannot be read: {_first_line(exc)}",
                            file=_state_db(getattr(args, "project", None))), as_json)
            return EXIT_USAGE
        log = _crash_log(getattr(args, "project", None))
        _err(RatuiError("RAT-RUN-002", f"{type(exc).__name__}: {_first_line(exc)}",
                        hint=f"This is a bug in ratui; the traceback is in {log}. main is unchanged."), as_json)
        return EXIT_FAILED


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (`ratui runs | head`): stop quietly, and keep Python from complaining
    again when it flushes stdout at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return EXIT_BROKEN_PIPE


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _is_database_error(exc: BaseException) -> bool:
    import sqlite3

    while exc is not None:
        if isinstance(exc, sqlite3.DatabaseError) or type(exc).__name__ == "DatabaseError":
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _state_db(project: str | None) -> str | None:
    try:
        from ratui.engine.project.settings import DB_FILE, STATE_DIR, find_project_root

        return str(find_project_root(Path(project or ".")) / STATE_DIR / DB_FILE)
    except Exception:
        return None


def _crash_log(project: str | None) -> str:
    import tempfile
    import traceback

    folder = None
    if project:
        try:
            from ratui.engine.project.settings import find_project_root

            folder = find_project_root(Path(project)) / ".ratui" / "logs"
            folder.mkdir(parents=True, exist_ok=True)
        except Exception:
            folder = None
    path = (folder or Path(tempfile.gettempdir())) / "ratui-crash.log"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} ratui {' '.join(_words())}\n")
        fh.write(traceback.format_exc())
    return str(path)
