"""One owner per record: every table of the project's state database (.ratui/ratui.db) is written by one module of
ratui, its owner, and by no other. Read from the code (ast), no database and no JVM:

    SQL             INSERT INTO t / INSERT OR REPLACE INTO t / REPLACE INTO t / UPDATE t SET / DELETE FROM t, in any
                    string (implicit concatenation, `+` and f-strings whose placeholders are module constants included)
    sqlite-utils    db["t"].insert(...) / db.table("t").update(...) / ... and the same through a local name
                    (`table = db.table(T)` then `table.insert(...)`)
    the owner's     the run record's writes reach the run tables through its module: only the modules of CALLERS may
    write methods   import it (its write methods are reached from nowhere else)

OWNERS below is the one list of table -> owner (the contributors' layout page of the docs gives it too); a table
created anywhere in ratui must be in it. `state/migrations.py` alone may change any table's rows, in a numbered
migration step. The last test feeds the checker a stray write of each kind, so a checker that sees nothing fails.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RATUI = REPO / "ratui"

RUN_RECORD = "ratui/engine/run/record.py"
LEDGER = "ratui/engine/state/ledger.py"
CATALOG_RECORDS = "ratui/engine/state/catalog/records.py"
CATALOG_ICEBERG_ROWS = "ratui/engine/state/catalog/iceberg_rows.py"

OWNERS: dict[str, str] = {
    # a run's record: queued, started, phases, outcome; its log, quality results, cancel requests, landings
    "runs": RUN_RECORD,
    "run_logs": RUN_RECORD,
    "quality_results": RUN_RECORD,
    "cancel_requests": RUN_RECORD,
    "landings": RUN_RECORD,
    # the landing ledger: every landing file per zone and pipeline, its loads per ref, the facts taken in per ref
    "landing_files": LEDGER,
    "landing_loads": LEDGER,
    "landing_synced": LEDGER,
    # the embedded catalog: refs, commits, fork points, deleted refs; PyIceberg's table and namespace rows; roots
    "catalog_refs": CATALOG_RECORDS,
    "catalog_commits": CATALOG_RECORDS,
    "catalog_fork_pointers": CATALOG_RECORDS,
    "catalog_deleted_refs": CATALOG_RECORDS,
    "iceberg_tables": CATALOG_ICEBERG_ROWS,
    "iceberg_namespace_properties": CATALOG_ICEBERG_ROWS,
    "project_roots": "ratui/engine/state/catalog/roots.py",
    # what `ratui undo` reverses; every reaper pass
    "undo_journal": "ratui/engine/state/journal.py",
    "reaper_reports": "ratui/engine/state/reaper_reports.py",
    # the schedules: paused and last fire, every fire decided, the runner's lease (ratui up)
    "schedule_state": "ratui/engine/state/schedule_state.py",
    "schedule_fires": "ratui/engine/state/schedule_state.py",
    "runner_lease": "ratui/engine/state/schedule_state.py",
    # alerts: each rule's last state per pipeline (one alert per change), every attempt to send one
    "alert_status": "ratui/engine/state/alert_state.py",
    "alert_attempts": "ratui/engine/state/alert_state.py",
}
MIGRATOR = "ratui/engine/state/migrations.py"

# an owner whose write methods are reached through its module -> the only modules that may import it
CALLERS: dict[str, set[str]] = {
    RUN_RECORD: {
        "ratui/engine/facade/base.py",  # the engine makes the one run record of a project state
        "ratui/engine/run/parts.py", "ratui/engine/run/scope.py",  # handed to invocations and a run's steps
        "ratui/engine/run/executor.py",  # a run's start, phases, outcome, and its merge stamp (in the merge's tx)
        "ratui/engine/run/in_flight.py",  # cancel requests
        "ratui/engine/run/recovery.py",  # dead runs finished
        "ratui/engine/ops/reaper.py", "ratui/engine/ops/reaper_pass.py",  # stuck runs failed, old runs deleted
        "ratui/engine/ops/branches.py",  # a branch merge's landings (in the merge's tx)
        "ratui/engine/ops/undo.py",  # an undone run's log line (in the undo's tx)
    },
}

SQL_WRITE = re.compile(
    r"\b(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|REPLACE\s+INTO|DELETE\s+FROM)\s+([\w{}?]+)"
    r"|\bUPDATE\s+(?:OR\s+\w+\s+)?([\w{}?]+)\s+SET\b", re.IGNORECASE)
SQL_CREATE = re.compile(r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w{}?]+)\s*\(", re.IGNORECASE)
SQLITE_UTILS_WRITES = {"insert", "insert_all", "upsert", "upsert_all", "update", "delete", "delete_where"}
UNKNOWN = "{?}"


@dataclass(frozen=True)
class Write:
    table: str  # UNKNOWN when the code names it in a way the checker cannot read
    line: int
    how: str


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level string constants (NAME = "...")."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The string an expression makes, with module constants filled in (UNKNOWN for any other placeholder)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                parts.append(constants.get(value.value.id, UNKNOWN))
            else:
                parts.append(UNKNOWN)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, constants), _text(node.right, constants)
        if left is not None or right is not None:
            return (left or UNKNOWN) + (right or UNKNOWN)
    return None


def _table_of(node: ast.AST, constants: dict[str, str], aliases: dict[str, str]) -> str | None:
    """The table of a sqlite-utils table expression: db["t"], db.table("t"), db.table(T), or a local name bound to
    one; None when it is not one."""
    if isinstance(node, ast.Subscript):
        name = _text(node.slice, constants) if not isinstance(node.slice, ast.Name) else \
            constants.get(node.slice.id, UNKNOWN)
        return name or UNKNOWN
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "table" \
            and node.args:
        arg = node.args[0]
        name = constants.get(arg.id, UNKNOWN) if isinstance(arg, ast.Name) else _text(arg, constants)
        return name or UNKNOWN
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    return None


class _Scanner(ast.NodeVisitor):
    """One pass over a module: its writes (SQL in strings, sqlite-utils calls) and the tables it creates."""

    def __init__(self, constants: dict[str, str]):
        self.constants = constants
        self.scopes: list[dict[str, str]] = [{}]  # per function: local name -> the table it is bound to
        self.writes: list[Write] = []
        self.creates: list[tuple[str, int]] = []

    def aliases(self) -> dict[str, str]:
        return {k: v for scope in self.scopes for k, v in scope.items()}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and not isinstance(node.value, ast.Name):
            table = _table_of(node.value, self.constants, {})
            if table is not None:
                self.scopes[-1][node.targets[0].id] = table
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in (*SQLITE_UTILS_WRITES, "create"):
            table = _table_of(node.func.value, self.constants, self.aliases())
            if table is not None and node.func.attr == "create":
                self.creates.append((table, node.lineno))
            elif table is not None:
                self.writes.append(Write(table, node.lineno, f"sqlite-utils .{node.func.attr}()"))
        self.generic_visit(node)

    def _string(self, node: ast.expr) -> bool:
        """Read a string expression whole (its parts are not read again); False when it is not one."""
        text = _text(node, self.constants)
        if text is None:
            return False
        for match in SQL_WRITE.finditer(text):
            table = match.group(1) or match.group(2)
            self.writes.append(Write(table.lower() if "{" not in table else UNKNOWN, node.lineno, "SQL"))
        self.creates.extend((m.group(1).lower(), node.lineno) for m in SQL_CREATE.finditer(text))
        return True

    def visit_Constant(self, node: ast.Constant) -> None:
        self._string(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if not self._string(node):
            self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not self._string(node):
            self.generic_visit(node)


@functools.lru_cache(maxsize=None)
def _scan(source: str) -> _Scanner:
    tree = ast.parse(source)
    scanner = _Scanner(_constants(tree))
    scanner.visit(tree)
    return scanner


def writes_in(source: str) -> list[Write]:
    return sorted(set(_scan(source).writes), key=lambda w: (w.line, w.table))


def created_in(source: str) -> list[tuple[str, int]]:
    return _scan(source).creates


def importers_of(module_path: str, source: str) -> bool:
    """Whether `source` imports the module at `module_path` (in any spelling)."""
    dotted = module_path[:-3].replace("/", ".")
    package, _, name = dotted.rpartition(".")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name == dotted for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == dotted:
            return True
        if isinstance(node, ast.ImportFrom) and node.module == package and any(a.name == name for a in node.names):
            return True
    return False


def stray_writes(files: dict[str, str]) -> list[str]:
    """Every write of `files` (path -> source) made outside its table's owner, and every import of a CALLERS owner
    by a module not declared as its caller."""
    problems = []
    for path, source in sorted(files.items()):
        for write in writes_in(source):
            owner = OWNERS.get(write.table)
            if path == MIGRATOR or path == owner:
                continue
            if owner is None:
                problems.append(f"{path}:{write.line}: {write.how} write to table '{write.table}', which has no "
                                "owner in OWNERS (or is named in a way this test cannot read)")
            else:
                problems.append(f"{path}:{write.line}: {write.how} write to '{write.table}': only {owner} writes it")
        for owner, callers in CALLERS.items():
            if path != owner and path not in callers and importers_of(owner, source):
                problems.append(f"{path}: imports {owner}, whose writes only {sorted(callers)} may call")
    return problems


def _sources() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text() for p in sorted(RATUI.rglob("*.py"))}


def test_each_table_is_written_by_its_owner_alone():
    problems = stray_writes(_sources())
    assert not problems, "writes outside a table's owner:\n" + "\n".join(problems)


def test_every_table_ratui_creates_has_an_owner_that_writes_it():
    sources = _sources()
    created = {table: (path, line) for path, source in sources.items() for table, line in created_in(source)}
    assert set(created) >= {"runs", "undo_journal", "landing_files", "catalog_refs"}, created  # the checker reads
    unowned = {t: where for t, where in created.items() if t not in OWNERS}
    assert not unowned, f"tables without an owner in OWNERS: {unowned}"
    written = {write.table for path, source in sources.items() for write in writes_in(source)
               if OWNERS.get(write.table) == path}
    # iceberg_tables and iceberg_namespace_properties: PyIceberg's SqlCatalog writes them too, through iceberg_rows' DDL
    assert set(OWNERS) - written == set(), f"owners that never write their table: {set(OWNERS) - written}"
    assert all((REPO / owner).is_file() for owner in {*OWNERS.values(), *CALLERS})


def test_the_checker_finds_a_stray_write_of_each_kind():
    """A module that is no table's owner, writing each way the checker reads: every one is reported."""
    stray = '''
from ratui.engine.run.record import RunRecord
TABLE = "runs"


def bad(conn, db, run_id):
    conn.execute("UPDATE runs SET status = 'failed' WHERE id = ?", (run_id,))
    conn.execute(f"INSERT OR REPLACE INTO {TABLE} (id) VALUES (?)", (run_id,))
    conn.execute("delete from " "run_logs where run_id = ?", (run_id,))
    conn.execute("INSERT INTO undo_journal (kind) VALUES (?) " + "-- and more", ("x",))
    db["landing_files"].insert({"file": "a.csv"})
    db.table(TABLE).update(run_id, {"status": "x"})
    reports = db.table("reaper_reports")
    reports.delete_where("id = ?", [1])
    conn.execute(f"DELETE FROM {some_name} WHERE 1")
'''
    problems = stray_writes({"ratui/engine/somewhere.py": stray})
    text = "\n".join(problems)
    for expected in ("SQL write to 'runs'", "SQL write to 'run_logs'", "SQL write to 'undo_journal'",
                     "sqlite-utils .insert() write to 'landing_files'", "sqlite-utils .update() write to 'runs'",
                     "sqlite-utils .delete_where() write to 'reaper_reports'", "table '{?}', which has no owner",
                     "imports ratui/engine/run/record.py"):
        assert expected in text, f"{expected!r} not reported:\n{text}"
    assert sum("write to 'runs'" in p for p in problems) == 3, text  # UPDATE, f-string INSERT, sqlite-utils update
    assert stray_writes({RUN_RECORD: stray.replace("undo_journal", "runs").replace("landing_files", "runs")
                         .replace('"reaper_reports"', '"runs"').replace("{some_name}", "runs")
                         .replace("from ratui.engine.run.record import RunRecord", "")}) == []
