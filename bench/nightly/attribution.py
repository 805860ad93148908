"""Attribution by replay: which changed component made a confirmed regression.

With one fingerprint change against the baseline, that change is the cause (with the regression's figure).
With more than one, the device is replayed once per changed component with that component put back to the
baseline's (from the artefacts kept by sha256, bench.bundles.artefacts), the others new; the confirm replay of the new
set is the control. A component whose put-back makes the regression go away is the cause:
"cause: model (09c5… -> c84a…): with the old firmware and the new model +41%; with the old model and the new
firmware +0.4%". A component the bench cannot put back (the agent bundle: the bench deploys its own checkout's;
an OS image: the fleet's) is named with why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.bundles.artefacts import ArtefactStore
from bench.config.fleet import Device
from bench.results.judge import judge_run
from bench.results.thresholds import Thresholds
from bench.results.verdict import REGRESSION, SUSPECTED, Verdict
from bench.store.results import ResultStore

# component -> its fingerprint field
COMPONENTS = {"model": "model_sha256", "firmware": "firmware_sha256", "agent": "agent_bundle", "OS image": "os_image"}
NOT_PUT_BACK = {
    "agent": "the bench deploys its own checkout's agent (the old bundle is kept; bisect with `hilbench bisect --git`)",
    "OS image": "an OS image is the fleet's to write (`hilbench flash --os` with the old image)",
}

# replay(devices) -> the stored run's id; deploy(device) puts what the device's settings name on it
Replay = Callable[[list[Device]], Awaitable[int]]
Deploy = Callable[[Device], Awaitable[None]]


@dataclass
class Attribution:
    """Which component of a device's fingerprint change reproduces its regression."""

    device: str
    metric: str
    changed: dict[str, tuple[str | None, str | None]]  # component -> (baseline's, this run's)
    control_pct: float | None  # the new set's effect (the regression as confirmed)
    put_back: dict[str, float | None] = field(default_factory=dict)  # component put back -> the effect then
    runs: dict[str, int] = field(default_factory=dict)  # component put back -> the replay's run
    not_put_back: dict[str, str] = field(default_factory=dict)  # component -> why not
    cause: str | None = None
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def changed_components(new: dict[str, Any], old: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """The components whose sha differs between two fingerprints of a device."""
    return {c: (old.get(k), new.get(k)) for c, k in COMPONENTS.items() if old.get(k) != new.get(k)}


def put_back(device: Device, component: str, sha: str | None, artefacts: ArtefactStore) -> Device | str:
    """`device` with `component` set to the baseline's artefact `sha`, or why that cannot be done."""
    if component in NOT_PUT_BACK:
        return NOT_PUT_BACK[component]
    kept = (artefacts.source(sha) if component == "model" else artefacts.path(sha)) if sha else None
    if kept is None:
        return f"the baseline's {component} ({_short(sha)}) was not kept in {artefacts.root}"
    return device.with_settings(**{component: str(kept)})


def _short(sha: str | None) -> str:
    return (sha or "-")[:4] + "…" if sha and len(sha) > 8 else str(sha)


def _pct(value: float | None) -> str:
    return "no figure" if value is None else f"{value:+.1f}%"


async def attribute(
    store: ResultStore,
    run_id: int,
    regression: Verdict,
    device: Device,
    thresholds: Thresholds,
    replay: Replay,
    deploy: Deploy,
    *,
    pinned: int | None = None,
) -> Attribution | None:
    """The cause of `regression` (a confirmed one of `device` in run `run_id`), by replay when more than one
    component changed; None when its baseline run is unknown or no component changed."""
    if not regression.baseline_runs:
        return None
    new = store.verdicts.fingerprints(run_id).get(device.name, {})
    old = store.verdicts.fingerprints(max(regression.baseline_runs)).get(device.name, {})
    changed = changed_components(new, old)
    if not changed:
        return None
    control = _effect(regression.baseline_value, regression.confirm_value) or regression.effect_pct
    result = Attribution(device.name, regression.metric, changed, control)
    if len(changed) == 1:
        ((component, (was, now)),) = changed.items()
        result.cause = component
        result.text = f"cause: {component} ({_short(was)} -> {_short(now)}), the only change: {_pct(control)}"
        return result
    artefacts = ArtefactStore.of(store)
    removes = []
    for component, (was, _now) in changed.items():
        variant = put_back(device, component, was, artefacts)
        if isinstance(variant, str):
            result.not_put_back[component] = variant
            continue
        await deploy(variant)
        again = await replay([variant])
        result.runs[component] = again
        verdict = next(
            (v for v in judge_run(store, again, thresholds, against=run_id, pinned=pinned, devices=[device.name])
             if v.metric == regression.metric),
            None,
        )  # fmt: skip
        result.put_back[component] = verdict.effect_pct if verdict else None
        if verdict is not None and verdict.status != SUSPECTED:
            removes.append(component)
    result.cause = removes[0] if len(removes) == 1 else None
    result.text = _text(result, removes)
    return result


def _effect(base: float | None, value: float | None) -> float | None:
    return (value / base - 1.0) * 100.0 if base and value is not None else None


def _text(result: Attribution, removes: list[str]) -> str:
    parts = []
    for component, pct in result.put_back.items():
        others = [c for c in result.changed if c != component]
        parts.append(f"with the old {component} and the new {' and '.join(others)} {_pct(pct)}")
    parts += [f"{c} not put back: {why}" for c, why in result.not_put_back.items()]
    parts.append(f"the new set (control) {_pct(result.control_pct)}")
    detail = "; ".join(parts)
    if result.cause is not None:
        was, now = result.changed[result.cause]
        return f"cause: {result.cause} ({_short(was)} -> {_short(now)}): {detail}"
    if len(removes) > 1:
        return f"cause: {' and '.join(removes)} (each put back removes it): {detail}"
    return f"cause not found by replay (no single component put back removes it): {detail}"


def regressions_of(verdicts: list[Verdict]) -> dict[str, Verdict]:
    """device -> its confirmed regression with the largest effect."""
    worst: dict[str, Verdict] = {}
    for v in sorted((v for v in verdicts if v.status == REGRESSION), key=lambda v: v.effect_pct or 0.0):
        worst[v.device] = v  # the largest effect comes last
    return worst
