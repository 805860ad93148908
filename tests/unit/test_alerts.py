"""Alerts on a synthetic history judged by the nightly's own confirm stage: a step opens one alert and later bad
nights join it; triage by hand moves it through its states; k good nights fix it; a relapse reopens it; a second
device's step on the same model is suggested downstream. Also the [alerts] settings and the store's migration."""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.alerts import table
from bench.alerts.model import ACKNOWLEDGED, DOWNSTREAM, DRIFT, FIXED, INVALID, REGRESSION, UNTRIAGED, AlertError
from bench.alerts.night import night_alerts
from bench.alerts.triage import acknowledge, downstream, fix, invalidate
from bench.core.errors import ConfigError
from bench.report.publish import publish_run
from bench.results.thresholds import load_thresholds, parse_thresholds
from bench.store.results import open_store
from bench.store.schema import SCHEMA_VERSION
from tests.nightly_history import store_night

RULES = load_thresholds()
BAD = "1" * 64  # the model with the step
GOOD = "2" * 64  # a later model without it


def _baseline(store, rng, nights: int = 6) -> list[int]:
    return [store_night(store, RULES, rng) for _ in range(nights)]


def test_a_step_opens_one_alert_that_later_bad_nights_join(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        first = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        night = night_alerts(store, [first], RULES.alerts)
        (alert,) = night.new
        assert (alert.device, alert.state, alert.first_run) == ("c6-a", UNTRIAGED, first)
        (metric,) = alert.metrics
        assert (metric.session, metric.metric, metric.first_run) == ("combat", "inference_p50", first)
        assert metric.effect_pct == pytest.approx(40, abs=6) and metric.p_value < 0.01
        assert alert.change == ["model sha256 00000000… -> 11111111…"]
        assert "hilbench bisect --device c6-a" in alert.bisect and "--metric inference_p50" in alert.bisect
        assert night.failing == [alert] and night.known == []
        later = [store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}) for _ in range(5)]
        assert len(table.select(store)) == 1  # joined, not opened again
        again = night_alerts(store, [later[-1]], RULES.alerts)
        assert again.new == [] and [a.id for a in again.known] == [alert.id]
        assert table.get(store, alert.id).last_run == later[-1]
        assert [e.event for e in store.alerts.events(alert.id)] == ["opened"] + ["joined"] * 5


def test_a_creep_is_one_alert_a_regression_first_then_a_drift_with_its_cumulative_change(tmp_path: Path) -> None:
    # +15% a night on c6-a's inference P50 (floor 10%): each night a regression; from the third a drift as well
    rng = np.random.default_rng(1)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        runs = [store_night(store, RULES, rng, slower={"c6-a": 1.15}, models={"c6-a": BAD})]
        (alert,) = night_alerts(store, runs, RULES.alerts).new
        assert (alert.kind, alert.lead.drift, alert.first_run) == (REGRESSION, None, runs[0])
        assert alert.lead.effect_label() == f"{alert.lead.effect_pct:+.1f}%"
        runs += [store_night(store, RULES, rng, slower={"c6-a": 1.15**k}, models={"c6-a": BAD}) for k in (2, 3, 4)]
        (alert,) = table.select(store)  # the creep's nights joined the regression's alert; none opened another
        assert (alert.kind, alert.state, alert.first_run, alert.last_run) == (DRIFT, UNTRIAGED, runs[0], runs[-1])
        (metric,) = alert.metrics
        assert metric.drift["since_run"] == runs[0] and metric.drift["nights"] == 4
        assert metric.drift["effect_pct"] == pytest.approx(1.15**4 * 100 - 100, abs=6)
        assert metric.effect_label() == f"drift {metric.drift['effect_pct']:+.1f}% since run {runs[0]}"
        night = night_alerts(store, [runs[-1]], RULES.alerts)
        assert night.new == [] and [a.id for a in night.known] == [alert.id] and night.failing == night.known
        assert f"drift +{metric.drift['effect_pct']:.1f}% since run {runs[0]}" in night.lines()[0]
        events = store.alerts.events(alert.id)
        assert [e.event for e in events] == ["opened", "joined", "joined", "joined"]
        assert events[2].detail.startswith(f"run {runs[2]}: now a drift: inference time P50")
        assert f"since run {runs[0]} (3 nights)" in events[2].detail
        html = publish_run(store, runs[-1], reports_dir=tmp_path / "reports").page.read_text()
    assert f"<b>known</b> alert #{alert.id}: c6-a, 1 metric ·" in html
    shown = f"<li>{metric.title} drift +{metric.drift['effect_pct']:.1f} % since run {runs[0]}:"
    assert shown in html  # the run page's alert, not the first night's +15%
    assert f"drift: {metric.title} +{metric.drift['effect_pct']:.0f}% since run {runs[0]} (4 nights)" in html


def test_ack_keeps_a_known_alert_out_of_the_exit_code_unless_acknowledged_ones_fail(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        (alert,) = table.select(store)
        acked = acknowledge(store, alert.id, "maria", "model v7 is heavier", "https://bugs.example/123")
        assert (acked.state, acked.owner, acked.link) == (ACKNOWLEDGED, "maria", "https://bugs.example/123")
        run = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        night = night_alerts(store, [run], RULES.alerts)
        assert [a.state for a in night.known] == [ACKNOWLEDGED] and night.failing == []
        strict = night_alerts(store, [run], replace(RULES.alerts, fail_acknowledged=True))
        assert [a.id for a in strict.failing] == [alert.id]
        assert store.alerts.events(alert.id)[1].actor.endswith("@" + table.who().split("@")[1])


def test_k_good_nights_fix_it_and_a_relapse_reopens_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    k = RULES.alerts.fixed_after_nights
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        (alert,) = table.select(store)
        good = [store_night(store, RULES, rng, models={"c6-a": GOOD}) for _ in range(k)]
        assert table.get(store, alert.id).state == FIXED
        assert table.get(store, alert.id).fixed_run == good[-1]
        assert [a.id for a in night_alerts(store, [good[-1]], RULES.alerts).fixed] == [alert.id]
        relapse = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        night = night_alerts(store, [relapse], RULES.alerts)
        assert [a.id for a in night.new] == [alert.id] and night.new[0].state == UNTRIAGED  # the same alert, reopened
        assert store.alerts.events(alert.id)[-1].event == "reopened"
        assert len(table.select(store)) == 1


def test_k_minus_one_good_nights_then_a_bad_one_keeps_it_open(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        for _ in range(RULES.alerts.fixed_after_nights - 1):
            store_night(store, RULES, rng, models={"c6-a": GOOD})
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        (alert,) = table.select(store)
        assert alert.state == UNTRIAGED and alert.lead.good_nights == 0 and alert.lead.recovered_run is None


def test_a_second_devices_step_on_the_same_model_is_suggested_downstream(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        run = store_night(store, RULES, rng, slower={"c6-a": 1.4, "orin-1": 1.3}, models={"c6-a": BAD, "orin-1": BAD})
        night = night_alerts(store, [run], RULES.alerts)
        (second,) = night.new
        (root,) = night.known
        assert second.device == "orin-1" and second.suggested_of == root.id
        assert any(f"downstream {second.id} --of {root.id}" in line for line in night.lines())
        marked = downstream(store, second.id, root.id)
        assert (marked.state, marked.of_alert) == (DOWNSTREAM, root.id)
        assert night_alerts(store, [run], RULES.alerts).failing == [root]  # only the root fails the night


def test_wrong_triage_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        run = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        (alert,) = table.select(store)
        with pytest.raises(AlertError, match="no alert 99"):
            acknowledge(store, 99, "maria", "x")
        with pytest.raises(AlertError, match="--owner is empty"):
            acknowledge(store, alert.id, " ", "x")
        with pytest.raises(AlertError, match="names the alert itself"):
            downstream(store, alert.id, alert.id)
        with pytest.raises(AlertError, match="not after its first night"):
            fix(store, alert.id, run)
        with pytest.raises(ConfigError, match="no run 999"):
            fix(store, alert.id, 999)
        assert invalidate(store, alert.id, "the lab's USB hub").state == INVALID
        later = store_night(store, RULES, rng)
        assert fix(store, alert.id, later).state == FIXED
        with pytest.raises(AlertError, match="is fixed: it cannot become acknowledged"):
            acknowledge(store, alert.id, "maria", "x")


def test_an_untriaged_alert_past_its_deadline_is_overdue(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        run = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        later = dt.datetime.now(dt.UTC) + dt.timedelta(days=RULES.alerts.untriaged_days + 1)
        night = night_alerts(store, [run], RULES.alerts, now=later)
        assert [a.id for a in night.overdue] == [night.new[0].id]
        assert any(line.startswith("  OVERDUE") for line in night.lines())
        assert night_alerts(store, [run], RULES.alerts).overdue == []


def test_alert_settings_are_validated(tmp_path: Path) -> None:
    body = {"metrics": {"x": {"measurement": "fps", "worse": "lower", "threshold_pct": 5}}}
    assert parse_thresholds(body, tmp_path / "t.toml").alerts.fixed_after_nights == 3
    with pytest.raises(ConfigError, match=r"t.toml: alerts.fixed_after_nights = 0 must be at least 1"):
        parse_thresholds({**body, "alerts": {"fixed_after_nights": 0}}, tmp_path / "t.toml")
    with pytest.raises(ConfigError, match=r"alerts: unknown field\(s\) \['k'\]"):
        parse_thresholds({**body, "alerts": {"k": 3}}, tmp_path / "t.toml")
    with pytest.raises(ConfigError, match=r"alerts\.fail_acknowledged must be true or false"):
        parse_thresholds({**body, "alerts": {"fail_acknowledged": "yes"}}, tmp_path / "t.toml")


def test_a_store_of_the_first_schema_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    open_store(path).close()
    db = sqlite3.connect(path)  # as the first schema left it: no alert tables, version 1
    db.execute("DROP TABLE alert_metrics")
    db.execute("DROP TABLE alert_events")
    db.execute("DROP TABLE alerts")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with open_store(path) as store:
        assert store.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
        assert table.select(store) == []
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match="update this bench host's checkout"):
        open_store(path)


def test_a_product_failure_opens_an_alert_that_passing_nights_fix(tmp_path: Path) -> None:
    from bench.core.outcomes import PASS, product
    from bench.nightly.alerting import night_findings, record_alerts

    def night(outcome, ota_outcome) -> int:
        run = store.runs.begin_run("replay", session="combat")
        store.runs.add_device(run, "c6-a", "esp32c6")
        store.runs.update_device(run, "c6-a", status="ok" if outcome == PASS else "failed", outcome=outcome.to_json())
        store.runs.finish_run(run, "ok")
        ota = store.runs.begin_run("ota", session="update-and-faults")
        store.runs.finish_run(ota, "ok")
        found = night_findings(store, {}, {"combat": run}, ota, {"faults": {"c6-a": ota_outcome}})
        record_alerts(store, found, RULES.alerts)
        return run

    with open_store(tmp_path / "r.sqlite") as store:
        crashed = product("agent crashed: MemoryError in npc_agent.run")
        first = night(crashed, PASS)
        (alert,) = night_alerts(store, [first], RULES.alerts).new
        assert (alert.kind, alert.lead.metric, alert.state) == ("failure", "product failure: replay", UNTRIAGED)
        assert "MemoryError" in alert.lead.data["reason"]
        assert alert.line().startswith("#1 c6-a product failure in replay failed")
        # the run's page lists it with its reason (a failure has no effect size: the page once raised on it)
        from bench.report.build import build_report
        from bench.report.html import render_html
        from tests.unit.test_report_render import synthetic_run

        report = build_report(
            synthetic_run("run-0001", "2026-11-28T02:00:00Z", frames=100),
            alerts=night_alerts(store, [first], RULES.alerts).to_json(),
        )
        assert "MemoryError in npc_agent.run" in render_html(report)
        night(crashed, product("model refused: bad signature"))  # the replay's joins; the faults stage opens its own
        listed = [[m.metric for m in a.metrics] for a in table.select(store)]
        assert sorted(listed) == [["product failure: faults"], ["product failure: replay"]]
        for _ in range(RULES.alerts.fixed_after_nights):
            night(PASS, PASS)
        assert {a.state for a in table.select(store)} == {FIXED}


def test_a_postgres_store_of_the_first_schema_is_migrated(pg_url: str) -> None:
    import psycopg

    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as db:  # as the first schema left it
        db.execute("DROP TABLE alert_metrics")
        db.execute("DROP TABLE alert_events")
        db.execute("DROP TABLE alerts")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    with open_store(pg_url) as store:
        assert store.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
        rng = np.random.default_rng(12)
        for _ in range(6):
            store_night(store, RULES, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD})
        (alert,) = table.select(store)
        assert acknowledge(store, alert.id, "maria", "on PostgreSQL").state == ACKNOWLEDGED


# -- one cause, one alert ------------------------------------------------------------------------------------

HEAVY = ("inference_latency_p50", "decision_latency_p50")  # what a model with more multiply-accumulates moves


def test_a_change_that_moves_several_metrics_opens_one_alert_and_one_ack_covers_the_next_nights(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(21)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        first = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}, moved=HEAVY)
        night = night_alerts(store, [first], RULES.alerts)
        (alert,) = night.new
        assert {m.metric for m in alert.metrics} == {"inference_p50", "latency_p50"}
        assert all(m.effect_pct == pytest.approx(40, abs=6) and m.data["baseline_value"] for m in alert.metrics)
        assert alert.change == ["model sha256 00000000… -> 11111111…"] and night.failing == [alert]
        assert len(night.lines()) == 1 and len(night.lines()[0]) < 80
        assert [e.event for e in store.alerts.events(alert.id)] == ["opened"]
        acknowledge(store, alert.id, "maria", "v2 has twice the MACs")
        # the next night moves a third figure with the same model: it joins the acknowledged alert
        later = store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}, moved=(*HEAVY, "mem_peak"))
        again = night_alerts(store, [later], RULES.alerts)
        assert again.new == [] and [a.id for a in again.known] == [alert.id] and again.failing == []
        (joined,) = table.select(store)
        assert joined.state == ACKNOWLEDGED and len(joined.metrics) == 3 and joined.last_run == later
        assert {m.metric: m.last_run for m in joined.metrics}["memory_peak"] == later


def test_a_metric_that_recovers_is_marked_inside_its_alert_which_is_fixed_when_all_have(tmp_path: Path) -> None:
    rng = np.random.default_rng(22)
    k = RULES.alerts.fixed_after_nights
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}, moved=HEAVY)
        (alert,) = table.select(store)
        half = [store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}) for _ in range(k)]
        alert = table.get(store, alert.id)
        by_name = {m.metric: m for m in alert.metrics}
        assert by_name["latency_p50"].recovered_run == half[-1] and by_name["inference_p50"].recovered_run is None
        assert alert.state == UNTRIAGED and "(recovered)" in alert.line(width=200)
        assert store.alerts.events(alert.id)[-1].event == "recovered"
        good = [store_night(store, RULES, rng, models={"c6-a": GOOD}) for _ in range(k)]
        alert = table.get(store, alert.id)
        assert (alert.state, alert.fixed_run) == (FIXED, good[-1])
        assert [a.id for a in night_alerts(store, [good[-1]], RULES.alerts).fixed] == [alert.id]


def test_two_devices_or_two_first_nights_are_two_alerts(tmp_path: Path) -> None:
    rng = np.random.default_rng(23)
    with open_store(tmp_path / "r.sqlite") as store:
        _baseline(store, rng)
        run = store_night(store, RULES, rng, slower={"c6-a": 1.4, "orin-1": 1.4}, moved=HEAVY)  # no change
        night = night_alerts(store, [run], RULES.alerts)
        assert sorted((a.device, len(a.metrics)) for a in night.new) == [("c6-a", 2), ("orin-1", 2)]
        # with no fingerprint change, a figure whose first bad night is later is another cause
        memory = store_night(store, RULES, rng, slower={"c6-a": 1.4}, moved=(*HEAVY, "mem_peak"))
        later = night_alerts(store, [memory], RULES.alerts)
        (new,) = later.new
        assert [m.metric for m in new.metrics] == ["memory_peak"] and [a.device for a in later.known] == ["c6-a"]


def _v2_store(execute, pg: bool = False) -> None:
    """Turn a fresh store into one as schema version 2 left it: an alert per device, session and metric."""
    from bench.store.dialect import postgres_ddl
    from bench.store.schema import ALERT_TABLES_V2

    for name in ("alert_metrics", "alert_events", "alerts"):
        execute(f"DROP TABLE {name}")
    for statement in ALERT_TABLES_V2:
        execute(postgres_ddl(statement) if pg else statement)
    columns = "session, device, metric, kind, state, first_run, last_run, opened_at, state_since, owner, fixed_run"
    columns += ", data"
    for values in (
        "'combat', 'c6-a', 'inference_p50', 'regression', 'untriaged', 7, 9, '2026-11-01T02:00:00+00:00',"
        " '2026-11-01T02:00:00+00:00', '', NULL, '{\"title\": \"inference P50\", \"effect_pct\": 40.5}'",
        "'combat', 'c6-a', 'latency_p50', 'drift', 'acknowledged', 5, 9, '2026-10-30T02:00:00+00:00',"
        ' \'2026-11-02T09:00:00+00:00\', \'maria\', NULL, \'{"drift": {"since_run": 5, "nights": 5,'
        ' "effect_pct": 12.0}}\'',
        "'combat', 'orin-1', 'fps', 'regression', 'fixed', 3, 4, '2026-10-28T02:00:00+00:00',"
        " '2026-10-31T02:00:00+00:00', '', 6, '{\"change\": [\"model sha256 0… -> 1…\"]}'",
    ):
        execute(f"INSERT INTO alerts ({columns}) VALUES ({values})")
    execute("INSERT INTO alert_events (alert_id, run_id, at, event, actor) VALUES (2, 9, '2026-11-02T09:00:00+00:00',"
            " 'acknowledged', 'maria@lab')")  # fmt: skip
    execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def _check_v2_migrated(store) -> None:
    assert store.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    alerts = {a.id: a for a in table.select(store, states=None)}
    assert {i: [(m.session, m.metric) for m in a.metrics] for i, a in alerts.items()} == {
        1: [("combat", "inference_p50")],
        2: [("combat", "latency_p50")],
        3: [("combat", "fps")],
    }
    assert alerts[1].lead.effect_pct == 40.5 and alerts[1].line().startswith("#1 c6-a inference P50 +40.5%")
    assert (alerts[2].state, alerts[2].owner, alerts[2].kind, alerts[2].lead.drift["since_run"]) == (
        ACKNOWLEDGED,
        "maria",
        DRIFT,
        5,
    )
    assert (alerts[3].state, alerts[3].lead.recovered_run, alerts[3].change) == (FIXED, 6, ["model sha256 0… -> 1…"])
    assert [e.event for e in store.alerts.events(2)] == ["acknowledged"]
    acknowledge(store, 1, "maria", "after the migration")  # a migrated alert is triaged like any other
    assert table.get(store, 1).state == ACKNOWLEDGED


def test_a_store_of_the_previous_schema_is_migrated_to_alerts_of_one_metric(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite"
    open_store(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    _v2_store(db.execute)
    db.close()
    with open_store(path) as store:
        _check_v2_migrated(store)
    with open_store(path) as store:  # opened again: nothing more to do
        assert len(table.select(store, states=None)) == 3


def test_a_postgres_store_of_the_previous_schema_is_migrated_to_alerts_of_one_metric(pg_url: str) -> None:
    import psycopg

    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as db:
        _v2_store(db.execute, pg=True)
    with open_store(pg_url) as store:
        _check_v2_migrated(store)


def test_one_change_seen_in_two_sessions_is_one_alert_listing_both(tmp_path: Path) -> None:
    rng = np.random.default_rng(24)
    with open_store(tmp_path / "r.sqlite") as store:
        for _ in range(6):
            store_night(store, RULES, rng, session="combat")
            store_night(store, RULES, rng, session="dialogue")
        runs = [store_night(store, RULES, rng, slower={"c6-a": 1.4}, models={"c6-a": BAD}, session=s, moved=HEAVY)
                for s in ("combat", "dialogue")]  # fmt: skip
        (alert,) = table.select(store)
        assert alert.sessions == ["combat", "dialogue"] and len(alert.metrics) == 4
        events = store.alerts.events(alert.id)
        assert [(e.event, e.run_id) for e in events] == [("opened", runs[0]), ("joined", runs[1])]
        assert [a.id for a in night_alerts(store, runs, RULES.alerts).new] == [alert.id]  # the night's, once
