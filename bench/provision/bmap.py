"""Writing an image with bmaptool and checking what reached the storage against the bmap.

`bmaptool copy` writes only the mapped blocks and checks the image's data against the bmap's sha256 per
range as it reads it (a damaged download or image file fails there). Afterwards the bench reads every
mapped range back from the storage and checks the same sha256s, which catches what went wrong on the
way (a flaky card, reader or cable): bmaptool itself does not read back.
"""

from __future__ import annotations

import hashlib
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError, ConfigError
from bench.provision.controls import run_command

_CHUNK = 1 << 20


class BmapMismatch(BenchError):
    """Data on the storage (or in the image) does not match the bmap's checksums."""


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
