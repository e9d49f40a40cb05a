"""`python -I -m ratui.engine.isolation.jvm_launch`: start the data server's JVM inside its Landlock domain.

Reads its plan (JSON) from stdin: the JVM's command and environment, the paths it may read, write and execute,
its own TCP ports, the pid of the ratui process it belongs to. It dies with that process (PR_SET_PDEATHSIG),
confines itself when the plan says so (every thread and process the JVM starts inherits the domain), and becomes
the JVM (execve: same pid, same process group).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    plan = json.loads(sys.stdin.read())
    from ratui.engine.isolation import limits

    limits.die_with_parent(int(plan["parent"]))
    if plan.get("confine"):  # a domain it cannot have is an error (ConfinementError): never an unconfined JVM
        from ratui.engine.isolation import landlock

        proc_self = Path(f"/proc/{os.getpid()}")  # after execve the JVM keeps this pid: its own /proc only
        landlock.restrict(read=[Path(p) for p in plan["read"]] + [proc_self],
                          write=[Path(p) for p in plan["write"]],
                          execute=[Path(p) for p in plan["execute"]],
                          sockets=[Path(p) for p in plan["sockets"]],
                          connect_ports=plan["ports"], bind_ports=plan["ports"])
    argv = plan["argv"]
    os.execve(argv[0], argv, plan["env"])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
