"""Test support for OS provisioning: a small sparse image with its real bmap (bmaptool create), and bmaps made
to lie about it."""

from __future__ import annotations

import hashlib
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

IMAGE_BYTES = 4 << 20


def sparse_image(folder: Path) -> tuple[Path, Path]:
    """A 4 MiB sparse image in `folder` with data in three places, and its bmap (bmaptool create)."""
    path = folder / "small.img"
    with path.open("wb") as fh:
        fh.truncate(IMAGE_BYTES)
        for offset in (0, 1 << 20, 3 << 20):
            fh.seek(offset)
            fh.write(hashlib.sha256(str(offset).encode()).digest() * 512)
    bmap = folder / "small.img.bmap"
    subprocess.run(["bmaptool", "create", "-o", str(bmap), str(path)], check=True, capture_output=True)
    return path, bmap


def lying_bmap(bmap_path: Path, out: Path, edit: Callable[[ET.Element], None]) -> Path:
    """A copy of a real bmap at `out` with `edit(root)` applied to its XML."""
    tree = ET.parse(bmap_path)
    edit(tree.getroot())
    tree.write(out)
    return out


def bad_checksum(root: ET.Element) -> None:
    """The second range's checksum is wrong."""
    root.find("BlockMap").findall("Range")[1].set("chksum", "0" * 64)


def past_the_end(root: ET.Element) -> None:
    """The last range reaches 16 blocks past the image's end."""
    last = root.find("BlockMap").findall("Range")[-1]
    first = int(last.text.strip().split("-")[0])
    last.text = f" {first}-{int(root.findtext('BlocksCount')) + 15} "


def short_image(root: ET.Element) -> None:
    """The image is said to be 1 MiB: the ranges after it are outside."""
    root.find("ImageSize").text = " 1048576 "


def out_of_order(root: ET.Element) -> None:
    """The first range moved to the end."""
    bm = root.find("BlockMap")
    ranges = bm.findall("Range")
    bm.remove(ranges[0])
    bm.append(ranges[0])
