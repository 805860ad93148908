"""Every setting is declared: each table of a fleet file is read into a `Declared` class (bench/core/fields.py),
no module reads a field of one by hand (`typed()` outside the fields module), and nothing asks a settings or
config object for an attribute by name (`getattr(settings, "x", default)` bypasses the declared types)."""

from __future__ import annotations

import ast
import dataclasses

from bench.config.fleet import _COMMON_KEYS, _PLACE_KEYS, DeviceFields
from bench.config.kinds import KINDS
from bench.links.spec import LinkFields
from tests.conftest import REPO

BENCH = REPO / "bench"
FIELDS = BENCH / "core" / "fields.py"
# what a settings or config object is called where it is read: a kind's settings, a table's spec, a device, a link
CONFIG_NAMES = {"settings", "spec", "cfg", "device", "dev", "link", "fleet", "lab", "energy", "power", "bench"}
TABLES = {"name", "kind", "power", "energy", "os", "qemu"}  # the identity, and tables declared by their own classes


def by_name(source: str) -> list[int]:
    """Lines of `source` where `getattr` reads a settings or config object's attribute by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            target = node.args[0]
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in CONFIG_NAMES:
                found.append(node.lineno)
    return found


def hand_read(source: str) -> list[int]:
    """Lines of `source` that read a fleet-file field by hand (`typed(raw, ...)`)."""
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "typed"]  # fmt: skip


def names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_a_planted_read_is_found_and_other_objects_are_not() -> None:
    planted = 'a = getattr(settings, "firmware", "")\nb = getattr(self.device.settings, "baud")\n'
    assert by_name(planted + 'c = getattr(device.link, "timing", None)\nd = getattr(exc, "hint", None)\n') == [1, 2, 3]
    assert hand_read('x = typed(raw, "baud", int, where, None)\ny = typed\n') == [1]


def test_no_settings_attribute_is_read_by_name_and_no_field_by_hand() -> None:
    files = sorted(BENCH.rglob("*.py"))
    found = [f"{p.relative_to(REPO)}:{n}" for p in files for n in by_name(p.read_text(encoding="utf-8"))]
    assert len(files) > 250 and found == [], "read the declared field instead:\n" + "\n".join(found)
    by_hand = [f"{p.relative_to(REPO)}:{n}" for p in files if p != FIELDS
               for n in hand_read(p.read_text(encoding="utf-8"))]  # fmt: skip
    assert by_hand == [], (
        "declare the field (bench.core.fields.Declared) and read it with settings_from:\n" + "\n".join(by_hand)
    )


def test_every_field_a_device_table_takes_is_declared() -> None:
    for name, kind in KINDS.items():
        taken = _COMMON_KEYS | _PLACE_KEYS | kind.link.fields | set(kind.setting_types())
        declared = names(DeviceFields) | names(LinkFields) | names(kind.settings) | TABLES
        assert taken <= declared, f"kind {name}: fields read but not declared: {sorted(taken - declared)}"
