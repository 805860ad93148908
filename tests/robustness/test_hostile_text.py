"""Hostile text into every output (issue 48): values in the Markdown summary stay text to GitHub's Markdown and
to an HTML sanitizer; stored alert owners, notes and names stay text to rich and to the terminal; damaged alert
rows are exit 2 naming the row; downstream refuses cycles; a lost race is a named refusal; and two sessions
with one id are refused before a run, never a traceback after it."""

from __future__ import annotations

import html.parser
import shutil
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bench.alerts import table
from bench.alerts.model import FIXED
from bench.alerts.triage import acknowledge, downstream, fix
from bench.ci.facts import AlertLine, CiReport, Figure
from bench.ci.openmetrics import openmetrics_text
from bench.ci.summary_md import summary_markdown
from bench.core.errors import ConfigError, ExitCode
from bench.report.nights import load_grids
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO, hilbench
from tests.nightly_history import store_history
from tests.unit.test_ci_files import nightly_ci_report

GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])
RULES = load_thresholds()
SESSION = REPO / "fixtures/sessions/combat.mcap"

# -- the Markdown summary -----------------------------------------------------------------------------------

PAYLOADS = [
    "x|y", "x\\|y", "</details>", "</summary></details><details open>", "<img src=x onerror=alert(1)>",
    "<!-- hide the rest", "`code`", "``", "# heading", "- item", "1. item", "> quote", "---", "***",
    "[link](https://evil.example)", "![img](https://evil.example/p.png)", "www.evil.example",
    "https://evil.example", "@org/team", "$x^2$", "&lt;entity&gt;", "a\nb\r\n\n# c", "<script>x</script>",
    "~~strike~~", "*em* _em_ **b**", "\x1b[2J\x1b]52;c;ZXZpbA==\x07", "<https://evil.example>",
]  # fmt: skip


class _Html(html.parser.HTMLParser):
    """Tags, comments and visible text of a page."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.comments: list[str] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag + "".join(sorted(f" {k}" for k, _ in attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append("/" + tag)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> CiReport:
    return nightly_ci_report(tmp_path_factory.mktemp("md"))


def _with(report: CiReport, value: str) -> CiReport:
    """`report` with `value` in every text a value can bring: title, headline, device, session, metric title,
    reason, alert fields, notes, pages and timings."""
    judged = [replace(j, session=value, verdict=replace(j.verdict, device=value, title=value, reason=value))
              for j in report.judged]  # fmt: skip
    alerts = [AlertLine(7, value, True, value, value, value, 1.0, False, value)]
    return replace(report, title=value, headline=value, judged=judged, alerts=alerts, notes=[value],
                   pages=[(value, Path("reports/runs/7.html"))], timings=[(value, 1.0)])  # fmt: skip


@pytest.mark.parametrize("value", PAYLOADS)
def test_a_value_stays_text_in_the_markdown_summary(base_report: CiReport, value: str) -> None:
    """Rendered as GitHub does, a summary with `value` in every field has the same tags as one with a plain
    word there (no cell split, no fold closed, no tag, link or comment added), and shows the value as itself."""
    plain = _Html(GFM.render(summary_markdown(_with(base_report, "WORD"))))
    page = GFM.render(summary_markdown(_with(base_report, value)))
    hostile = _Html(page)
    assert hostile.tags == plain.tags and not hostile.comments
    folded = " ".join("".join(" " if c in "\x1b\x07" else c for c in value).split())
    shown = " ".join("".join(hostile.text).split())
    assert shown.count(folded) >= 10, (folded, shown[:400])


@pytest.mark.parametrize("value", PAYLOADS)
def test_no_tag_or_comment_of_a_value_survives_a_sanitizer(base_report: CiReport, value: str) -> None:
    """nh3 (ammonia), with GitHub's tags allowed, keeps the page as it is: nothing a value brought was markup."""
    nh3 = pytest.importorskip("nh3")
    page = GFM.render(summary_markdown(_with(base_report, value)))
    allowed = {"h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "strong", "em", "a",
               "details", "summary", "sub", "code"}  # fmt: skip
    cleaned = nh3.clean(page, tags=allowed, attributes={"a": {"href"}, "th": {"style"}, "td": {"style"},
                                                        "details": {"open"}}, link_rel=None)  # fmt: skip
    assert _Html(cleaned).tags == _Html(page).tags
    assert "<img" not in cleaned and "<script" not in cleaned and "<!--" not in cleaned


# -- alerts: stored text to rich and the terminal ------------------------------------------------------------

TERMINAL = ["[/red]", "[bold]x[/bold]", "[link=file:///etc/passwd]x[/link]", "\x1b[2J\x1b[H", "\x1b]52;c;ZXZpbA==\x07",
            "\x9b31m", "\u202eevil", "a\rb"]  # fmt: skip
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """6 good nights and 3 with a step on c6-a and orin-1: alerts #1 and #2 open."""
    path = tmp_path_factory.mktemp("alerts") / "results.sqlite"
    return path, store_history(path, RULES, [{"slower": {"c6-a": 1.4, "orin-1": 1.3}}] * 3)


@pytest.fixture
def store_copy(history: tuple[Path, list[int]], tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    shutil.copy(history[0], path)
    return path


def _alerts(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hilbench("alerts", *args, "--results", str(path)), cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={"COLUMNS": "80"})  # fmt: skip


def _sql(path: Path, sql: str, *params: object) -> None:
    db = sqlite3.connect(path)
    db.execute(sql, params)
    db.commit()
    db.close()


@pytest.mark.parametrize("value", TERMINAL)
@pytest.mark.parametrize("command", [["list", "--all"], ["show", "1"]])
def test_stored_text_reaches_the_terminal_as_text(store_copy: Path, value: str, command: list[str]) -> None:
    """An owner, note, device and metric title holding rich markup or terminal escapes: `alerts list` and `show`
    exit 0 and print them shown (`\\x1b`), never as markup or as the control characters themselves."""
    with open_store(store_copy) as store:
        acknowledge(store, 1, value, value)
    _sql(store_copy, "UPDATE alerts SET device = ? WHERE id = 1", value)
    _sql(store_copy, "UPDATE alert_metrics SET data = json_set(data, '$.title', ?) WHERE alert_id = 1", value)
    run = _alerts(store_copy, *command)
    assert run.returncode == 0, run.stderr
    assert not any(c in run.stdout for c in RAW) and "Traceback" not in run.stderr
    if value.startswith("["):
        assert value.split("]")[0][:12] in run.stdout  # the markup printed as itself (`list` shortens it)


# -- damaged alert rows -------------------------------------------------------------------------------------

METRIC = "alert_metrics, row 1/combat/inference_p50"  # how a damaged metric of alert #1 is named
DAMAGE = {
    "blob owner": ("UPDATE alerts SET owner = ? WHERE id = 1", b"\x00\xff", "owner", "alerts, row 1"),
    "blob device": ("UPDATE alerts SET device = ? WHERE id = 1", b"\x01", "device", "alerts, row 1"),
    "date not ISO": ("UPDATE alerts SET state_since = ? WHERE id = 1", "last tuesday", "state_since", "alerts, row 1"),
    "date a number": ("UPDATE alerts SET opened_at = ? WHERE id = 1", 12345, "opened_at", "alerts, row 1"),
    "unbalanced quote": ("UPDATE alerts SET data = json_set(data, '$.bisect', ?) WHERE id = 1",
                         "hilbench bisect --git 'a..b", "bisect", "alerts, row 1"),
    "unknown state": ("UPDATE alerts SET state = ? WHERE id = 1", "melted", "state", "alerts, row 1"),
    "data a list": ("UPDATE alerts SET data = ? WHERE id = 1", "[1, 2]", "data", "alerts, row 1"),
    "of_alert text": ("UPDATE alerts SET of_alert = ? WHERE id = 1", "two", "of_alert", "alerts, row 1"),
    "no metric": ("DELETE FROM alert_metrics WHERE alert_id = 1 AND ? IS NOT NULL", 1, "metrics", "alerts, row 1"),
    "effect text": ("UPDATE alert_metrics SET data = json_set(data, '$.effect_pct', ?) WHERE alert_id = 1", "big",
                    "effect_pct", METRIC),
    "drift text": ("UPDATE alert_metrics SET kind = 'drift', data = json_set(data, '$.drift', ?) WHERE alert_id = 1",
                   "far", "drift", METRIC),
    "unknown kind": ("UPDATE alert_metrics SET kind = ? WHERE alert_id = 1", "worse", "kind", METRIC),
    "recovered text": ("UPDATE alert_metrics SET recovered_run = ? WHERE alert_id = 1", "soon", "recovered_run",
                       METRIC),
}  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", [["list", "--all"], ["show", "1"]])
def test_a_damaged_alert_row_is_a_named_error(store_copy: Path, damage: str, command: list[str]) -> None:
    """`alerts list` and `show` on a row changed outside the bench: exit 2 naming the table, row and field."""
    sql, value, field, where = DAMAGE[damage]
    _sql(store_copy, sql, value)
    run = _alerts(store_copy, *command)
    assert run.returncode == ExitCode.USAGE, (run.stdout, run.stderr)
    assert where in run.stderr and field in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("damage", [d for d in DAMAGE if d != "no metric"])  # the page reads alerts by their metrics
def test_a_damaged_alert_row_is_a_named_error_on_the_history_page(store_copy: Path, damage: str) -> None:
    """The history page (its grids read every session's newest alerts) names the row too."""
    sql, value, field, where = DAMAGE[damage]
    _sql(store_copy, sql, value)
    with open_store(store_copy) as store, pytest.raises(ConfigError) as info:
        load_grids(store, RULES)
    assert info.value.exit_code == ExitCode.USAGE and where in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("column", ["actor", "detail", "at"])
def test_a_damaged_history_row_is_a_named_error(store_copy: Path, column: str) -> None:
    """An event row of the alert's history that is a blob (or a date that is not one): exit 2 naming it."""
    _sql(store_copy, f"UPDATE alert_events SET {column} = ? WHERE alert_id = 1", b"\x00")
    run = _alerts(store_copy, "show", "1")
    assert run.returncode == ExitCode.USAGE and "alert_events" in run.stderr and column in run.stderr, run.stderr


# -- downstream cycles and lost races ------------------------------------------------------------------------


def _more_alerts(path: Path, n: int) -> None:
    """Copies of alert #1 (with its metrics) until there are `n` open ones."""
    db = sqlite3.connect(path)
    columns = [r[1] for r in db.execute("PRAGMA table_info(alerts)") if r[1] != "id"]
    metrics = [r[1] for r in db.execute("PRAGMA table_info(alert_metrics)") if r[1] != "alert_id"]
    while db.execute("SELECT count(*) FROM alerts").fetchone()[0] < n:
        copy = db.execute(f"INSERT INTO alerts ({', '.join(columns)}) SELECT {', '.join(columns)} FROM alerts"
                          " WHERE id = 1").lastrowid  # fmt: skip
        db.execute(f"INSERT INTO alert_metrics (alert_id, {', '.join(metrics)}) SELECT ?, {', '.join(metrics)}"
                   " FROM alert_metrics WHERE alert_id = 1", (copy,))  # fmt: skip
    db.commit()
    db.close()


@pytest.mark.parametrize("length", [2, 3, 4])
def test_downstream_refuses_a_cycle_of_any_length(store_copy: Path, length: int) -> None:
    """#1 of #2, #2 of #3 ... then the last of #1: refused, naming the cycle; so every real step still fails
    its night."""
    _more_alerts(store_copy, length)
    with open_store(store_copy) as store:
        for n in range(1, length):
            downstream(store, n, n + 1)
    run = _alerts(store_copy, "downstream", str(length), "--of", "1")
    assert run.returncode == ExitCode.USAGE and "cycle" in run.stderr, run.stderr
    with open_store(store_copy) as store:
        assert table.get(store, length).of_alert is None


def test_a_lost_race_is_a_named_refusal(store_copy: Path, history: tuple[Path, list[int]],
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`ack` reads the alert untriaged; a `fix` lands before it writes: the ack is refused (compare-and-set on
    the state), the fix stays, and no owner is written over it."""
    with open_store(store_copy) as store:
        stale = table.get(store, 1)
        fix(store, 1, history[1][-1])
        monkeypatch.setattr(table, "get", lambda _store, _id: replace(stale))
        with pytest.raises(ConfigError, match="changed meanwhile"):
            acknowledge(store, 1, "maria", "mine")
        monkeypatch.undo()
        now = table.get(store, 1)
    assert now.state == FIXED and now.owner == ""


# -- metrics: duplicate label sets ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["check", "--device", "pi5-1"], ["nightly", "--device", "pi5-1"]])
def test_two_sessions_with_one_id_are_refused_before_the_run(tmp_path: Path, command: list[str]) -> None:
    """A copy of a session under another name has its id: exit 2 naming both files, before any device."""
    twin = tmp_path / "twin.mcap"
    shutil.copy(SESSION, twin)
    run = subprocess.run(hilbench(*command, "--session", str(SESSION), "--session", str(twin), "--metrics",
                                  str(tmp_path / "m.prom"), "--output-dir", str(tmp_path / "o")),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "twin.mcap" in run.stderr and "session id" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "m.prom").exists()


def test_metrics_with_duplicate_label_sets_are_written_not_raised() -> None:
    """Two figures with one label set (whatever got past the checks): one sample, no exception."""
    f = Figure("c6-a", "esp32c6", "combat", "latency_p50", "bench", "ms", 1.0, "check")
    text = openmetrics_text(CiReport("check", "t", 0, "h", figures=[f, replace(f, value=2.0)]))
    assert text.count("hilbench_figure{") == 1 and text.endswith("# EOF\n")
