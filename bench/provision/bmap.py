"""Writing an image with bmaptool and checking what reached the storage against the bmap.

Before anything is touched, `check_against_image` holds the bmap to the image it came with: ranges in
order, inside the image (the bmap's image size is the image's), each range's checksum computed from the image
(decompressed as it is read, for .xz/.bz2/.gz/.zst/.lz4 images). A bmap that lies (a wrong checksum, a range
past the image's end) is refused while the board still runs what it had: bmaptool alone finds it only
partway through the write, with the board powered off and its disk half written (issue 31).

`bmaptool copy` writes only the mapped blocks and checks the image's data against the bmap's sha256 per
range as it reads it (a damaged download or image file fails there). Afterwards the bench reads every
mapped range back from the storage and checks the same sha256s, which catches what went wrong on the
way (a flaky card, reader or cable): bmaptool itself does not read back.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import io
import lzma
import os
import shutil
import stat
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bench.core.errors import BenchError, ConfigError
from bench.provision.controls import run_command

_CHUNK = 1 << 20


class BmapMismatch(BenchError):
    """Data on the storage (or in the image) does not match the bmap's checksums."""


class BmapRefused(ConfigError):
    """The bmap does not describe its image: refused before the board was touched."""


@dataclass(frozen=True)
class BlockMap:
    """A bmap file: block size, image size and the mapped ranges (first, last block, sha256)."""

    path: Path
    block_size: int
    image_size: int
    checksum: str
    ranges: tuple[tuple[int, int, str], ...]

    @property
    def mapped_bytes(self) -> int:
        """How many bytes the ranges cover."""
        return sum((last - first + 1) * self.block_size for first, last, _ in self.ranges)


def read_bmap(path: Path) -> BlockMap:
    """Parse a bmap (format 1.x/2.x); ConfigError naming the file when it is not one."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        hint = f"make it with: bmaptool create -o {path} IMAGE"
        raise ConfigError(f"bmap {path} does not exist", hint=hint) from None
    except ET.ParseError as exc:
        raise ConfigError(f"bmap {path}: not a bmap file ({exc})") from None
    try:
        block_size = int(root.findtext("BlockSize", "").strip())
        image_size = int(root.findtext("ImageSize", "").strip())
        checksum = (root.findtext("ChecksumType") or "sha1").strip()
        ranges = []
        for item in root.iter("Range"):
            text = (item.text or "").strip()
            first, _, last = text.partition("-")
            ranges.append((int(first), int(last or first), item.get("chksum", "")))
    except ValueError as exc:
        raise ConfigError(f"bmap {path}: malformed ({exc})") from None
    if checksum not in ("sha256", "sha1"):
        raise ConfigError(f"bmap {path}: unsupported checksum type {checksum!r}")
    return BlockMap(path, block_size, image_size, checksum, tuple(ranges))


_DECOMPRESSORS = {".zst": ["zstd", "-dc"], ".lz4": ["lz4", "-dc"]}


@contextlib.contextmanager
def _image_stream(image: Path) -> Iterator[BinaryIO]:
    """The image's bytes as bmaptool reads them: decompressed (stdlib for .xz/.bz2/.gz, the `zstd`/`lz4`
    programs for .zst/.lz4, as bmaptool itself does)."""
    suffix = image.suffix.lower()
    if suffix in (".gz", ".bz2", ".xz"):
        opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
        with opener(image, "rb") as fh:
            yield fh
        return
    if suffix in _DECOMPRESSORS:
        argv = _DECOMPRESSORS[suffix]
        if shutil.which(argv[0]) is None:
            raise ConfigError(
                f"image {image}: {argv[0]} is needed to check it against its bmap", hint=f"install {argv[0]}"
            )
        with subprocess.Popen([*argv, str(image)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            assert proc.stdout is not None
            try:
                yield proc.stdout
            finally:
                proc.kill()
        return
    with image.open("rb") as fh:
        yield fh


def check_against_image(bmap: BlockMap, image: Path, device: str) -> int:
    """Refuse (BmapRefused, naming the bmap and the image) a bmap whose ranges are out of order, reach past the
    image's end, or whose checksums differ from the image's own bytes; returns the bytes checked. Reads the
    image once, front to back, never holding more than one chunk."""
    name = f"{device}: bmap {bmap.path}"
    if bmap.block_size <= 0 or bmap.image_size <= 0:
        raise BmapRefused(f"{name}: block size {bmap.block_size} and image size {bmap.image_size} must be positive")
    end = -1
    for first, last, _ in bmap.ranges:
        if first < 0 or last < first or first <= end:
            raise BmapRefused(f"{name}: range {first}-{last} is empty, negative or out of order")
        if first * bmap.block_size >= bmap.image_size or last * bmap.block_size >= bmap.image_size:
            raise BmapRefused(
                f"{name}: range {first}-{last} runs past the end of the image ({bmap.image_size} bytes)",
                hint=f"make the bmap from this image: bmaptool create -o {bmap.path} {image}",
            )
        end = last
    checked, at = 0, 0
    hint = f"the bmap belongs to another image, or one of them is damaged: bmaptool create -o {bmap.path} {image}"
    try:
        with _image_stream(image) as fh:
            for first, last, expected in bmap.ranges:
                start = first * bmap.block_size
                left = min((last - first + 1) * bmap.block_size, bmap.image_size - start)
                at += _skip(fh, start - at)
                if at != start:
                    break
                h = hashlib.new(bmap.checksum)
                while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
                    h.update(chunk)
                    left -= len(chunk)
                    at += len(chunk)
                    checked += len(chunk)
                if left:
                    break
                if h.hexdigest() != expected:
                    raise BmapRefused(
                        f"{name}: the checksum of blocks {first}-{last} is not that of {image.name}'s bytes there",
                        hint=hint,
                    )
            at += _skip(fh, bmap.image_size - at + 1)  # the image's true size (one byte more: is it longer?)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise BmapRefused(f"{name}: cannot read the image {image} to check it: {exc}") from None
    if at != bmap.image_size:
        has = "more" if at > bmap.image_size else str(at)
        raise BmapRefused(f"{name}: says the image has {bmap.image_size} bytes, {image.name} has {has}", hint=hint)
    return checked


def _skip(fh: BinaryIO, n: int) -> int:
    """Move `n` bytes on (a seek in a plain file: a sparse image's holes are not read; compressed streams are
    read away); returns how many bytes there were."""
    if isinstance(fh, io.BufferedReader) and stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        at = fh.tell()
        to = min(at + max(0, n), os.fstat(fh.fileno()).st_size)
        fh.seek(to)
        return to - at
    done = 0
    while done < n and (chunk := fh.read(min(_CHUNK, n - done))):
        done += len(chunk)
    return done


async def write_image(image: Path, bmap: Path, target: Path, log: Path | None, device: str,
                      timeout_s: float, on_line: Callable[[str], None] | None = None) -> None:  # fmt: skip
    """`bmaptool copy --bmap BMAP IMAGE TARGET` (also decompresses .xz/.bz2/.gz/.zst images).
    BmapMismatch when bmaptool finds the image's data does not match the bmap."""
    if shutil.which("bmaptool") is None:
        raise ConfigError("bmaptool is not installed", hint="apt-get install bmap-tools")
    try:
        await run_command(["bmaptool", "copy", "--bmap", str(bmap), str(image), str(target)],
                          f"{device}: bmaptool copy", timeout_s, log, on_line=on_line)  # fmt: skip
    except BenchError as exc:
        if "checksum" in str(exc).lower():  # bmaptool: "checksum mismatch for blocks range ..."
            raise BmapMismatch(
                f"{device}: the image {image.name} does not match its bmap {bmap.name}: {exc}",
                hint="the image file is damaged or the bmap belongs to another image; nothing trustworthy was written",
            ) from None
        raise


def verify_written(
    bmap: BlockMap, target: Path, device: str, progress: Callable[[int, int], None] | None = None
) -> int:
    """Read every mapped range back from `target` and check its checksum; returns the bytes checked.
    BmapMismatch naming the first bad range (its byte offsets) when the storage holds something else."""
    done, total = 0, bmap.mapped_bytes
    bad: list[str] = []
    with target.open("rb") as fh:
        for first, last, expected in bmap.ranges:
            h = hashlib.new(bmap.checksum)
            fh.seek(first * bmap.block_size)
            left = (last - first + 1) * bmap.block_size
            left = min(left, max(0, bmap.image_size - first * bmap.block_size))
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
                done += len(chunk)
            if h.hexdigest() != expected or left:
                start, end = first * bmap.block_size, (last + 1) * bmap.block_size
                bad.append(f"blocks {first}-{last} (bytes {start}-{end})")
            if progress is not None:
                progress(done, total)
    if bad:
        more = f" and {len(bad) - 1} more range(s)" if len(bad) > 1 else ""
        raise BmapMismatch(
            f"{device}: read-back of {target} does not match the bmap {bmap.path.name}: {bad[0]}{more}",
            hint="the write was corrupted on its way to the storage (card, reader, cable); the board was not booted",
        )
    return done
