"""Which of Java's compilers ratui's own JVM uses (ratui.yaml `spark.jit`).

A JVM compiles hot code twice: first with its quick compiler (C1), then the hottest parts again with the optimising
one (C2). A new Spark spends most of its first seconds doing that: on a 2-core machine the JIT takes about half of
the JVM's CPU while it boots and runs its first queries, and the optimised code pays off only in work that runs
long enough. With the quick compiler alone (`-XX:TieredStopAtLevel=1`) a new JVM starts and runs its first small
queries in about half the CPU, but big work runs up to 2.7x slower.

- `full`: both compilers (Java's default).
- `quick`: the quick compiler only.
- `auto` (the default): `quick` for a process that runs a known, small piece of work and exits (a `ratui run` whose
  inputs add up to less than SMALL_INPUT_BYTES: its engine says so with expect_small_work() before Spark starts),
  `full` for everything else: the console, `ratui watch` and `ratui web` live long, and a run over big inputs needs
  the optimised code.

Only ratui's own JVM in local mode is concerned: a cluster's executors and a Spark Connect server are started by
someone else.
"""

from __future__ import annotations

import threading

from ratui.engine.project.settings import Settings

QUICK_OPTION = "-XX:TieredStopAtLevel=1"

# Measured on the 2-core machine (benchmarks/README.md): a new process reading a Parquet table, writing a projection
# of it and aggregating that, quick vs full: 1M rows (17 MB) 1.5-2.3 s faster, 4M rows (66 MB) 0.6-1.4 s slower.
SMALL_INPUT_BYTES = 32 * 1024 * 1024

_lock = threading.Lock()
_small_work: str | None = None  # why this process's work is small, once its engine said so
_lives_long = False  # the warm engine: many commands, one JVM (lives_long())


def expect_small_work(reason: str | None) -> None:
    """This process runs only a small piece of work and then exits (`reason` says what; None: its work is big or
    of unknown size): a JVM started from now on compiles quickly when ratui.yaml leaves `spark.jit` at auto. Call
    it before Spark starts. Ignored in a process that lives long (lives_long())."""
    global _small_work
    with _lock:
        if not _lives_long:
            _small_work = reason


def lives_long() -> None:
    """This process serves many commands (the warm engine): its JVM compiles fully, whatever a command expects."""
    global _small_work, _lives_long
    with _lock:
        _lives_long = True
        _small_work = None


def long_lived() -> bool:
    """Whether this process is the warm engine (lives_long() was called)."""
    return _lives_long


def mode(settings: Settings) -> str:
    """'quick' or 'full': how a JVM started now for these settings compiles."""
    if settings.spark_jit != "auto":
        return settings.spark_jit
    local = not settings.spark_remote and settings.spark_master.startswith("local")
    return "quick" if local and _small_work is not None else "full"


def describe(settings: Settings) -> str:
    """The choice and why, for the JVM's log: "quick (spark.jit auto: 1 pipeline(s) reading at most 1,024 bytes)"."""
    chosen = mode(settings)
    if settings.spark_jit != "auto":
        why = f"spark.jit {settings.spark_jit}"
    elif chosen == "quick":
        why = f"spark.jit auto: {_small_work}"
    else:
        why = "spark.jit auto: a long-lived process, or inputs that are big or of unknown size"
    return f"{chosen} ({why})"


def java_option(settings: Settings) -> str:
    """The JVM option for mode(settings) ('' for full)."""
    return QUICK_OPTION if mode(settings) == "quick" else ""
