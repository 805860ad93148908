"""Judge a stored run: every device and metric against its baseline window, with the bench host's noise.

Returns verdicts before confirmation (a regression is SUSPECTED until a replay reproduces it; see
bench.nightly.confirm), and decides which device runs join later baselines."""

from __future__ import annotations

from dataclasses import replace

from bench.measure.catalogue import CATALOGUE, COMPUTE, METERED
from bench.measure.energy import ACTIVE, ACTIVE_DECISIONS, DEVICE_CLOCK, MARKER, SHORT, SLOW_RULE, TOO_SLOW
from bench.measure.host import HostNoise
from bench.measure.replay_timing import SEED_ALIGNMENT_MS
from bench.results.clocks import COUNTED_TIMING, fingerprint_timing
from bench.results.drift import SERIES_NIGHTS, as_drift, find_creep, find_drift
from bench.results.evidence import regression_nights, series, window
from bench.results.played import played_difference
from bench.results.thresholds import MetricRule, Thresholds
from bench.results.verdict import (
    INCONCLUSIVE,
    NO_DATA,
    REGRESSION,
    SUSPECTED,
    UNCHANGED,
    Verdict,
    Window,
    host_busy,
    judge,
    not_applicable,
    off_pace,
    played_otherwise,
    short_stretch,
)  # fmt: skip
from bench.store.results import ResultStore

ICOUNT = (
    "QEMU runs this guest with -icount: its clock advances with executed instructions, not real time, and its "
    "agent cannot hold inputs for a replay on that clock (no `hold` cap), so no latency was measured"
)


PACE_FIGURES = (("replay_send_error_p99", "send error"), ("replay_release_error_p99", "release error, device clock"))


def pace_reason(stored: dict) -> str | None:
    """Why a device's replay was off pace (its send or release error P99 over the seed's alignment), or None."""
    for name, what in PACE_FIGURES:
        m = stored.get(name)
        if m is not None and m.value is not None and m.value / 1e6 > SEED_ALIGNMENT_MS:
            return f"{what} P99 {m.value / 1e6:.1f} ms > the seed's +-{SEED_ALIGNMENT_MS} ms alignment"
    return None


def no_data_reason(rule: MetricRule, stored: dict) -> str | None:
    """Why a device's run has no figure for `rule` when the cause is known: no power meter, or one too slow for
    per-decision energy (None: the verdict's own "no ... measurement in this run" stands)."""
    if rule.measurement not in METERED:
        return None
    if "power_mean" not in stored:
        return "no power meter on this device (its fleet entry has no `energy` table: docs/lab-control.md)"
    m = stored.get(rule.measurement)
    if m is not None and TOO_SLOW in m.flags:
        return f"the meter cannot resolve single decisions ({SLOW_RULE}): energy per session only"
    if m is not None and ACTIVE in m.flags:
        return f"the meter cannot resolve single decisions ({SLOW_RULE}): their active energy over their number only"
    return None


def too_few_reason(decisions: int | None) -> str:
    """Why a figure of a meter too coarse for single decisions says nothing confident: the run played fewer than
    the decisions it is taken over (bench.measure.energy.ACTIVE_DECISIONS)."""
    return (f"too few decisions ({decisions or 0} of the {ACTIVE_DECISIONS} the figure is taken over: another, "
            "shorter stretch of the session than its baseline runs')")  # fmt: skip


def busy_reason(
    store: ResultStore, data: dict | None, thresholds: Thresholds, baseline_runs: tuple[int, ...]
) -> str | None:
    """Why the bench host counts as busy during a run whose stored host noise is `data`, or None when it was not (or
    was not measured): other processes (and steal) took more than `busy_others_pct` of it, and more by
    `busier_margin_pct` than during any of the baseline runs (a host that is always as busy has that noise in the
    window's spread already), or more than `starved_others_pct` whatever the baseline runs had (the bench got too
    little of the host to measure)."""
    if not data or "others_pct" not in data:
        return None
    noise = HostNoise.from_json(data)
    rules = thresholds.host
    if not noise.busy(rules.busy_others_pct):
        return None
    if noise.busy(rules.starved_others_pct):
        return f"{noise.describe()}: over {rules.starved_others_pct:g}%, the bench was starved"
    usual = max((HostNoise.from_json(store.verdicts.host_of(r) or {}).load_pct for r in baseline_runs), default=0.0)
    if noise.load_pct <= usual + rules.busier_margin_pct:
        return None
    return f"{noise.describe()}; at most {usual:.0f}% in its baseline runs"


def judge_run(
    store: ResultStore,
    run_id: int,
    thresholds: Thresholds,
    *,
    against: int | None = None,
    pinned: int | None = None,
    devices: list[str] | None = None,
    window_runs: tuple[int, ...] | None = None,
) -> list[Verdict]:
    """Verdicts of run `run_id` (only `devices`, if given). The baseline windows end before run `against`
    (default: this run) or at the `pinned` run; with `window_runs` they are those runs (a pre-merge check's
    baseline replays) and no drift is looked for. A night the window passes is suspected when the whole series of
    judged nights before it, with it, drifted; a suspected night is also named a drift when it is a regression that
    keeps growing (bench.results.drift; neither against a pinned baseline, which does not move). A suspected
    regression of a host-timed metric on a virtual device while the bench host was busier than during its baseline
    runs (or starved) is INCONCLUSIVE; not a figure counted in instructions (counted()). Every counted figure of a
    device replayed on its own clock that was given its inputs otherwise than in its baseline runs is INCONCLUSIVE,
    naming the difference (bench.results.played), whatever it showed; so is an energy figure taken over fewer
    decisions than it needs (too_few_reason)."""
    (record,) = store.reading.runs([run_id], [store.runs.run(run_id)])  # the run is read once, up front
    prints = store.reading.fingerprints([run_id])[run_id]
    host = store.verdicts.host_of(run_id)
    row = record.run
    verdicts = []
    for part in (d for d in record.devices.values() if d.listed):
        dev = part.row
        if devices is not None and dev.name not in devices:
            continue
        fp = prints.get(dev.name, {})
        virtual = bool(fp.get("virtual", False))
        icount = fp.get("clock") == "icount"
        stored = {m.name: m for m in part.measurements}
        pace = pace_reason(stored)
        played: dict[tuple[int, ...], str | None] = {}  # baseline runs -> how the run was given its inputs otherwise
        for rule in thresholds.rules:
            m = stored.get(rule.measurement)
            count = counted(rule, fp, m.flags if m else ())
            if count and rule.icount_threshold_pct is not None:
                rule = replace(rule, threshold_pct=rule.icount_threshold_pct)
            base = window(
                store, row.session or "", dev.name, rule.measurement,
                before=against or run_id, size=thresholds.baseline_runs, pinned=pinned, only=window_runs,
            )  # fmt: skip
            verdict = judge(rule, dev.name, m.value if m else None, m.samples if m else None, base, m.unit if m else "")
            if verdict.status == NO_DATA and (why := no_data_reason(rule, stored)):
                verdict = replace(verdict, reason=why)
            fixed = pinned is not None or window_runs is not None  # a window that does not move
            if not fixed and m is not None and m.value is not None:
                verdict = drift_check(store, row.session or "", rule, verdict, base, run_id, m.value, against or run_id)
            if rule.bench_clock and icount and fp.get("latency_clock") != "device":
                verdict = not_applicable(verdict, ICOUNT)
            elif rule.replay_paced and pace:
                verdict = off_pace(verdict, pace)
            elif virtual and rule.host_timed and not count and verdict.status == SUSPECTED:
                busy = busy_reason(store, host, thresholds, verdict.baseline_runs)
                verdict = host_busy(verdict, busy) if busy else verdict
            elif count and fp.get("latency_clock") == "device":
                runs = verdict.baseline_runs
                if runs not in played:
                    played[runs] = played_difference(store, run_id, dev.name, runs)
                verdict = played_otherwise(verdict, played[runs]) if played[runs] else verdict
            if m is not None and SHORT in m.flags:
                verdict = short_stretch(verdict, too_few_reason(m.samples))
            verdicts.append(verdict)
    return verdicts


# energy figures of single decisions: counted on a core whose meter's samples follow its counted clock
DECISION_ENERGY = frozenset({"energy_per_decision_p50", "energy_per_decision_p99", "energy_per_decision_mean"})


def counted(rule: MetricRule, fingerprint: dict, flags: tuple[str, ...] = ()) -> bool:
    """Whether the rule's figure is counted in instructions, not timed by the host, on the device of `fingerprint`
    (`flags`: those of the run's measurement). On a QEMU -icount clock, a figure of compute alone (inference t0..t1,
    where the clock advances only with executed instructions). On a microcontroller's counted core (COUNTED_TIMING:
    the virtual ESP32-C6), also energy per decision from the inference marker: its virtual meter's samples are the
    counted clock and draw the running current over each marked inference, so a decision's energy is its counted
    time. On an icount guest, energy per decision from a meter on the guest's own clock (DEVICE_CLOCK): its stand-in
    sensor's power follows the guest's counted busy time, and the decisions' span is counted time. Not frame
    timing, jitter or mean power: an idle core's clock follows the host's real time, and so its load; nor a guest's
    energy from a meter that samples on the bench clock (tegrastats)."""
    if fingerprint.get("clock") != "icount":
        return False
    if rule.measurement in CATALOGUE and CATALOGUE[rule.measurement].histogram == COMPUTE:
        return True
    if rule.measurement not in DECISION_ENERGY:
        return False
    return DEVICE_CLOCK in flags or (MARKER in flags and fingerprint_timing(fingerprint) == COUNTED_TIMING)


def drift_check(
    store: ResultStore,
    session: str,
    rule: MetricRule,
    verdict: Verdict,
    base: Window,
    run_id: int,
    value: float,
    before: int,
) -> Verdict:
    """`verdict` as a suspected drift when there is one with `value` (run `run_id`'s) as the newest night, the
    stored nights being those before run `before`: for a night the window passed, a drift of the series of judged
    nights (find_drift); for a suspected night, a creep of the regression's nights since `base`, the window it was
    judged against (find_creep). Else `verdict` as it is."""
    if verdict.status == UNCHANGED:
        ids, values = series(store, session, verdict.device, rule.measurement, before=before, limit=SERIES_NIGHTS)
        found = find_drift(rule, [*ids, run_id], [*values, value], verdict.n_baseline)
    elif verdict.status == SUSPECTED and base.run_ids:
        ids, values = regression_nights(store, session, verdict.device, rule.name, rule.measurement,
                                        after=max(base.run_ids), before=before, limit=SERIES_NIGHTS)  # fmt: skip
        found = find_creep(rule, [*ids, run_id], [*values, value], base)
    else:
        found = None
    return as_drift(verdict, found) if found else verdict


def acceptance(verdicts: list[Verdict], device: str, status: str) -> tuple[bool, str]:
    """Whether a device's run joins later baselines: a finished run with no confirmed or inconclusive regression.
    A run on a busy host that showed nothing suspect does join: the window then holds the noise this bench host
    really has, and a host that is always busy still gets a baseline."""
    if status not in ("ok", "running"):
        return False, f"device status {status}"
    bad = [v.metric for v in verdicts if v.device == device and v.status in (REGRESSION, INCONCLUSIVE)]
    if bad:
        return False, "regressed: " + ", ".join(bad)
    return True, ""
