"""Model updates of a run, kept with the results: stored in the device's `info` (key "ota") by whoever ran
them, read back as OtaTransfer records for the report.

    append_ota(store, run_id, update, kind="pi5")   # after each rollout, per DeviceUpdate

Note: `ResultStore.add_device` replaces a device's row (and its info); write OTA records after anything
that (re)adds the device to the run, e.g. after the replay stage.
"""

from __future__ import annotations

from typing import Any

from bench.report.runview import OtaTransfer
from bench.store.results import ResultStore


def append_ota(store: ResultStore, run_id: int, update: Any, *, kind: str) -> None:
    """Keep one rollout result (a `bench.ota.rollout.DeviceUpdate`) with the run, after the device's earlier ones."""
    rows = {d.name: d for d in store.runs.devices(run_id)}
    if update.device not in rows:
        store.runs.add_device(run_id, update.device, kind)
    earlier = rows[update.device].info.get("ota", []) if update.device in rows else []
    store.runs.update_device(run_id, update.device, ota=[*earlier, ota_record(update)])


def ota_record(update: Any) -> dict[str, Any]:
    """The JSON kept for one `bench.ota.rollout.DeviceUpdate` (anything with its fields)."""
    data = update.to_json() if hasattr(update, "to_json") else dict(update)
    keep = ("ok", "target", "previous", "running", "delta", "blocks", "bytes", "retransmits", "transfer_ms",
            "verify_ms", "switch_ms", "detail", "kept_previous", "channel")  # fmt: skip
    return {k: data.get(k) for k in keep}


def ota_transfers(info: dict[str, Any]) -> list[OtaTransfer]:
    """The OtaTransfer records in a device's stored info (none when it has no "ota" key)."""
    return [_transfer(r) for r in info.get("ota", []) if isinstance(r, dict)]


def model_label(model: dict[str, Any] | None) -> str:
    """name@version of a model description from an agent's hello ("" when unknown)."""
    if not model:
        return ""
    return f"{model.get('name', '?')}@{model.get('version', '?')}"


def _transfer(r: dict[str, Any]) -> OtaTransfer:
    if r.get("ok"):
        result = "ok"
    else:
        kept = "old model kept" if r.get("kept_previous") else "device state unknown"
        result = f"failed: {r.get('detail') or 'no detail'} ({kept})"
    return OtaTransfer(
        model_from=model_label(r.get("previous")),
        model_to=str(r.get("target") or model_label(r.get("running"))),
        delta=bool(r.get("delta")),
        bytes_sent=int(r.get("bytes") or 0),
        blocks=int(r.get("blocks") or 0),
        retransmits=int(r.get("retransmits") or 0),
        transfer_ms=float(r.get("transfer_ms") or 0.0),
        verify_ms=float(r.get("verify_ms") or 0.0),
        switch_ms=float(r.get("switch_ms") or 0.0),
        result=result,
        channel=str(r.get("channel") or "coap"),
    )
