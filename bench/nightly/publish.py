"""The nightly's reports and verdicts: each session's run against the baseline of that session."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report.publish import publish_run
from bench.results.baseline import get_baseline, set_baseline
from bench.results.store import ResultStore
from bench.results.verdict import Verdict


@dataclass
class PublishedRun:
    """One session's run: its report page and verdicts."""

    session: str
    run_id: int
    baseline: str
    page: Path | None
    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""

    @property
    def regressions(self) -> list[Verdict]:
        """The verdicts that say a metric got worse."""
        return [v for v in self.verdicts if v.status == "regression"]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "session": self.session,
            "run_id": self.run_id,
            "baseline": self.baseline,
            "report": str(self.page) if self.page else None,
            "note": self.note,
            "regressions": [v.to_dict() for v in self.regressions],
            "verdicts": [v.to_dict() for v in self.verdicts],
        }


def baseline_name(prefix: str, session: str) -> str:
    """The baseline a session's runs are compared with: one per session, so like is compared with like."""
    return f"{prefix}-{session}"


def publish_runs(store: ResultStore, run_ids: dict[str, int], reports_dir: Path, prefix: str) -> list[PublishedRun]:
    """Render every session's run (the first session last, so latest.html is the nightly's main run); a session
    with no baseline yet makes this run its baseline."""
    published = []
    for session, run_id in reversed(list(run_ids.items())):
        name = baseline_name(prefix, session)
        out = publish_run(store, run_id, reports_dir=reports_dir, baseline_name=name)
        note = ""
        if get_baseline(store, name) is None:
            set_baseline(store, run_id, name)
            note = f"no baseline {name!r} yet: this run is now the baseline"
        published.append(PublishedRun(session, run_id, name, out.page, list(out.verdicts), note))
    return list(reversed(published))
