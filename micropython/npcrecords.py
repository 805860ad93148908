"""The frame and fault records both reference agents send (docs/protocol.md), built in one place.

Runs under MicroPython and CPython 3.8+: deployed unchanged to both agents, like npcsched.py.
"""


def frame_record(slot, act, p, seq, version):
    """The `frame` message of one display frame: its scheduling `slot` (npcsched.Slot), the decision
    (`act`, its probability `p`; None when nothing ran), the last input `seq` and the model `version`."""
    rec = {
        "t": "frame",
        "i": slot.i,
        "vsync": slot.vsync,
        "due": slot.due,
        "ran": slot.t0 is not None,
        "act": act,
        "p": p,
        "seq": seq,
        "skip": slot.skip,
        "late": slot.late,
        "q": slot.q,
    }
    if slot.t0 is not None:
        rec["t0"] = slot.t0
        rec["t1"] = slot.t1
        rec["model"] = version
    return rec


def refused_record(kind, detail, t_fault, manifest, running_version):
    """A model the agent refused to load (`kind`: signature, hash, parse, ...); the running one is kept."""
    rec = {"t": "fault", "kind": kind, "detail": detail, "t_fault": t_fault}
    if isinstance(manifest, dict):
        model = {}
        for k in ("name", "version", "sha256"):
            if k in manifest:
                model[k] = manifest[k]
        rec["model"] = model
    if running_version is not None:
        rec["prev"] = {"version": running_version}
    return rec


def model_fault_record(cause, version, detail, t_fault):
    """The running model failed an inference (`cause`: crash or oom) outside probation."""
    return {"t": "fault", "kind": cause, "model": {"version": version}, "detail": detail, "t_fault": t_fault}


def rollback_record(cause, version, prev_version, t_switch, t_start, t_fault, rollback_us, detail):
    """A model in probation failed (`cause`) and the agent switched back to `prev_version`."""
    return {
        "t": "fault",
        "kind": "rollback",
        "cause": cause,
        "model": {"version": version},
        "prev": {"version": prev_version},
        "t_switch": t_switch,
        "t_start": t_start,
        "t_fault": t_fault,
        "rollback_us": rollback_us,
        "detail": detail,
    }
