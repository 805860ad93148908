"""The MicroPython agent's `update` transfer (docs/protocol.md `update`): the manifest's signature, version and
size (against the free heap) checked before anything is fetched, then the model (or a bsdiff4-zlib delta:
MicroPython has no bz2 for plain bsdiff4, applied to the running model) fetched over CoAP Block2 into updates/,
outside models/, streamed to flash block by block (the heap never holds the model twice). Imported only when an
update comes: it costs heap."""

import os

import npccoap
import npcmanifest
import wire
from npcmodels import Refused

MAX_MANIFEST = 4096  # bytes of a delta manifest (one is ~500)
FIGURES = ("blocks", "bytes", "retransmits", "transfer_us", "resumed_from", "restarts")


def _remove(path):
    try:  # noqa: SIM105 (MicroPython has no contextlib)
        os.remove(path)
    except OSError:
        pass


def fetch(agent, msg, manifest, url, allow, tmp):
    """Fetch what `update` request `msg` names into `tmp`; returns the `updated` reply's transfer figures. A refusal
    is reported as a fault and raised as Refused, with nothing of it left in updates/ but a resumable part."""
    models = agent.models
    timing = npccoap.Timing.from_json(msg.get("coap"))  # a bad field is bad_field before anything else
    try:
        models.check_signature(manifest)  # a forged manifest: nothing is fetched
        models.check_forward(manifest, allow)  # nor an older or foreign one
        models.check_fits(manifest)  # nor one the heap cannot hold
    except Refused as exc:
        models.refuse(exc, manifest)
        raise
    client = npccoap.Client(timing, on_wait=agent.serve_during_update)
    try:
        if msg.get("delta"):
            fetched = _fetch_delta(agent, client, url, manifest, tmp)
        else:
            fetched = client.fetch(url, tmp, manifest.get("sha256"), agent.serve_during_update, manifest.get("size"))
    except Refused as exc:
        _remove(tmp)  # a patched file that is refused is not kept
        models.refuse(exc, manifest)
        raise
    except (npccoap.FetchError, OSError, ValueError) as exc:  # ValueError: a patch that does not apply
        _remove(tmp)
        kind = getattr(exc, "kind", "parse" if isinstance(exc, ValueError) else "transfer")
        refused = Refused(kind, "%s: %s" % (url, exc))
        models.refuse(refused, manifest)
        raise refused
    finally:
        client.close()
    figures = {"delta_saved": 0}
    for k in FIGURES:
        figures[k] = fetched.get(k, 0)
    if msg.get("delta"):  # the model's size less what travelled (delta manifest and patch)
        figures["delta_saved"] = max(0, int(manifest.get("size", 0)) - figures["bytes"])
    return figures


def _fetch_delta(agent, client, url, manifest, path):
    """Fetch the signed delta manifest (`url`/manifest) and, once it checks out against the running model, the
    patch (`url`); apply it into `path`. Returns the transfer figures of both fetches."""
    import npcpatch
    import npcsig

    models = agent.models
    cur = models.current
    stats = client.fetch(url + "/manifest", path + ".delta", None, agent.serve_during_update, MAX_MANIFEST)
    dm = read_delta_manifest(path + ".delta")
    if models.key is None or not npcsig.verify_manifest(dm, models.key):
        raise Refused("signature", "delta manifest does not verify with the trusted key")
    if dm.get("algo") != "bsdiff4-zlib" or dm.get("target") != manifest.get("sha256"):
        raise Refused("hash", "the delta manifest is not a bsdiff4-zlib patch to this model")
    if cur is None or dm.get("base") != cur.manifest.get("sha256"):
        raise Refused("hash", "delta is against base %s, not the running model" % str(dm.get("base"))[:12])
    patch = client.fetch(url, path + ".patch", dm.get("patch_sha256"), agent.serve_during_update, dm.get("patch_size"))
    try:
        npcpatch.apply(cur.path, path + ".patch", path)
    finally:
        os.remove(path + ".patch")
    for k in FIGURES:
        if k != "resumed_from":
            stats[k] = stats.get(k, 0) + patch.get(k, 0)
    stats["resumed_from"] = patch.get("resumed_from", 0)
    return stats


def read_delta_manifest(path):
    """The delta manifest fetched into `path` (at most MAX_MANIFEST bytes), deleted once read: a JSON object nested
    at most wire.MAX_DEPTH deep whose fields have their types; Refused("parse") naming what is wrong otherwise."""
    import json

    try:
        with open(path, "rb") as f:
            body = f.read(MAX_MANIFEST + 1)
    finally:
        _remove(path)
    try:
        if len(body) > MAX_MANIFEST or not wire.shallow(body):
            raise ValueError("over %d B or %d levels" % (MAX_MANIFEST, wire.MAX_DEPTH))
        return npcmanifest.fields(json.loads(body), "delta manifest")
    except (ValueError, RuntimeError, MemoryError) as exc:
        raise Refused("parse", "not a delta manifest: %s" % exc)
