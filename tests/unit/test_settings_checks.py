"""Settings checks are part of each field: an override cannot drop them, a number without a range is refused, and
docs/extending.md's Pi 4 example is valid with the error text the fleet loader really prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.config.kinds import KINDS, Settings, WebSettings
from bench.core.errors import ConfigError
from bench.core.fields import SettingError
from tests.conftest import REPO

EXTENDING = REPO / "docs" / "extending.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", EXTENDING.read_text(encoding="utf-8"), re.S)


def test_a_number_added_without_a_range_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"Pi4Settings.n: a numeric setting needs a range"):
        type("Pi4Settings", (Settings,), {"__annotations__": {"n": "int"}, "n": 3})


def test_a_web_device_memory_limit_is_range_checked() -> None:
    with pytest.raises(SettingError, match=r"-5 is out of range \(must be 0 to 1048576\)"):
        WebSettings(memory_limit_mb=-5)


def test_the_documented_pi4_kind_keeps_its_ranges_and_fails_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind_code = next(b for b in _blocks("python") if "class Pi4Settings" in b)
    namespace: dict = {}
    monkeypatch.setitem(KINDS, "pi4", None)  # the example registers pi4: gone again after this test
    exec(compile("from bench.config.kinds import *\n" + kind_code, str(EXTENDING), "exec"), namespace)
    pi4 = namespace["Pi4Settings"]
    assert pi4().fps_target == 20 and pi4(fps_target=15).fps_target == 15
    with pytest.raises(SettingError, match="out of range"):
        pi4(fps_target=5000)
    with pytest.raises(SettingError, match="out of range"):
        pi4(memory_limit_mb=-5)
    fleet_text = next(b for b in _blocks("toml") if 'kind = "pi4"' in b)
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(fleet_text.replace("fps_target = 15", "fps_target = 5000"))
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "pi4").write_text("key")
    assert KINDS["pi4"].settings is pi4
    with pytest.raises(ConfigError) as caught:
        load_fleet(fleet)
    documented = next(b for b in _blocks("text") if "out of range" in b).strip()
    assert str(caught.value).splitlines()[0] == documented.replace("FLEET", str(fleet))
