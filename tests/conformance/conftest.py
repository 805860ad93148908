"""The conformance suite runs every test against each reference agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.harness import AgentUnderTest, HostAgent


@pytest.fixture(params=["host", "micropython", "web"])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> AgentUnderTest:
    """A deployed reference agent (started per session by the tests)."""
    if request.param == "host":
        return HostAgent(tmp_path / "agent")
    if request.param == "web":
        from tests.conformance.harness import WebAgent

        return WebAgent(tmp_path / "agent")
    from tests.conformance.harness import MicroPythonAgent

    return MicroPythonAgent(tmp_path / "agent")
