"""The Engine's landing zones: the ledger of every landing file read, reset (undoable) or forgotten, and naming a
zone as a user types it."""

from __future__ import annotations

from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.facade.base import EngineBase


class LandingPart(EngineBase):
    def landing_files(self, zone: str | None = None, pipeline: str | None = None) -> list:
        """The ledger: every landing file per zone and consuming pipeline, with its state (of every namespace, or
        of one zone: `namespace.zone`, or `zone` when one namespace has it)."""
        if zone is None:
            return self._state.ledger.files(None, None, pipeline)
        namespace, name = self.resolve_zone(zone, pipeline)
        return self._state.ledger.files(namespace, name, pipeline)

    def landing_reset(self, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        """Make a zone's files (or one file) loadable again; the journal keeps the rows as they were, for undo."""
        from ratui.engine.state import journal

        namespace, name = self.resolve_zone(zone, pipeline)
        what = f"landing reset {namespace}.{name}" + (f" {file}" if file else "") + (f" for {pipeline}" if pipeline
                                                                                       else "")

        def keep(conn: Any, saved: dict[str, list]) -> None:
            if saved["files"]:
                journal.add(conn, "landing_reset", f"{namespace}.{name}", what, data={"ledger": saved})

        return self._state.ledger.reset(namespace, name, file, pipeline, in_tx=keep)

    def landing_forget(self, zone: str, file: str, pipeline: str | None = None) -> int:
        return self._state.ledger.forget(*self.resolve_zone(zone, pipeline), file, pipeline)

    def resolve_zone(self, zone: str, pipeline: str | None = None) -> tuple[str, str]:
        """(namespace, zone) of a zone as a user names it: `namespace.zone`; `zone` alone when the pipeline's
        namespace, or the only namespace whose ledger or project has such a zone, says which; RAT-LND-011 listing
        the candidates when several do."""
        zone = zone.strip()
        if "." in zone:
            namespace, _, name = zone.partition(".")
            return namespace, name
        if pipeline and pipeline.count(".") == 2:
            return pipeline.split(".", 1)[0], zone
        known = {(f.namespace, f.zone) for f in self._state.ledger.files(None, zone, None)}
        try:
            known |= {(key.split(".", 1)[0], zone) for key, p in self.compile().pipelines.items()
                      if zone in (p.zones or ())}
        except Exception:  # noqa: BLE001 - a project that does not compile still has its ledger
            pass
        namespaces = sorted({namespace for namespace, _ in known})
        if len(namespaces) > 1:
            raise RatuiError("RAT-LND-011", f"zone '{zone}' is in several namespaces: "
                             + ", ".join(f"{n}.{zone}" for n in namespaces),
                             hint=f"Name it with its namespace, e.g. {namespaces[0]}.{zone}.")
        return (namespaces[0] if namespaces else self.settings.namespace), zone
