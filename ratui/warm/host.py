"""The warm engine of one project: `python -m ratui.warm.host PROJECT [AFTER_PID]` (client.py starts it; nobody else
needs to). Its door, what it serves and how long it lives are door.py's; here is the process: the lock, the standard
streams routed by command, `ratui`'s own commands handed down (the command line is the top layer: this entry point
is the one place below it that imports it), the signals, the warm-up, the serving.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from ratui.warm import place as places, stdio
from ratui.warm.door import Host, log, tree_rss

__all__ = ["Host", "main", "tree_rss"]


def main(argv: list[str]) -> int:
    project = Path(argv[0]).resolve()
    after_pid = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 0
    started_env = dict(os.environ)
    place = places.place_of(project)
    host = Host(place, started_env)
    if not host.claim():
        log(f"another warm engine of {project} is running: this one exits")
        return 0
    stdio.install(sys.__stderr__)
    from ratui.cli import common
    from ratui.cli.main import execute, parse
    from ratui.warm import served

    served.commands_from(parse, execute)
    common.keep_engines_open(host.engine_for_command)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda signum, _frame: host.stop_all(signum))
    host.listen()
    log(f"warm engine of {project} listening on {place.socket} (pid {os.getpid()})")
    threading.Thread(target=host.warm_up, args=(after_pid,), name="ratui-engine-warm-up", daemon=True).start()
    try:
        host.serve()
    finally:
        host.retire(host.retired or "stopped")
        log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
