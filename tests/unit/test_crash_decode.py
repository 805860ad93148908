"""Crash decoding from console text: tracebacks mapped to the deployed sources, other crash signs, nothing."""

from bench.bundles import host_agent_sources
from bench.bundles.mpy_board import agent_files
from bench.testkit.crash import decode_crash
from tests.conftest import REPO

MPY_SOURCES = {p.name: p for p in agent_files()}


def test_micropython_traceback_maps_to_the_deployed_file_and_line():
    source = MPY_SOURCES["npc_agent.py"]
    line = next(i for i, text in enumerate(source.read_text().splitlines(), 1) if "def serve" in text) + 1
    console = [
        "npc_agent: deployed model npc-policy v1 loaded",
        "Traceback (most recent call last):",
        '  File "<stdin>", line 2, in <module>',
        f'  File "npc_agent.py", line {line}, in serve',
        '  File "/lib/missing.py", line 7, in gone',
        "KeyboardInterrupt: ",
        ">",
    ]
    crash = decode_crash("c6-a", console, MPY_SOURCES)
    assert crash is not None and crash.summary == "KeyboardInterrupt:"
    frames = {f.device_file: f for f in crash.frames}
    assert frames["npc_agent.py"].source == source and frames["npc_agent.py"].line == line
    assert frames["npc_agent.py"].code == source.read_text().splitlines()[line - 1].strip()
    assert frames["/lib/missing.py"].source is None and frames["<stdin>"].source is None
    text = crash.text()
    assert f"npc_agent.py:{line} in serve -> micropython/npc_agent.py:{line}:" in text
    assert "device c6-a: KeyboardInterrupt:" in text.splitlines()[0]


def test_cpython_traceback_skips_the_printed_source_lines():
    sources = host_agent_sources()
    console = [
        "Traceback (most recent call last):",
        '  File "/opt/npc/agent/npc_host_agent.py", line 3, in <module>',
        "    import asyncio",
        '  File "/usr/lib/python3/dist-packages/numpy/core.py", line 10, in f',
        "    x = 1",
        "MemoryError",
    ]
    crash = decode_crash("switch-1", console, sources)
    assert crash.summary == "MemoryError"
    assert [f.source for f in crash.frames] == [sources["npc_host_agent.py"], None]


def test_kernel_panic_shows_the_last_console_lines():
    console = [f"[    1.{i:03d}] boot line {i}" for i in range(30)] + [
        "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100"
    ]
    crash = decode_crash("switch-1", console, {})
    assert crash.summary.startswith("Kernel panic - not syncing: Attempted to kill init!")
    assert len(crash.lines) == 20 and crash.lines[-1] == console[-1]


def test_quiet_console_is_no_crash_unless_the_agent_is_gone():
    console = ["npc_agent: listening on 127.0.0.1:4000"]
    assert decode_crash("pi5-1", console, {}) is None
    crash = decode_crash("pi5-1", console, {}, why="the agent's link ended")
    assert crash.summary == "the agent's link ended" and crash.lines == tuple(console)


def test_sources_are_shown_relative_to_the_checkout():
    crash = decode_crash("x", ["Traceback (most recent call last):", '  File "wire.py", line 1', "ValueError: x"],
                         host_agent_sources())  # fmt: skip
    assert "-> bench/agent/wire.py:1:" in crash.text() and str(REPO / "bench") not in crash.text()
