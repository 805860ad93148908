"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.esp32c6_support import Board, app_board, counted_image
from tests.linux_support import LINUX_KINDS, RunningBoard, virtual_board


@pytest.fixture(scope="module", params=LINUX_KINDS)
def linux_board(request: pytest.FixtureRequest) -> Iterator[RunningBoard]:
    """Each virtual Linux board kind in turn (loopback sshd, a blank board), started once per test module."""
    with virtual_board(request.param) as running:
        yield running


@pytest.fixture(scope="module")
def c6_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    """A virtual ESP32-C6 with the bundled firmware, in its app, started once per test module."""
    with app_board(tmp_path_factory.mktemp("c6")) as running:
        yield running


@pytest.fixture(scope="module")
def counted_c6_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    """A virtual ESP32-C6 running the counted firmware (MicroPython's own ESP32-C6 build, what a fleet's virtual C6
    runs by default), in its app, started once per test module."""
    with app_board(tmp_path_factory.mktemp("c6"), image=counted_image()) as running:
        yield running
