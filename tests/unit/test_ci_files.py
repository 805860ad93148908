"""The CI files, each read by its consumer: JUnit XML by junitparser, OpenMetrics by prometheus-client's parser,
the Markdown summary by markdown-it-py (GitHub-flavoured tables) under GitHub's 65,535-character comment limit."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from markdown_it import MarkdownIt
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from bench.alerts.night import night_alerts
from bench.ci.facts import CiReport, figure_clock, judged_runs, outcome_cases, run_figures, verdict_cases
from bench.ci.junit import junit_xml
from bench.ci.openmetrics import openmetrics_text
from bench.ci.summary_md import COMMENT_LIMIT, summary_markdown
from bench.ci.write import STEP_SUMMARY_ENV, CiFiles, write_ci_files
from bench.core.errors import ConfigError
from bench.core.outcomes import infrastructure, product
from bench.nightly.ci_report import alert_lines, nightly_report
from bench.nightly.orchestration import NightlyResult
from bench.nightly.publish import PublishedRun
from bench.nightly.stages import DeviceOutcome, StageResult
from bench.results.evidence import stored_verdicts
from bench.results.thresholds import load_thresholds
from bench.results.verdict import INCONCLUSIVE, REGRESSION
from bench.store.results import open_store
from tests.nightly_history import Plan, write_history

DEVICES = ("c6-a", "pi5-1")
GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])  # what GitHub renders, less autolinks
STEP_NIGHT = 6  # c6-a's memory peak steps up 40% that night


def nightly_ci_report(folder: Path) -> CiReport:
    """A nightly's report: the night of a memory step on c6-a (its alert new), one metric made inconclusive, two
    devices failed."""
    thresholds = load_thresholds()
    with open_store(folder / "r.sqlite") as store:
        ids = write_history(store, thresholds, Plan(STEP_NIGHT + 1, step_night=STEP_NIGHT), DEVICES)
        run = ids[-1]
        verdicts = stored_verdicts(store, run)
        busy = next(i for i, v in enumerate(verdicts) if v.device == "pi5-1" and v.metric == "latency_p50")
        verdicts[busy] = replace(verdicts[busy], status=INCONCLUSIVE, reason="inconclusive: bench host busy (78%)")
        judged = judged_runs([("combat", run, verdicts)], thresholds)
        figures = run_figures(store, run)
        result = NightlyResult("20261204-020000", folder)
        result.alerts = night_alerts(store, [run], thresholds.alerts)
        alerts = alert_lines(result.alerts)
    outcomes = {"orin-1": infrastructure("flash: no answer on its link"), "c6-b": product("agent crashed")}
    return CiReport(
        job="nightly", title="hilbench nightly 20261204-020000", exit_code=1, headline="1 regression(s)",
        judged=judged, figures=figures, cases=verdict_cases("nightly", judged) + outcome_cases("nightly", outcomes),
        alerts=alerts, pages=[("combat (run 7)", Path("reports/runs/7.html"))], notes=["orin-1 left the run at flash"],
        timings=[("stage replay", 61.2), ("stage confirm", 30.1)], started=dt.datetime(2026, 12, 4, 2, tzinfo=dt.UTC),
    )  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> CiReport:
    return nightly_ci_report(tmp_path_factory.mktemp("ci"))


def test_junit_has_a_case_per_device_session_and_metric_failing_on_the_regression(report, tmp_path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(report))
    cases = {(c.classname, c.name): c for suite in JUnitXml.fromfile(str(path)) for c in suite}
    thresholds = load_thresholds()
    for device in DEVICES:
        assert {name for cls, name in cases if cls == f"combat.{device}"} == {r.name for r in thresholds.rules}
    failed = {key: c for key, c in cases.items() if any(isinstance(r, Failure) for r in c.result)}
    assert list(failed) == [("combat.c6-a", "memory_peak"), ("devices.c6-b", "run")]
    assert "memory peak" in failed["combat.c6-a", "memory_peak"].result[0].message
    busy = cases["combat.pi5-1", "latency_p50"]
    assert isinstance(busy.result[0], Skipped) and "bench host busy" in busy.result[0].message
    collecting = [c for c in cases.values() if c.result and isinstance(c.result[0], Skipped)]
    assert all(c.result[0].message for c in collecting)  # every skip says why
    assert isinstance(cases["devices.orin-1", "run"].result[0], Error)
    assert isinstance(cases["devices.c6-b", "run"].result[0], Failure)
    xml = JUnitXml.fromfile(str(path))
    assert sum(s.failures for s in xml) == 2 and sum(s.errors for s in xml) == 1


def test_openmetrics_parses_with_prometheus_client_and_labels_every_figure(report) -> None:
    text = openmetrics_text(report)
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    figures = families["hilbench_figure"].samples
    assert len(figures) == len(report.figures)
    labels = {"device", "kind", "session", "metric", "clock", "unit", "run_kind", "build"}
    assert all(set(s.labels) == labels for s in figures)
    mem = next(s for s in figures if s.labels["device"] == "c6-a" and s.labels["metric"] == "mem_peak")
    assert mem.labels["kind"] == "esp32c6" and mem.labels["session"] == "combat" and mem.labels["clock"] == "none"
    assert mem.value == pytest.approx(118_000 * 1.4)
    inference = next(s for s in figures if s.labels["device"] == "pi5-1" and s.labels["metric"].startswith("infer"))
    assert inference.labels["clock"] == "guest"  # an icount guest's device clock
    flagged = {(s.labels["device"], s.labels["metric"]) for s in families["hilbench_regression"].samples if s.value}
    assert flagged == {("c6-a", "mem_peak")}
    base = next(s for s in families["hilbench_figure_baseline"].samples if s.labels["metric"] == "mem_peak")
    assert base.value == pytest.approx(118_000, rel=0.05)
    (code,) = families["hilbench_job_exit_code"].samples
    assert code.value == 1 and code.labels == {"command": "nightly"}  # not `job`, which Prometheus sets itself


def test_openmetrics_keeps_one_sample_of_two_figures_with_the_same_labels(report) -> None:
    twice = replace(report, figures=[*report.figures, report.figures[0]])
    assert openmetrics_text(twice) == openmetrics_text(report)


def test_summary_renders_as_markdown_tables_with_the_regression_first(report) -> None:
    text = summary_markdown(report, base_url="https://ci.example/reports/runs")
    html = GFM.render(text)
    assert html.count("<table>") >= 3  # changed verdicts, figures per device, where the time went
    assert "(exit 1)" in text and "https://ci.example/reports/runs/7.html" in html
    changed = text.split("### Verdicts that changed", 1)[1].split("###", 1)[0]
    rows = [line for line in changed.splitlines() if line.startswith("| ") and "device" not in line]
    assert "regression" in rows[0] and "c6-a" in rows[0] and "+40.0%" in rows[0]
    assert any("inconclusive" in r and "pi5-1" in r for r in rows)
    assert len(text) <= COMMENT_LIMIT


def test_a_huge_summary_stays_under_the_comment_limit_and_says_what_it_left_out(report) -> None:
    many = [replace(j, session=f"session-{n:03d}") for n in range(400) for j in report.judged]
    text = summary_markdown(replace(report, judged=many))
    assert len(text) <= COMMENT_LIMIT
    assert "left out to stay under 65,535 characters" in text
    html = GFM.render(text)
    assert html.count("<details") == html.count("</details>")  # every fold it opened is closed


def test_files_are_written_and_the_step_summary_appended(report, tmp_path) -> None:
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    files = CiFiles(tmp_path / "s.md", tmp_path / "j.xml", tmp_path / "m.prom")
    written = write_ci_files(report, files, env={STEP_SUMMARY_ENV: str(step)})
    assert set(written) == {tmp_path / "s.md", tmp_path / "j.xml", tmp_path / "m.prom", step}
    assert step.read_text().startswith("earlier step\n## hilbench nightly")
    assert (tmp_path / "s.md").read_text() == step.read_text().removeprefix("earlier step\n")


def test_an_unwritable_file_is_a_usage_error_naming_the_option(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"--junit .*cannot write"):
        CiFiles(junit=tmp_path / "no-such-dir" / "j.xml").check()


def test_a_figure_says_which_clock_it_is_on() -> None:
    assert figure_clock("decision_latency_p50", {"clock": "real time"}) == "bench"
    assert figure_clock("decision_latency_p50", {"clock": "icount", "latency_clock": "device"}) == "guest"
    assert figure_clock("inference_latency_p50", {"clock": "realtime"}) == "device"
    assert figure_clock("mem_peak", {}) == "none"
    assert REGRESSION  # the status the failing case rests on


def test_the_nightly_report_has_its_runs_verdicts_outcomes_and_stage_times(tmp_path) -> None:
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        run = write_history(store, thresholds, Plan(STEP_NIGHT + 1, step_night=STEP_NIGHT), DEVICES)[-1]
        result = NightlyResult(
            "20261204-020000",
            tmp_path,
            [
                StageResult(
                    "replay",
                    61.0,
                    {"c6-a": DeviceOutcome(True), "pi5-1": DeviceOutcome(True), "orin-1": DeviceOutcome(False, "hung")},
                )
            ],
        )
        result.runs = [PublishedRun("combat", run, "window", tmp_path / "7.html", stored_verdicts(store, run))]
        result.alerts = night_alerts(store, [run], thresholds.alerts)
        report = nightly_report(result, store, thresholds)
    assert report.exit_code == 1 and report.headline.startswith("1 regression(s): c6-a memory peak")
    assert {f.device for f in report.figures} == set(DEVICES) and {f.run_kind for f in report.figures} == {"replay"}
    failing = {(c.classname, c.name) for c in report.cases if c.status == "failed"}
    (alert,) = report.alerts
    # a replay that hung: product; the step's alert, untriaged, fails the night in a case of its own
    assert failing == {("combat.c6-a", "memory_peak"), ("devices.orin-1", "run"), ("alerts.c6-a", f"alert #{alert.id}")}
    assert (alert.new, alert.state, alert.device, alert.failing, alert.metrics) == (True, "untriaged", "c6-a", True, 1)
    assert alert.metric.startswith("memory peak (agent high-water mark) +4")  # the step's effect
    table = summary_markdown(report).split("### Alerts", 1)[1]
    row = f"| #{alert.id} | **new**, untriaged, fails the job | c6-a | combat | memory peak (agent high-water mark) +4"
    assert row in table
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text(report))}
    (count,) = families["hilbench_alert_metrics"].samples
    (fails,) = families["hilbench_alert_failing"].samples
    assert count.labels == {"alert": str(alert.id), "device": "c6-a", "state": "untriaged"} and count.value == 1
    assert fails.value == 1
    assert report.timings == [("stage replay", 61.0)] and report.pages == [(f"combat (run {run})", tmp_path / "7.html")]


def test_the_suite_passes_metrics_to_pytest() -> None:
    from bench.cli import build_parser
    from bench.commands.suite import suite_argv

    args = build_parser("suite").parse_args(["suite", "--metrics", "m.prom", "--fleet", "fixtures/fleets/virtual.toml"])
    assert "--metrics=m.prom" in suite_argv(args)


def test_a_bisection_has_a_case_per_step_and_its_figures_labelled_by_build(tmp_path) -> None:
    from bench.commands.bisect import bisect_report
    from bench.measure.measurement import Measurement
    from bench.results.bisect import Bisection, Step

    with open_store(tmp_path / "r.sqlite") as store:
        runs = {}
        for build, us in (("m1.tflite", 1000.0), ("m2.tflite", 1000.0), ("m3.tflite", 1300.0)):
            runs[build] = []
            for _ in range(2):
                run = store.runs.begin_run("bisect", session="combat")
                store.runs.add_device(run, "c6-a", "esp32c6")
                store.measures.add_measurements(
                    run, "c6-a", [Measurement("inference_latency_p50", "us", us, samples=900)]
                )
                runs[build].append(run)
        result = Bisection("c6-a", list(runs), 0, 2, 2, Step(0, "m1.tflite", "baseline", runs["m1.tflite"]),
                           [Step(1, "m2.tflite", "good", runs["m2.tflite"]),
                            Step(2, "m3.tflite", "bad", runs["m3.tflite"], "inference_p50", "2 of 2 runs worse")],
                           first_bad=2, last_good=1)  # fmt: skip
        report = bisect_report(result, store, dt.datetime(2026, 12, 4, tzinfo=dt.UTC), tmp_path)
    cases = {c.name: c for suite in JUnitXml.fromstring(junit_xml(report).encode()) for c in suite}
    assert set(cases) == set(runs) and isinstance(cases["m3.tflite"].result[0], Failure)
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text(report))}
    by_build = {s.labels["build"]: s.value for s in families["hilbench_figure"].samples}
    assert by_build == {"m1.tflite": 1000.0, "m2.tflite": 1000.0, "m3.tflite": 1300.0}
    text = summary_markdown(report)
    assert "first bad build: m3.tflite" in text and "Verdicts that changed" not in text


def test_a_creep_named_a_drift_shows_so_in_the_headline_junit_metrics_and_alerts(tmp_path) -> None:
    # c6-a's inference P50 +15% a night from night 6 (floor 10%): a regression each night, a drift from the third
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        ids = write_history(store, thresholds, Plan(9, creep_device="c6-a", creep_from=6, creep_rate=0.15), DEVICES)
        result = NightlyResult("20261204-020000", tmp_path)
        result.runs = [PublishedRun("combat", ids[-1], "window", tmp_path / "9.html", stored_verdicts(store, ids[-1]))]
        result.alerts = night_alerts(store, [ids[-1]], thresholds.alerts)
        report = nightly_report(result, store, thresholds)
    (drift,) = [j.verdict for j in report.judged if j.verdict.is_drift]
    assert (drift.device, drift.metric, drift.status) == ("c6-a", "inference_p50", REGRESSION)
    assert drift.drift_since == ids[6]
    assert drift.effect_pct == pytest.approx(1.15**3 * 100 - 100, abs=6)
    assert f"c6-a {drift.title} (combat; drift {drift.effect_pct:+.0f}% since run {ids[6]})" in report.headline
    (case,) = [c for c in report.cases if c.classname == "combat.c6-a" and c.name == "inference_p50"]
    assert case.status == "failed" and case.message.startswith(f"{drift.title}: drift: ")
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text(report))}
    (pct,) = families["hilbench_drift_pct"].samples
    assert pct.labels["device"] == "c6-a" and pct.value == pytest.approx(drift.effect_pct)
    (alert,) = [a for a in report.alerts if a.device == "c6-a"]
    assert not alert.new and alert.metric.endswith(f"drift +{drift.effect_pct:.1f}% since run {ids[6]}")
