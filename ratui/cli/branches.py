"""The branch workflow on the command line: `ratui branch`, `merge`, `diff`, `log` and `rollback`.

    ratui branch create dev [--from main | --from main@3f2a9c1b]      ratui branch delete dev
    ratui run +clean_orders --ref dev                                  runs fork from dev and merge into dev
    ratui diff dev [main]                                              per table: who changed it, rows, files, schema
    ratui merge dev [--into main] [--dry-run]                          Nessie's rule, all or nothing
    ratui log [TABLE] [--ref main]                                     commits: run, pipeline, version, snapshots
    ratui rollback [TABLE] --to RUN_ID|COMMIT [--ref main] [--dry-run] a new commit restoring earlier pointers
    ratui undo [--dry-run]                                             the last merge, publish, rollback, branch
                                                                       delete or landing reset, undone
"""

from __future__ import annotations

import json

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, engine as open_engine, positive_int, project_arg, table, warm_arg,
)
from ratui.engine.vocabulary import MAIN


def add_parsers(sub) -> None:
    p = sub.add_parser("branches", help="list branches (refs) of the catalog")
    project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("branch", help="create or delete a branch of your own (`branch create NAME [--from REF]`, "
                                      "`branch delete NAME`, `branch list`)")
    p.add_argument("action", choices=("create", "delete", "list"))
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("--from", dest="from_ref", default=MAIN, metavar="REF",
                   help="the ref (or past state REF@COMMIT) the branch starts from (default: main)")
    project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("merge", help="merge a branch into main (or --into another branch), all tables or none")
    p.add_argument("name", metavar="BRANCH")
    p.add_argument("--into", default=MAIN, metavar="REF", help="the branch to merge into (default: main)")
    p.add_argument("--dry-run", action="store_true", help="say what would be merged, which tables merge by "
                   "append and which conflict; change nothing")
    project_arg(p)
    p.add_argument("--json", action="store_true")
    warm_arg(p)

    p = sub.add_parser("diff", help="what differs between two refs, per table (default: against main)")
    p.add_argument("left", metavar="REF")
    p.add_argument("right", nargs="?", default=MAIN, metavar="REF")
    project_arg(p)
    p.add_argument("--json", action="store_true")
    warm_arg(p)

    p = sub.add_parser("log", help="a ref's commits: time, run, pipeline version, tables and snapshots changed")
    p.add_argument("table", nargs="?", metavar="TABLE", help="only commits that changed this table")
    p.add_argument("--ref", default=MAIN, help="the ref (or REF@COMMIT) whose history to show (default: main)")
    p.add_argument("--limit", type=positive_int, default=30)
    project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("rollback", help="put a table (or every table) of a ref back as an earlier run or commit "
                                        "left it, as a new commit")
    p.add_argument("table", nargs="?", metavar="TABLE", help="the table to roll back (default: every table)")
    p.add_argument("--to", required=True, metavar="RUN_ID|COMMIT", help="a run id, or a commit hash (6+ digits)")
    p.add_argument("--ref", default=MAIN, help="the branch to roll back (default: main)")
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")
    project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("undo", help="undo the last merge, atomic publish, rollback, branch delete or landing reset "
                                    "(refused when later commits built on it)")
    p.add_argument("--dry-run", action="store_true", help="say what would be undone and what changes; change nothing")
    project_arg(p)
    p.add_argument("--json", action="store_true")


def _num(value) -> str:
    return "-" if value is None else f"{value:,}"


def _snap(value) -> str:
    return "-" if value is None else str(value)


def cmd_branches(args) -> int:
    """`ratui branches` (and `ratui branch list`): every ref with its head, creation, run and table count."""
    engine = open_engine(args.project)
    refs = engine.refs()
    if args.json:
        for ref in refs:
            print(json.dumps(ref.__dict__, default=str))
        return EXIT_OK
    rows = [[r.name, r.head[:12], r.created_at[:19], r.run_id or "", str(len(engine.table_pointers(r.name)))]
            for r in refs]
    print(table(["REF", "HEAD", "CREATED", "RUN", "TABLES"], rows))
    return EXIT_OK


def cmd_branch(args) -> int:
    from ratui.engine.errors import RatuiError

    if args.action == "list":
        return cmd_branches(args)
    engine = open_engine(args.project)
    if not args.name:
        raise RatuiError("RAT-CLI-001", f"ratui branch {args.action}: a branch NAME is needed",
                         hint=f"`ratui branch {args.action} NAME`")
    if args.action == "create":
        ref = engine.create_branch(args.name, from_ref=args.from_ref)
        tables = len(engine.table_pointers(ref.name))
        if args.json:
            print(json.dumps({"branch": ref.name, "from": args.from_ref, "head": ref.head, "tables": tables}))
        else:
            print(f"branch {ref.name} created from {args.from_ref} ({tables} table(s)); run on it with "
                  f"`ratui run --ref {ref.name}`, publish it with `ratui merge {ref.name}`")
        return EXIT_OK
    engine.delete_branch(args.name)
    print(json.dumps({"deleted": args.name}) if args.json else f"branch {args.name} deleted (its files stay: "
          "main and the history may share them; the reaper frees what nothing reaches)")
    return EXIT_OK


def cmd_merge(args) -> int:
    engine = open_engine(args.project, recover=True)
    before = engine.diff_refs(args.name, args.into)
    result = engine.merge(args.name, into=args.into, dry_run=args.dry_run)
    rows = {d.table: d for d in before}
    if args.json:
        print(json.dumps({"branch": args.name, "into": args.into, "dry_run": args.dry_run, "tables": result.tables,
                          "conflicts": result.conflicts, "by_append": result.by_append, "reasons": result.reasons,
                          "commit": result.commit.hash if result.commit else None,
                          "changes": [d.to_dict() for d in before]}, default=str))
        return EXIT_FAILED if result.conflicts else EXIT_OK
    verb = "would merge" if args.dry_run else "merged"

    def how(key: str) -> str:
        return "conflict" if key in result.conflicts else "by append" if key in result.by_append else "as is"

    if result.tables:
        print(table(["TABLE", "CHANGE", "ROWS ON " + args.into.upper(), "ROWS ON " + args.name.upper(), "MERGES"],
                    [[t, rows[t].change if t in rows else "modified",
                      _num(rows[t].right.rows) if t in rows else "-", _num(rows[t].left.rows) if t in rows else "-",
                      how(t)] for t in result.tables]))
    if result.conflicts:
        print(f"\n{len(result.conflicts)} conflict(s): {args.into} changed {', '.join(result.conflicts)} since "
              f"{args.name} was created; a merge would change nothing")
        for key in result.conflicts:
            if result.reasons.get(key):
                print(f"  {key}: {result.reasons[key]}")
        return EXIT_FAILED
    if result.by_append:
        print(f"\n{len(result.by_append)} table(s) {'merge' if args.dry_run else 'merged'} by append (both sides "
              f"only appended): {', '.join(result.by_append)}; {args.name}'s added files "
              + ("are re-committed on " + args.into + " once the tables' quality tests pass on the combined rows"
                 if args.dry_run else "were re-committed on " + args.into + " after their quality tests passed"))
    if not result.tables:
        print(f"nothing to merge: {args.into} already has every table of {args.name}")
    else:
        print(f"\n{verb} {len(result.tables)} table(s) of {args.name} into {args.into}"
              + (f" in commit {result.commit.hash[:12]}" if result.commit else ""))
    return EXIT_OK


def cmd_diff(args) -> int:
    engine = open_engine(args.project)
    changes = engine.diff_refs(args.left, args.right)
    if args.json:
        for d in changes:
            print(json.dumps(d.to_dict(), default=str))
        return EXIT_OK
    if not changes:
        print(f"{args.left} and {args.right} hold the same tables")
        return EXIT_OK
    who = {"left": args.left, "right": args.right, "both": "both (conflict)", "": "-"}
    print(table(["TABLE", "CHANGE", "CHANGED ON", f"SNAPSHOT {args.left}", f"SNAPSHOT {args.right}",
                 f"ROWS {args.left}", f"ROWS {args.right}", "FILES", "SCHEMA"],
                [[d.table, d.change, who[d.changed_on], _snap(d.left.snapshot_id), _snap(d.right.snapshot_id),
                  _num(d.left.rows), _num(d.right.rows), f"{_num(d.left.files)} / {_num(d.right.files)}",
                  "; ".join(d.schema_changes) or "-"] for d in changes]))
    return EXIT_OK


def cmd_log(args) -> int:
    engine = open_engine(args.project)
    entries = engine.log(args.ref, table=args.table, limit=args.limit)
    if args.json:
        for entry in entries:
            print(json.dumps(entry.to_dict(), default=str))
        return EXIT_OK
    for entry in entries:
        head = f"commit {entry.hash[:12]}  {entry.created_at[:19].replace('T', ' ')}  {entry.kind}"
        if entry.run_id:
            head += f"  run {entry.run_id}"
        print(head)
        print(f"    {entry.message}")
        for t in entry.tables:
            made = f"  run {t['run_id']}" if t.get("run_id") and t.get("run_id") != entry.run_id else ""
            version = f"  version {t['version']}" if t.get("version") else ""
            print(f"    {t['change']:<8} {t['table']}  snapshot {_snap(t['snapshot_id'])}  {_num(t['rows'])} rows"
                  f"{made}{version}")
    if not entries:
        print(f"no commits{' changing ' + args.table if args.table else ''} on {args.ref}")
    return EXIT_OK


def cmd_rollback(args) -> int:
    engine = open_engine(args.project, recover=True)
    plan = engine.plan_rollback(args.ref, args.to, args.table)
    commit = None if args.dry_run else engine.rollback(plan)
    if args.json:
        print(json.dumps({**plan.to_dict(), "dry_run": args.dry_run, "commit": commit.hash if commit else None},
                         default=str))
        return EXIT_OK
    if not plan.changes:
        print(f"nothing to roll back: {args.table or 'every table'} on {args.ref} is already as commit "
              f"{plan.to.hash[:12]} left it")
        return EXIT_OK
    print(f"{'would roll back' if args.dry_run else 'rolled back'} {args.ref} to commit {plan.to.hash[:12]} "
          f"({plan.to.created_at[:19].replace('T', ' ')}: {plan.to.message})")
    print(table(["TABLE", "SNAPSHOT NOW", "ROWS NOW", "SNAPSHOT AFTER", "ROWS AFTER"],
                [[c.table, _snap(c.before.snapshot_id), _num(c.before.rows),
                  _snap(c.after.snapshot_id) if c.after.location else "(removed from the ref)", _num(c.after.rows)]
                 for c in plan.changes]))
    if plan.reloadable:
        print(f"{plan.reloadable} landing file(s) loaded since then become loadable again: the next run of "
              "those pipelines loads them (or `ratui landing forget ZONE FILE` drops one for good)")
    if commit:
        print(f"commit {commit.hash[:12]}; the rolled-back snapshots stay reachable through the log until the "
              "snapshot retention ends")
    return EXIT_OK


def cmd_undo(args) -> int:
    """`ratui undo [--dry-run]`: what the console's `z` does, headless."""
    engine = open_engine(args.project, recover=True)
    plan = engine.plan_undo()
    done = None if args.dry_run else engine.undo(plan)
    if args.json:
        print(json.dumps({**plan.to_dict(), "dry_run": args.dry_run, "done": done}, default=str))
        return EXIT_OK
    lines = plan.lines
    print(("would " if args.dry_run else "") + lines[0])
    for line in lines[1:]:
        print(line)
    if done and done.get("commit"):
        print(f"commit {done['commit'][:12]}")
    return EXIT_OK


COMMANDS = {"branches": cmd_branches, "branch": cmd_branch, "merge": cmd_merge, "diff": cmd_diff, "log": cmd_log,
            "rollback": cmd_rollback, "undo": cmd_undo}
