"""The conformance suite runs every test against each reference agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.harness import AgentUnderTest, HostAgent, SharedBrowser


@pytest.fixture(scope="module")
def shared_browser() -> Iterator[SharedBrowser]:
    """One Chromium for the file's web agents (a Chromium's start was ~1.7 s of every web session's ~2.5 s)."""
    browser = SharedBrowser()
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture(params=["host", "micropython", "web"])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AgentUnderTest]:
    """A deployed reference agent (started per session by the tests). The web agent's sessions are fresh tabs
    of the file's shared browser, each on a page server (an origin) of its own."""
    if request.param == "host":
        yield HostAgent(tmp_path / "agent")
        return
    if request.param == "web":
        from tests.conformance.harness import WebAgent

        browser: SharedBrowser = request.getfixturevalue("shared_browser")
        yield WebAgent(tmp_path / "agent", devtools=browser.devtools())
        browser.close_tabs()
        return
    from tests.conformance.harness import MicroPythonAgent

    yield MicroPythonAgent(tmp_path / "agent")
