"""How a Python pipeline's run(ctx) is kept from the machine: the isolation levels, declared once (ratui.yaml's
python.isolation, a pipeline's own `isolation`). The settings schema and a pipeline's configuration accept these
names; isolation/levels.py decides which level a run gets (a level the machine cannot give degrades to the next
one down), isolation/runner.py and isolation/child.py give it. tests/engine/test_declared_lists.py fails when a
level is not accepted or not given everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IsolationLevel:
    name: str
    in_child: bool  # run(ctx) runs in a child process whose only handle on data is a Spark Connect session
    confined: bool  # the child confines itself (Landlock, seccomp) before the user's module loads
    jailed: bool  # the child runs inside bubblewrap's namespaces
    summary: str


LEVELS = (
    IsolationLevel("none", in_child=False, confined=False, jailed=False, summary=(
        "run(ctx) in ratui's own process, with the user's privileges (dbt's Python models work this way)")),
    IsolationLevel("process", in_child=True, confined=False, jailed=False, summary=(
        "a child Python (-I) in its own session: an allow-listed environment (no keys or tokens), a scratch folder "
        "as its working directory, limits on CPU, memory, file size and open files, a wall-clock timeout, its whole "
        "process group killed at the end; its only handle on data is a Spark Connect session to ratui's data "
        "server (isolation/data_server.py), no py4j and no SparkContext")),
    IsolationLevel("confined", in_child=True, confined=True, jailed=False, summary=(
        "process, and before the pipeline's module loads: Landlock (read the Python installation and the "
        "pipeline's folder, write the scratch folder, execute nothing, TCP only to the data server) and a seccomp "
        "filter (no fork, exec, ptrace, mount, namespaces, bpf, keyrings, UDP or IPv6)")),
    IsolationLevel("jail", in_child=True, confined=True, jailed=True, summary=(
        "confined, inside bubblewrap (own user, PID, IPC and UTS namespaces, a read-only view of the system, no "
        "home folder, an empty /tmp)")),
)
BY_NAME = {level.name: level for level in LEVELS}
NAMES = tuple(BY_NAME)
DEFAULT = "confined"
CONFINED = tuple(level.name for level in LEVELS if level.confined)


def listed() -> str:
    """The names as a hint lists them: 'none, process, confined or jail'."""
    return ", ".join(NAMES[:-1]) + " or " + NAMES[-1]
