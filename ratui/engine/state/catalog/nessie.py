"""The branch catalog on a real Nessie server, through its REST API v2: what a team shares.

Every operation is Nessie's own: refs are Nessie branches, a table write is a Nessie commit of an ICEBERG_TABLE
content (nessie_tables.py), a merge is Nessie's merge with its own conflict detection, the log is Nessie's commit
log, and ratui's facts about a commit (run id, pipeline, version...) are Nessie commit properties (nessie_tree.py),
so another Nessie client sees the same history `ratui log` shows.

Where Nessie's model differs from the embedded catalog, this backend follows Nessie:
- A branch's creation is a Nessie commit of no operations on the new branch ("create branch X from Y", with the
  run id in its properties): Nessie keeps no creation time or owner for a ref, and this commit is where ratui reads
  them back (`fork_hash` is its parent: the source's head). A branch made by another Nessie client has none; its
  fork point is Nessie's common ancestor with main and its time its head's.
- Every table change is a commit of its own (PyIceberg commits one table at a time), so `record_commit` adds a
  commit of no operations carrying the message and the meta on top of them: the log shows both.
- A merge is one squashed commit on the target with the source head as a second parent (`Commit.parent` is the
  first). A branch that changed no table merges to nothing (no commit), as on the embedded catalog: ratui asks
  Nessie for a dry run first and only merges when a table changed.
- A deleted branch's commits are not reachable by name any more: `log` of a deleted branch is RAT-CAT-002. ratui
  records each deletion it makes (its head, its tables then, when) in the project's state database
  (`deleted_refs`), and reads the commits by hash (`history_from`): the reaper keeps what a branch deleted inside
  the retention window reaches. A branch another Nessie client deleted is not known: nothing of it is kept.
- main's `created_at` is its head's time (Nessie keeps none for a ref); an empty main gets an "init" commit when a
  catalog opens, since Nessie merges nothing into its empty beginning.
- A table restored after it was dropped comes back with a new content id (Nessie gives a re-added key a new one).
- Branch names follow Nessie's rule too: a letter first, no "..", no trailing ".".

`in_tx` callbacks (the ledger's SQLite writes) cannot share a transaction with Nessie: they run right after Nessie
accepted the change, in a local SQLite transaction on the project's state database. If the process dies between the
two, Nessie has the change and the project's database does not; nothing is lost: the table's snapshot names the
landing files the run loaded (state/landing_facts.py: the next run takes them in), and recovery finds the run's merge
in Nessie's log (`merged_run`) and records the run as the success it was.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.failpoints import failpoint
from ratui.engine.locations import ProjectLocations
from ratui.engine.state.catalog import merge_rule, records
from ratui.engine.state.catalog import nessie_tree as tree
from ratui.engine.state.catalog.base import (
    MAIN, BranchCatalog, Commit, DeletedRef, MergeResult, Ref, TableChange, split_spec,
)
from ratui.engine.state.catalog.nessie_http import NessieHttp, key_of, ref_path
from ratui.engine.state.catalog.nessie_tables import NessieRefCatalog
from ratui.engine.storage.warehouse import Warehouse
from ratui.engine.state.db import open_db, sqlite_utils, write_tx

# ratui's rule for branch names (the embedded catalog's); Nessie's own adds no "..", no trailing "." and a letter
# first (checked here, so the error is ratui's RAT-CAT-006 rather than Nessie's BAD_REQUEST)
BRANCH_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,127}$")
DELETE_ATTEMPTS = 3


class NessieBranchCatalog(BranchCatalog):
    """The branch catalog on the Nessie server at `uri` (its API v2 base, e.g. http://host:19120/api/v2).

    `db_path` is the project's state database (only `in_tx` callbacks use it); `warehouse` the project root, as for
    the embedded catalog: table files go through the project's FileIO. Opening checks that Nessie answers
    (RAT-NES-001 if not, RAT-NES-002 if what answers is not Nessie's API v2)."""

    def __init__(self, uri: str, db_path: Path, warehouse: Path | Warehouse, *, token: str | None = None,
                 allow_outside: tuple[Path, ...] = (), connect_timeout: float | None = None):
        self.uri = uri.rstrip("/")
        self.db_path = Path(db_path).resolve()
        self.storage = warehouse if isinstance(warehouse, Warehouse) else Warehouse(Path(warehouse).resolve())
        self.warehouse = self.storage.root.resolve()
        timeouts = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
        self._api = NessieHttp(self.uri, token, **timeouts)
        self.locations = ProjectLocations(self.warehouse, (), allow_outside)
        self._catalogs: dict[str, NessieRefCatalog] = {}
        self._lock = threading.Lock()
        self._check_server()
        self._init_main()

    @classmethod
    def opened(cls, *, db_path: Path, root: Path, warehouse: Warehouse, allow_outside: tuple[Path, ...],
               uri: str | None, token: str | None) -> NessieBranchCatalog:
        return cls(uri or "", db_path, warehouse, token=token, allow_outside=allow_outside)

    def __repr__(self) -> str:
        return f"NessieBranchCatalog({self.uri!r})"

    def _check_server(self) -> None:
        config = self._api.get("config")
        if not isinstance(config, dict) or "defaultBranch" not in config or config.get("actualApiVersion", 2) < 2 \
                or "specVersion" not in config:
            raise RatuiError("RAT-NES-002", f"{self.uri} is not Nessie's API v2 (its /config answered "
                             f"{str(config)[:120]})", details={"uri": self.uri})
        if config["defaultBranch"] != MAIN:
            raise RatuiError("RAT-NES-002", f"Nessie at {self.uri} has '{config['defaultBranch']}' as its default "
                             f"branch; ratui publishes to '{MAIN}'", details={"uri": self.uri})

    def _init_main(self) -> None:
        """An empty main (a new Nessie) gets a first commit, "init", as on the embedded catalog: Nessie finds no
        common ancestor between its empty beginning and a branch made from it, so nothing could merge into it."""
        main = tree.reference(self._api, MAIN)
        if main["hash"] == tree.NO_ANCESTOR:
            tree.commit(self._api, MAIN, main["hash"], "init", [], {"kind": "init"})

    def allow_outside(self, folders: tuple[Path, ...]) -> None:
        self.locations = ProjectLocations(self.warehouse, (), folders)
        with self._lock:
            self._catalogs.clear()

    @contextmanager
    def _local_tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the project's state database, for `in_tx` callbacks (see the module docstring)."""
        conn = open_db(self.db_path)
        try:
            with write_tx(conn):
                yield conn
        finally:
            conn.close()

    # ---------------------------------------------------------------- refs

    def create_branch(self, name: str, *, from_ref: str = MAIN, run_id: str | None = None,
                      in_tx: Callable[[sqlite3.Connection], None] | None = None) -> Ref:
        """See BranchCatalog.create_branch: a Nessie branch at `from_ref`'s head, then the commit that records its
        origin (see the module docstring). `in_tx` runs after Nessie created it."""
        if not BRANCH_NAME_RE.match(name) or ".." in name or name.endswith("."):
            raise RatuiError("RAT-CAT-006", f"branch name '{name[:40]}' is not valid on Nessie", hint=(
                "On Nessie a branch name starts with a letter, then letters, digits, '.', '_' or '-' (at most 128 "
                "characters), with no '..' and no '.' at the end."))
        source = tree.reference(self._api, from_ref)
        self._api.post("trees", {"type": "BRANCH", "name": source["name"], "hash": source["hash"]},
                       name=name, type="BRANCH")
        meta = {"kind": "branch", "from": from_ref, "run_id": run_id}
        response = tree.commit(self._api, name, source["hash"], f"create branch {name} from {from_ref}", [], meta)
        head = response["targetBranch"]["hash"]
        created = next(tree.log_entries(self._api, name, head, limit=1))["commitMeta"].get("commitTime")
        ref = Ref(name, head, tree.iso(created), source["hash"], run_id)
        if in_tx is not None:
            with self._local_tx() as conn:
                in_tx(conn)
        return ref

    def list_refs(self) -> list[Ref]:
        found = []
        token = None
        while True:
            page = self._api.get("trees", fetch="ALL", max_records=tree.PAGE, page_token=token)
            found += [r for r in page.get("references") or [] if r.get("type") == "BRANCH"]
            token = page.get("token")
            if not page.get("hasMore") or not token:
                break
        refs = [self._ref(r) for r in found]
        return sorted(refs, key=lambda r: (r.name != MAIN, r.created_at, r.name))

    def change_token(self) -> object | None:
        """Every branch's name and head from Nessie's ref list (no per-ref reads): any client's commit, new branch
        or deleted branch changes it."""
        heads = []
        token = None
        while True:
            page = self._api.get("trees", max_records=tree.PAGE, page_token=token)
            heads += [(r["name"], r["hash"]) for r in page.get("references") or [] if r.get("type") == "BRANCH"]
            token = page.get("token")
            if not page.get("hasMore") or not token:
                return tuple(sorted(heads))

    def get_ref(self, name: str) -> Ref:
        base, at = split_spec(name)
        if at is not None:
            self.commit(name)
        return self._ref(self._api.get(f"trees/{ref_path(base)}", fetch="ALL")["reference"])

    def _ref(self, reference: dict) -> Ref:
        """A Nessie reference as ratui's Ref: creation time, run and fork point from the commit that created it."""
        name, head = reference["name"], reference["hash"]
        meta = reference.get("metadata") or {}
        head_time = tree.iso((meta.get("commitMetaOfHEAD") or {}).get("commitTime"))
        if name == MAIN:
            return Ref(name, head, head_time, None, None)
        ahead = meta.get("numCommitsAhead")
        for entry in tree.log_entries(self._api, name, head, limit=None if ahead is None else ahead + 1):
            props = tree.props_of(entry["commitMeta"])
            if props.get(tree.REF_PROPERTY) == name and props.get("ratui.kind") == "branch":
                return Ref(name, head, tree.iso(entry["commitMeta"].get("commitTime")),
                           entry.get("parentCommitHash"), props.get("ratui.run_id"))
        return Ref(name, head, head_time, meta.get("commonAncestorHash"), None)

    def delete_branch(self, name: str, in_tx: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """Delete the Nessie branch (guarded by its head: a head that moved meanwhile is read again, a few times);
        its files stay, shared with other refs. `in_tx` runs after Nessie deleted it."""
        if name == MAIN:
            raise RatuiError("RAT-CAT-004", "main cannot be deleted")
        for attempt in range(DELETE_ATTEMPTS):
            head = tree.reference(self._api, name)["hash"]
            try:
                self._api.delete(f"trees/{ref_path(name, head)}")
                break
            except RatuiError as e:
                if e.code != "RAT-CAT-003" or attempt == DELETE_ATTEMPTS - 1:
                    raise
        with self._lock:
            self._catalogs.pop(name, None)
        # read by hash alone: the branch is gone, its commits are not
        tables = tree.pointers(tree.contents(self._api, "", head)[1])
        with self._local_tx() as conn:
            db = sqlite_utils.Database(conn)
            records.create_deleted_table(db)
            records.record_deletion(db, name, head, tables)
            if in_tx is not None:
                in_tx(conn)

    def deleted_refs(self, since: str | None = None) -> list[DeletedRef]:
        """The branches this project deleted (recorded in its state database), at or after `since`."""
        conn = open_db(self.db_path)
        try:
            return [DeletedRef(*row) for row in records.deletions(sqlite_utils.Database(conn), since)]
        finally:
            conn.close()

    def history_from(self, hash: str, ref: str) -> list[Commit]:
        """Nessie's log from commit `hash` (read by hash alone: a deleted branch's too)."""
        return self._commits(ref, list(tree.log_entries(self._api, "", hash)))

    def revive_branch(self, name: str, head: str, pointers: dict[str, str],
                      in_tx: Callable[[sqlite3.Connection], None] | None = None) -> Ref:
        """See BranchCatalog.revive_branch: a Nessie branch created at the deleted branch's last head (Nessie keeps
        a deleted branch's commits until its GC removes them); its tables are that commit's. `in_tx` runs after."""
        try:
            tree.reference(self._api, name)
        except RatuiError as e:
            if e.code != "RAT-CAT-002":
                raise
        else:
            raise RatuiError("RAT-CAT-001", f"branch '{name}' exists again: it cannot be brought back")
        try:
            self._api.post("trees", {"type": "BRANCH", "name": MAIN, "hash": head}, name=name, type="BRANCH")
        except RatuiError as e:
            if e.code == "RAT-CAT-001":
                raise
            raise RatuiError("RAT-UNDO-003", f"Nessie cannot bring back branch '{name}' at {head[:12]}: {e.message}"
                             ) from None
        ref = self.get_ref(name)
        if in_tx is not None:
            with self._local_tx() as conn:
                in_tx(conn)
        return ref

    # ---------------------------------------------------------------- commits

    def record_commit(self, ref: str, message: str, meta: dict | None = None) -> Commit:
        """On Nessie every table write already is a commit; this adds one of no operations on top, carrying the
        message and the meta (ratui's facts about the write), so the log reads as it does on the embedded catalog
        (with the table commits in between)."""
        head = tree.reference(self._api, ref)["hash"]
        response = tree.commit(self._api, ref, head, message, [], meta)
        return self._commit_at(ref, response["targetBranch"]["hash"])

    def _commit_at(self, ref: str, hash: str) -> Commit:
        entry = next(tree.log_entries(self._api, ref, hash, limit=1))
        _, entries = tree.contents(self._api, ref, hash)
        return tree.to_commit(entry, ref, tree.pointers(entries))

    def commit(self, spec: str) -> Commit:
        name, at = split_spec(spec)
        if at is None:
            return self._commit_at(name, tree.reference(self._api, name)["hash"])
        if not re.fullmatch(r"[0-9a-fA-F]{6,64}", at):
            raise RatuiError("RAT-CAT-010", f"'{at[:70]}' is not a commit hash (6 to 64 hex digits)",
                             details={"ref": name})
        prefix = at.lower()
        found = [e for e in tree.log_entries(self._api, name) if e["commitMeta"]["hash"].startswith(prefix)][:2]
        if len(found) != 1:
            raise RatuiError("RAT-CAT-010", f"{'no' if not found else 'more than one'} commit {at} in the history "
                             f"of {name}", details={"ref": name})
        return self._commit_at(name, found[0]["commitMeta"]["hash"])

    def commit_at(self, ref: str, when: str) -> Commit:
        for entry in tree.log_entries(self._api, ref):
            if tree.iso(entry["commitMeta"].get("commitTime")) <= when:
                return self._commit_at(ref, entry["commitMeta"]["hash"])
        raise RatuiError("RAT-CAT-010", f"{ref} has no commit at or before {when}", details={"ref": ref})

    def restore(self, ref: str, pointers: dict[str, str | None], expected: dict[str, str | None], message: str,
                meta: dict | None = None, in_tx: Callable[[sqlite3.Connection, Commit], None] | None = None) -> Commit:
        """One Nessie commit of PUT/DELETE operations, guarded by the hash the current pointers were read at (Nessie
        refuses it if one of these tables changed after it: RAT-CAT-003). `in_tx` runs after Nessie accepted it."""
        hash, entries = tree.contents(self._api, ref)
        now = tree.pointers(entries)
        moved = sorted(k for k in pointers if now.get(k) != expected.get(k))
        if moved:
            raise merge_rule.conflict(ref, ref, moved, f"{ref} changed {', '.join(moved)} meanwhile")
        ops: list[dict] = []
        added = [k for k, loc in pointers.items() if loc is not None and k not in entries]
        ops += tree.namespace_puts(entries, sorted(added))
        for key, location in sorted(pointers.items()):
            if location == now.get(key):
                continue
            if location is None:
                ops.append(tree.remove(key))
            else:
                metadata = self._metadata(location)
                ops.append(tree.put(key, tree.table_content(location, metadata, (entries.get(key) or {}).get("id"))))
        response = tree.commit(self._api, ref, hash, message, ops, meta)
        commit = self._commit_at(ref, response["targetBranch"]["hash"])
        if in_tx is not None:
            with self._local_tx() as conn:
                in_tx(conn, commit)
        return commit

    def _metadata(self, location: str) -> Any:
        io = load_file_io(properties=self.file_io_properties(), location=location)
        return FromInputFile.table_metadata(io.new_input(location))

    def log(self, ref: str, limit: int = 50, *, own: bool = False) -> list[Commit]:
        """Nessie's log: first parents from the head (or from "ref@HASH"), newest first. Each commit's pointers are
        the tables at the oldest commit listed, carried forward through the newer commits' operations."""
        name, at = split_spec(ref)
        start = self.commit(ref).hash if at is not None else None
        entries: list[dict] = []
        for entry in tree.log_entries(self._api, name, start, limit=limit):
            entries.append(entry)
            if own and tree.props_of(entry["commitMeta"]).get(tree.REF_PROPERTY) != name:
                break
        return self._commits(name, entries)

    def _commits(self, name: str, entries: list[dict]) -> list[Commit]:
        """Log entries (newest first) as commits: the tables at the oldest, carried forward through the newer ones'
        operations."""
        if not entries:
            return []
        _, oldest = tree.contents(self._api, "", entries[-1]["commitMeta"]["hash"])
        tables = tree.pointers(oldest)
        out = [tree.to_commit(entries[-1], name, tables)]
        for entry in reversed(entries[:-1]):
            tables = tree.apply(tables, entry.get("operations"))
            out.append(tree.to_commit(entry, name, tables))
        return out[::-1]

    # ---------------------------------------------------------------- diff and merge

    def _three_way(self, ref: str, into: str) -> tuple[str, str, dict[str, str], list[TableChange], list[str]]:
        """Nessie's dry-run merge of `ref` into `into`: (source head, target head, target tables, what the source
        changed since the merge base with conflict flags, the keys Nessie reports in conflict)."""
        source = tree.reference(self._api, ref)["hash"]
        target = tree.reference(self._api, into)["hash"]
        report = self._api.post(f"trees/{ref_path(into, target)}/history/merge",
                                # Nessie's JSON names keep the "is" of isDryRun(): "dryRun" is ignored (and merges)
                                {"fromRefName": ref, "fromHash": source, "isDryRun": True,
                                 "isReturnConflictAsResult": True})
        base = report.get("commonAncestor") or source
        target = report.get("effectiveTargetHash") or target
        tables = {h: tree.pointers(tree.contents(self._api, n, h)[1]) for n, h in
                  ((ref, source), (ref, base), (into, target))}
        conflicts = sorted({key_of(d["key"]["elements"]) for d in report.get("details") or [] if d.get("conflict")})
        changes = merge_rule.changes(tables[source], tables[base], tables[target])
        return source, target, tables[target], changes, conflicts

    def diff(self, ref: str, against: str = MAIN) -> list[TableChange]:
        """What `ref` changed since its merge base with `against` (Nessie's common ancestor), with conflict flags."""
        if ref == against:
            tree.reference(self._api, ref)
            return []
        return self._three_way(ref, against)[3]

    def merge(
        self,
        ref: str,
        into: str = MAIN,
        *,
        message: str | None = None,
        dry_run: bool = False,
        in_tx: Callable[[sqlite3.Connection, MergeResult], None] | None = None,
        meta: dict | None = None,
        skip: Collection[str] = (),
    ) -> MergeResult:
        """Nessie's merge (one squashed commit with the source head as second parent). A dry run asks Nessie for
        its conflicts; a merge Nessie refuses is RAT-CAT-003 with its conflicting keys. `in_tx` runs after Nessie
        accepted the merge (see the module docstring)."""
        if ref == into or ref == MAIN:
            raise RatuiError("RAT-CAT-007", f"cannot merge '{ref}' into '{into}'")
        source, target, _, changes, conflicts = self._three_way(ref, into)
        changes = [c for c in changes if c.table not in skip]
        conflicts = [k for k in conflicts if k not in skip]
        tables = [c.table for c in changes]
        if dry_run:
            return MergeResult(ref, into, tables, None, True, conflicts)
        if conflicts:
            raise merge_rule.conflict(ref, into, conflicts)
        if not changes:
            return MergeResult(ref, into, [], None, False, [])
        text = message or f"merge {ref} into {into}: {', '.join(tables)}"
        body = {"fromRefName": ref, "fromHash": source,
                # the skipped keys stay as they are on the target (Nessie's DROP: not merged, no conflict)
                "keyMergeModes": [{"key": {"elements": key.split(".")}, "mergeBehavior": "DROP"}
                                  for key in sorted(skip)],
                "commitMeta": {"message": text, "properties": tree.properties(into, meta or {"kind": "merge",
                                                                                            "from": ref})}}
        try:
            response = self._api.post(f"trees/{ref_path(into, target)}/history/merge", body)
        except RatuiError as e:
            if e.code == "RAT-CAT-003":
                raise merge_rule.conflict(ref, into, e.details.get("tables") or tables) from None
            raise
        commit = self._commit_at(into, response["resultantTargetHash"])
        result = MergeResult(ref, into, tables, commit, False, [])
        failpoint("kill:merged")  # Nessie has merged, the project's database does not know yet
        if in_tx is not None:
            with self._local_tx() as conn:
                in_tx(conn, result)
        return result

    def merged_run(self, run_id: str, into: str = MAIN, since: str | None = None) -> str | None:
        """See BranchCatalog.merged_run: the merge commit on `into` whose properties name the run (its log read back
        to `since`, the run's start)."""
        for entry in tree.log_entries(self._api, into):
            meta = entry["commitMeta"]
            when = tree.iso(meta.get("commitTime"))
            if since and when < since:
                return None
            props = tree.props_of(meta)
            if props.get(tree.PREFIX + "run_id") == run_id and props.get(tree.PREFIX + "kind") == "run" \
                    and props.get(tree.REF_PROPERTY) == into:
                return when
        return None

    # ---------------------------------------------------------------- tables

    def iceberg(self, ref: str) -> NessieRefCatalog:
        if split_spec(ref)[1] is not None:
            raise RatuiError("RAT-CAT-007", f"{ref} is a past state of a branch: it can be read, not written")
        with self._lock:
            catalog = self._catalogs.get(ref)
        if catalog is not None:
            return catalog
        tree.reference(self._api, ref)
        with self._lock:
            if ref not in self._catalogs:
                self._catalogs[ref] = NessieRefCatalog(ref, self._api, warehouse=self.warehouse.as_uri(),
                                                       **self.file_io_properties())
            return self._catalogs[ref]

    def static_table(self, location: str) -> Table:
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(location, properties=self.file_io_properties())

    def every_pointer(self) -> list[tree.Pointer]:
        """Every table of every Nessie reference, branches and tags, other clients' too, each read at the hash one
        listing gave (nessie_tree.every_pointer): what the orphan-file sweep must keep."""
        return tree.every_pointer(self._api)

    def table_pointers(self, ref: str) -> dict[str, str]:
        if split_spec(ref)[1] is not None:
            return dict(self.commit(ref).pointers)
        return tree.pointers(tree.contents(self._api, ref)[1])

    def close(self) -> None:
        self._api.close()
