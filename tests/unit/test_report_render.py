"""Report rendering from synthetic runs: self-contained HTML, units, verdict colours, index and latest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.report.build import HistoryPoint, build_report
from bench.report.html import num, render_html, write_report
from bench.report.runview import TimelineFault
from bench.report.summary import summarize
from bench.results.thresholds import load_thresholds
from bench.results.verdict import Window, judge, not_applicable, settle
from tests.synthetic_runs import synthetic_run


def history_point(run) -> HistoryPoint:
    return HistoryPoint(run.run_id, run.started_at, {n: summarize(d) for n, d in run.devices.items()})


def window_verdicts(run, base) -> list:
    """Latency verdicts of `run` against a window of five runs like `base` (1% apart)."""
    rules = load_thresholds()
    out = []
    for name, device in run.devices.items():
        now, then = summarize(device), summarize(base.devices[name])
        for rule, field in (("latency_p50", "latency_p50_ms"), ("latency_p99", "latency_p99_ms")):
            values = tuple(getattr(then, field) * 1000 * f for f in (0.99, 1.0, 1.01, 0.995, 1.005))
            window = Window((1, 2, 3, 4, 5), values, 5)
            value = getattr(now, field) * 1000
            out.append(settle(judge(rules.rule(rule), name, value, now.latency_n, window, "us")))
    return out


def regressed_report(frames: int = 3000):
    base = synthetic_run("run-0001", "2026-11-28T02:00:00Z", frames=frames, seed=1)
    run = synthetic_run("run-0002", "2026-11-29T02:00:00Z", frames=frames, seed=2, latency_factor={"orin-1": 1.3})
    verdicts = window_verdicts(run, base)
    return build_report(run, verdicts=verdicts, baseline=base, baseline_name="nightly", history=[history_point(base)])


def test_report_is_self_contained_and_marks_only_what_a_verdict_says() -> None:
    report = regressed_report()
    page = render_html(report)
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the report must not reference the network"
    outcome = report.data["outcome"]
    assert (outcome["regressions"], outcome["regressed_devices"], outcome["verdict"]) == (2, ["orin-1"], "regression")
    # red cells only in orin-1's section and the overview row of orin-1
    sections = dict(re.findall(r'<section class="device" id="dev-([^"]+)">(.*?)</section>', page, re.S))
    assert set(sections) == {"c6-a", "orin-1", "pi5-1", "switch-1"}
    assert 'class="bad"' in sections["orin-1"]
    assert all('class="bad"' not in sections[d] and 'class="good"' not in sections[d] for d in ("c6-a", "pi5-1"))
    orin = next(d for d in report.data["devices"] if d["name"] == "orin-1")
    p99 = next(v for v in orin["verdicts"] if v["metric"] == "latency_p99")
    assert p99["status"] == "regression" and p99["p_value"] < 0.01 and p99["n_run"] > 2000
    # evidence is in the page: runs in the window, samples, threshold
    assert f"{p99['n_baseline']} runs in the window; {p99['n_run']:,} inputs (needs 662)" in sections["orin-1"]
    assert "+20.0 %" in sections["orin-1"]


def test_every_summary_number_carries_a_unit() -> None:
    page = render_html(regressed_report())
    table = re.search(r'<table class="num summary">(.*?)</table>', page, re.S).group(1)
    values = re.findall(r'<td(?! class="txt")[^>]*>([^<]*\d[^<]*)</td>', table)
    assert values
    units = r"(ms|µs|FPS|MB|kB|frames?|inputs?|inferences?|cold starts?|events?|transfers?|@)"
    unitless = [v for v in values if not re.search(units, v)]
    assert unitless == []


def test_large_runs_are_downsampled_in_plots() -> None:
    report = build_report(synthetic_run("run-0003", "2026-11-29T02:00:00Z", frames=100_000, devices=1))
    for plots in report.plots.values():
        for name, svg in plots.items():
            for points in re.findall(r'points="([^"]*)"', svg):
                assert points.count(",") <= 1100, f"{name} plot has {points.count(',')} points"
    # the summary still uses every frame
    assert report.data["devices"][0]["summary"]["frames"] == 100_000


def test_json_data_is_the_report_data(tmp_path: Path) -> None:
    report = regressed_report()
    page = write_report(report, tmp_path)
    stored = json.loads(page.with_suffix(".json").read_text())
    assert stored == json.loads(json.dumps(report.data, default=str))
    trend = stored["devices"][1]["trend"]
    assert [p["run_id"] for p in trend] == ["run-0001", "run-0002"]


def test_index_lists_runs_newest_first_and_latest_follows_the_newest(tmp_path: Path) -> None:
    older = build_report(synthetic_run("run-a", "2026-11-01T02:00:00Z", frames=500, with_events=False))
    newer = regressed_report(frames=500)
    write_report(newer, tmp_path)
    write_report(older, tmp_path)  # re-rendering an old run must not replace latest.html
    index = (tmp_path / "index.html").read_text()
    assert index.index("run-0002") < index.index("run-a")
    assert 'href="runs/run-0002.html"' in index
    latest = (tmp_path / "latest.html").read_text()
    assert "Run run-0002" in latest and 'href="index.html"' in latest
    assert "No baseline to compare with" in (tmp_path / "runs" / "run-a.html").read_text()


def test_a_device_without_frames_renders_with_dashes() -> None:
    run = synthetic_run("run-x", "2026-11-02T02:00:00Z", frames=200)
    run.devices["c6-a"].frames = None
    run.devices["c6-a"].samples.clear()
    page = render_html(build_report(run))
    section = re.search(r'id="dev-c6-a">(.*?)</section>', page, re.S).group(1)
    assert "—" in section and "latency_cdf" not in section


def test_bench_clock_latency_of_an_icount_guest_is_not_applicable() -> None:
    run = synthetic_run("run-0003", "2026-11-30T02:00:00Z", frames=500)
    page = render_html(build_report(run, clocks={"switch-1": "icount"}))
    sections = dict(re.findall(r'<section class="device" id="dev-([^"]+)">(.*?)</section>', page, re.S))
    table = re.search(r'<table class="num summary">(.*?)</table>', sections["switch-1"], re.S).group(1)
    rows = {re.sub(r"<[^>]+>", "", m[0]): re.sub(r"<[^>]+>", "", m[1]) for m in re.findall(
        r'<tr><td class="txt">(.*?)</td>\s*(<td.*?</td>)', table, re.S)}  # fmt: skip
    bench_clock = ("decision latency P50", "decision latency P95", "decision latency P99", "deadline misses",
                   "first-frame time (median of cold starts)")  # fmt: skip
    assert all(rows[label] == "n/a" for label in bench_clock), rows
    assert rows["FPS (1 / mean frame time)"].endswith("FPS")  # device clock: shown, labelled with its clock
    assert "guest (icount)" in table and "QEMU runs this guest with -icount" in sections["switch-1"]
    assert "n/a" not in sections["pi5-1"].split("<h3>")[0]


def _verdict_row(section: str, title: str) -> list[str]:
    """The cells (tags stripped) of the verdict row whose metric is `title`."""
    table = re.search(r'<table class="num verdicts">(.*?)</table>', section, re.S).group(1)
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if cells and cells[0] == title:
            return cells
    raise AssertionError(f"no verdict row {title!r}")


def test_a_not_applicable_verdict_shows_no_figure() -> None:
    rules = load_thresholds()
    run = synthetic_run("run-0004", "2026-11-30T02:00:00Z", frames=500)
    window = Window((1, 2, 3, 4, 5), (29e3, 29.1e3, 28.9e3, 29e3, 29.2e3), 5)
    verdict = not_applicable(judge(rules.rule("latency_p99"), "switch-1", 7_176_000.0, 9391, window, "us"), "icount")
    assert (verdict.run_value, verdict.baseline_value, verdict.spread, verdict.p_value) == (None, None, None, None)
    page = render_html(build_report(run, verdicts=[verdict], clocks={"switch-1": "icount"}))
    section = re.search(r'id="dev-switch-1">(.*?)</section>', page, re.S).group(1)
    cells = _verdict_row(section, "decision latency P99")
    assert cells[1:4] == ["not applicable", "n/a", "n/a"]
    assert "7,176" not in section and "0.000" not in section


def test_verdict_counts_say_what_they_count() -> None:
    rules = load_thresholds()
    run = synthetic_run("run-0005", "2026-11-30T02:00:00Z", frames=500)
    first = judge(rules.rule("first_frame_ms"), "c6-a", 18_200.0, 10, Window((1, 2), (18e3, 18.4e3), 5), "us")
    page = render_html(build_report(run, verdicts=[first]))
    section = re.search(r'id="dev-c6-a">(.*?)</section>', page, re.S).group(1)
    cells = _verdict_row(section, "first-frame time (median of cold starts)")
    assert "2 runs in the window; 10 cold starts (needs 10)" in cells


def test_measures_and_verdicts_share_labels_and_clocks() -> None:
    rules = load_thresholds()
    run = synthetic_run("run-0006", "2026-11-30T02:00:00Z", frames=500)
    window = Window((1,), (100.0,), 5)
    verdicts = [judge(rules.rule(name), "pi5-1", 100.0, 1000, window, "") for name in ("memory_peak", "fps")]
    page = render_html(build_report(run, verdicts=verdicts))
    section = re.search(r'id="dev-pi5-1">(.*?)</section>', page, re.S).group(1)
    measures = re.search(r'<table class="num summary">(.*?)</table>', section, re.S).group(1)
    for rule in ("memory_peak", "fps"):
        title = rules.rule(rule).title
        assert f'<td class="txt">{title}</td>' in measures, title
        _verdict_row(section, title)
    row = re.search(r"FPS \(1 / mean frame time\)</td>(.*?)</tr>", measures, re.S).group(1)
    assert row.strip().endswith('<td class="txt">device</td>')


def test_icount_guest_plots_leave_out_the_bench_clock_and_label_the_guest_clock() -> None:
    run = synthetic_run("run-0007", "2026-11-30T02:00:00Z", frames=500)
    report = build_report(run, clocks={"switch-1": "icount"})
    assert "latency_cdf" not in report.plots["switch-1"] and "latency_cdf" in report.plots["pi5-1"]
    summary = next(d for d in report.data["devices"] if d["name"] == "switch-1")["summary"]
    assert (summary["latency_p99_ms"], summary["first_frame_ms"], summary["deadline_misses"]) == (None, None, None)
    assert summary["fps"] is not None  # the guest's own clock: kept
    assert "guest-clock time since run start (s)" in report.plots["switch-1"]["frame_interval"]


def test_a_fps_plot_of_one_window_is_left_out_and_untimed_faults_have_no_time() -> None:
    run = synthetic_run("run-0008", "2026-11-30T02:00:00Z", frames=20)  # under 1 s of frames
    device = run.devices["c6-a"]
    device.faults = [TimelineFault(None, "signature", "does not verify", "")]
    report = build_report(run)
    assert "fps" not in report.plots["c6-a"] and "faults" not in report.plots["c6-a"]
    section = re.search(r'id="dev-c6-a">(.*?)</section>', render_html(report), re.S).group(1)
    faults = section.split("<h3>Faults</h3>")[1].split("</table>")[0]
    assert "<th>time</th>" not in faults and "0.00 s" not in faults


def test_zero_and_sub_millisecond_values_read_right() -> None:
    assert num(0.0, "ms") == "0 ms"
    assert num(0.0004, "ms") == "0.40 µs"
    run = synthetic_run("run-0009", "2026-11-30T02:00:00Z", frames=500)
    page = render_html(build_report(run))
    assert "&lt; 1 µs" in page  # the synthetic OTA switch of 0.0 ms: below the device's timer tick
    assert "0.000 ms" not in page


def test_the_index_names_each_runs_session_and_the_update_run_is_not_missing_a_baseline(tmp_path: Path) -> None:
    session = synthetic_run("run-s", "2026-11-01T02:00:00Z", frames=200, with_events=False)
    session.meta["session"] = "combat-0000"
    updates = synthetic_run("run-u", "2026-11-01T02:05:00Z", frames=200)
    updates.label, updates.meta["session"] = "ota", "update-and-faults"
    write_report(build_report(session), tmp_path)
    write_report(build_report(updates), tmp_path)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", (tmp_path / "index.html").read_text(), re.S)
    cells = [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]
    by_run = {c[0]: c for c in cells if c}
    assert by_run["run-s"][2] == "combat-0000" and by_run["run-s"][-1] == "no baseline"
    assert by_run["run-u"][2] == "update-and-faults"
    assert by_run["run-u"][-1] == "updates and faults: no performance verdicts"
    page = (tmp_path / "runs" / "run-u.html").read_text()
    assert '<table class="num summary">' not in page and "Verdicts against the baseline" not in page
    assert "Run run-s" in (tmp_path / "latest.html").read_text()  # the newest session run, not the update run


def test_every_plot_has_a_visible_title() -> None:
    page = render_html(regressed_report(frames=500))
    figures = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    assert figures
    captions = [re.search(r"<figcaption>(.*?)</figcaption>", f, re.S) for f in figures]
    assert all(c and c.group(1).strip() for c in captions)
    assert "FPS over time" in page and "FPS over the last 2 runs" in page


def test_a_band_and_its_mean_have_different_legend_swatches() -> None:
    report = build_report(synthetic_run("run-0010", "2026-11-30T02:00:00Z", frames=500))
    legend = report.plots["c6-a"]["frame_interval"]
    assert re.search(r'<rect [^>]*fill-opacity="0.35"/><text [^>]*>min-max per bucket<', legend)
    assert re.search(r"<line [^>]*/><text [^>]*>mean per bucket<", legend)


def test_the_measures_table_shows_the_stored_figure_the_verdict_judges() -> None:
    run = synthetic_run("run-0011", "2026-11-30T02:00:00Z", frames=500)
    device = run.devices["orin-1"]
    device.scalars.update({"decision_latency_p99": (42_600.0, "us"), "mem_peak": (70_900_000.0, "B"),
                           "first_frame_p50": (42_300.0, "us")})  # fmt: skip
    summary = summarize(device)
    figures = (summary.latency_p99_ms, summary.memory_peak_mb, summary.first_frame_ms)
    assert figures == pytest.approx((42.6, 70.9, 42.3))
    del device.scalars["decision_latency_p99"]
    assert summarize(device).latency_p99_ms is None  # no stored figure: none, never one computed again


def test_a_virtual_devices_telemetry_says_it_is_not_silicon() -> None:
    import numpy as np

    from bench.report.runview import TimeSeries

    run = synthetic_run("run-0011", "2026-11-30T02:00:00Z", frames=500)
    for device in run.devices.values():
        device.telemetry["temp_c"] = TimeSeries("degC", np.array([0.0, 1.0]), np.array([45.0, 46.0]))
    page = render_html(build_report(run, virtual=frozenset({"orin-1"})))
    sections = dict(re.findall(r'<section class="device" id="dev-([^"]+)">(.*?)</section>', page, re.S))
    assert "not measurements of the board's silicon" in sections["orin-1"]
    assert all("silicon" not in body for name, body in sections.items() if name != "orin-1")
