"""The screen class of each mode console/screen_specs.py declares (each class says its MODE): the App's modes and
the help's sections take the classes from here, in the order of the specs."""

from __future__ import annotations

from ratui.console import screen_specs
from ratui.screens.base import ConsoleScreen
from ratui.screens.branches import BranchesScreen
from ratui.screens.landing import LandingScreen
from ratui.screens.lineage import LineageScreen
from ratui.screens.logs import SparkLogScreen
from ratui.screens.pipelines import PipelinesScreen
from ratui.screens.quality import QualityScreen
from ratui.screens.query import QueryScreen
from ratui.screens.reaper import ReaperScreen
from ratui.screens.runs import RunsScreen
from ratui.screens.schedules import SchedulesScreen

_CLASSES = {cls.MODE: cls for cls in (PipelinesScreen, RunsScreen, QualityScreen, BranchesScreen, LandingScreen,
                                      ReaperScreen, QueryScreen, LineageScreen, SparkLogScreen,
                                      SchedulesScreen)}
if set(_CLASSES) != set(screen_specs.BY_MODE):
    raise RuntimeError(f"screen classes {sorted(_CLASSES)} != screen specs {sorted(screen_specs.BY_MODE)}")

# mode -> its screen class, in the order screen_specs.SCREENS declares them
SCREEN_CLASSES: dict[str, type[ConsoleScreen]] = {spec.mode: _CLASSES[spec.mode] for spec in screen_specs.SCREENS}
