"""Reports and verdicts from runs stored in the results store: adapter, baselines, publish_run, history."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.core.errors import ConfigError, ExitCode
from bench.measure.histogram import Histogram
from bench.report.history import load_history
from bench.report.html import render_html
from bench.report.publish import load_stored_run, publish_run, report_of
from bench.report.runview import FRAME_INTERVAL_MS, LATENCY_MS, MEMORY_PEAK_MB
from bench.report.view_adapter import histogram_values, load_run
from bench.results.baseline import set_baseline
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.stored_runs import build_store

FRAMES = 3000


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """7 runs x 2 devices (c6-a, orin-1); baseline "default" = run 1; run 7 regressed on orin-1."""
    path = tmp_path_factory.mktemp("store") / "results.sqlite"
    return path, build_store(path, runs=7, devices=2, frames=FRAMES)


def test_a_stored_run_reads_into_the_view_with_report_units(stored: tuple[Path, int]) -> None:
    path, last = stored
    with open_store(path) as store:
        run = load_run(store, last)
        frames_ran = int(store.frames.frame_columns(last, "orin-1").values["ran"].sum())
    assert run.run_id == str(last) and set(run.devices) == {"c6-a", "orin-1"}
    orin = run.devices["orin-1"]
    latency = orin.series(LATENCY_MS)
    assert latency.unit == "ms" and len(latency) == orin.counts["decision_latency_p50"] == FRAMES  # one per input
    assert 2.5 < float(np.median(latency.values)) < 5.0  # 3.1 ms x 1.25, stored in us
    assert orin.frames is not None and len(orin.frames) == frames_ran
    assert float(np.nanmedian(orin.series(FRAME_INTERVAL_MS).values)) == pytest.approx(1000 / 60, rel=0.1)
    assert orin.series(MEMORY_PEAK_MB).values.tolist() == [1420.0]  # one stored value: one sample
    assert orin.model_versions == ["v7", "v8"]
    assert orin.decision_budget_ms == 50.0
    (fault,) = orin.faults
    assert fault.kind == "oom" and "rolled back to v7 in 412 ms" in fault.outcome
    assert 0 < fault.t_s < orin.frames.t_s[-1]


def test_hdr_values_match_the_histogram_percentiles() -> None:
    values = np.random.default_rng(3).lognormal(np.log(20_000), 0.3, 20_000)
    hist = Histogram.decode("x", "us", Histogram("x", "us").record_all(values.tolist()).encode())
    decoded = histogram_values(hist)
    assert decoded.size == 20_000 and np.all(np.diff(decoded) >= 0)
    for q in (50, 95, 99):
        assert np.quantile(decoded, q / 100, method="inverted_cdf") == hist.percentile(q)


def test_publish_judges_against_the_window_of_accepted_runs_and_writes_the_report(
    stored: tuple[Path, int], tmp_path: Path
) -> None:
    path, last = stored
    with open_store(path) as store:
        published = publish_run(store, last, reports_dir=tmp_path)
    assert published.baseline_run_id == last - 1  # the newest run of the window (runs 2-6)
    assert published.exit_code == ExitCode.FAILED
    regressed = {(v.device, v.metric) for v in published.regressions}
    assert {("orin-1", "latency_p50"), ("orin-1", "latency_p99")} <= regressed
    assert all(device == "orin-1" for device, _ in regressed)
    p50 = next(v for v in published.regressions if v.metric == "latency_p50")
    assert p50.baseline_runs == (2, 3, 4, 5, 6) and p50.n_baseline == 5 and 20 < p50.effect_pct < 30
    memory = next(v for v in published.verdicts if v.device == "c6-a" and v.metric == "memory_peak")
    assert memory.status == "unchanged" and memory.run_value == 1.42e9
    page = published.page.read_text()
    assert published.page == tmp_path / "runs" / f"{last}.html"
    assert "Regression:" in page and "orin-1" in page
    offer = published.report.data["outcome"]["bisect"]["orin-1"]  # the first bad build, a command to copy
    assert offer.startswith("hilbench bisect --device orin-1 --session ") and "--metric latency_p" in offer
    assert "hilbench bisect --device orin-1" in page
    assert (tmp_path / "latest.html").exists() and f"runs/{last}.html" in (tmp_path / "index.html").read_text()
    trend = next(d for d in published.report.data["devices"] if d["name"] == "orin-1")["trend"]
    assert [p["run_id"] for p in trend] == [str(r) for r in range(1, last + 1)]


def test_compare_with_another_run_writes_a_separate_page(stored: tuple[Path, int], tmp_path: Path) -> None:
    path, _ = stored
    with open_store(path) as store:
        published = publish_run(store, 2, reports_dir=tmp_path, compare_run=1)
    assert published.page == tmp_path / "compare" / "2-vs-1.html"
    assert published.exit_code == ExitCode.OK and published.verdicts
    assert "collecting baseline" in {v.status for v in published.verdicts}  # one run has no spread
    assert not (tmp_path / "latest.html").exists()


def test_the_first_runs_collect_a_baseline(stored: tuple[Path, int]) -> None:
    path, _ = stored
    with open_store(path) as store:
        first = publish_run(store, 1, reports_dir=None)
        third = publish_run(store, 3, reports_dir=None)
    assert first.report.data["outcome"]["verdict"] == "collecting baseline"
    assert first.report.data["outcome"]["collecting"] == "collecting baseline (0 of 5)"
    assert third.exit_code == ExitCode.OK
    assert {v.reason for v in third.verdicts if v.status == "collecting baseline"} == {"collecting baseline (2 of 5)"}


def test_baselines_pin_the_window(stored: tuple[Path, int], tmp_path: Path) -> None:
    path, last = stored
    with open_store(path) as store:
        set_baseline(store, 6, "release-1.4")
        assert store.windows.named("release-1.4").run_id == 6
        assert [b.name for b in store.windows.all_named()] == ["default", "release-1.4"]
        assert store.windows.named("nope") is None
        with pytest.raises(ConfigError, match="no run 99"):
            set_baseline(store, 99)
        with pytest.raises(ConfigError, match="baseline name"):
            set_baseline(store, 1, "bad name!")
        published = publish_run(store, last, reports_dir=None, baseline_name="release-1.4")
        early = publish_run(store, last, reports_dir=None, baseline_name="default")  # pinned at run 1
    assert published.baseline_run_id == 6 and published.report.data["baseline"]["name"] == "release-1.4"
    assert {v.reason for v in early.verdicts if v.status == "collecting baseline"} == {
        "collecting baseline (1 of 5) up to pinned run 1"
    }


def test_history_reads_measurements_of_earlier_runs_only(stored: tuple[Path, int]) -> None:
    path, _ = stored
    with open_store(path) as store:
        points = load_history(store, up_to=2)
    assert [p.run_id for p in points] == ["1", "2"]
    summary = points[0].summaries["orin-1"]
    assert summary.latency_n > 2000 and 2.0 < summary.latency_p50_ms < 4.5
    assert summary.memory_peak_mb == 1420.0 and summary.faults == 1


def test_history_keeps_to_one_session(stored: tuple[Path, int]) -> None:
    path, last = stored
    with open_store(path) as store:
        other = store.runs.begin_run("nightly", bench="synthetic", session="dialogue")
        store.runs.finish_run(other, "ok")
        combat = load_history(store, up_to=other, session="synthetic")
        dialogue = load_history(store, up_to=other, session="dialogue")
    assert [p.run_id for p in combat] == [str(r) for r in range(1, last + 1)]
    assert [p.run_id for p in dialogue] == [str(other)]


def test_model_updates_kept_in_device_info_reach_the_report(tmp_path: Path) -> None:
    from bench.ota.rollout import DeviceUpdate
    from bench.report.html import render_html
    from bench.report.ota_results import append_ota

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=1, devices=1, frames=500)
    v3 = {"name": "npc-policy", "version": 3, "sha256": "aa"}
    v4 = {"name": "npc-policy", "version": 4, "sha256": "bb"}
    good = DeviceUpdate("c6-a", ok=True, target="npc-policy@4", previous=v3, running=v4, delta=True, blocks=23,
                        bytes=23_552, retransmits=2, transfer_ms=1840.0, verify_ms=196.0, switch_ms=14.0)  # fmt: skip
    refused = DeviceUpdate("c6-a", ok=False, target="npc-policy@5", previous=v4, running=v4, blocks=64,
                           bytes=65_536, detail="signature does not verify")  # fmt: skip
    with open_store(path) as store:
        append_ota(store, last, good, kind="esp32c6")
        append_ota(store, last, refused, kind="esp32c6")
        append_ota(store, last, DeviceUpdate("c6-new", ok=True, target="npc-policy@4"), kind="esp32c6")
        run = load_run(store, last)
        published = publish_run(store, last, reports_dir=None)
    first, second = run.devices["c6-a"].ota
    assert [o.model_to for o in run.devices["c6-new"].ota] == ["npc-policy@4"]  # a device the run had not seen
    assert (first.model_from, first.model_to, first.delta, first.retransmits) == (
        "npc-policy@3",
        "npc-policy@4",
        True,
        2,
    )
    assert second.result == "failed: signature does not verify (old model kept)"
    assert {"npc-policy@3", "npc-policy@4"} <= set(run.devices["c6-a"].model_versions)
    assert "npc-policy@5" not in run.devices["c6-a"].model_versions
    page = render_html(published.report)
    assert "12.5 KiB/s" in page and "196 ms" in page and "signature does not verify (old model kept)" in page


def test_memory_peak_is_the_agents_high_water_mark_not_board_telemetry(tmp_path: Path) -> None:
    from bench.measure.measurement import Measurement
    from bench.store.telemetry import add_telemetry
    from bench.telemetry.monitor import Sample

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=6, devices=2, frames=500, regressed_runs=0)
    with open_store(path) as store:  # the product's 1.42 GB -> 1.58 GB example, in the agent's own figure
        store.measures.add_measurements(last, "orin-1", [Measurement("mem_peak", "B", 1.58e9, samples=40)])
        samples = [Sample(int(k * 0.5e9), "tegrastats", {"mem_used_mb": 3000.0}) for k in range(120)]
        add_telemetry(store, last, "orin-1", samples)  # the board's memory in use: not the agent's
        published = publish_run(store, last, reports_dir=None)
    memory = next(v for v in published.verdicts if v.device == "orin-1" and v.metric == "memory_peak")
    assert memory.status == "regression" and memory.baseline_value == 1.42e9 and 11 < memory.effect_pct < 12


def test_a_regression_says_since_when(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=8, devices=2, frames=3000, regressed_runs=3)
    with open_store(path) as store:
        published = publish_run(store, last, reports_dir=tmp_path)
    p99 = next(v for d in published.report.data["devices"] for v in d["verdicts"]
               if d["name"] == "orin-1" and v["metric"] == "latency_p99")  # fmt: skip
    assert p99["status"] == "regression"
    assert p99["since"]["run_id"] == str(last - 2) and p99["since"]["runs"] == 3
    assert not p99["since"]["from_window_start"]
    page = published.page.read_text()
    assert f"worse since run {last - 2} (3 runs" in page
    assert "orin-1</a>: decision latency P99" in page and f"since run {last - 2}</li>" in page


@pytest.mark.parametrize(
    ("usual", "now", "status"),
    [(5.0, 95.0, "inconclusive"), (60.0, 65.0, "regression"), (80.0, 85.0, "starved")],
)
def test_a_virtual_devices_timing_is_inconclusive_only_on_a_host_busier_than_for_its_baseline(
    tmp_path: Path, usual: float, now: float, status: str
) -> None:

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=7, devices=2, frames=1000)
    with open_store(path) as store:
        for run in range(1, last + 1):
            store.verdicts.record_host(run, {"host": "h", "cores": 2, "others_pct": now if run == last else usual})
            store.verdicts.record_fingerprint(run, "orin-1", {"virtual": True})
        published = publish_run(store, last, reports_dir=None)
    p50 = next(v for v in published.verdicts if v.device == "orin-1" and v.metric == "latency_p50")
    # over the host rules' starved_others_pct the bench got too little of the host, whatever the baseline had
    assert p50.status == ("inconclusive" if status == "starved" else status)
    memory = next(v for v in published.verdicts if v.device == "orin-1" and v.metric == "memory_peak")
    assert memory.status == "unchanged"  # memory is judged whatever the load
    if status == "starved":
        assert "the bench was starved" in p50.reason and published.exit_code == ExitCode.OK
    if status == "inconclusive":
        assert p50.reason.startswith("inconclusive: bench host busy (other processes 95% of 2 CPUs")
        assert published.exit_code == ExitCode.OK


def test_a_refused_load_says_the_running_model_was_kept() -> None:
    from types import SimpleNamespace

    from bench.report.view_adapter import fault_event as _fault

    refused = SimpleNamespace(kind="signature", cause="", detail="bad sig", model_version=2, prev_version=1,
                              t_switch_us=None, t_fault_us=None, t_fault_bench_ns=None, since_switch_ms=None,
                              rollback_us=None)  # fmt: skip
    rolled = SimpleNamespace(**{**vars(refused), "kind": "rollback", "t_switch_us": 10, "rollback_us": 300.0})
    assert _fault(refused, None).outcome == "refused, v1 kept running"
    assert _fault(rolled, None).outcome == "rolled back to v1 in 300 µs"


def test_a_replay_off_pace_makes_its_timing_verdicts_inconclusive_and_the_page_says_why(tmp_path: Path) -> None:
    """Send error P99 over the seed's +-8.3 ms alignment: the pacing-dependent verdicts are inconclusive (so the run
    joins no baseline), memory is still judged, and the page shows the figure next to the alignment."""
    from bench.measure.measurement import Measurement
    from bench.results.judge import acceptance

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=7, devices=2, frames=1000)
    with open_store(path) as store:
        errors = [
            Measurement(f"replay_send_error_{q}", "ns", v) for q, v in (("p50", 8e3), ("p99", 15e6), ("max", 7e7))
        ]
        store.measures.add_measurements(last, "orin-1", errors)
        published = publish_run(store, last, reports_dir=tmp_path)
    by_metric = {v.metric: v for v in published.verdicts if v.device == "orin-1"}
    assert by_metric["latency_p50"].status == "inconclusive"
    assert by_metric["latency_p50"].reason.startswith("inconclusive: replay off pace (send error P99 15.0 ms > the")
    assert by_metric["memory_peak"].status == "unchanged" and by_metric["inference_p50"].status != "inconclusive"
    joins, why = acceptance(published.verdicts, "orin-1", "ok")
    assert not joins and "latency_p50" in why  # an off-pace run joins no baseline
    page = published.page.read_text()
    assert (
        "send error P50 8.00 µs, P99 15.0 ms, max 70.0 ms (the seed aligns modalities within ±8.3 ms: off pace" in page
    )


@pytest.mark.parametrize(("latency_clock", "status"), [("device", "regression"), (None, "not applicable")])
def test_an_icount_guests_latency_is_judged_when_replayed_on_its_own_clock(
    tmp_path: Path, latency_clock: str | None, status: str
) -> None:

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=7, devices=2, frames=1000)
    with open_store(path) as store:
        for run in range(1, last + 1):
            store.verdicts.record_fingerprint(
                run, "orin-1", {"virtual": True, "clock": "icount", "latency_clock": latency_clock}
            )
        published = publish_run(store, last, reports_dir=tmp_path)
    p50 = next(v for v in published.verdicts if v.device == "orin-1" and v.metric == "latency_p50")
    # over the host rules' starved_others_pct the bench got too little of the host, whatever the baseline had
    assert p50.status == ("inconclusive" if status == "starved" else status)
    page = published.page.read_text()
    assert ("guest clock (icount)" in page) == (latency_clock == "device")


@pytest.mark.parametrize(
    ("platform", "label"),
    [("micropython-esp32/qemu-icount", "counted: RV32 at the chip"), ("linux-aarch64/qemu-icount", "guest clock")],
)
def test_a_counted_microcontrollers_figures_say_so(tmp_path: Path, platform: str, label: str) -> None:
    """A MicroPython agent on an icount clock, replayed on it, is the counted ESP32-C6 core: its figures say counted
    RV32 time, its energy that it is modelled from counted cycles; an aarch64 guest's keep the guest-clock label."""

    path = tmp_path / "results.sqlite"
    last = build_store(path, runs=3, devices=1, frames=200)
    with open_store(path) as store:
        for run in range(1, last + 1):
            fingerprint = {"virtual": True, "clock": "icount", "latency_clock": "device", "platform": platform}
            store.verdicts.record_fingerprint(run, "c6-a", fingerprint)
        published = publish_run(store, last, reports_dir=tmp_path)
    page = published.page.read_text()
    assert label in page
    assert ("counted: RV32" in page) == platform.startswith("micropython-")


@pytest.mark.parametrize("compare", [None, 2], ids=["baseline window", "compared with run 2"])
def test_the_report_renders_from_one_load_of_the_run(stored: tuple[Path, int], compare: int | None) -> None:
    """Everything the page shows is read by `load_stored_run`: rendered after the store is closed, the page is
    the one `publish_run` renders (the run, its verdicts and baseline, history, fingerprints and host)."""
    path, last = stored
    rules = load_thresholds()
    with open_store(path) as store:
        published = publish_run(store, last, reports_dir=None, compare_run=compare, thresholds=rules)
        loaded = load_stored_run(store, last, rules, pinned=compare)
    page = render_html(report_of(loaded, rules))
    assert page == render_html(published.report)
    assert loaded.baseline is not None and int(loaded.baseline.run_id) == published.baseline_run_id
    assert len(loaded.history) == last and {v.device for v in loaded.verdicts} == {"c6-a", "orin-1"}
