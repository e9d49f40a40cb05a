"""What a schedule's words may be: a cron expression (croniter reads it; nothing here parses one) and an IANA time
zone (zoneinfo). ratui.yaml's `schedules:` (settings_schema.py) and a pipeline's `schedule` (config.py) check their
values with these; each refusal is a RAT-SCH code at the key's line.

A pipeline's schedule is a cron, optionally with its time zone after a semicolon:

    -- @schedule: 0 6 * * *; Europe/Amsterdam          (an annotation: text)
    schedule: {cron: "0 6 * * *", timezone: Europe/Amsterdam}   (config.yaml; or the text form)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ratui.engine.project.schema import invalid

DEFAULT_TIMEZONE = "UTC"
CATCH_UP = ("none", "last", "all")
DEFAULT_CATCH_UP = "last"
# croniter's aliases ratui lets through as they are (each a five-field expression)
ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
CRON_FIELDS = 5


def check_cron(value: Any) -> str:
    """A five-field cron expression croniter accepts (or an alias), normalised to single spaces. croniter also
    reads a sixth (seconds) field: refused, a schedule fires at minutes."""
    from croniter import croniter

    text = " ".join(str(value).split()) if isinstance(value, str) else ""
    if not text:
        raise invalid(f"{{where}} must be a cron expression (text), got {value!r}", "RAT-SCH-001")
    fields = text.split(" ")
    if text.lower() in ALIASES:
        return text.lower()
    if len(fields) != CRON_FIELDS:
        raise invalid(f"{{where}}: cron '{text}' has {len(fields)} fields, a schedule's has {CRON_FIELDS}",
                      "RAT-SCH-001")
    if not croniter.is_valid(text):
        raise invalid(f"{{where}}: '{text}' is not a cron expression croniter can read", "RAT-SCH-001")
    return text


def check_timezone(value: Any) -> str:
    """An IANA time zone zoneinfo knows (UTC when left out)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if value is None:
        return DEFAULT_TIMEZONE
    text = str(value).strip() if isinstance(value, str) else ""
    if not text:
        raise invalid(f"{{where}} must be a time zone name, got {value!r}", "RAT-SCH-002")
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise invalid(f"{{where}}: unknown time zone '{text[:64]}'", "RAT-SCH-002") from None
    return text


def pipeline_schedule(value: Any) -> tuple[str, str] | None:
    """A pipeline's `schedule` as (cron, time zone): text `CRON` or `CRON; ZONE`, or a mapping of cron and
    timezone."""
    if value is None:
        return None
    if isinstance(value, dict):
        unknown = [str(key) for key in value if key not in ("cron", "timezone")]
        if unknown:
            raise invalid(f"{{where}} takes cron and timezone, not '{unknown[0]}'", "RAT-CFG-005")
        return check_cron(value.get("cron")), check_timezone(value.get("timezone"))
    if not isinstance(value, str):
        raise invalid(f"{{where}} must be a cron (text, '; ZONE' after it) or a mapping of cron and timezone, got "
                      f"{type(value).__name__}", "RAT-SCH-001")
    cron, _, zone = value.partition(";")
    return check_cron(cron), check_timezone(zone.strip() or None)


@dataclass(frozen=True)
class Schedule:
    """A checked schedule of the project: from ratui.yaml (`source` "ratui.yaml") or a pipeline's own `schedule`
    (`source` the pipeline's key, its selector that pipeline alone, its name the key)."""

    name: str
    select: str  # `ratui run` selectors, space-separated
    cron: str
    timezone: str
    atomic: bool = False
    catch_up: str = DEFAULT_CATCH_UP
    enabled: bool = True
    source: str = "ratui.yaml"
    file: str | None = None
    line: int | None = None

    @property
    def selectors(self) -> list[str]:
        return self.select.split()


def declared_schedules(settings: Any, pipelines: dict[str, Any], graph: Any) -> tuple[list[Schedule], list]:
    """Every schedule of the project, and the problems only the whole project shows: a name used twice (a
    pipeline's schedule is named after the pipeline), a selector that selects no pipeline (RAT-SCH-003/004)."""
    from ratui.engine.errors import RatuiError
    from ratui.engine.project.dag import select

    found = [Schedule(s.name, s.select, s.cron, s.timezone, s.atomic, s.catch_up, s.enabled, "ratui.yaml", s.file,
                      s.line) for s in settings.schedules]
    for key in sorted(pipelines):
        config = pipelines[key].config
        if config is not None and config.schedule is not None:
            cron, zone = config.schedule
            file, line = config.where.get("schedule", (str(pipelines[key].file), None))
            found.append(Schedule(key, key, cron, zone, source=key, file=file, line=line))
    schedules: list[Schedule] = []
    errors: list = []
    names: set[str] = set()
    for schedule in found:
        if schedule.name in names:
            errors.append(RatuiError("RAT-SCH-003", f"schedule name '{schedule.name}' is used twice",
                                     file=schedule.file, line=schedule.line))
            continue
        names.add(schedule.name)
        try:
            select(schedule.selectors, pipelines, graph, settings.namespace)
        except RatuiError as exc:
            errors.append(RatuiError("RAT-SCH-004", f"schedule '{schedule.name}' selects no pipeline: "
                                     f"{exc.message}", file=schedule.file, line=schedule.line))
            continue
        schedules.append(schedule)
    return schedules, errors
