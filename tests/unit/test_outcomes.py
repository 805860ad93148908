"""Failure classes (bench.core.outcomes): what each device outcome is, and the exit code they make together."""

from __future__ import annotations

from pathlib import Path

from bench.agent.session import AgentError
from bench.commands.nightly import _print
from bench.core.console import out
from bench.core.errors import BenchError, DeviceUnreachable, ExitCode, LeaseBusy
from bench.core.outcomes import PASS, FailureClass, Outcome, exit_code, infrastructure, of_exception, product, recovered
from bench.nightly.confirm import Confirmation
from bench.nightly.orchestration import NightlyResult
from bench.nightly.stages import DeviceOutcome, StageResult
from bench.recovery.surviving import AgentGaveUp
from bench.results.thresholds import load_thresholds
from bench.results.verdict import Window, confirmed, judge


def test_exceptions_are_classed_by_who_failed() -> None:
    assert of_exception(DeviceUnreachable("no hello")).cls == FailureClass.INFRASTRUCTURE
    assert of_exception(DeviceUnreachable("no hello")).reason == "link lost: no hello"
    assert of_exception(LeaseBusy("c6-a held by pid 1")).reason.startswith("lease not obtained")
    assert of_exception(TimeoutError()).cls == FailureClass.INFRASTRUCTURE
    assert of_exception(BenchError("deploy step firmware failed")).cls == FailureClass.INFRASTRUCTURE
    assert of_exception(AgentGaveUp("the agent died 4 times")).cls == FailureClass.PRODUCT
    refused = AgentError("c6-a", "load", {"code": "bad-signature", "detail": "forged"})
    assert of_exception(refused).cls == FailureClass.PRODUCT


def test_exit_codes_keep_their_meaning() -> None:
    assert exit_code([PASS, PASS]) == ExitCode.OK
    assert exit_code([PASS, Outcome(FailureClass.INCONCLUSIVE, "host busy")]) == ExitCode.OK
    assert exit_code([PASS, infrastructure("link lost")]) == ExitCode.UNREACHABLE
    assert exit_code([infrastructure("link lost"), product("agent crashed")]) == ExitCode.FAILED
    assert exit_code([infrastructure("x"), Outcome(FailureClass.REGRESSION, "fps")]) == ExitCode.FAILED
    assert exit_code([PASS.retried(recovered(["soft_reset"]))]) == ExitCode.OK


def test_a_recovered_board_is_infrastructure_and_its_retry_that_passes_is_passed_on_retry() -> None:
    hung = recovered(["soft_reset"])
    assert hung.label == "infrastructure: recovered by soft_reset"
    again = PASS.retried(hung)
    assert again.passed_on_retry and again.cls == FailureClass.PASS
    assert again.label == "passed on retry (first try: infrastructure: recovered by soft_reset)"
    assert Outcome.from_json(again.to_json()) == again
    assert not infrastructure("x").retried(hung).passed_on_retry  # a retry that failed again is no pass


def _nightly(replay: dict[str, DeviceOutcome]) -> NightlyResult:
    check = StageResult("check", 1.0, {d: DeviceOutcome(True, "ok") for d in replay})
    return NightlyResult("20261202-020000", Path("reports/x"), [check, StageResult("replay", 1.0, replay)])


def test_the_nightly_exits_3_when_only_infrastructure_failed_and_1_on_a_product_failure() -> None:
    lost = infrastructure("link lost: no frame for 5 s")
    only_infra = _nightly({"c6-a": DeviceOutcome(False, "x", outcome=lost), "c6-b": DeviceOutcome(True, "1")})
    assert only_infra.exit_code == ExitCode.UNREACHABLE
    crashed = product("agent crashed")
    both = _nightly(
        {"c6-a": DeviceOutcome(False, "x", outcome=lost), "c6-b": DeviceOutcome(False, "y", outcome=crashed)}
    )
    assert both.exit_code == ExitCode.FAILED
    flaky = _nightly({"c6-a": DeviceOutcome(True, "1", outcome=PASS.retried(recovered(["hard_reset"])))})
    assert flaky.exit_code == ExitCode.OK
    assert flaky.outcomes()["c6-a"].passed_on_retry
    with out.capture() as captured:
        _print(flaky)
    assert "c6-a: passed on retry (first try: infrastructure: recovered by hard_reset)" in captured.get()


def test_a_confirmed_regression_is_the_devices_class() -> None:
    rule = load_thresholds().rule("first_frame_ms")
    window = Window((1, 2, 3, 4, 5), (100.0, 101.0, 99.0, 100.5, 99.5), 5)
    regression = confirmed(judge(rule, "c6-b", 120.0, 10, window, "ms"), judge(rule, "c6-b", 121.0, 10, window, "ms"))
    night = _nightly({"c6-b": DeviceOutcome(True, "1")})
    night.confirmations["combat"] = Confirmation(7, [regression])
    assert night.outcomes()["c6-b"].cls == FailureClass.REGRESSION
    assert night.exit_code == ExitCode.FAILED
