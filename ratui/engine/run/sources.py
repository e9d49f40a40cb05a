"""What one attempt of a run reads: the tables on its branch and the landing zones, as temporary views.

`ref('layer.name')` and `{{ this }}` become views over the table's data files on the run's branch; a landing
zone becomes a view over the files the ledger says this run must read (landing/reader.py does the reading).
The sources remember which landing files were read (they become loaded when the run merges), the zone's
files as they were (change detection compares them next time) and each zone's columns as Spark read them (the
table's snapshot records them: a later run with nothing new to read takes them from there, reading no file). A
retry of the run starts new sources.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.read import column_max_from_stats, read_table
from ratui.engine.landing.formats import zone_format
from ratui.engine.landing.formats.csv import DELIMITER_NAMES
from ratui.engine.landing.reader import ZoneFile, ZoneReader
from ratui.engine.landing.zone import Zone, ZoneEntry, open_zone, zone_digest
from ratui.engine.project.discovery import Pipeline
from ratui.engine.project.names import check_name, sql_ident
from ratui.engine.project import intervals
from ratui.engine.project.templating import TemplateContext, parse_ref
from ratui.engine.state import landing_facts
from ratui.engine.run.control import RunControl
from ratui.engine.run.scope import Log
from ratui.engine.state.project_state import ProjectState
from ratui.engine.storage.staging import RemoteStaging
from ratui.engine.vocabulary import MAIN, format_bytes

NO_RECORDED_COLUMNS = ("no file is new and the table records none of the zone's columns: Spark reads them from the "
                       "newest loaded file, none of its rows")


@dataclass(frozen=True)
class ZoneSelection:
    """What a run reads of a zone: this pipeline's ledger rows of it on the run's ref (`entries`), those it reads
    (`wanted`), whether it rebuilds (full_refresh) and the pipeline's landing_mode."""

    entries: list
    wanted: list
    rebuild: bool
    mode: str

    @classmethod
    def of(cls, entries: list, *, rebuild: bool, mode: str) -> "ZoneSelection":
        wanted = [e for e in entries if e.state != "skipped" and (
            rebuild or e.state == "unloaded" or (mode == "all" and not e.archived))]
        return cls(entries, wanted, rebuild, mode)


class RunSources:
    def __init__(self, state: ProjectState, session: Any, *, key: str, branch: str, pipeline: Pipeline,
                 strategy: str, full_refresh: bool, run_started_at: str, staging: Path, log: Log,
                 control: RunControl | None = None, target: str = MAIN, remote_staging: RemoteStaging | None = None):
        """`log`: where what the reads did is said (the run's log, its notes, its staging progress); `control`: the
        run's, checked between downloads (a cancel stops them). `remote_staging`: where local landing files go for
        a Spark that cannot see this disk (storage/staging.py); None when Spark reads this disk."""
        self.state = state
        self.session = session
        self.key = key
        self.branch = branch
        self.target = target  # whose view of the landing ledger this run reads and loads
        self.pipeline = pipeline
        self.strategy = strategy
        self.full_refresh = full_refresh
        self.run_started_at = run_started_at
        self.staging = staging
        self.remote_staging = remote_staging
        self.log = log
        self.control = control
        self.views: dict[str, str] = {}
        self.interval: intervals.Range | None = None  # an incremental_by_time run's [start, end): the template's
        self.consumed: list[tuple[str, str, str, str]] = []  # landing files read: (namespace, zone, pipeline, file)
        self.zone_inputs: dict[str, list] = {}
        # the landing files this run reads, as it found them before reading
        self.read_entries: list[tuple[Zone, list[ZoneEntry]]] = []
        self.fork_snapshot: int | None = None  # the table's current snapshot when the branch was made
        self.zone_columns: dict[str, dict] = {}  # each zone's columns as its view has them (StructType JSON)
        self._recorded: dict[str, landing_facts.ZoneColumns] | None = None

    def learn_landing(self) -> None:
        """Before any zone is read: take in the landing facts this pipeline's table carries on the run's branch
        (what the target had when the branch was made) that the ledger has not seen: files another installation
        sharing the catalog loaded, or a run that died between its merge and its ledger write (landing_facts.py).
        They are loaded, and this run does not read them again."""
        catalog = self.state.catalog
        if not self.pipeline.zones or not catalog.table_exists(self.branch, self.key):
            return
        table = catalog.load_table(self.branch, self.key)
        self.fork_snapshot = table.metadata.current_snapshot_id
        walked, facts = landing_facts.since(table, self.state.ledger.synced(self.target, self.key))
        if not walked:
            return
        learned = self.state.ledger.learn(self.target, self.key.split(".")[0], self.key, self.key, walked, facts)
        if learned:
            # on the run's line and in its --json (a note), not only in its log
            self.log.note(learned_note(learned, self.target, rebuild=self.strategy == "full_refresh"))

    def landing_summary(self) -> dict[str, str]:
        """The snapshot-summary properties naming the landing files this run read and, for each zone whose columns
        the table does not record as they are now (or all of them when the run rebuilds the table), its columns
        (landing_facts.py)."""
        recorded = self.recorded_columns()
        rebuild = self.strategy == "full_refresh"
        columns = {zone: schema for zone, schema in self.zone_columns.items()
                   if rebuild or zone not in recorded or recorded[zone].schema != schema}
        return {**landing_facts.summary(self.state.ledger.identities(self.consumed)),
                **landing_facts.columns_summary(columns)}

    def recorded_columns(self) -> dict[str, landing_facts.ZoneColumns]:
        """The columns of this pipeline's zones as its table on the run's branch records them (read once)."""
        if self._recorded is None:
            catalog = self.state.catalog
            self._recorded = {}
            if self.pipeline.zones and catalog.table_exists(self.branch, self.key):
                self._recorded = landing_facts.recorded_columns(catalog.load_table(self.branch, self.key),
                                                                self.pipeline.zones)
        return self._recorded

    def written_snapshots(self) -> list[int]:
        """The snapshots of this pipeline's table on the branch since the branch was made (this run's writes): the
        merge records them as taken in, so a later reset of a file is not undone by this run's own facts."""
        catalog = self.state.catalog
        if not self.pipeline.zones or not catalog.table_exists(self.branch, self.key):
            return []
        table = catalog.load_table(self.branch, self.key)
        stop = {self.fork_snapshot} if self.fork_snapshot is not None else set()
        return landing_facts.since(table, stop)[0]

    def forget(self, key: str) -> None:
        """Read `key` again next time (this pipeline's own table after the write, for its quality tests)."""
        self.views.pop(key, None)

    def drop_views(self) -> None:
        for view in self.views.values():
            try:
                self.session.catalog.dropTempView(view.strip("`"))
            except Exception:  # a stopped session: its views are gone anyway
                pass

    def table(self, key: str) -> str:
        view = sql_ident(*key.split("."))
        if key in self.views:
            return self.views[key]
        if not self.state.catalog.table_exists(self.branch, key):
            name = key.split(".", 1)[1]
            raise RatuiError("RAT-CAT-005", f"table {key} does not exist yet",
                             hint=f"Run its pipeline first: `ratui run +{name}` runs it with its ancestors.")
        table = self.state.catalog.load_table(self.branch, key)
        read_table(self.session, table).createOrReplaceTempView(view.strip("`"))
        self.views[key] = view
        return view

    def zone(self, namespace: str, zone_name: str, file: str) -> str:
        """The zone's files for this run as a temp view. Which files comes from the ledger:

            a rebuild (full_refresh)   every file the ledger knows but skipped ones, archived ones included
            landing_mode new_files     the files this pipeline has not loaded (new, failed before, or reset)
            landing_mode all           the files in the zone, and archived ones a reset made loadable

        A file the ledger needs that is gone is an error naming it (RAT-LND-005): never a smaller table. What the
        run reads is staged where Spark reads it (a remote zone's objects are fetched, at most `concurrency` at a
        time, with progress, or read in place; local files are uploaded for a Spark that cannot see this disk),
        before the format of each is checked.
        """
        key = f"landing:{namespace}.{zone_name}"
        if key in self.views:
            return self.views[key]
        check_name(zone_name, "landing zone", file)
        zone = open_zone(self.state.settings, namespace, zone_name, file=file)
        active = zone.list()
        mode = self.pipeline.config.landing_mode if self.pipeline.config else "all"
        selection = ZoneSelection.of(self._synced_ledger(namespace, zone_name, active, mode),
                                     rebuild=self.strategy == "full_refresh", mode=mode)
        entries, wanted = selection.entries, selection.wanted
        self.zone_inputs[zone_name] = zone_digest(active)
        # counted before reading: a file that cannot be read (bad rows, wrong columns) is this run's failure too
        self.consumed.extend((namespace, zone_name, self.key, e.file) for e in wanted)
        present = {e.name: e for e in active}
        archived = [e.file for e in wanted if e.archived]
        if archived:
            present.update(zone.lookup(archived))
        missing = [e for e in wanted if e.file not in present]
        if missing:
            raise self._gone(zone_name, missing, zone.where(missing[0].file))
        if not active and not entries and mode != "new_files":
            raise RatuiError("RAT-LND-002", f"landing zone '{zone_name}' has no active {zone.noun}s"
                             + (f" under {zone.url}" if zone.polled else ""), file=zone.url, hint=zone.empty_hint)
        chosen = [present[e.file] for e in wanted]
        self.read_entries.append((zone, chosen))
        df = None
        if chosen:
            fmt = zone_format(zone_name, [e.name for e in chosen], zone.url, zone.where)  # before any download
            df = self._read_zone(zone, fmt, self._stage(zone, chosen))
        if df is None:
            df = self._empty_batch(zone, entries)
        else:
            self.zone_columns[zone_name] = json.loads(df.schema.json())
        return self._zone_view(key, namespace, zone_name, df, selection)

    def _empty_batch(self, zone: Zone, entries: list):
        """Nothing to read (or only empty files): an empty batch with the zone's columns. They are the ones Spark
        read the zone with when a run last read its rows, as the table's snapshots record them (no file is read,
        none uploaded); a table that records none (written before ratui recorded them, or that snapshot expired)
        gets them from the newest non-empty file the ledger knows, Spark reading its columns alone."""
        from pyspark.sql.types import StructType

        recorded = self.recorded_columns().get(zone.name)
        if recorded is not None:
            self.zone_columns[zone.name] = recorded.schema
            self.log.line(f"landing zone {zone.name}: no file is new: its columns are those Spark read by run "
                          f"{recorded.run_id or '(unnamed)'}" + (f" at {recorded.at[:19].replace('T', ' ')} UTC"
                                                                 if recorded.at else "")
                          + ", as the table records them; no file read for them")
            return self._no_rows(StructType.fromJson(recorded.schema))
        known = zone.lookup(e.file for e in entries if e.state != "skipped")
        sample = max((e for e in known.values() if e.size), key=lambda e: e.mtime_ns, default=None)
        if sample is None:
            raise RatuiError("RAT-LND-002", f"landing zone '{zone.name}' has no {zone.noun} with data to read",
                             file=zone.url)
        fmt = zone_format(zone.name, [sample.name], zone.url, zone.where)
        if self.remote_staging is None:  # (else the upload's line says it)
            self.log.line(f"landing zone {zone.name}: {NO_RECORDED_COLUMNS}")
        # Spark reads the zone's columns (its own type inference) from that file alone: no row of it is read
        df = self._read_zone(zone, fmt, self._stage(zone, [sample], columns_only=True), check_rows=False).limit(0)
        self.zone_columns[zone.name] = json.loads(df.schema.json())
        return df

    def _no_rows(self, schema):
        """A DataFrame of no rows with exactly `schema`: a local relation made from an empty Arrow table (from an
        empty list, a local Spark makes a Python RDD, and writing its zero rows starts Python workers: seconds)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        try:
            data: Any = to_arrow_schema(schema).empty_table()
        except Exception:  # a type Arrow cannot hold: the list does
            data = []
        return self.session.createDataFrame(data, schema)

    def _stage(self, zone: Zone, chosen: list[ZoneEntry], columns_only: bool = False) -> list[ZoneFile]:
        """The files to read where Spark reads them, each with the name the ledger knows it by (`columns_only`: a
        file staged for the zone's columns alone, the batch being empty)."""
        began = time.monotonic()
        total_bytes = sum(e.size for e in chosen)

        def progress(done: int, total: int, size: int) -> None:
            self.log.staging(zone.name, done, total, size, total_bytes)

        staged = zone.stage(chosen, self.staging, progress, check=self._check)
        files = [staged[e.name] for e in chosen]
        in_place = sum(1 for zf in files if zf.in_place)
        if in_place:
            self.log.line(f"landing zone {zone.name}: {in_place} {zone.noun}(s), {format_bytes(total_bytes)}, read "
                          f"in place from {zone.url}")
        elif chosen and zone.polled:
            self.log.line(f"landing zone {zone.name}: fetched {len(chosen)} {zone.noun}(s), "
                          f"{format_bytes(total_bytes)}, from {zone.url} in {time.monotonic() - began:.1f} s")
        if self.remote_staging is not None:
            files = self._hand_over(zone, files, progress, columns_only)
        return files

    def _hand_over(self, zone: Zone, files: list[ZoneFile], progress: Callable[[int, int, int], None],
                   columns_only: bool = False) -> list[ZoneFile]:
        """Upload the files that are on this disk to the run's staging prefix, where a Spark that cannot see this
        disk reads them (ratui's own checks still read the local files)."""
        assert self.remote_staging is not None
        local = [zf for zf in files if zf.spark_uri is None and zf.path is not None]
        if not local:
            return files
        began = time.monotonic()
        remote = self.remote_staging
        uris = remote.upload([(zf.path, remote.place(zone.name, zf.name)) for zf in local if zf.path is not None],
                             progress, check=self._check)
        self.log.line(f"landing zone {zone.name}: uploaded {len(local)} file(s), "
                      f"{format_bytes(sum(zf.size for zf in local))}, to {remote.url}/ for Spark in "
                      f"{time.monotonic() - began:.1f} s"
                      + (f" ({NO_RECORDED_COLUMNS})" if columns_only else ""))
        handed = {zf.name: dataclasses.replace(zf, spark_uri=uri) for zf, uri in zip(local, uris)}
        return [handed.get(zf.name, zf) for zf in files]

    def _synced_ledger(self, namespace: str, zone_name: str, active: list, mode: str) -> list:
        """Sync the ledger with the zone's active files (a file gone from the zone is forgotten in landing_mode
        all); this pipeline's rows of the zone as the run's ref sees them."""
        ledger = self.state.ledger
        return ledger.on_ref(self.target, ledger.sync(namespace, zone_name, self.key, active,
                                                      forget_missing=mode == "all"))

    def _check(self) -> None:
        """Between downloads: a cancelled run stops."""
        if self.control is not None:
            self.control.check()

    def changed_inputs(self, *, removed: bool = False) -> list[tuple[str, str, str]]:
        """The landing files this run read that are no longer as the run found them before reading (still being
        written, or replaced): (zone, where, what changed). `removed`: files gone since count too (a read that
        failed may have failed for that). A zone whose reads are pinned to what was listed has none."""
        return [(zone.name, zone.where(entry.name), how) for zone, entries in self.read_entries
                for entry, how in zone.changed(entries, removed)]

    def _gone(self, zone_name: str, missing: list, where: str) -> RatuiError:
        rebuild = self.strategy == "full_refresh"
        purged = [e for e in missing if e.purged_at]
        names = ", ".join(e.file for e in missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10
                                                             else "")
        return RatuiError(
            "RAT-LND-005",
            f"{'rebuilding ' + self.key if rebuild else self.key} needs {len(missing)} landing file(s) of zone "
            f"'{zone_name}' that are gone: {names}"
            + (f" ({len(purged)} removed by the reaper's processed-file retention)" if purged else ""),
            file=where)

    def _zone_view(self, key: str, namespace: str, zone_name: str, df, selection: "ZoneSelection") -> str:
        entries, wanted, rebuild, mode = selection.entries, selection.wanted, selection.rebuild, selection.mode
        skipped = sum(1 for e in entries if e.state == "skipped")
        view = sql_ident(namespace, "landing", zone_name)
        df.createOrReplaceTempView(view.strip("`"))
        self.views[key] = view
        archived = sum(1 for e in wanted if e.archived)
        how = (" (rebuild: every file the ledger knows)" if rebuild and (mode == "new_files" or archived)
               else " (new files only)" if mode == "new_files" else "")
        self.log.line(f"landing zone {zone_name}: {len(wanted)} file(s) read{how}"
                      + (f", {archived} of them from _processed/" if archived else "")
                      + (f", {skipped} skipped file(s) left out" if skipped else ""))
        return view

    def _read_zone(self, zone: Zone, fmt: str, files: list[ZoneFile], check_rows: bool = True):
        """A DataFrame over landing files (see landing/reader.py); the reader's warnings become run notes."""
        config = self.pipeline.config
        settings = self.state.settings
        bad_rows = config.landing_bad_rows if config and config.landing_bad_rows else settings.landing_bad_rows
        columns = (config.landing_columns if config and config.landing_columns else self.state.settings.landing_columns)
        reader = ZoneReader(self.session, zone.name, fmt, bad_rows=bad_rows, columns=columns, staging=self.staging,
                            check_rows=check_rows)
        df = reader.read(files)
        for note in reader.report.notes:
            self.log.note(note)
        by_delimiter: dict[str, list[str]] = {}
        for name, delimiter in reader.report.delimiters.items():
            by_delimiter.setdefault(delimiter, []).append(name)
        for delimiter, names in sorted(by_delimiter.items()):
            self.log.line(f"landing zone {zone.name}: {len(names)} CSV file(s) read with a "
                          f"{DELIMITER_NAMES[delimiter]} between fields (their header has no comma): "
                          f"{', '.join(sorted(names)[:5])}" + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
        return df

    def context(self, pipeline: Pipeline, file: Path) -> TemplateContext:
        exists = self.state.catalog.table_exists(self.branch, self.key)
        this = sql_ident(*self.key.split("."))
        if exists:
            this = self.table(self.key)
        watermark = None
        _file, config = pipeline.loaded()
        if config.watermark_column and exists and not self.full_refresh:
            watermark = self.watermark(config.watermark_column)
        return TemplateContext(
            ref=lambda name: self.table(parse_ref(name, pipeline.namespace, str(file))),
            landing_zone=lambda zone: self.zone(pipeline.namespace, zone, str(file)),
            this=this,
            run_started_at=self.run_started_at,
            watermark_value=watermark,
            is_incremental=self.strategy == "incremental" and exists,
            is_scd2=self.strategy == "scd2",
            start=intervals.iso(self.interval[0]) if self.interval else None,
            end=intervals.iso(self.interval[1]) if self.interval else None,
        )

    def watermark(self, column: str) -> str | None:
        table = self.state.catalog.load_table(self.branch, self.key)
        try:
            field = table.schema().find_field(column, case_sensitive=False)
        except ValueError:
            return None
        exact, value = column_max_from_stats(table, field.name)
        if exact:
            value = _bound_to_python(field.field_type, value)
        else:
            from pyspark.sql import functions as F

            value = read_table(self.session, table).agg(F.max(F.col(f"`{field.name}`"))).first()[0]
        if value is None:
            return None
        text = _timestamp_text(value)
        self.log.line(f"watermark {column} = {text}" + (" (from file statistics)" if exact else " (scanned)"))
        return text


def learned_note(learned: list, target: str, *, rebuild: bool) -> str:
    """What a run says of the landing files it took in as loaded from the table's facts: how many, of which zones,
    by which runs and when; not read again, or read again by a full refresh (which rebuilds from every file)."""
    by_run: dict[tuple[str | None, str | None], list] = {}
    for fact in learned:
        by_run.setdefault((fact.run_id, fact.at), []).append(fact)
    runs = "; ".join(
        f"{len(facts)} of zone{'s' if len({f.zone for f in facts}) > 1 else ''} "
        f"{', '.join(sorted({f.zone for f in facts}))} by run {run_id or '(unnamed)'}"
        + (f" at {at[:19].replace('T', ' ')} UTC" if at else "")
        for (run_id, at), facts in sorted(by_run.items(), key=lambda item: str(item[0][1])))
    then = ("read again all the same: a full_refresh rebuilds the table from every file the ledger knows" if rebuild
            else "not read again")
    return (f"{len(learned)} landing file(s) already loaded on {target} ({runs}), as the table's own record says: "
            f"another installation sharing the catalog, or a run this ledger did not record; {then}")


def _timestamp_text(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


def _bound_to_python(itype, value):
    """Iceberg bounds decode to micros/days ints for temporal types: turn them into readable values."""
    from datetime import date, timedelta

    from pyiceberg import types as it

    if value is None:
        return None
    if isinstance(itype, (it.TimestampType, it.TimestamptzType)):
        return datetime(1970, 1, 1) + timedelta(microseconds=value)
    if isinstance(itype, it.DateType):
        return date(1970, 1, 1) + timedelta(days=value)
    return value


CHANGED_WHILE_READ = "RAT-LND-010"


def changed_inputs_error(changed: list[tuple[str, str, str]], cause: RatuiError | None = None) -> RatuiError:
    """RAT-LND-010 for the files `RunSources.changed_inputs` found; `cause`: the error the read failed with."""
    zones = sorted({zone_name for zone_name, _where, _how in changed})
    first = changed[0][1]
    names = ", ".join((f"{_base(where)} ({how})" if len(zones) == 1 else f"{zone_name}/{_base(where)} ({how})")
                      for zone_name, where, how in changed[:5])
    if len(changed) > 5:
        names += f" and {len(changed) - 5} more"
    where = f"zone '{zones[0]}'" if len(zones) == 1 else "zones " + ", ".join(f"'{z}'" for z in zones)
    message = f"landing file(s) of {where} changed while the run read them: {names}; nothing was merged"
    if cause is not None:
        message += f" (the read failed with {cause.code}: {cause.message})"
    return RatuiError(CHANGED_WHILE_READ, message, file=first)


def _base(where: str) -> str:
    return where.rstrip("/").rsplit("/", 1)[-1]
