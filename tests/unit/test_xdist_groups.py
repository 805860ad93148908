"""The device groups the plugin hands pytest-xdist's scheduler (bench.testkit.scheduling): a test on one device
is in that device's group, a `devices`-marker test joins every device it may take into one group, and a test
without a device is in none. Collected for real (pytester, in process); no device is started."""

from __future__ import annotations

import pytest

from bench.testkit.scheduling import device_groups

pytest_plugins = ("pytester",)

TESTS = """
import pytest


def test_one(agent):
    pass


@pytest.mark.devices(2, kind="pi5")
def test_two_boards(devices):
    pass


def test_no_device():
    pass
"""


def test_groups_follow_the_devices_each_test_may_hold(pytester: pytest.Pytester) -> None:
    fleet = pytester.path / "fleet.toml"
    boards = (("c6-x", "esp32c6"), ("pi5-x", "pi5"), ("pi5-y", "pi5"))
    fleet.write_text("".join(f'[[device]]\nname = "{n}"\nkind = "{k}"\nvirtual = true\n' for n, k in boards))
    pytester.makepyfile(test_groups=TESTS)
    # labgrid's plugin configures its logging once per process: left out of this in-process session
    items, _ = pytester.inline_genitems("--fleet", str(fleet), "-p", "no:cacheprovider", "-p", "no:labgrid")
    groups = device_groups(items[0].config, items)
    assert groups == {
        "test_groups.py::test_one[c6-x]": "hilbench:c6-x",
        "test_groups.py::test_one[pi5-x]": "hilbench:pi5-x,pi5-y",  # joined by the two-board test
        "test_groups.py::test_one[pi5-y]": "hilbench:pi5-x,pi5-y",
        "test_groups.py::test_two_boards": "hilbench:pi5-x,pi5-y",
    }
