"""Every table `hilbench` prints fits 80 columns (rich's console width) without a cell cut to "…"."""

from __future__ import annotations

import argparse
import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from bench.commands import flash, nightly, replay, session, update
from bench.commands import fleet as fleet_cmd
from bench.core.outcomes import FailureClass
from bench.core.paths import SESSIONS_DIR
from bench.nightly.orchestration import STAGE_NAMES

WIDTH = 80
ELLIPSES = ("…", "...")


def _console() -> Console:
    return Console(file=io.StringIO(), width=WIDTH, color_system=None, force_terminal=False, soft_wrap=False)


def render(renderable) -> str:
    console = _console()
    console.print(renderable)
    return console.file.getvalue()


def assert_fits(text: str, *whole: str) -> None:
    """Every line within 80 columns, nothing cut to an ellipsis, and each of `whole` printed unbroken."""
    lines = text.splitlines()
    assert lines, "nothing printed"
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, f"wider than {WIDTH}: {too_wide[0]!r}"
    cut = [line for line in lines if any(e in line for e in ELLIPSES)]
    assert not cut, f"a cell is cut: {cut[0]!r}\n{text}"
    for word in whole:
        assert word in text, f"{word!r} is not printed whole:\n{text}"


def printed(monkeypatch, module, func, args) -> str:
    console = _console()
    monkeypatch.setattr(module, "out", console)
    func(args)
    return console.file.getvalue()


def _measure(name: str, value: float):
    return SimpleNamespace(name=name, value=value)


def _replay_result() -> SimpleNamespace:
    values = {"fps": 59.94, "inference_latency_p50": 1234.5, "inference_latency_p99": 98765.4,
              "decision_latency_p50": 12345.6, "decision_latency_p99": 1234567.8, "decision_deadline_misses": 1234,
              "frame_jitter_p99": 123456, "replay_send_error_p99": 123456.7, "faults": 12}  # fmt: skip
    devices = []
    for name, cls in (("c6-a", FailureClass.PASS), ("jetson-orin-1", FailureClass.INFRASTRUCTURE),
                      ("switch-arm64-1", FailureClass.INCONCLUSIVE), ("web-1", FailureClass.PRODUCT)):  # fmt: skip
        devices.append(SimpleNamespace(
            device=SimpleNamespace(name=name), outcome=SimpleNamespace(cls=cls), track=SimpleNamespace(mode="voicef"),
            result=SimpleNamespace(measurements=[_measure(k, v) for k, v in values.items()]),
        ))  # fmt: skip
    return SimpleNamespace(run_id=123456, session_id="exploration-0000", speed=2.5, realtime=False, devices=devices)


def test_replay_summary_fits_80_columns():
    text = render(replay.summary_table(_replay_result()))
    assert_fits(text, "jetson-orin-1", "switch-arm64-1", "inconclusive", "1234.6", "98.77", "59.9", "FPS")


def test_replay_summary_wide_has_every_measurement():
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(replay.summary_table(_replay_result(), wide=True))
    text = console.file.getvalue()
    assert all(label in text for _, label, *_ in replay.SUMMARY_COLUMNS) and "voicef" in text


def test_session_info_fits_80_columns(monkeypatch):
    args = argparse.Namespace(file=str(SESSIONS_DIR / "combat.mcap"), json=False)
    text = printed(monkeypatch, session, session.cmd_info, args)
    assert_fits(text, "channel", "msgs", "real Hz", "118.43", "3964.3", "events")


def test_fleet_list_fits_80_columns(monkeypatch):
    args = argparse.Namespace(fleet=None, port=None, device=[], kind=[], tag=[], json=False)
    text = printed(monkeypatch, fleet_cmd, fleet_cmd.cmd_list, args)
    assert_fits(text, "jetson-orin-nx", "switch-arm64", "c6-a", "virtual")


def test_fleet_check_health_and_leases_fit_80_columns():
    detail = "connection refused by 192.168.100.123:22 (is sshd running? the board may still be booting)"
    boards = (("orin-1", "jetson-orin-nx", "unreachable"), ("switch-1", "switch-arm64", "reachable"))
    rows = [{"name": n, "kind": k, "status": s, "driver": "no driver yet", "detail": detail} for n, k, s in boards]
    assert_fits(render(fleet_cmd.check_table("/home/lab/fleets/desk-1.toml", rows)), "jetson-orin-nx", "unreachable")
    checks = [SimpleNamespace(device="jetson-orin-1", before="good", state="needs-attention", answered=False,
                              detail=detail)]  # fmt: skip
    assert_fits(render(fleet_cmd.health_table("fleet health --fix", checks)), "good -> needs-attention")
    leases = [{"device": "switch-arm64-1", "holder": "hilbench nightly", "host": "bench-host-1.lab.example.org",
               "pid": 4194304, "alive": True, "expires_in_s": 86400.0}]  # fmt: skip
    assert_fits(render(fleet_cmd.leases_table("/var/lib/hilbench/leases", leases)), "switch-arm64-1", "4194304")


def test_update_table_fits_80_columns(monkeypatch):
    console = _console()
    monkeypatch.setattr(update, "out", console)
    r = SimpleNamespace(device="jetson-orin-1", ok=True, delta=True, previous={"version": 12}, running={"version": 13},
                        kept_previous=False, checked=True, blocks=1234, bytes=1234567, retransmits=12,
                        transfer_ms=12345.0, delta_saved=1234567, verify_ms=123.4, switch_ms=12.34, detail="",
                        notes=[])  # fmt: skip
    update._print([r])
    assert_fits(console.file.getvalue(), "jetson-orin-1", "v12->v13", "1234567")


def test_flash_table_fits_80_columns():
    steps = [SimpleNamespace(step="firmware", detail="written 1.2 MB at 921600 baud in 14.2 s, verified sha256"),
             SimpleNamespace(step="agent", detail="12 files, 48 kB (3 unchanged)")]  # fmt: skip
    r = SimpleNamespace(name="switch-arm64-1", kind="switch-arm64", ok=True, up_to_date=False, steps=steps,
                        attempts=3, seconds=123.4)  # fmt: skip
    assert_fits(render(flash._table([r])), "switch-arm64-1", "switch-arm64", "flashed", "123.4")


@pytest.mark.parametrize("stages", [len(STAGE_NAMES)])
def test_nightly_stage_table_fits_80_columns(stages):
    names = list(STAGE_NAMES)[:stages]
    ok = SimpleNamespace(ok=True, outcome=None, skipped=False, detail="regression confirmed")
    result = SimpleNamespace(started="2026-12-02T02:00:00", stages=[
        SimpleNamespace(name=n, devices={"switch-arm64-1": ok, "jetson-orin-1": ok}) for n in names])  # fmt: skip
    assert_fits(render(nightly.stage_table(result)), "switch-arm64-1", "jetson-orin-1", "confirm")
