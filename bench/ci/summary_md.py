"""The Markdown summary of a job, for a CI job page or a pull request comment (GitHub-flavoured Markdown).

It leads with what the job found and its exit code, then the verdicts that changed, each alert (one per cause,
with every metric it lists) and its state,
the judged figures against their baseline (one folded table per device and session), the pages, notes and where
the time went. It stays under `limit` characters (GitHub takes 65,535 in a comment, 1 MiB per step summary):
rows that do not fit are left out and counted in a line that says where to read them."""

from __future__ import annotations

import html
import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import quote

from bench.ci.facts import CiReport, Judged
from bench.core.units import figure
from bench.results.verdict import IMPROVED, INCONCLUSIVE, NOT_REPRODUCED, REGRESSION, UNCHANGED

COMMENT_LIMIT = 65_535  # characters in a GitHub pull request comment
STEP_LIMIT = 1024 * 1024  # bytes of one GitHub Actions step summary
# plain words, bold where the job fails: they read the same in any renderer and font (no emoji glyph needed)
MARK = {REGRESSION: "**regression**", IMPROVED: "improved", INCONCLUSIVE: "*inconclusive*",
        NOT_REPRODUCED: "not reproduced"}  # fmt: skip
EXIT_WORDS = {
    0: "pass",
    1: "**FAILED**: regression or failure",
    2: "**usage error**",
    3: "**bench infrastructure failed**",
}
_RESERVE = 400  # room kept for the closing lines and the note on what was left out


class _Budget:
    """Lines that stay under a character limit; counts the rows that did not fit."""

    def __init__(self, limit: int) -> None:
        self.lines: list[str] = []
        self.left = limit - _RESERVE
        self.dropped = 0

    def add(self, *lines: str, keep: int = 0) -> bool:
        """Add `lines` whole if they fit with `keep` characters to spare (False, counted as one dropped row, when
        not)."""
        size = sum(len(line) + 1 for line in lines)
        if size + keep > self.left:
            self.dropped += 1
            return False
        self.lines.extend(lines)
        self.left -= size
        return True

    def close(self, *lines: str) -> None:
        """Lines that must be written (closing tags, room kept for them by `add`)."""
        self.lines.extend(lines)
        self.left -= sum(len(line) + 1 for line in lines)


# What GitHub's Markdown reads as structure in a value: inline marks, `|` (a table cell), `$` (maths), `@` (a
# mention), `:` and `www.` (autolinks) are backslash-escaped (CommonMark takes a backslash before any ASCII
# punctuation); <, > and & become entities, so no tag, comment or entity of a value reaches the page's HTML;
# a value's first character is escaped where it would start a block (a heading, list, rule or quote).
_INLINE = str.maketrans({c: "\\" + c for c in "\\`*_[]|~$@"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"})
_AUTOLINK = re.compile(r"(?i)(?<=www)\.|:(?=//)|(?<=mailto):|(?<=xmpp):")
_BLOCK_START = re.compile(r"^(\d*)([-+=#.)])")


def _one_line(text: object) -> str:
    """`text` on one line: control characters, line breaks and runs of spaces folded to single spaces."""
    return " ".join("".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in str(text)).split())


def cell(text: object) -> str:
    """A value as plain text in one line of Markdown (a table cell, a list item, a heading): on one line
    (`_one_line`), everything Markdown or HTML would read as structure escaped: `|` splits no cell,
    `</details>` closes no fold, `<!--` hides nothing, `@team` pings nobody, `# x` starts no heading."""
    escaped = _AUTOLINK.sub(r"\\\g<0>", _one_line(text).translate(_INLINE))
    return _BLOCK_START.sub(r"\1\\\2", escaped, count=1)


def html_text(text: object) -> str:
    """A value as plain text inside an HTML block (a fold's <summary>, where Markdown's escapes do not apply):
    folded to one line as `cell` does, with &, <, > and quotes as entities."""
    return html.escape(_one_line(text))


def link(text: str, path: Path, base_url: str | None) -> str:
    """A Markdown link to a page: under `base_url` when the job's pages are published there, else its path (the
    target percent-encoded, so no value in it ends the link or adds markup)."""
    target = f"{base_url.rstrip('/')}/{path.name}" if base_url else os.path.relpath(path)
    return f"[{cell(text)}](<{quote(target, safe='/:%#?=&')}>)"


def change(j: Judged) -> str:
    """The effect against the baseline mean, signed ("-" when not judged)."""
    effect = j.verdict.effect_pct
    return "-" if effect is None else f"{effect:+.1f}%"


def summary_markdown(report: CiReport, *, limit: int = COMMENT_LIMIT, base_url: str | None = None) -> str:
    """The summary of `report` in at most `limit` characters."""
    out = _Budget(limit)
    regressions = sum(j.verdict.status == REGRESSION for j in report.judged)
    out.add(f"## {cell(report.title)}: {EXIT_WORDS.get(report.exit_code, 'exit')} (exit {report.exit_code})", "")
    out.add(cell(report.headline), "")
    changed = [j for j in report.judged if j.changed]
    if report.judged or not report.cases:  # a bisection's steps are its cases and notes, not verdicts
        _changed(out, report, changed)
    if report.alerts:
        out.add(
            "### Alerts", "", "| alert | state | device | session | metrics | age | |", "|---|---|---|---|---|---:|---|"
        )
        for a in sorted(report.alerts, key=lambda a: (not a.new, not a.overdue, a.id)):
            state = ("**new**, " if a.new else "") + cell(a.state) + (", **overdue**" if a.overdue else "")
            state += ", fails the job" if a.failing else ""
            out.add(f"| #{a.id} | {state} | {cell(a.device)} | {cell(a.session)} | {cell(a.metric)} | "
                    f"{a.age_days:.1f} d | {cell(a.text)} |")  # fmt: skip
        out.add("")
    _figures(out, report)
    if report.pages:
        out.add("### Pages", "")
        for what, page in report.pages:
            out.add(f"- {link(what, page, base_url)}")
        out.add("")
    if report.notes:
        out.add("### Notes", "")
        for note in report.notes:
            out.add(f"- {cell(note)}")
        out.add("")
    if report.timings:
        total = sum(s for _, s in report.timings)
        out.add("### Where the time went", "", "| step | seconds | share |", "|---|---:|---:|")
        for what, seconds in report.timings:
            out.add(f"| {cell(what)} | {seconds:.1f} | {100 * seconds / total if total else 0:.0f}% |")
        out.add(f"| **total** | **{total:.1f}** | |", "")
    if out.dropped:
        out.close(f"_{out.dropped} row(s) left out to stay under {limit:,} characters: the pages have them all._")
    if regressions:
        out.close("", f"<sub>{regressions} regression(s); exit {report.exit_code}.</sub>")
    return "\n".join(out.lines) + "\n"


def _changed(out: _Budget, report: CiReport, changed: list[Judged]) -> None:
    """The verdicts that moved, regressions first, each with its figure against the baseline and its reason."""
    out.add("### Verdicts that changed", "")
    if changed:
        out.add("| device | session | metric | verdict | now | baseline | change |", "|---|---|---|---|---|---|---|")
        for j in sorted(changed, key=lambda j: (j.verdict.status != REGRESSION, j.verdict.device, j.session)):
            v = j.verdict
            out.add(
                f"| {cell(v.device)} | {cell(j.session)} | {cell(v.title)} | {MARK.get(v.status, cell(v.status))}"
                f" | {figure(v.run_value, v.unit)} | {figure(v.baseline_value, v.unit)} | {change(j)} |"
            )
        out.add("")
        for j in changed:
            out.add(f"- **{cell(j.verdict.device)} {cell(j.verdict.title)}**: {cell(j.verdict.reason)}")
    else:
        judged = sum(1 for j in report.judged if j.verdict.status in (UNCHANGED, IMPROVED))
        out.add(f"None: {judged} judged figure(s) unchanged; the others not judged (see below)." if judged
                else "Nothing was judged yet (see below).")  # fmt: skip
    out.add("")


def _figures(out: _Budget, report: CiReport) -> None:
    """Per device and session, the judged figures against their baseline, folded (the changed ones open)."""
    groups: dict[tuple[str, str, int], list[Judged]] = {}
    for j in report.judged:
        groups.setdefault((j.verdict.device, j.session, j.run_id), []).append(j)
    if not groups:
        return
    out.add("### Figures against their baseline", "")
    for (device, session, run_id), rows in sorted(groups.items()):
        opened = " open" if any(j.changed for j in rows) else ""
        if not out.add(
            f"<details{opened}><summary>{html_text(device)} · {html_text(session)} (run {run_id})</summary>",
            "",
            "| metric | now | baseline | change | runs | verdict |",
            "|---|---:|---:|---:|---:|---|",
            keep=16,
        ):
            continue
        for j in rows:
            v = j.verdict
            out.add(
                f"| {cell(v.title)} | {figure(v.run_value, v.unit)} | {figure(v.baseline_value, v.unit)} | "
                f"{change(j)} | {v.n_baseline} | {MARK.get(v.status, cell(v.status))} |",
                keep=16,
            )
        out.close("", "</details>", "")
