"""`hilbench image build|show KIND`: the device images the bench builds itself (switch-arm64)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from bench.config.kinds import KINDS
from bench.core.console import emit_json, err, out
from bench.core.errors import ConfigError, ExitCode
from bench.core.paths import FIRMWARE_DIR
from bench.image.build import BuiltImage, build_image, cached_image


def image_kinds() -> list[str]:
    """Kinds whose system image the bench builds from a recipe."""
    return [k.name for k in KINDS.values() if k.image]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `image` command group."""
    image = sub.add_parser("image", help="build the device images the bench boots itself")
    isub = image.add_subparsers(dest="image_command", required=True)
    p = isub.add_parser("build", help="build an image from its recipe (reuses the cached build when unchanged)")
    p.add_argument("kind", help=f"image kind: {', '.join(image_kinds())}")
    p.add_argument("--force", action="store_true", help="rebuild even when the cached image matches the recipe")
    p.add_argument("--out", metavar="DIR", type=Path, help="images folder (default: the bench cache)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_build)
    p = isub.add_parser(
        "firmware", help="build the virtual ESP32-C6's counted firmware (MicroPython for RV32) and its flashable image"
    )
    p.add_argument("--force", action="store_true", help="rebuild even when the cached build matches its inputs")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_firmware)
    p = isub.add_parser("show", help="show the cached image for the current recipe (exit 1 if not built)")
    p.add_argument("kind", help=f"image kind: {', '.join(image_kinds())}")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_show)


def _check_kind(kind: str) -> None:
    if kind not in image_kinds():
        hint = f"recipes in {FIRMWARE_DIR}: {', '.join(image_kinds())}"
        raise ConfigError(f"no image recipe for kind {kind!r}", hint=hint)


def cmd_build(args: argparse.Namespace) -> int:
    """Build (or reuse) the image and print where it is."""
    _check_kind(args.kind)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True, disable=args.json) as bar:
        task = bar.add_task(f"image {args.kind}", total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"image {args.kind}: {what}")

        image = build_image(args.kind, root=args.out, force=args.force, progress=progress)
    _print(image, args.json)
    return ExitCode.OK


def cmd_firmware(args: argparse.Namespace) -> int:
    """Build (or reuse) the counted ESP32-C6 firmware; print its ELF and the image `hilbench flash --firmware`
    writes (a virtual board runs it on its counted core)."""
    from bench.bundles.c6_firmware import build_firmware, image_for

    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True, disable=args.json) as bar:
        task = bar.add_task("counted firmware", total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total or None, description=f"counted firmware: {what}")

        firmware = build_firmware(force=args.force, progress=progress)
        image = image_for(firmware.elf)
    if args.json:
        emit_json({**firmware.as_dict(), "image": str(image)})
        return ExitCode.OK
    verb = f"built in {firmware.seconds:.1f} s" if firmware.built else "cached (inputs unchanged)"
    out.print(f"[bold]counted ESP32-C6 firmware[/bold] {verb}: {firmware.elf}", soft_wrap=True)
    out.print(f"flashable image: {image}  (hilbench flash --firmware {image})", soft_wrap=True)
    return ExitCode.OK


def cmd_show(args: argparse.Namespace) -> int:
    """Print the cached image, or say it needs building."""
    _check_kind(args.kind)
    image = cached_image(args.kind)
    if image is None:
        if args.json:
            emit_json({"kind": args.kind, "built": False})
        else:
            out.print(
                f"{args.kind}: not built for the current recipe (run: hilbench image build {args.kind})", soft_wrap=True
            )
        return ExitCode.FAILED
    _print(image, args.json)
    return ExitCode.OK


def _print(image: BuiltImage, as_json: bool) -> None:
    if as_json:
        emit_json(image.as_dict())
        return
    verb = f"built in {image.seconds:.1f} s" if image.built else "cached (recipe unchanged)"
    out.print(f"[bold]{image.name}[/bold] {verb}: {image.folder}", soft_wrap=True)
    out.print(f"  kernel {image.kernel_release}  {image.kernel_bytes / 1e6:.1f} MB  sha256 {image.kernel_sha256[:16]}")
    out.print(
        f"  initrd {image.initrd_bytes / 1e6:.1f} MB (rootfs {image.rootfs_bytes / 1e6:.1f} MB)"
        f"  sha256 {image.initrd_sha256[:16]}"
    )
    if image.format == "disk":
        size = f"{image.disk_bytes / 1e6:.0f} MB sparse"
        out.print(f"  disk {image.disk} ({size}), bmap {image.bmap.name}", soft_wrap=True)
        out.print(f"  sha256 {image.disk_sha256}  (pin it as \\[device.os] sha256)", soft_wrap=True)
