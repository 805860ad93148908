"""Model update for the host (Linux) agent: fetch over CoAP Block2 with resume, verify, hand back a file.

The `update` handler of the host agent calls `fetch_update`; it returns the verified model file (hash and
ECDSA-P256 signature checked) and the transfer figures, and only then does the agent switch. Nothing here
touches the running model, so any failure leaves it in place.

Transfer: one block at a time (NSTART 1), written to `<target sha256>.part` as it arrives. Retransmission
is done here, on RFC 7252's schedule with the link's timing, so every retransmission is counted. A transfer
that gives up keeps its `.part`: the next `fetch_update` for the same target resumes from the last good
block (if the server's ETag still matches). A completed file whose hash is wrong (a corrupted block) is
discarded and fetched once more; a second mismatch is refused.

Bounds: nothing past the size the signed manifest gives is written (a delta manifest: MAX_MANIFEST bytes); a
block larger than its size, a short block that says more follow, a block size growing mid-transfer or an ETag
longer than RFC 7252's 8 bytes ends the transfer, as do more than MAX_RESTARTS changes of the ETag; each of
these refusals deletes what was written (nothing is kept for resume).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiocoap
import npc_bspatch  # deployed flat beside the agent
import npcmanifest
import wire
from aiocoap import error as coap_error
from aiocoap.numbers.codes import Code
from aiocoap.numbers.constants import TransportTuning
from aiocoap.optiontypes import BlockOption

BLOCK_SZX = 6  # 1024-byte blocks
MAX_RESTARTS = 3  # content changes (a new ETag) one fetch starts over for, then gives up
MAX_MANIFEST = 4096  # bytes of a delta manifest (one is ~500)
MAX_ETAG = 8  # bytes (RFC 7252 5.10.6)


@dataclass(frozen=True)
class Timing:
    """CoAP retransmission timing of this link (RFC 7252 names); the bench sends it as `coap` in `update`."""

    ack_timeout: float = 0.05
    ack_random_factor: float = 1.5
    max_retransmit: int = 6

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Timing:
        """From `{"ack_timeout_ms": .., "ack_random_factor": .., "max_retransmit": ..}`; missing keys default."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ValueError("coap must be an object of link timings")
        return cls(
            _bounded(data.get("ack_timeout_ms", 50), "ack_timeout_ms", 1, 60000) / 1000,
            float(_bounded(data.get("ack_random_factor", 1.5), "ack_random_factor", 1, 4)),
            int(_bounded(data.get("max_retransmit", 6), "max_retransmit", 0, 20, whole=True)),
        )


def _bounded(value: Any, name: str, low: float, high: float, *, whole: bool = False) -> float:
    """`value` when it is a number in [low, high] (the bench's own link-timing ranges, bench/ota/timing.py);
    ValueError (answered `bad_field`) for 1e308, NaN, true or a string."""
    ok = not isinstance(value, bool) and isinstance(value, int | float) and low <= value <= high
    if not ok or (whole and value != int(value)):
        raise ValueError(f"coap.{name}: {value!r} is outside {low:g}..{high:g}")
    return value


class _OneShot(TransportTuning):
    """Send a confirmable message once; it counts as lost after `wait` s (this module retransmits)."""

    ACK_RANDOM_FACTOR = 1.0
    MAX_RETRANSMIT = 0

    def __init__(self, wait: float) -> None:
        self.ACK_TIMEOUT = wait


@dataclass
class FetchStats:
    """Figures for one transfer (accumulated over retries of the same update)."""

    blocks: int = 0  # blocks received in this call
    bytes: int = 0  # payload bytes received in this call
    retransmits: int = 0
    resumed_from: int = 0  # first block requested (0: from the start)
    restarts: int = 0  # full re-fetches after an ETag change or a bad hash
    transfer_s: float = 0.0
    size: int = 0


class UpdateFailed(Exception):
    """The update was refused or could not complete; `kind` is the protocol's fault kind (or `transfer`)."""

    def __init__(self, kind: str, detail: str, stats: FetchStats | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.stats = stats or FetchStats()


class _BlockLost(Exception):
    pass


def _discard(part: Path) -> None:
    """Delete a refused transfer's file and its resume record: nothing refused is kept for resume."""
    part.unlink(missing_ok=True)
    part.with_name(part.name + ".json").unlink(missing_ok=True)


class _RoundTrip:
    """Round-trip estimate of one transfer (RFC 6298's SRTT/RTTVAR, from blocks answered at the first try).

    The first wait of a block is the link timing's, or SRTT + 4 RTTVAR when that is longer: a server busy with a
    whole fleet's rollout answers later than a quiet one, and a request resent because of that only adds work
    (a resent block is a new request to the server). On a quiet LAN the estimate stays under the link timing,
    so losses cost what they did."""

    def __init__(self) -> None:
        self.srtt = 0.0
        self.rttvar = 0.0

    def sample(self, rtt: float) -> None:
        if not self.srtt:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt

    def first_wait(self, timing: Timing, rng: random.Random) -> float:
        base = max(timing.ack_timeout, self.srtt + 4 * self.rttvar)
        return rng.uniform(base, base * timing.ack_random_factor)


async def _get_block(
    ctx: aiocoap.Context,
    url: str,
    num: int,
    szx: int,
    timing: Timing,
    stats: FetchStats,
    rng: random.Random,
    remote: Any,
    rtt: _RoundTrip,
) -> aiocoap.Message:
    wait = rtt.first_wait(timing, rng)
    for attempt in range(timing.max_retransmit + 1):
        if attempt:
            stats.retransmits += 1
        if remote is None:
            request = aiocoap.Message(code=Code.GET, uri=url, transport_tuning=_OneShot(wait))
        else:  # the address resolved for block 0 and its path: no URI parsing or name lookup per block
            request = aiocoap.Message(code=Code.GET, uri_path=remote[1], transport_tuning=_OneShot(wait))
            request.remote = remote[0]
        request.opt.block2 = BlockOption.BlockwiseTuple(num, False, szx)
        sent = time.monotonic()
        try:
            response = await ctx.request(request, handle_blockwise=False).response
        except coap_error.TimeoutError:
            wait *= 2
        else:
            if not attempt:  # Karn: a resent block's answer may belong to either request
                rtt.sample(time.monotonic() - sent)
            return response
    raise _BlockLost(f"block {num}: no answer after {timing.max_retransmit} retransmissions")


class _Broken(Exception):
    """The server broke a transfer bound: the transfer is refused (kind `hash` for content longer than the signed
    size, `transfer` for the protocol's other bounds) and its file deleted."""

    def __init__(self, detail: str, kind: str = "transfer") -> None:
        super().__init__(detail)
        self.kind = kind


def _refusing_broken_bounds(fetcher):
    """`fetcher` with a server's broken bound (`_Broken`) refused: its part file deleted, UpdateFailed raised."""

    @functools.wraps(fetcher)
    async def fetch(ctx, url: str, part: Path, timing: Timing, stats: FetchStats, *rest) -> Path:
        try:
            return await fetcher(ctx, url, part, timing, stats, *rest)
        except _Broken as exc:
            _discard(part)
            raise UpdateFailed(exc.kind, f"{url}: {exc}; nothing kept", stats) from None

    return fetch


@_refusing_broken_bounds
async def fetch(
    ctx: aiocoap.Context,
    url: str,
    part: Path,
    timing: Timing,
    stats: FetchStats,
    rng: random.Random,
    limit: int,
) -> Path:
    """Fetch `url` (at most `limit` bytes) into `part` block by block, resuming from what `part` already holds;
    return `part`.

    Raises UpdateFailed("transfer", ...) when a block gets no answer (the part file is kept for resume), or when
    the server breaks a bound (module docstring; the part file is deleted). A `grpc://` URL is fetched over the
    gRPC update channel instead (npc_grpc), with the same resume rule and limit."""
    if url.startswith("grpc://"):
        import npc_grpc  # deployed flat beside the agent; needs grpcio and protobuf

        try:
            return await npc_grpc.fetch(url, part, stats, limit)
        except npc_grpc.OverLimit as exc:
            raise _Broken(str(exc), "hash") from None
    meta_path = part.with_name(part.name + ".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() and part.is_file() else {}
    szx = BLOCK_SZX
    size = 1 << (szx + 4)
    num = part.stat().st_size // size if meta.get("etag") else 0  # the part is named by content: any URL may resume
    stats.resumed_from = num
    started = time.monotonic()
    remote = None
    rtt = _RoundTrip()
    with part.open("r+b" if num else "wb") as f:
        f.truncate(num * size)
        while True:
            try:
                response = await _get_block(ctx, url, num, szx, timing, stats, rng, remote, rtt)
            except _BlockLost as exc:
                stats.transfer_s += time.monotonic() - started
                raise UpdateFailed("transfer", f"{url}: {exc}; {num} blocks kept for resume", stats) from None
            if not response.code.is_successful():
                raise UpdateFailed("transfer", f"{url}: server answered {response.code}", stats)
            remote = (response.remote, response.request.opt.uri_path)
            if len(response.opt.etag or b"") > MAX_ETAG:
                raise _Broken(f"an ETag of {len(response.opt.etag)} bytes (at most {MAX_ETAG})")
            etag = (response.opt.etag or b"").hex()
            if meta.get("etag") not in (None, etag):  # content changed since the part was written: start over
                stats.restarts += 1
                if stats.restarts > MAX_RESTARTS:
                    raise _Broken(f"the content changed {stats.restarts} times during the transfer")
                meta, num = {}, 0
                f.seek(0)
                f.truncate(0)
                continue
            if not meta:
                meta = {"etag": etag}
                meta_path.write_text(json.dumps(meta))
            block = response.opt.block2
            if block is not None and block.size_exponent < szx and block.start == num * size:
                szx, size, num = block.size_exponent, block.size, block.block_number  # the server's smaller blocks
            if block is not None and block.size_exponent > szx:
                raise _Broken(f"block {num}: the server's block size grew to {block.size} B")
            if block is not None and block.block_number != num:
                raise UpdateFailed("transfer", f"{url}: asked for block {num}, got {block.block_number}", stats)
            _check_block(response, block, num, size, limit)
            f.seek(num * size)
            f.write(response.payload)
            f.flush()  # the last good block survives a crash of the agent
            stats.blocks += 1
            stats.bytes += len(response.payload)
            stats.size = response.opt.size2 or f.tell()
            num += 1
            if block is None or not block.more:
                break
    stats.transfer_s += time.monotonic() - started
    meta_path.unlink(missing_ok=True)
    return part


def _check_block(response: aiocoap.Message, block: Any, num: int, size: int, limit: int) -> None:
    """_Broken when block `num` (of `size` bytes) would write past `limit` bytes or is not a block's size."""
    n = len(response.payload)
    if n > size:
        raise _Broken(f"block {num} carries {n} B, more than its {size}")
    if block is not None and block.more and n != size:
        raise _Broken(f"block {num} carries {n} B of {size} and says more follow")
    if num * size + n > limit or (response.opt.size2 or 0) > limit:
        total = max(num * size + n, response.opt.size2 or 0)
        raise _Broken(f"the server sends {total} B or more, the manifest says {limit}", "hash")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(65536):
            h.update(chunk)
    return h.hexdigest()


async def _fetch_verified(
    ctx: aiocoap.Context,
    url: str,
    part: Path,
    sha256: str,
    timing: Timing,
    stats: FetchStats,
    rng: random.Random,
    limit: int,
) -> Path:
    """Fetch with resume; on a hash mismatch discard and fetch once more, then refuse."""
    for attempt in range(2):
        await fetch(ctx, url, part, timing, stats, rng, limit)
        if _sha256_file(part) == sha256:
            return part
        part.unlink()
        if attempt == 0:
            stats.restarts += 1
    raise UpdateFailed("hash", f"{url}: content hash differs from the manifest twice", stats)


@dataclass
class UpdateResult:
    """A verified model file ready to switch to, and the figures for the `updated` reply."""

    path: Path
    manifest: dict[str, Any]
    stats: FetchStats
    verify_s: float
    delta_saved: int  # model size minus the bytes a delta update transferred (0 for a full update)

    def figures(self) -> dict[str, Any]:
        """The `updated` reply's transfer fields."""
        return {
            "blocks": self.stats.blocks,
            "bytes": self.stats.bytes,
            "retransmits": self.stats.retransmits,
            "resumed_from": self.stats.resumed_from,
            "restarts": self.stats.restarts,
            "transfer_us": round(self.stats.transfer_s * 1e6),
            "verify_us": round(self.verify_s * 1e6),
            "delta_saved": self.delta_saved,
        }


async def _fetch_json(
    ctx: aiocoap.Context, url: str, part: Path, timing: Timing, stats: FetchStats, rng: random.Random
) -> dict[str, Any]:
    """A delta manifest: at most MAX_MANIFEST bytes, nested at most wire.MAX_DEPTH deep, an object whose
    fields have their types and sizes; UpdateFailed("parse") naming what is wrong otherwise."""
    await fetch(ctx, url, part, timing, stats, rng, MAX_MANIFEST)
    try:
        body = part.read_bytes()
        if not wire.shallow(body):
            raise ValueError(f"nested deeper than {wire.MAX_DEPTH}")
        return npcmanifest.fields(json.loads(body), "delta manifest")
    except (ValueError, RecursionError) as exc:
        raise UpdateFailed("parse", f"{url}: not a delta manifest: {exc}", stats) from None
    finally:
        _discard(part)


async def fetch_update(
    ctx: aiocoap.Context,
    url: str,
    manifest: dict[str, Any],
    signed: Callable[[dict[str, Any]], bool],
    workdir: Path,
    *,
    delta: bool = False,
    current: bytes | None = None,
    timing: Timing | None = None,
    rng: random.Random | None = None,
) -> UpdateResult:
    """Fetch the model `manifest` describes and return it verified as `workdir/<sha256>.bin`.

    `signed(m)` tells whether manifest `m` carries a valid signature by the trusted key. With `delta`,
    `url` names a bsdiff4 patch: its signed delta manifest is fetched from `url/manifest` first and checked
    (signature, base = the running model's bytes `current`, target = `manifest`), then the patch is fetched,
    checked and applied. Raises UpdateFailed; the running model is never touched."""
    timing = timing or Timing()
    rng = rng or random.Random()
    stats = FetchStats()
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if not signed(manifest):
        what = f"{manifest.get('name')}@{manifest.get('version')}"
        raise UpdateFailed("signature", f"manifest of {what} is not signed by the trusted key")
    verify_s = time.monotonic() - t0
    sha = manifest["sha256"]
    if not isinstance(sha, str) or len(sha) != 64 or not isinstance(manifest.get("size"), int):
        raise UpdateFailed("parse", "the manifest has no sha256 of 64 hex digits and size")
    target = workdir / f"{sha}.bin"
    if not delta:
        await _fetch_verified(ctx, url, workdir / f"{sha}.part", sha, timing, stats, rng, manifest["size"])
        (workdir / f"{sha}.part").replace(target)
    else:
        dm = await _fetch_json(ctx, url + "/manifest", workdir / f"{sha}.delta.json.part", timing, stats, rng)
        t0 = time.monotonic()
        if not signed(dm):
            raise UpdateFailed("signature", "delta manifest is not signed by the trusted key", stats)
        if dm.get("target") != sha:
            raise UpdateFailed("hash", "delta manifest's target is not the manifest's model", stats)
        base_sha = hashlib.sha256(current).hexdigest() if current is not None else None
        if dm.get("base") != base_sha:
            have, want = str(base_sha)[:12], str(dm.get("base"))[:12]
            raise UpdateFailed("hash", f"delta is against base {want}, the running model is {have}", stats)
        verify_s += time.monotonic() - t0
        patch_sha, patch_size = dm.get("patch_sha256"), dm.get("patch_size")
        if not isinstance(patch_sha, str) or len(patch_sha) != 64 or not isinstance(patch_size, int):
            raise UpdateFailed("parse", "the delta manifest has no patch_sha256 of 64 hex digits and patch_size", stats)
        patch_part = workdir / f"{patch_sha}.part"
        patch = await _fetch_verified(ctx, url, patch_part, patch_sha, timing, stats, rng, patch_size)
        try:
            target.write_bytes(npc_bspatch.apply_patch(current, patch.read_bytes()))
        except ValueError as exc:
            raise UpdateFailed("parse", str(exc), stats) from None
        finally:
            patch.unlink(missing_ok=True)
    t0 = time.monotonic()
    if _sha256_file(target) != sha or target.stat().st_size != manifest["size"]:
        target.unlink()
        raise UpdateFailed("hash", "model hash or size differs from the signed manifest", stats)
    verify_s += time.monotonic() - t0
    saved = max(0, manifest["size"] - stats.bytes) if delta else 0
    return UpdateResult(target, manifest, stats, verify_s, saved)
