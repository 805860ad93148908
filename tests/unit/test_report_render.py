"""Report rendering from synthetic runs: self-contained HTML, units, verdict colours, index and latest."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.report.build import HistoryPoint, build_report
from bench.report.html import render_html, write_report
from bench.report.summary import summarize
from bench.results.thresholds import load_thresholds
from bench.results.verdict import Window, judge, settle
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
    assert f"{p99['n_baseline']} / {p99['n_run']} (min 662)" in sections["orin-1"]
    assert "+20.0 %" in sections["orin-1"]


def test_every_summary_number_carries_a_unit() -> None:
    page = render_html(regressed_report())
    table = re.search(r'<table class="num summary">(.*?)</table>', page, re.S).group(1)
    values = re.findall(r'<td(?! class="txt")[^>]*>([^<]*\d[^<]*)</td>', table)
    assert values
    unitless = [v for v in values if not re.search(r"(ms|µs|FPS|MB|kB|frames|inputs|events|transfers|@)", v)]
    assert unitless == []


def test_large_runs_are_downsampled_in_plots() -> None:
    report = regressed_report(frames=100_000)
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
    assert sections["switch-1"].count("n/a (icount)") == 4  # P50, P95, P99, deadline misses
    assert "n/a (icount)" not in sections["pi5-1"]
