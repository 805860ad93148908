"""What a Linux board needs to run the host agent, checked over SSH, with what to install when it is missing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bench.config.kinds import get_kind
from bench.core.errors import BenchError, ConfigError
from bench.links.ssh import SshConnection, quote

MIN_PYTHON = (3, 8)  # JetPack 5's python3; JetPack 6 has 3.10, Raspberry Pi OS bookworm 3.11

# Runs on the device's Python (3.6+ syntax): prints one JSON object.
PROBE = r"""
import json, platform, sys
out = {"python": platform.python_version(), "machine": platform.machine(), "executable": sys.executable, "mods": {}}
for mod, sub in (("ai_edge_litert", "ai_edge_litert.interpreter"), ("tflite_runtime", "tflite_runtime.interpreter"),
                 ("numpy", None)):
    try:
        m = __import__(sub or mod, fromlist=["x"])
        top = sys.modules[mod]
        out["mods"][mod] = {"ok": True, "version": str(getattr(top, "__version__", "?"))}
    except Exception as exc:
        out["mods"][mod] = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
print(json.dumps(out))
"""


@dataclass
class RuntimeReport:
    """The device's Python and tflite runtime, as found."""

    python: str
    machine: str
    executable: str
    runtime: str | None  # "ai-edge-litert 2.3.0" / "tflite-runtime 2.14.0" / None
    numpy: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the agent can run."""
        return not self.problems


def install_hint(kind: str) -> str:
    """What to run on a board of `kind` to get the agent's runtime (its registry entry's runtime_hint)."""
    return get_kind(kind).runtime_hint or "install Python 3 with numpy and ai-edge-litert (or tflite-runtime)"


async def check_runtime(conn: SshConnection, python: str, kind: str) -> RuntimeReport:
    """Run the probe with the device's `python`; raise a BenchError naming the device when Python
    itself is missing, else return a report whose `problems` say exactly what is missing."""
    result = await conn.run(f"{quote(python)} -c {quote(PROBE)}", check=False)
    if result.returncode in (126, 127):
        raise ConfigError(
            f"device {conn.device!r}: no Python at {python!r} ({result.stderr.decode(errors='replace').strip()})",
            hint=f"install Python 3 on the device or set the fleet field 'python'; {install_hint(kind)}",
        )
    try:
        info = json.loads(result.text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        detail = result.stderr.decode(errors="replace").strip().splitlines()
        raise BenchError(
            f"device {conn.device!r}: {python} could not run the runtime probe: {detail[-1] if detail else '?'}"
        ) from None
    mods = info["mods"]
    problems = []
    version = tuple(int(p) for p in info["python"].split(".")[:2])
    if version < MIN_PYTHON:
        problems.append(f"Python {info['python']} is too old (need {'.'.join(map(str, MIN_PYTHON))} or newer)")
    runtime = None
    for mod, dist in (("ai_edge_litert", "ai-edge-litert"), ("tflite_runtime", "tflite-runtime")):
        if mods[mod]["ok"]:
            runtime = f"{dist} {mods[mod]['version']}"
            break
    if runtime is None:
        problems.append(
            "no tflite runtime: neither ai_edge_litert nor tflite_runtime imports "
            f"({mods['ai_edge_litert']['error']}; {mods['tflite_runtime']['error']})"
        )
    numpy = mods["numpy"]["version"] if mods["numpy"]["ok"] else None
    if numpy is None:
        problems.append(f"numpy missing ({mods['numpy']['error']})")
    return RuntimeReport(info["python"], info["machine"], info["executable"], runtime, numpy, problems)
