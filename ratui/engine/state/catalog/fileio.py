"""PyIceberg's FileIO for a ratui project: stored paths mapped to this project's files, nothing outside it.

Set on every ref's SqlCatalog through the `py-io-impl` property (see locations.ProjectLocations), so every
metadata, manifest and data file PyIceberg reads, writes or deletes goes through `_map`.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.io.pyarrow import PyArrowFileIO

from ratui.engine.locations import ProjectLocations, plain_path


class ProjectFileIO(PyArrowFileIO):
    """PyArrowFileIO that maps an earlier project root to the current one and refuses any local path outside
    the project (RAT-PTH-002). Remote locations (s3://...) pass through unchanged."""

    def __init__(self, properties: dict[str, Any] | None = None):
        properties = dict(properties or {})
        super().__init__(properties)
        self.locations = ProjectLocations.from_properties(properties)

    def _map(self, location: str) -> str:
        if plain_path(location) is None:
            return location
        path = self.locations.local(location)
        self.locations.check(path, "table file", code="RAT-PTH-002")
        return path

    def new_input(self, location: str):
        return super().new_input(self._map(location))

    def new_output(self, location: str):
        return super().new_output(self._map(location))

    def delete(self, location: Any) -> None:
        if not isinstance(location, str):
            location = location.location
        super().delete(self._map(location))
