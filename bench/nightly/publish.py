"""The nightly's reports and verdicts: each session's run against the baseline of that session."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.nightly.confirm import Confirmation
from bench.report.publish import publish_run
from bench.results.verdict import INCONCLUSIVE, NOT_REPRODUCED, Verdict, collecting_summary
from bench.store.results import ResultStore


@dataclass
class PublishedRun:
    """One session's run: its report page and verdicts."""

    session: str
    run_id: int
    baseline: str
    page: Path | None
    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""
    bisect: dict[str, str] = field(default_factory=dict)  # device -> `hilbench bisect` command for its regression
    energy: dict[str, dict[str, Any]] = field(default_factory=dict)  # device -> its energy per decision and label

    @property
    def regressions(self) -> list[Verdict]:
        """The verdicts that say a metric got worse."""
        return [v for v in self.verdicts if v.status == "regression"]

    def with_status(self, status: str) -> list[Verdict]:
        """The verdicts with `status`."""
        return [v for v in self.verdicts if v.status == status]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "session": self.session,
            "run_id": self.run_id,
            "baseline": self.baseline,
            "report": str(self.page) if self.page else None,
            "note": self.note,
            "regressions": [v.to_dict() for v in self.regressions],
            "not_reproduced": [v.to_dict() for v in self.with_status(NOT_REPRODUCED)],
            "inconclusive": [v.to_dict() for v in self.with_status(INCONCLUSIVE)],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "bisect": self.bisect,
            "energy": self.energy,
        }


OTA_SESSION = "update-and-faults"


def publish_runs(
    store: ResultStore,
    run_ids: dict[str, int],
    reports_dir: Path,
    confirmations: dict[str, Confirmation],
    ota_run: int | None = None,
) -> list[PublishedRun]:
    """Render the update-and-faults run, then every session's run with its final verdicts (the first session
    last, so latest.html is the nightly's main run)."""
    published = []
    if ota_run is not None:
        out = publish_run(store, ota_run, reports_dir=reports_dir)
        published.append(PublishedRun(OTA_SESSION, ota_run, "", out.page, [], "model updates and fault cases"))
    for session, run_id in reversed(list(run_ids.items())):
        out = publish_run(store, run_id, reports_dir=reports_dir)
        verdicts = confirmations[session].verdicts if session in confirmations else list(out.verdicts)
        offers = dict(out.report.data["outcome"].get("bisect", {}))
        note, energy = collecting_summary(verdicts), energy_of(store, run_id)
        published.append(PublishedRun(session, run_id, "window", out.page, verdicts, note, offers, energy))
    return list(reversed(published))  # the update-and-faults run last


def energy_of(store: ResultStore, run_id: int) -> dict[str, dict[str, Any]]:
    """device -> the run's energy per decision (mJ, None where its meter gives none), mean power (mW) and the label
    of how they were taken (the meter, what it is modelled from, the method), for every metered device."""
    out: dict[str, dict[str, Any]] = {}
    for m in store.measures.measurements(run_id):
        if m.name == "energy_per_decision_p50":
            label = (m.description or "").partition("; meter: ")[2]
            out.setdefault(m.device, {}).update(energy_per_decision_mj=m.value, label=label, flags=list(m.flags))
        elif m.name == "power_mean":
            out.setdefault(m.device, {})["power_mean_mw"] = m.value
    return out
