"""The warm engine: one ratui process per project and user that keeps Spark, the catalog and the opened project
between commands, so that `ratui run`, `query`, `diff` and `merge` from a shell cost what they cost in the console.

    client.py   what `ratui COMMAND` does when the command can run warm: reach (or start) the project's engine,
                hand it the command with this process's stdin, stdout and stderr, forward Ctrl-C, exit with its code
    host.py     the engine process: a Unix socket, a thread per command, the same command functions as a cold run
    place.py    where an engine lives (a private folder of this user), what it is (its fingerprint), its files
    wire.py     the messages between them, and the passing of file descriptors
    stdio.py    a command's prints go to its own client's terminal or pipe, from every thread it starts

Imports stay light on the client's side (client, place, wire): a command that runs warm loads no PySpark.
"""
