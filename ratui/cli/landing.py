"""`ratui landing`: the landing-file ledger of every namespace, `landing reset` and `landing forget`."""

from __future__ import annotations

import json

from ratui.cli.common import (
    EXIT_OK, engine as _engine, project_arg as _project_arg,
    table as _table,
)
from ratui.engine.errors import RatuiError


def add_parsers(sub) -> None:
    p = sub.add_parser("landing", help="landing files and their load state; `landing reset ZONE [FILE]`, "
                                       "`landing forget ZONE FILE` (ZONE: namespace.zone, or zone alone when "
                                       "one namespace has it)")
    p.add_argument("args", nargs="*", metavar="ZONE | reset ZONE [FILE] | forget ZONE FILE")
    _project_arg(p)
    p.add_argument("--pipeline", help="only the ledger of this pipeline (table key or name)")
    p.add_argument("--json", action="store_true")


def cmd_landing(args) -> int:
    engine = _engine(args.project)
    words = list(args.args)
    pipeline = args.pipeline
    if pipeline and pipeline.count(".") < 2:
        pipeline = engine.compile().resolve(pipeline).key
    if words and words[0] == "forget":
        if len(words) != 3:
            raise RatuiError("RAT-CLI-001", "usage: ratui landing forget ZONE FILE",
                             hint="Name the zone and the file whose ledger rows to drop.")
        changed = engine.landing_forget(words[1], words[2], pipeline)
        if changed == 0:
            raise RatuiError("RAT-LND-001", f"no ledger entry for zone '{words[1]}' file '{words[2]}'",
                             hint="`ratui landing` lists the files the ledger knows.")
        print(json.dumps({"forgotten": changed}) if args.json else
              f"{changed} ledger entr{'y' if changed == 1 else 'ies'} dropped: a rebuild goes on without the file")
        return EXIT_OK
    if words and words[0] == "reset":
        if len(words) not in (2, 3):
            raise RatuiError("RAT-CLI-001", "usage: ratui landing reset ZONE [FILE]", hint="Name the zone to reset.")
        zone, file = words[1], words[2] if len(words) == 3 else None
        changed = engine.landing_reset(zone, file, pipeline)
        if changed == 0:
            raise RatuiError("RAT-LND-001", f"no ledger entry for zone '{zone}'" + (f" file '{file}'" if file else ""),
                             hint="`ratui landing` lists the files the ledger knows.")
        print(json.dumps({"reset": changed}) if args.json else f"{changed} ledger entr{'y' if changed == 1 else 'ies'} "
              "made loadable again")
        return EXIT_OK
    zone = words[0] if words else None
    if words[1:]:
        raise RatuiError("RAT-CLI-001", f"ratui landing takes one zone, got {len(words)} words",
                         hint="`ratui landing [ZONE]`, `ratui landing reset ZONE [FILE]`, "
                              "`ratui landing forget ZONE FILE` (ZONE: namespace.zone, or zone alone).")
    files = engine.landing_files(zone, pipeline)
    if args.json:
        for f in files:
            print(json.dumps(f.to_dict()))
        return EXIT_OK
    rows = [[f"{f.namespace}.{f.zone}", f.file, f.pipeline, f.state, f"{f.size:,}", str(f.attempts), f.run_id or "",
             (f.last_error or "")[:40]] for f in files]
    print(_table(["ZONE", "FILE", "PIPELINE", "STATE", "BYTES", "TRIES", "LOADED BY", "LAST ERROR"], rows))
    return EXIT_OK


COMMANDS = {"landing": cmd_landing}
