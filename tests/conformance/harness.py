"""Agents under test for the conformance suite: deploy a reference agent, start it, talk to it.

Each agent is deployed from its real bundle (bench/bundles/__init__.py) into a temp folder and started as a
local process speaking the protocol on stdin/stdout: host/ under this Python, micropython/ under the
MicroPython unix VM.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import bundles
from bench.agent.session import AgentSession
from bench.agent.transport import ProcessTransport
from bench.config.fleet import Device
from bench.models import signing
from bench.ota.store import ModelStore
from tests.host_agent_support import deploy_host_bundle

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "fixtures" / "models"
MICROPYTHON = shutil.which("micropython") or str(Path(sys.executable).with_name("micropython"))
FAMILY = "npc-policy"


class AgentUnderTest:
    """One reference agent, deployed in `folder`, started fresh for each session."""

    kind = ""
    model_ext = ""
    crash_model = ""  # a fixture that loads but fails at inference
    oom_model = ""  # a fixture that loads but exceeds the agent's memory limit
    broken_model = ""  # a fixture the runtime refuses to parse

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env: dict[str, str] = {}  # more environment for the agent's process
        self.models_dir = folder / "models"
        self.key = signing.load_private_key(signing.DEV_PRIVATE_KEY)

    @property
    def model_format(self) -> str:
        """The format of this agent's fixture models, as an update store publishes them."""
        return "npcm-int8" if self.model_ext == "npcm" else "tflite-int8"

    def publish(self, store: ModelStore, *fixtures: str) -> list[dict[str, Any]]:
        """Publish fixture models (no extension: this agent's format of each) to `store` as the next versions of
        npc-policy, signed with the development key; their manifests."""
        return [
            store.publish(MODELS / f"{f}.{self.model_ext}", self.key, name=FAMILY, fmt=self.model_format).manifest
            for f in fixtures
        ]

    def needs_coap_updates(self, s: AgentSession) -> None:
        """Skip the test when the agent does not update over CoAP."""
        if "update-coap" not in s.info["caps"]:
            pytest.skip(f"the {self.kind} agent does not update over CoAP")

    def argv(self) -> list[str]:
        """The command that starts the agent (cwd: `folder`), speaking on stdin/stdout."""
        raise NotImplementedError

    def vm_argv(self) -> list[str]:
        """The agent's interpreter, ready to run the script file named by one more argument, in the agent's folder
        (the agent's modules importable)."""
        raise NotImplementedError

    def deploy(
        self, fixture: str, version: int, *, tamper: str | None = None, name: str = FAMILY
    ) -> tuple[str, dict[str, Any]]:
        """Copy fixture model `fixture` (no extension) to the agent's models folder as `name` `version`;
        returns (path for `load`, signed manifest). `tamper`: "sig" (signature of another manifest),
        "bytes" (one model byte flipped after signing), "unsigned"."""
        src = MODELS / f"{fixture}.{self.model_ext}"
        dest = f"{fixture}-v{version}.{self.model_ext}"
        data = bytearray(src.read_bytes())
        fmt = ("npcm" if self.model_ext == "npcm" else "tflite") + ("-int8" if "int8" in fixture else "-f32")
        manifest = signing.model_manifest(src, name, version, fmt)
        signed = signing.sign_manifest(manifest, self.key)
        if tamper == "sig":
            other = signing.sign_manifest({**manifest, "version": version + 100}, self.key)
            signed["sig"] = other["sig"]
        elif tamper == "unsigned":
            signed.pop("sig")
        elif tamper == "bytes":
            data[len(data) // 2] ^= 0x01
        self.models_dir.mkdir(parents=True, exist_ok=True)
        (self.models_dir / dest).write_bytes(bytes(data))
        return dest, signed

    def reference(self, fixture: str, x: np.ndarray) -> np.ndarray:
        """The numpy reference's action probabilities for feature vectors `x` (batch, 48)."""
        from bench.models.tflite_read import parse_int8_policy
        from bench.testkit import reference

        policy = parse_int8_policy((MODELS / f"{fixture}.tflite").read_bytes(), fixture)
        x_q = reference.quantize_input(x, policy.mlp.in_scale, policy.mlp.in_zp)
        return reference.dequantize_probs(reference.policy_infer(policy.mlp, policy.action_map, x_q))

    @contextlib.asynccontextmanager
    async def session(self, log_path: Path | None = None, timeout: float = 10.0) -> AsyncIterator[AgentSession]:
        """A fresh agent process and an open session to it; the agent is shut down afterwards."""
        transport = await ProcessTransport.spawn(
            self.argv(), cwd=self.folder, env=self.env, stderr_path=self.folder / "stderr.log"
        )
        session = await AgentSession.open(transport, device=self.kind, log_path=log_path, timeout=timeout)
        try:
            yield session
        finally:
            if not session.closed:
                with contextlib.suppress(Exception):
                    await session.shutdown(timeout=10)
            await session.close()
            await transport.close(grace=5)

    def run(self, body: Callable[[AgentSession], Awaitable[Any]], **kw: Any) -> Any:
        """Run `body(session)` against a fresh agent, in a fresh event loop."""

        async def main() -> Any:
            async with self.session(**kw) as s:
                return await body(s)

        return asyncio.run(main())


class HostAgent(AgentUnderTest):
    """host/ from its bundle, under this Python, with the pi5 kind's settings (memory limit 256 MB)."""

    kind = "host"
    model_ext = "tflite"
    crash_model = "npc-fault-crash-int8"
    oom_model = "npc-fault-arena-int8"
    broken_model = "npc-fault-broken-int8"
    mem_limit_mb = 256

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        device = Device(
            name="conformance-host",
            kind="pi5",
            link=None,
            virtual=True,
            settings={"model": "npc-policy-int8", "memory_limit_mb": self.mem_limit_mb},
        )
        deploy_host_bundle(device, folder)
        # isolated from the checkout (no PYTHONPATH): the bundle must stand alone
        self.command = bundles.host_agent_command(device, str(folder), python=sys.executable, stdio=True, isolated=True)

    def argv(self) -> list[str]:
        return self.command

    def vm_argv(self) -> list[str]:
        # -E -s (not -I): no PYTHONPATH, no user site, but the script's own folder (the bundle) on the path
        return [sys.executable, "-E", "-s"]


def voice_b64(samples: list[int]) -> str:
    """int16 PCM as the `voice` channel carries it."""
    return base64.b64encode(np.asarray(samples, dtype="<i2").tobytes()).decode()


class MicroPythonAgent(AgentUnderTest):
    """micropython/ from its board bundle, in the MicroPython unix VM with an ESP32-C6's heap, with the
    esp32c6 kind's settings (memory limit 160 KB of live heap)."""

    kind = "micropython"
    model_ext = "npcm"
    crash_model = "npc-fault-crash-int8"
    oom_model = "npc-fault-heap-int8"  # it parses in small blocks, but its heap use is over the limit
    broken_model = "npc-fault-broken-int8"

    def __init__(self, folder: Path) -> None:
        from bench.bundles.mpy_board import ESP32C6_HEAP, agent_command, copy_bundle
        from bench.config.fleet import load_fleet

        super().__init__(folder)
        esp = next(d for d in load_fleet(None).devices if d.kind == "esp32c6")
        # a bare VM: no power meter is wired to it, so no inference marker (the unix port has no machine.Pin)
        settings = esp.settings.replace(marker_gpio=None)
        device = Device(name="conformance-mpy", kind="esp32c6", link=None, virtual=True, settings=settings)
        copy_bundle(bundles.micropython_bundle(device, folder / ".bundle"), folder)
        self.command = agent_command(ESP32C6_HEAP)

    def argv(self) -> list[str]:
        return self.command

    def vm_argv(self) -> list[str]:
        # the VM's default heap: the scheduler scenarios keep every slot they produce for the comparison
        return [MICROPYTHON, "-c", "import sys; exec(open(sys.argv[1]).read())"]


class WebAgent(AgentUnderTest):
    """web/ in a page of a headless Chromium (bench.testkit.web_stdio_agent bridges its WebSocket link to stdio), with
    the web kind's memory limit on LiteRT.js's WASM heap (256 MB)."""

    kind = "web"
    model_ext = "tflite"
    crash_model = "npc-fault-crash-int8"  # LiteRT.js's WASM build returns garbage; the agent's output check faults
    oom_model = "npc-fault-arena-int8"  # ~460 MB of WASM heap at its first inference
    broken_model = "npc-fault-broken-int8"
    mem_limit_mb = 256

    def __init__(self, folder: Path, devtools: str = "") -> None:
        """`devtools`: a running browser's DevTools URL (bench.browser.browser.Browser.devtools): each session's page
        is a new tab of it instead of a Chromium of its own (bench.testkit.web_stdio_agent)."""
        from bench.browser.deploy import deploy_storage
        from bench.testkit.web_stdio_agent import DEVTOOLS_ENV

        super().__init__(folder)
        deploy_storage(folder, MODELS / "npc-policy-int8.tflite", mem_limit_mb=self.mem_limit_mb)
        if devtools:
            self.env[DEVTOOLS_ENV] = devtools

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "bench.testkit.web_stdio_agent", "--storage", str(self.folder)]

    def vm_argv(self) -> list[str]:
        # the scheduler is JavaScript: the same scenario, ported, on web/agent/npcsched.js under Node
        return [shutil.which("node") or "node", str(ROOT / "web" / "tools" / "sched_scenario.mjs")]


class SharedBrowser:
    """One headless Chromium on its own loop thread for a test file's web agents: each agent session is a fresh tab
    (its own page server on its own port: its own origin, so its own storage), closed when the session ends. A
    browser that died is started again."""

    def __init__(self) -> None:
        from bench.core.loop_thread import LoopThread

        self.loop = LoopThread()
        self.browser: Any = None

    def devtools(self) -> str:
        """The running browser's DevTools URL (started now if it is not running)."""
        from bench.browser.browser import Browser

        proc = self.browser.proc if self.browser is not None else None
        if proc is None or proc.returncode is not None:
            self._stop_browser()
            self.browser = Browser()
            self.loop.run(self.browser.start(), timeout_s=60)
        return self.browser.devtools

    def close_tabs(self) -> None:
        """Close the tabs a killed agent left open (all but the browser's first, blank, one)."""
        if self.browser is None or self.browser.cdp is None:
            return
        cdp = self.browser.cdp

        async def close() -> None:
            targets = (await cdp.call("Target.getTargets", timeout=10))["targetInfos"]
            for t in targets:
                if t["type"] == "page" and t["url"] != "about:blank":
                    await cdp.call("Target.closeTarget", targetId=t["targetId"], timeout=10)

        with contextlib.suppress(Exception):
            self.loop.run(close(), timeout_s=30)

    def _stop_browser(self) -> None:
        if self.browser is not None:
            with contextlib.suppress(Exception):
                self.loop.run(self.browser.stop(), timeout_s=30)
            self.browser = None

    def close(self) -> None:
        self._stop_browser()
        self.loop.close()
