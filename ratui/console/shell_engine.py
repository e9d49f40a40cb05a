"""The project's warm engine as the console sees it: the process that runs the shell's `ratui run`, `query`, `diff`
and `merge` (ratui/warm/), beside the console's own Spark, which runs the console's runs in its process.

`read(root)` asks the engine over its socket (`ratui engine status`'s question): blocking, so the controller's
caller runs it on a worker thread. The words the status line and the detail notice use are here too, as plain
text: this module imports no Textual.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ratui.engine.errors import RatuiError

UP, OFF, UNREACHABLE = "up", "off", "unreachable"


@dataclass(frozen=True)
class ShellEngine:
    """What the project's warm engine is now: `state` UP (with what `ratui engine status` says), OFF (none runs),
    or UNREACHABLE (its folder is refused: `problem` says why, with its code)."""

    state: str
    pid: int | None = None
    since: float | None = None  # seconds since the epoch
    commands: int = 0  # served since it started
    running: int = 0  # in flight now
    rss_bytes: int | None = None
    spark: str | None = None  # where its Spark runs, once started
    idle_minutes: int | None = None
    warm_off: str | None = None  # what keeps the shell's commands from using an engine (RATUI_WARM=0, ratui.yaml)
    problem: str | None = None
    socket: str | None = None
    log: str | None = None
    running_argv: tuple[str, ...] = field(default=())
    console: bool = False  # a console serves the shell's commands (ratui/warm/hosted.py), not an engine of its own
    here: bool = False  # and it is this console


def read(root: Path) -> ShellEngine:
    """The project's warm engine now. Never raises: an unreadable engine is OFF, a refused folder UNREACHABLE.
    Creates nothing (no folder, no engine). Blocking (a connect and one answer, each bounded)."""
    from ratui.warm import client, place as places

    warm_off = client.warm_off(root)
    try:
        folder = places.engines_folder(create=False)
        if not folder.is_dir():
            return ShellEngine(OFF, warm_off=warm_off)
        place = places.place_of(root, folder)
        answer = client.ask(place, {"status": True})
    except RatuiError as exc:
        return ShellEngine(UNREACHABLE, warm_off=warm_off, problem=f"{exc.code} {exc.message}")
    status = (answer or {}).get("status")
    if not isinstance(status, dict):
        return ShellEngine(OFF, warm_off=warm_off, socket=str(place.socket), log=str(place.log))
    running = status.get("running") or []
    return ShellEngine(
        UP, pid=status.get("pid"), since=status.get("since"), commands=int(status.get("commands_served") or 0),
        running=len(running), rss_bytes=status.get("rss_bytes"), spark=status.get("spark"),
        idle_minutes=status.get("idle_minutes"), warm_off=warm_off, socket=str(place.socket), log=str(place.log),
        running_argv=tuple(" ".join(str(w) for w in (r.get("argv") or [])) for r in running),
        console=bool(status.get("console")), here=bool(status.get("console")) and status.get("pid") == os.getpid())


# ------------------------------------------------------------------------------------------------ its words
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _age(since: float | None, now: float) -> str:
    if since is None:
        return "?"
    seconds = max(0, int(now - since))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d}"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def _mib(rss: int | None) -> str | None:
    return f"{rss / 2**20:,.0f} MiB" if rss else None


def line_forms(engine: ShellEngine | None, now: float) -> list[tuple[str, str]]:
    """The status line's words for the engine, longest first, each (text, style); [] before the first read."""
    if engine is None:
        return []
    if engine.state == UNREACHABLE:
        code = (engine.problem or "").split(" ", 1)[0]
        return [(f"✘ shell engine: {code}", "red")]
    if engine.state == OFF:
        return [("○ shell engine off", "dim")]
    cmds = _plural(engine.commands, "cmd")
    busy = f"{engine.running} running, " if engine.running else ""
    style = "cyan" if engine.running else "green"
    if engine.here:
        return [(f"● serving the shell: {busy}{cmds}", style), (f"● serving the shell: {cmds}", style)]
    if engine.console:
        return [(f"● shell served by the console of pid {engine.pid}: {busy}{cmds}", style),
                (f"● shell served by console {engine.pid}", style), (f"● shell: console {engine.pid}", style)]
    memory = _mib(engine.rss_bytes)
    long = f"● shell engine: up {_age(engine.since, now)}, {busy}{cmds}{', ' + memory if memory else ''}, " \
           f"pid {engine.pid}"
    return [(long, style), (f"● shell engine: up, {busy}{cmds}", style), (f"● shell engine: {cmds}", style)]


def detail(engine: ShellEngine, console_spark: str, now: float) -> str:
    """The detail notice: which Spark serves the console's runs, and what the shell's warm engine holds."""
    lines = [f"The console's runs use its own Spark, in this process: {console_spark or 'not started yet'}."]
    if engine.state == UNREACHABLE:
        lines.append(f"The shell's warm engine cannot be reached: {engine.problem}.")
    elif engine.state == OFF:
        lines.append("No warm engine runs for this project: the shell's `ratui run`, `backfill`, `query`, `diff` and "
                     "`merge` start one (or `ratui engine start`).")
    elif engine.console:
        who = "this console" if engine.here else f"the console of pid {engine.pid}"
        lines += [f"The shell's `ratui run`, `backfill`, `query`, `diff`, `merge` and `watch` run in {who}, on its "
                  f"Spark: {engine.commands} served, {engine.running} running (their runs show here live).",
                  "  it serves until that console closes, or `ratui engine stop`"]
        lines += [f"  running: ratui {argv}" for argv in engine.running_argv]
    else:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(engine.since)) if engine.since else "?"
        lines += [f"The shell's warm engine: pid {engine.pid}, since {started} ({_age(engine.since, now)}).",
                  f"  its Spark: {engine.spark or 'not started yet'}",
                  f"  commands: {engine.commands} served, {engine.running} running",
                  f"  memory: {_mib(engine.rss_bytes) or '?'} (its Python; Spark's JVM is its own)"]
        lines += [f"  running: ratui {argv}" for argv in engine.running_argv]
        if engine.idle_minutes:
            lines.append(f"  stops after {engine.idle_minutes} idle minute(s), or `ratui engine stop`")
    if engine.warm_off:
        lines.append(f"The shell's commands run in their own process ({engine.warm_off}).")
    return "\n".join(lines)
