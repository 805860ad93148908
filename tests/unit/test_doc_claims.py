"""Claims of the docs that a test can hold: an unknown device name is a usage error naming the fleet's devices
(cli.md), the model store's default follows the bench cache (ota.md), a device kind's name is looked up in
bench/config/kinds.py only, the drivers test `virtual` once, and a frame's inference time, frame time and
deviation are each computed in one place (architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.config.kinds import KINDS
from bench.core.errors import ConfigError, ExitCode
from bench.ota.store import default_store_dir
from tests.conftest import REPO


def test_an_unknown_device_is_a_usage_error_listing_the_fleets_devices():
    fleet = load_fleet(REPO / "fixtures" / "fleets" / "virtual.toml")
    with pytest.raises(ConfigError) as raised:
        fleet.select(["c6-z"])
    assert raised.value.exit_code == ExitCode.USAGE == 2
    assert "c6-z" in str(raised.value) and all(d.name in raised.value.hint for d in fleet)


def test_the_model_store_defaults_to_the_bench_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("HILBENCH_OTA_STORE", raising=False)
    monkeypatch.setenv("HILBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert default_store_dir() == tmp_path / "cache" / "ota-store"
    monkeypatch.setenv("HILBENCH_OTA_STORE", str(tmp_path / "store"))
    assert default_store_dir() == tmp_path / "store"


def _bench_sources(*but: str) -> dict[str, ast.Module]:
    """The bench package's modules (checkout-relative name -> syntax tree), except the files `but`."""
    files = {f.relative_to(REPO).as_posix(): f for f in sorted((REPO / "bench").rglob("*.py"))}
    return {name: ast.parse(f.read_text(encoding="utf-8")) for name, f in files.items() if name not in but}


def _strings(node: ast.expr) -> list[str]:
    """The string constants `node` is, or holds (a tuple, list or set of them)."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def kind_name_comparisons(tree: ast.Module) -> list[int]:
    """Lines of `tree` that compare something with a registered kind's name (`x == "pi5"`, `x in ("web", ...)`)."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(name in KINDS for side in (node.left, *node.comparators) for name in _strings(side))]  # fmt: skip


def test_a_kind_name_is_looked_up_in_the_kind_registry_only():
    assert kind_name_comparisons(ast.parse('if device.kind in ("web", "x"):\n    pass\nok = k == "other"\n')) == [1]
    found = [f"{name}:{line}" for name, tree in _bench_sources("bench/config/kinds.py").items()
             for line in kind_name_comparisons(tree)]  # fmt: skip
    assert found == [], "compare the kind's registry entry (Device.kind_info), not its name"


def differences(tree: ast.Module, pairs: set[tuple[str, str]]) -> list[int]:
    """Lines of `tree` that subtract field `b` from field `a` for a pair (a, b) of `pairs` (`r.t1 - r.t0`)."""

    def field(node: ast.expr) -> str | None:
        return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and (field(node.left), field(node.right)) in pairs]  # fmt: skip


def test_inference_time_frame_time_and_deviation_have_one_home_each():
    """t1 - t0 in Frame.infer_us, t0 - due and t0 - previous t0 in bench.measure.frames; every other place calls
    them (the report's frame trace too)."""
    pairs = {("t1", "t0"), ("t0", "due"), ("t0", "previous_t0")}
    assert differences(ast.parse("a = r.t1 - r.t0\nb = t0 - due\nc = t0 - t0[0]\n"), pairs) == [1, 2]
    found = {name: lines for name, tree in _bench_sources().items() if (lines := differences(tree, pairs))}
    assert set(found) == {"bench/agent/frame.py", "bench/measure/frames.py"}, found


def test_the_drivers_test_virtual_once_to_refuse_the_default_firmware_on_a_real_board():
    reads = [f"{name}:{node.lineno}" for name, tree in _bench_sources().items() if name.startswith("bench/devices/")
             for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "virtual"]  # fmt: skip
    assert len(reads) == 1 and reads[0].startswith("bench/devices/esp32c6.py:"), reads
