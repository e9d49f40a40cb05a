"""Where a project's warm engine lives and what it is.

Every engine of a user is in one private folder: `$RATUI_ENGINE_DIR`, else `$XDG_RUNTIME_DIR/ratui`, else
`/tmp/ratui-UID`. The folder must belong to the user and let nobody else in (0700): a folder that does not is
refused, never used (another user could otherwise put a socket of theirs where ours is looked for). A project's
files there are named by a digest of its real path: `KEY.sock` (the socket the engine listens on), `KEY.json`
(what it is: pid, project, since when, its fingerprint), `KEY.lock` (held while one is started, so two commands
at once start one engine), `KEY.log` (what it printed: `ratui engine logs`; KEY.log.1 the older lines), `KEY.renewed`
(why the last engine renewed itself: said by the next command, then removed).

The fingerprint is what the engine was started with and must not silently differ for a command it runs: ratui's
version and code, the Python it runs on and its installed packages, and the environment (less what changes from
one terminal to the next). A command whose fingerprint differs gets a fresh engine, said once.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ratui.engine.errors import RatuiError

# variables that differ between two terminals of the same session and say nothing about how a command runs
VOLATILE_ENV = ("PWD", "OLDPWD", "SHLVL", "_", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID",
                "COLUMNS", "LINES", "TMUX", "TMUX_PANE", "WINDOWID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
                "SSH_AUTH_SOCK", "DISPLAY", "WAYLAND_DISPLAY", "LS_COLORS", "PS1", "PS2", "PROMPT_COMMAND", "HISTFILE",
                "VTE_VERSION", "COLORTERM", "STY", "WINDOW", "MAIL", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER",
                "PYTEST_XDIST_TESTRUNUID", "PYTEST_XDIST_WORKER_COUNT", "COV_CORE_CONTEXT",
                "SHELL", "RATUI_ENGINE_ANSWER_SECONDS")
# SHELL: the login shell a terminal (or tmux, for its panes) sets; ratui and Spark never read it. The last: how long
# a command waits for its engine, the client's own


@dataclass(frozen=True)
class Place:
    """The files of one project's engine."""

    folder: Path
    key: str
    project: Path

    @property
    def socket(self) -> Path:
        return self.folder / f"{self.key}.sock"

    @property
    def info(self) -> Path:
        return self.folder / f"{self.key}.json"

    @property
    def lock(self) -> Path:
        return self.folder / f"{self.key}.lock"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.key}.log"

    @property
    def note(self) -> Path:
        return self.folder / f"{self.key}.renewed"

    def leave_note(self, note: dict) -> None:
        """Why this engine retires, for the next command to say (nothing when it cannot be written)."""
        try:
            fd = os.open(self.note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(note))
        except OSError:
            pass

    def take_note(self) -> dict | None:
        """The note the last engine left, removed: said once."""
        try:
            note = json.loads(self.note.read_text(encoding="utf-8"))
            self.note.unlink(missing_ok=True)
        except (OSError, ValueError):
            return None
        return note if isinstance(note, dict) else None

    def read_info(self) -> dict | None:
        try:
            return json.loads(self.info.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


@contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name to bind or connect the Unix socket at `path` by: the path itself when it fits in a socket's address
    (107 bytes), else a short one through the open folder, /proc/self/fd/N/NAME (a deep RATUI_ENGINE_DIR or
    XDG_RUNTIME_DIR)."""
    text = str(path)
    if len(text.encode()) < 100:
        yield text
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def engines_folder(create: bool = True) -> Path:
    """This user's folder of engines, made private if it is new; RAT-ENG-001 when it exists and is not private."""
    given = os.environ.get("RATUI_ENGINE_DIR")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if given:
        folder = Path(given)
    elif runtime and Path(runtime).is_dir():
        folder = Path(runtime) / "ratui"
    else:
        folder = Path("/tmp") / f"ratui-{os.getuid()}"
    if create:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RatuiError("RAT-ENG-001", f"the warm engines' folder {folder} cannot be made: {exc.strerror}",
                             file=str(folder), hint=_PRIVATE_HINT) from None
    check_private(folder)
    return folder


_PRIVATE_HINT = ("The folder holds the sockets of your warm engines: it must be yours and closed to others "
                 "(chmod 700). Set RATUI_ENGINE_DIR to another folder, or run with --no-warm.")


def check_private(folder: Path) -> None:
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RatuiError("RAT-ENG-001", f"the warm engines' folder {folder} cannot be read: {exc.strerror}",
                         file=str(folder), hint=_PRIVATE_HINT) from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        what = "a link" if stat.S_ISLNK(info.st_mode) else f"mode {stat.S_IMODE(info.st_mode):04o}, owner uid " \
                                                            f"{info.st_uid}"
        raise RatuiError("RAT-ENG-001", f"the warm engines' folder {folder} is not private ({what}); it is not used",
                         file=str(folder), hint=_PRIVATE_HINT)


def place_of(project: Path, folder: Path | None = None) -> Place:
    real = Path(os.path.realpath(project))
    key = hashlib.sha256(str(real).encode()).hexdigest()[:20]
    return Place(folder or engines_folder(), key, real)


def fingerprint(env: dict[str, str] | None = None) -> str:
    """What an engine started now would be: ratui's version and code, the Python and its packages, the
    environment (less VOLATILE_ENV)."""
    from ratui.version import __version__

    env = dict(os.environ if env is None else env)
    parts = [__version__, sys.executable, sys.version, _code_stamp(), _packages_stamp()]
    parts += [f"{k}={v}" for k, v in sorted(env.items()) if k not in VOLATILE_ENV]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def differences(env_a: dict[str, str], env_b: dict[str, str]) -> list[str]:
    """The names of the variables (never their values: they may be secrets) that differ."""
    names = {k for k in set(env_a) | set(env_b) if k not in VOLATILE_ENV and env_a.get(k) != env_b.get(k)}
    return sorted(names)


def _code_stamp() -> str:
    """The newest modification of ratui's own files: an edited checkout is a new engine."""
    root = Path(__file__).resolve().parent.parent
    newest = 0
    for folder, _dirs, files in os.walk(root):
        if "__pycache__" in folder:
            continue
        for name in files:
            if name.endswith((".py", ".yaml")):
                try:
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
                except OSError:
                    pass
    return str(newest)


def _packages_stamp() -> str:
    """The installed packages: a pip install or uninstall changes a site-packages folder's modification time."""
    stamps = []
    for folder in sys.path:
        if folder.endswith("site-packages"):
            try:
                stamps.append(f"{folder}:{os.stat(folder).st_mtime_ns}")
            except OSError:
                pass
    return ";".join(stamps)
