"""What an alert says: the JSON every channel gets (a command's stdin, a webhook's body; Apprise gets its title and
text), one per run that changed state, or one digest for many.

It says what happened, where (project, pipeline, run id, ref, trigger, error code and the message's first line,
the `ratui show` command and the console's screen to see more) and from which host; never a row of data, a
setting's value or an environment variable.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratui.engine.project.freshness_terms import age_words
from ratui.engine.vocabulary import now_iso

DIGEST_SHOWN = 20  # alerts listed in a digest; the rest counted
VERBS = {"failure": "failed", "recovery": "recovered", "warn": "succeeded with quality warnings",
         "freshness": "is stale", "stuck": "is stuck", "missed": "missed a fire"}


@dataclass(frozen=True)
class RunOutcome:
    """A run that ended, as the alerts see it (from the engine's RunQueued and RunFinished events)."""
    run_id: str
    pipeline: str
    status: str
    ref: str = "main"
    trigger: str = "cli"
    warnings: int = 0
    error_code: str | None = None
    error_line: str | None = None


def alert(event: str, rule: str, run: RunOutcome, project: str, root: Path) -> dict[str, Any]:
    verb = VERBS.get(event, event)
    what = f"{run.pipeline} {verb}" + (f" ({run.error_code})" if event == "failure" and run.error_code else "")
    error = {"code": run.error_code, "first_line": run.error_line} if event == "failure" else None
    lines = [f"{what} on {run.ref} (run {run.run_id}, trigger {run.trigger}), project {project} on "
             f"{socket.gethostname()}."]
    if error and run.error_line:
        lines.append(f"{run.error_code or 'error'}: {run.error_line}")
    if event == "warn":
        lines.append(f"{run.warnings} quality warning(s).")
    lines.append(f"See: ratui show {run.run_id} --project {root}  (or the console's Runs screen)")
    return {"ratui_alert": 1, "event": event, "rule": rule, "project": project, "host": socket.gethostname(),
            "at": now_iso(), "pipeline": run.pipeline, "run_id": run.run_id, "status": run.status, "ref": run.ref,
            "trigger": run.trigger, "warnings": run.warnings, "error": error,
            "see": {"command": f"ratui show {run.run_id} --project {root}", "console": "Runs (2), then the run"},
            "title": f"ratui: {what}", "text": "\n".join(lines)}


def stale_alert(rule: str, row: dict[str, Any], project: str, root: Path) -> dict[str, Any]:
    """A table past its freshness: how old, against which bound, its last successful run."""
    age = row.get("age_seconds")
    bound = row.get("error_after") if row["state"] == "error" else row.get("warn_after")
    when = (f"last built {age_words(age)} ago (run {row['run_id']})" if age is not None else "never built on main")
    what = f"{row['pipeline']} is stale ({row['state']}: {when}; {row['state']}_after {bound})"
    see = f"ratui check --freshness --project {root}"
    return {"ratui_alert": 1, "event": "freshness", "rule": rule, "project": project, "host": socket.gethostname(),
            "at": now_iso(), "pipeline": row["pipeline"], "run_id": row.get("run_id"), "state": row["state"],
            "age_seconds": age, "warn_after": row.get("warn_after"), "error_after": row.get("error_after"),
            "last_success": row.get("last_success"), "ref": "main", "error": None,
            "see": {"command": see, "console": "Pipelines (1), the table"},
            "title": f"ratui: {what}", "text": f"{what}, project {project} on {socket.gethostname()}.\nSee: {see}"}


def stuck_alert(rule: str, run: dict[str, Any], age: float, after: float, project: str,
                root: Path) -> dict[str, Any]:
    what = f"{run['pipeline']} has been {run.get('status') or 'running'} for {age_words(age)} (run {run['id']})"
    see = f"ratui show {run['id']} --project {root}"
    return {"ratui_alert": 1, "event": "stuck", "rule": rule, "project": project, "host": socket.gethostname(),
            "at": now_iso(), "pipeline": run["pipeline"], "run_id": run["id"], "status": run.get("status"),
            "ref": run.get("ref") or "main", "trigger": run.get("trigger"), "age_seconds": round(age, 1),
            "after_seconds": after, "pid": run.get("pid"), "run_host": run.get("host"), "error": None,
            "see": {"command": see, "cancel": f"ratui cancel {run['id']} --project {root}",
                    "console": "Runs (2), then the run"},
            "title": f"ratui: {what}",
            "text": f"{what}, longer than {age_words(after)}; project {project} on {socket.gethostname()}, its process "
                    f"pid {run.get('pid')} on {run.get('host')}.\nSee: {see}"}


def missed_alert(rule: str, schedule: str, fires: list[tuple[str, str, str]], project: str,
                 root: Path) -> dict[str, Any]:
    first_at, action, reason = fires[0]
    what = f"schedule {schedule} missed its fire at {first_at[:16]} ({action}: {reason})"
    if len(fires) > 1:
        what += f" and {len(fires) - 1} more"
    see = f"ratui schedules --project {root}"
    return {"ratui_alert": 1, "event": "missed", "rule": rule, "project": project, "host": socket.gethostname(),
            "at": now_iso(), "pipeline": f"schedule {schedule}", "run_id": None, "schedule": schedule,
            "fires": [{"fire_at": at, "action": act, "reason": why} for at, act, why in fires[:20]], "error": None,
            "see": {"command": see, "console": "Schedules (0), then the schedule"},
            "title": f"ratui: {what}", "text": f"{what}; project {project} on {socket.gethostname()}.\nSee: {see}"}


def digest(alerts: list[dict[str, Any]], dropped: int, project: str) -> dict[str, Any]:
    """Many alerts for one channel at once: one message listing the first DIGEST_SHOWN, counting the rest."""
    total = len(alerts) + dropped
    counts: dict[str, int] = {}
    for one in alerts:
        counts[one["event"]] = counts.get(one["event"], 0) + 1
    if dropped:
        counts["more"] = dropped
    summary = ", ".join(f"{n} {VERBS.get(e, e) if e != 'more' else 'more not listed'}" for e, n in counts.items())
    shown = alerts[:DIGEST_SHOWN]
    lines = [f"{total} alerts at once in project {project} on {socket.gethostname()}: {summary}."]
    lines += [f"- {a['pipeline']} {VERBS.get(a['event'], a['event'])}"
              + (f" ({a['error']['code']})" if a.get("error") and a["error"].get("code") else "")
              + f", run {a['run_id']}" for a in shown]
    if total > len(shown):
        lines.append(f"... and {total - len(shown)} more: ratui runs --status failed")
    return {"ratui_alert": 1, "event": "digest", "project": project, "host": socket.gethostname(), "at": now_iso(),
            "count": total, "alerts": [{k: a[k] for k in ("event", "rule", "pipeline", "run_id", "ref", "error")}
                                       for a in shown],
            "title": f"ratui: {total} alerts in {project}", "text": "\n".join(lines)}


def test_alert(channel: str, project: str) -> dict[str, Any]:
    return {"ratui_alert": 1, "event": "test", "project": project, "host": socket.gethostname(), "at": now_iso(),
            "channel": channel, "title": f"ratui: a test alert to {channel}",
            "text": f"A test alert from ratui (project {project} on {socket.gethostname()}) to the channel "
                    f"{channel}: it arrives, so alerts will."}
