"""What ratui.yaml's `alerts:` may say (alerts.md): channels, and rules that send to them.

    alerts:
      channels:
        ops: {url_env: RATUI_OPS_WEBHOOK}          # an Apprise URL, or http(s):// (the alert as JSON), in the variable
        pager: {command: [notify-pager, --urgent]} # the alert as JSON on the command's stdin
      rules:
        - {on: failure, select: "tag:daily", notify: [ops, pager]}
        - {on: recovery, notify: [ops]}

A channel's address is never in the file: `url_env` names the environment variable that holds it (a webhook's
URL is a secret). A rule's `notify` names declared channels; its `select` is a `ratui run` selector (every
pipeline when left out), checked against the project by `ratui check` (RAT-ALR-002 at its line). Each refusal here
is a RAT-ALR code at the key's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainValidator, model_validator

from ratui.engine.project.schema import Section, at_least, invalid, mapping, one_of

# what a rule fires on: a run on its ref failing, the first success after failures, a success with quality warnings;
# checked by the runner: a table gone stale (its pipeline's freshness), a run going longer than `after`, a schedule's
# fire not run as planned (missed while the runner was down, or skipped: its previous run still going)
EVENTS = ("failure", "recovery", "warn", "freshness", "stuck", "missed")
RUN_EVENTS = ("failure", "recovery", "warn")
STUCK_AFTER = 3600.0  # a stuck rule's `after` when left out
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _env_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ENV_NAME.match(value.strip()):
        raise invalid("{where} must name an environment variable (letters, digits and '_'), not hold a URL",
                      "RAT-ALR-003", hint="Put the URL in a variable (export RATUI_OPS_WEBHOOK=...) and write "
                      "`url_env: RATUI_OPS_WEBHOOK`: a webhook's URL is a secret, never written in ratui.yaml.")
    return value.strip()


def _argv(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(w, str) and w for w in value):
        raise invalid("{where} must be a command as a list of words, e.g. [notify-pager, --urgent]", "RAT-ALR-003",
                      hint="The alert is written to the command's stdin as JSON; no shell reads the words.")
    return tuple(value)


class Channel(Section):
    """Where alerts go: the URL in `url_env` (Apprise's schemes, or http(s):// for the alert as JSON), or a
    `command`. A send that fails is retried `retries` times (waits of 1, 2, 4 ... s); each attempt gives up after
    `timeout_seconds`; past `max_per_hour` sent alerts the channel's next ones are recorded as suppressed."""

    url_env: Annotated[str | None, PlainValidator(_env_name)] = None
    command: Annotated[tuple[str, ...] | None, PlainValidator(_argv)] = None
    timeout_seconds: Annotated[int, PlainValidator(at_least(1))] = 10
    retries: Annotated[int, PlainValidator(at_least(0))] = 2
    max_per_hour: Annotated[int, PlainValidator(at_least(1))] = 60

    @model_validator(mode="after")
    def _one_address(self) -> "Channel":
        if (self.url_env is None) == (self.command is None):
            raise invalid("{where} takes one of url_env (a variable holding a URL) or command", "RAT-ALR-003",
                          hint="For example `ops: {url_env: RATUI_OPS_WEBHOOK}` or `pager: {command: [notify]}`.")
        return self


def _event(value: Any) -> str:
    return one_of(EVENTS, "RAT-ALR-001")(value)


def _after(value: Any) -> float | None:
    from ratui.engine.project.freshness_terms import duration

    return None if value is None else duration(value)


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise invalid("{where} must list the channels to notify, e.g. [ops]", "RAT-ALR-002")
    return tuple(v.strip() for v in value)


def _select(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{{where}} must be a `ratui run` selector (text), got {value!r}", "RAT-ALR-002")
    return value.strip()


class Rule(Section):
    """On `on` of a run of a selected pipeline on `ref` (main unless said; "*": any), or its table gone stale
    (`freshness`, main only), notify the channels."""

    on: Annotated[str, PlainValidator(_event)]
    notify: Annotated[tuple[str, ...], PlainValidator(_names)]
    select: Annotated[str | None, PlainValidator(_select)] = None
    ref: Annotated[str, PlainValidator(lambda v: str(v).strip() or "main")] = "main"
    after: Annotated[float | None, PlainValidator(_after)] = None  # stuck: how long a run may go (a duration)

    @model_validator(mode="after")
    def _fits_its_event(self) -> "Rule":
        if self.after is not None and self.on != "stuck":
            raise invalid("{where}: `after` applies to `on: stuck` (how long a run may go)", "RAT-ALR-002",
                          at="after")
        if self.select is not None and self.on == "missed":
            raise invalid("{where}: `select` does not apply to `on: missed`: it alerts for every schedule",
                          "RAT-ALR-002", at="select")
        return self


def _channels(value: Any) -> dict[str, Any]:
    out = mapping(value)
    for name in out:
        if not isinstance(name, str) or not _CHANNEL_NAME.match(name):
            raise invalid(f"channel name {name!r} must be letters, digits, '_', '.' and '-'", "RAT-ALR-003",
                          at=str(name))
    return out


def _rules(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid("{where} must be a list of rules, e.g. [{on: failure, notify: [ops]}]", "RAT-ALR-002")
    # YAML 1.1 reads a bare `on` key as true (as it reads yes and off): the rule's `on` is meant
    return tuple({("on" if key is True else key): v for key, v in rule.items()} if isinstance(rule, dict) else rule
                 for rule in value)


class AlertsSection(Section):
    """ratui.yaml's `alerts:`. `digest_after`: more alerts than this for one channel within `gather_seconds` are
    sent as one digest."""

    channels: Annotated[dict[str, Channel], BeforeValidator(_channels)] = Field(default_factory=dict)
    rules: Annotated[tuple[Rule, ...], BeforeValidator(_rules)] = ()
    digest_after: Annotated[int, PlainValidator(at_least(1))] = 5
    gather_seconds: Annotated[int, PlainValidator(at_least(0))] = 2

    @model_validator(mode="after")
    def _declared_channels(self) -> "AlertsSection":
        for index, rule in enumerate(self.rules):
            for name in rule.notify:
                if name not in self.channels:
                    from ratui.engine.errors import did_you_mean

                    raise invalid(f"alerts rule {index + 1} notifies '{name}', which is not a declared channel",
                                  "RAT-ALR-002", hint=did_you_mean(name, list(self.channels)) or
                                  "Declare it under alerts.channels (e.g. `ops: {url_env: RATUI_OPS_WEBHOOK}`).",
                                  at=("rules", str(index), "notify"))
        return self


@dataclass(frozen=True)
class AlertRule:
    """A checked rule, and where it was written (for `ratui check`'s errors about its selector)."""
    index: int
    on: str
    notify: tuple[str, ...]
    select: str | None
    ref: str
    file: str | None = None
    line: int | None = None
    after: float = STUCK_AFTER  # stuck: seconds a run may go

    @property
    def name(self) -> str:
        return f"{self.index + 1}:{self.on}"


@dataclass(frozen=True)
class AlertChannel:
    name: str
    url_env: str | None
    command: tuple[str, ...] | None
    timeout_seconds: int
    retries: int
    max_per_hour: int


@dataclass(frozen=True)
class Alerts:
    """The project's alerts, as Settings holds them."""
    channels: dict[str, AlertChannel]
    rules: tuple[AlertRule, ...]
    digest_after: int = 5
    gather_seconds: int = 2


NO_ALERTS = Alerts({}, ())


def checked_alerts(section: AlertsSection, file: str, line_of) -> Alerts:
    """The section as Settings holds it: `line_of(loc)` gives a key's line in ratui.yaml."""
    channels = {name: AlertChannel(name, c.url_env, c.command, c.timeout_seconds, c.retries, c.max_per_hour)
                for name, c in section.channels.items()}
    rules = tuple(AlertRule(i, r.on, r.notify, r.select, r.ref, file, line_of(("alerts", "rules", str(i))),
                            r.after if r.after is not None else STUCK_AFTER) for i, r in enumerate(section.rules))
    return Alerts(channels, rules, section.digest_after, section.gather_seconds)


def rule_errors(alerts: Alerts, pipelines: dict[str, Any], graph: Any, namespace: str) -> list:
    """A rule whose selector selects no pipeline (RAT-ALR-002 at its line): what only the whole project shows."""
    from ratui.engine.errors import RatuiError
    from ratui.engine.project.dag import select

    errors = []
    for rule in alerts.rules:
        if rule.select is None:
            continue
        try:
            select(rule.select.split(), pipelines, graph, namespace)
        except RatuiError as exc:
            errors.append(RatuiError("RAT-ALR-002", f"alerts rule {rule.index + 1} selects no pipeline: {exc.message}",
                                     file=rule.file, line=rule.line, hint=exc.hint))
    return errors
