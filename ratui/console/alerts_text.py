"""The console's words for alerts (the palette's "Alerts"): the newest attempts as `ratui alerts` lists them, plain
text with no Textual."""

from __future__ import annotations

from typing import Any

SHOWN = 8


def alerts_notice(attempts: list[dict[str, Any]], rules: int, channels: int) -> str:
    if not rules:
        return ("ratui.yaml declares no alert rules. Add `alerts:` with channels and rules (on failure, recovery, "
                "warn, freshness, stuck, missed): docs/concepts/alerts.md.")
    head = f"{rules} rule(s), {channels} channel(s)."
    if not attempts:
        return head + " No alert attempts yet: `ratui alerts test CHANNEL` sends a test message."
    lines = [head + f" The newest {min(len(attempts), SHOWN)} attempts (`ratui alerts` lists more):"]
    for one in attempts[:SHOWN]:
        what = ", ".join(one["pipelines"][:2]) + (f" +{len(one['pipelines']) - 2}" if len(one["pipelines"]) > 2
                                                  else "")
        lines.append(f"{one['at'][11:19]} {one['channel']} {one['event']} {what or '-'}: {one['outcome']}"
                     + (f" ({one['detail'][:60]})" if one["outcome"] != "sent" else ""))
    return "\n".join(lines)
