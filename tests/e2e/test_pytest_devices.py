"""The `agent`, `console` and `devices` fixtures in real pytest runs (pytester) against virtual devices: session
scope, recovery after a test broke the device, expect timeouts and not_matching, the multi-device marker, a
broken device reported in one line, and crash decoding attached to the failing test."""

from __future__ import annotations

import json
import re
import socket
from html import unescape
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import REPO

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.e2e

FIRMWARE = REPO / "firmware" / "esp32c6" / "host-clock-vm.bin"


def fleet_file(path: Path, *devices: str) -> Path:
    """A fleet file of `[[device]]` tables (TOML bodies)."""
    path.write_text("".join(f"[[device]]\n{body}\n" for body in devices))
    return path


def run(pytester: pytest.Pytester, fleet: Path, *args: str) -> tuple[pytest.RunResult, dict[str, ElementTree.Element]]:
    """Run pytest in a subprocess with the bench plugin; the result and the JUnit test cases by name."""
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--fleet", str(fleet), f"--junitxml={junit}", "--hil-log-dir", str(pytester.path / "logs"),
        "-p", "no:cacheprovider", "-rsE", "-v", "-W", "ignore::pytest.PytestWarning", *args, timeout=900,
    )  # fmt: skip
    cases = {c.get("name"): c for c in ElementTree.parse(junit).getroot().iter("testcase")} if junit.exists() else {}
    return result, cases


def status(case: ElementTree.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def props(case: ElementTree.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


LIFECYCLE = r"""
import pytest

PIDS = []


def agent_pid(agent):
    return agent.driver.agent.pid


def test_1_ready(agent, console):
    info = agent.hello()
    assert info["platform"] and info["model"]
    assert agent.infer([0.0] * 48)["act"] is not None
    console.expect_exact("[bench] ready:", timeout=1)  # brought up for this first test
    PIDS.append(agent_pid(agent))


def test_2_same_agent_for_the_next_test(agent, console):
    assert agent_pid(agent) == PIDS[0]  # no redeploy, no restart between tests
    assert not any("ready:" in text for text in console.text())  # this test's lines only


def test_3_expect_finds_the_fault_line(agent, console):
    agent.update("forged-v2")
    console.expect(r"\[fault\].*'kind': 'signature'", timeout=30)


def test_4_expect_times_out(console):
    console.expect("never printed", timeout=0.5)


def test_5_not_matching_fails_at_once(agent, console):
    agent.update("forged-v2")
    console.expect("never printed", timeout=60, not_matching=[r"\[fault\]"])


def test_6_kills_the_agent(agent):
    conn = agent.loop.run(agent.driver.connection())
    agent.loop.run(conn.run(f"kill -9 {agent_pid(agent)}"))


def test_7_gets_a_recovered_device(agent, console):
    assert agent.hello()["model"]
    assert agent_pid(agent) != PIDS[0]
    console.expect_exact("recovered by 'restart agent' (agent did not answer", timeout=1)
"""


def readme_example() -> str:
    """The test file shown in the README's "Write a device test" section."""
    section = (REPO / "README.md").read_text().split("## Write a device test", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_agent_and_console_fixtures_on_a_linux_board(pytester: pytest.Pytester) -> None:
    fleet = fleet_file(pytester.path / "fleet.toml", 'name = "pi5-x"\nkind = "pi5"\nvirtual = true')
    pytester.makepyfile(test_lifecycle=LIFECYCLE, test_readme=readme_example())
    result, cases = run(pytester, fleet)
    out = result.stdout.str()
    assert status(cases.pop("test_forged_update_is_refused[pi5-x]")) == "passed", out  # the README, unchanged
    outcomes = {name.split("[")[0]: status(case) for name, case in cases.items()}
    assert outcomes == {
        "test_1_ready": "passed",
        "test_2_same_agent_for_the_next_test": "passed",
        "test_3_expect_finds_the_fault_line": "passed",
        "test_4_expect_times_out": "failure",
        "test_5_not_matching_fails_at_once": "failure",
        "test_6_kills_the_agent": "passed",
        "test_7_gets_a_recovered_device": "passed",
    }, out
    timeout_case = cases["test_4_expect_times_out[pi5-x]"]
    assert "no line matching never printed within 0.5 s" in timeout_case.find("failure").get("message")
    assert float(timeout_case.get("time")) < 10
    forbidden = cases["test_5_not_matching_fails_at_once[pi5-x]"]
    assert "ConsoleForbidden" in forbidden.find("failure").get("message")
    assert float(forbidden.get("time")) < 45  # failed at the fault line, not after the 60 s timeout
    assert "[fault]" in props(forbidden)["crash pi5-x"]  # the fault line is the crash sign attached
    # logs: each test's console lines, stamped on the bench clock, in its own folder; the session's agent log
    logs = pytester.path / "logs"
    fault_log = next(logs.glob("*test_3_expect*/pi5-x.console.log")).read_text()
    assert re.search(r"^\d+\.\d{6} agent +\[fault\] ", fault_log, re.MULTILINE), fault_log
    session_console = (logs / "_session" / "pi5-x" / "pi5-x.console.log").read_text()
    assert session_console.count("[bench] ready:") == 1  # deployed and started once for the seven tests
    assert (logs / "_session" / "pi5-x" / "pi5-x.agent.log").is_file()


MULTI = r"""
import threading

import pytest


@pytest.mark.devices(2, kind="pi5")
def test_one_updates_while_the_other_serves(devices):
    a, b = devices
    assert sorted(d.name for d in devices) == ["pi5-x", "pi5-y"]
    done = {}
    updating = threading.Thread(target=lambda: done.setdefault("update", a.update("v2")))
    updating.start()
    served = 0
    while updating.is_alive():
        assert b.infer([0.2] * 48)["model"] == 1
        served += 1
    updating.join()
    assert done["update"].ok and served > 0
    assert a.hello()["model"]["version"] == 2 and b.hello()["model"]["version"] == 1


@pytest.mark.devices(3, kind="pi5")
def test_needs_three(devices):
    pass


@pytest.mark.kinds("esp32c6")
def test_on_the_dead_board(agent):
    pass


@pytest.mark.kinds("esp32c6")
def test_on_the_dead_board_again(agent):
    pass
"""


def test_devices_marker_and_a_broken_device(pytester: pytest.Pytester) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed: a board that is off
    fleet = fleet_file(
        pytester.path / "fleet.toml",
        'name = "pi5-x"\nkind = "pi5"\nvirtual = true',
        'name = "pi5-y"\nkind = "pi5"\nvirtual = true',
        f'name = "c6-dead"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{port}"\nfirmware = "{FIRMWARE}"',
    )
    pytester.makepyfile(test_multi=MULTI)
    result, cases = run(pytester, fleet)
    out = result.stdout.str()
    assert status(cases["test_one_updates_while_the_other_serves"]) == "passed", out
    assert status(cases["test_needs_three"]) == "skipped"
    assert "needs 3 devices of kind pi5" in cases["test_needs_three"].find("skipped").get("message")
    dead = cases["test_on_the_dead_board[c6-dead]"].find("error")
    assert dead is not None, out
    assert (
        dead.get("message").startswith('failed on setup with "Failed: device c6-dead: ')
        and "\n" not in dead.get("message").strip()
    )
    again = cases["test_on_the_dead_board_again[c6-dead]"].find("skipped")
    assert again is not None and "device c6-dead: " in again.get("message") and "found broken" in again.get("message")
    assert re.search(r"ERROR .*test_on_the_dead_board\[c6-dead\] - Failed: device c6-dead", out), out
    assert "Connection refused (recovery tried: restart agent, redeploy" in dead.get("message")


CRASH = r"""
def test_1_agent_crashes(agent, console):
    agent.run(lambda s: s.send_raw(b"\x03"))  # Ctrl-C on the serial console: KeyboardInterrupt in the agent
    console.expect("KeyboardInterrupt", timeout=20)
    assert False, "the agent crashed"


def test_2_gets_it_back(agent, console):
    assert agent.hello()["model"]
    console.expect_exact("recovered by 'restart agent'", timeout=1)
"""


def test_micropython_crash_is_decoded_into_the_reports(pytester: pytest.Pytester) -> None:
    fleet = fleet_file(pytester.path / "fleet.toml", 'name = "c6-x"\nkind = "esp32c6"\nvirtual = true')
    pytester.makepyfile(test_crash=CRASH)
    html = pytester.path / "report.html"
    result, cases = run(pytester, fleet, f"--html={html}", "--self-contained-html")
    out = result.stdout.str()
    assert status(cases["test_1_agent_crashes[c6-x]"]) == "failure", out
    assert status(cases["test_2_gets_it_back[c6-x]"]) == "passed", out
    crash = props(cases["test_1_agent_crashes[c6-x]"])["crash c6-x"]
    assert crash.startswith("device c6-x: KeyboardInterrupt")
    assert re.search(r"npc_agent\.py:\d+ in \w+ -> micropython/npc_agent\.py:\d+: \S", crash), crash
    assert "device c6-x crash" in out  # the report section, in the terminal
    blob = re.search(r'data-jsonblob="([^"]*)"', html.read_text()).group(1)
    tests = json.loads(unescape(blob))["tests"]
    extras = "".join(e["content"] for runs in tests.values() for r in runs for e in r["extras"])
    assert "micropython/npc_agent.py" in extras


XDIST_TESTS = r"""
import os


def test_hello(agent, record_property):
    record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
    assert agent.hello()["model"]


def test_infer(agent, record_property):
    record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
    assert agent.infer([0.0] * 48)["act"] is not None
"""


def test_each_device_on_one_xdist_worker(pytester: pytest.Pytester) -> None:
    """The project's own options (-n, --dist loadfile) over two files that use both devices: each device's tests
    run on one worker, the two devices on the two workers, and no worker waits for a device another holds."""
    fleet = fleet_file(
        pytester.path / "fleet.toml",
        'name = "pi5-x"\nkind = "pi5"\nvirtual = true',
        'name = "pi5-y"\nkind = "pi5"\nvirtual = true',
    )
    pytester.makepyfile(test_first=XDIST_TESTS, test_second=XDIST_TESTS)
    result, _ = run(pytester, fleet, "-n", "2", "--dist", "loadfile", "--lease-wait", "5")
    out = result.stdout.str()
    junit = ElementTree.parse(pytester.path / "junit.xml").getroot()
    ran = [c for c in junit.iter("testcase")]  # both files' tests (`cases` is by name: the files share names)
    assert len(ran) == 8 and {status(c) for c in ran} == {"passed"}, out
    workers = {}
    for case in ran:
        workers.setdefault(case.get("name").split("[")[1].rstrip("]"), set()).add(props(case)["worker"])
    assert all(len(w) == 1 for w in workers.values()), workers  # each device held by one worker
    assert workers["pi5-x"] != workers["pi5-y"], workers  # and the two devices served in parallel


@pytest.mark.slow  # opt-in (--run-slow): the whole hil/ suite; the fixtures it uses are tested above by default
def test_the_device_suite_passes_on_a_virtual_linux_board(pytester: pytest.Pytester) -> None:
    """The representative part of `pytest hil/` in the default run: its checks on one virtual Pi 5. Decision
    latency (on the bench clock) is left to `pytest hil/`: a shared CI host's load spikes would decide it."""
    fleet = fleet_file(pytester.path / "fleet.toml", 'name = "pi5-x"\nkind = "pi5"\nvirtual = true')
    result, cases = run(pytester, fleet, str(REPO / "hil"), "-k", "not decision_latency")
    out = result.stdout.str()
    outcomes = {name: status(case) for name, case in cases.items()}
    assert len(outcomes) == 7 and set(outcomes.values()) == {"passed"}, out
    measured = props(cases["test_fps_within_5_percent_of_target[pi5-x]"])
    assert 28.5 <= float(measured["fps [FPS]"]) <= 31.5


def test_the_device_suite_updates_a_virtual_c6_through_the_network_the_bench_grants_it(
    pytester: pytest.Pytester,
) -> None:
    """hil/'s CoAP update on one virtual ESP32-C6 (the counted core). Its Wi-Fi reaches only the host ports the bench
    grants it (bench.virtual.uplinks), so the plugin's stand-ins must be gated like the nightly's: an ungated one
    never hears from the update server ("block 0: no answer after 6 retransmissions")."""
    fleet = fleet_file(pytester.path / "fleet.toml", 'name = "c6-x"\nkind = "esp32c6"\nvirtual = true')
    result, cases = run(pytester, fleet, str(REPO / "hil" / "test_updates.py"), "-k", "coap_update")
    outcomes = {name: status(case) for name, case in cases.items()}
    assert outcomes == {"test_coap_update_completes_and_is_verified[c6-x]": "passed"}, result.stdout.str()
