"""pytest-xdist: every test of one device runs on one worker, and different devices' tests run in parallel.

A device is held by one process for a test session: its lease, its started virtual stand-in and its agent
session (a serial port or a labgrid place has one holder). So under `-n N` the plugin hands each worker its own
devices: tests that use a device (the `device`, `agent`, `console` fixtures) are grouped by that device, and
the tests of a `devices`-marker test join the devices it may take into one group. Tests that use no device are
distributed as `--dist` asked (load, loadscope, loadfile, loadgroup); other modes are left alone.

How: each worker writes, after collection, the group of every device test's id to a file the controller named in
its `workerinput`; the controller's scheduler (xdist's LoadScopeScheduling) takes those groups as its work units.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from xdist.scheduler import LoadGroupScheduling, LoadScopeScheduling

from bench import pytest_plugin
from bench.core.errors import BenchError
from bench.core.folders import write_file
from bench.testkit import device_fixtures

GROUPS_KEY = "hilbench_device_groups"  # workerinput key: the file the workers write the groups to
MODES = ("load", "loadscope", "loadfile", "loadgroup")  # --dist modes whose work units the plugin can group
_GROUPS_FILE = pytest.StashKey[Path]()


class DeviceScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with one work unit per device group; other tests as `mode` splits them."""

    def __init__(self, config: pytest.Config, log, groups_file: Path, mode: str) -> None:
        super().__init__(config, log)
        self.groups_file = groups_file
        self.mode = mode
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has collected (and written the file)
            try:
                self._groups = json.loads(self.groups_file.read_text())
            except (OSError, ValueError):
                self._groups = {}
        group = self._groups.get(nodeid)
        if group is not None:
            return group
        if self.mode == "loadfile":
            return nodeid.split("::", 1)[0]
        if self.mode == "loadscope":
            return super()._split_scope(nodeid)
        if self.mode == "loadgroup":
            return LoadGroupScheduling._split_scope(self, nodeid)
        return nodeid  # load: every test its own unit


def _groups_file(config: pytest.Config) -> Path:
    """The controller's file for the workers' groups (made on first use, removed at unconfigure)."""
    if _GROUPS_FILE not in config.stash:
        folder = Path(tempfile.mkdtemp(prefix="hilbench-xdist-"))
        config.stash[_GROUPS_FILE] = folder / "groups.json"
    return config.stash[_GROUPS_FILE]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> DeviceScheduling | None:
    """The controller's scheduler: device groups as work units (before xdist's own, which would not group)."""
    mode = config.getvalue("dist")
    return DeviceScheduling(config, log, _groups_file(config), mode) if mode in MODES else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Tell each worker where to write its groups."""
    node.workerinput[GROUPS_KEY] = str(_groups_file(node.config))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: write each device test's group (test id -> group) for the controller's scheduler."""
    target = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if target is None:
        return
    groups = device_groups(config, items)
    path = Path(target)
    write_file(path, json.dumps(groups), what="xdist folder")  # each worker writes the same map: the last wins


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the controller's groups file."""
    path = config.stash.get(_GROUPS_FILE, None)
    if path is not None:
        for leftover in path.parent.iterdir():
            leftover.unlink(missing_ok=True)
        path.parent.rmdir()


def device_groups(config: pytest.Config, items: Iterable[pytest.Item]) -> dict[str, str]:
    """Test id -> "hilbench:DEVICE[,DEVICE...]" for every test that uses devices of the fleet; devices that one
    test may use together are in one group (so one worker holds them all)."""
    used = {item.nodeid: names for item in items if (names := _devices_of(config, item))}
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    for names in used.values():
        first, *rest = sorted(names)
        root(first)
        for name in rest:
            parent[root(name)] = root(first)
    members: dict[str, list[str]] = {}
    for name in list(parent):
        members.setdefault(root(name), []).append(name)
    label = {r: "hilbench:" + ",".join(sorted(m)) for r, m in members.items()}
    return {nodeid: label[root(min(names))] for nodeid, names in used.items()}


def _ours(item: pytest.Item, fixture: str, module: str) -> bool:
    """Does `item` use the bench's fixture `fixture` (defined in `module`), not a suite's own of that name?"""
    defs = getattr(item, "_fixtureinfo", None)
    found = defs.name2fixturedefs.get(fixture) if defs is not None else None
    return bool(found) and found[-1].func.__module__ == module


def _devices_of(config: pytest.Config, item: pytest.Item) -> set[str]:
    """The fleet devices `item` may hold: its `device` parameter, or the candidates of its `devices` marker."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and _ours(item, "device", pytest_plugin.__name__):
        name = callspec.params.get("device")
        return {name} if isinstance(name, str) else set()
    if _ours(item, "devices", device_fixtures.__name__):
        marker = item.get_closest_marker("devices")
        kind = marker.kwargs.get("kind") if marker else None
        try:
            return {d.name for d in pytest_plugin.selected_devices(config) if kind is None or d.kind == kind}
        except (BenchError, pytest.UsageError):
            return set()
    return set()
