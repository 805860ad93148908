"""Many bench hosts through labgrid, end to end: a real labgrid coordinator and two bench hosts on loopback
(`hilbench lab serve`, each running its virtual ESP32-C6 and a real labgrid-exporter), `hilbench flash` and
`hilbench replay` reaching the boards only through their places, results of both hosts in one PostgreSQL
database. One coordinator and the two hosts are shared by the module's tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.alerts import table as alert_table
from bench.alerts.night import night_alerts
from bench.config.fleet import load_fleet
from bench.core.errors import ExitCode
from bench.lab.acquire import lab_devices
from bench.lab.client import LabClient
from bench.replay.recording import write_session
from bench.replay.synth import synth_session
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO, hilbench
from tests.nightly_history import store_night

pytestmark = pytest.mark.e2e

FLEET = """
[bench]
name = "lab-ci"

[lab]
coordinator = "127.0.0.1:{port}"
acquire_timeout_s = {timeout}

[[device]]
name = "c6-a"
kind = "esp32c6"
virtual = true
place = "ci-c6-a"
lab_host = "bench-a"
replay_budget_s = 45  # a counted core: its loop ends on its own clock, as the bundled fleet's C6s
lab_tags = {{ board = "esp32c6", bench = "a" }}

[[device]]
name = "c6-b"
kind = "esp32c6"
virtual = true
place = "ci-c6-b"
lab_host = "bench-b"
replay_budget_s = 45  # as c6-a's
lab_tags = {{ board = "esp32c6", bench = "b" }}

[[device]]
name = "any-c6"
kind = "esp32c6"
lab_tags = {{ board = "esp32c6" }}
"""


ADDRESSES = {"bench-a": "127.0.0.1", "bench-b": "127.0.0.2"}  # two loopback addresses: two hosts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """The coordinator, the bench hosts' `hilbench lab serve` processes and the fleet files."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.fleet = root / "lab.toml"
        self.fleet.write_text(FLEET.format(port=port, timeout=40))
        self.short_fleet = root / "lab-short.toml"  # same places, a 2 s acquire deadline
        self.short_fleet.write_text(FLEET.format(port=port, timeout=2))
        self.serving: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}

    def env(self, **extra: str) -> dict[str, str]:
        """A job's environment: its own state folder (jobs never start the lab's boards)."""
        return {**os.environ, "COLUMNS": "200", "HILBENCH_STATE_DIR": str(self.root / "job-state"), **extra}

    def serve(self, host: str) -> dict[str, str]:
        """Start bench host `host` (its own state folder and address, like another machine); return its
        boards' URLs."""
        address = ADDRESSES[host]
        proc = subprocess.Popen(
            hilbench("lab", "serve", "--fleet", str(self.fleet), "--host", host, "--address", address, "--json"),
            cwd=REPO, stdout=subprocess.PIPE, stderr=open(self.root / f"{host}.err", "ab"), text=True,  # noqa: SIM115
            env={**os.environ, "HILBENCH_STATE_DIR": str(self.root / f"{host}-state")},
        )  # fmt: skip
        text = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            text += line
            with contextlib.suppress(ValueError):
                doc = json.loads(text)
                break
        else:
            raise AssertionError(f"lab serve {host} exited: {(self.root / f'{host}.err').read_text()[-2000:]}")
        self.serving[host] = proc
        self.urls.update(doc["devices"])
        return doc["devices"]

    def stop(self, host: str) -> None:
        """Stop bench host `host` (exporter first, then its boards)."""
        proc = self.serving.pop(host)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)

    def run(self, *args: str, fleet: Path | None = None, timeout: float = 300, **env: str):
        """Run `hilbench ARGS --fleet FLEET` as a job."""
        argv = hilbench(*args, "--fleet", str(fleet or self.fleet))
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=self.env(**env))

    def places(self) -> dict:
        """`hilbench lab places --json`."""
        done = self.run("lab", "places", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("lab")
    port = _free_port()
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "labgrid.remote.coordinator", "-l", f"127.0.0.1:{port}"],
        cwd=root, stdout=open(root / "coordinator.log", "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
    )  # fmt: skip
    the_lab = Lab(root, port)
    try:
        for _ in range(100):  # until it listens
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        the_lab.serve("bench-a")
        the_lab.serve("bench-b")
        synced = the_lab.run("lab", "sync", "--json")
        assert synced.returncode == 0, synced.stderr
        assert "add place ci-c6-a" in json.loads(synced.stdout)["changed"]
        yield the_lab
    finally:
        for host in list(the_lab.serving):  # exporters go before the coordinator
            the_lab.stop(host)
        coordinator.terminate()
        coordinator.wait(timeout=10)


@contextlib.asynccontextmanager
async def _holding(lab: Lab, *places: str, owner: tuple[str, str] = ("other-host", "ci-job-17")):
    """Another job (another host's identity) holding `places`."""
    async with LabClient(f"127.0.0.1:{lab.port}", *owner) as other:
        for place in places:
            await other.acquire(place, time.monotonic() + 5)
        try:
            yield other
        finally:
            for place in places:
                await other.release(place)


async def _first_holder(lab: Lab, place: str, timeout_s: float) -> str | None:
    """Who holds `place` as soon as someone does (None if nobody does within `timeout_s`)."""
    async with LabClient(f"127.0.0.1:{lab.port}", "observer", "ci") as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await client.refresh()
            if holder := client.places()[place].acquired:
                return holder
            await asyncio.sleep(0.05)
    return None


def test_sync_is_idempotent_and_places_carry_the_fleet(lab: Lab) -> None:
    again = lab.run("lab", "sync", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] == []
    places = lab.places()
    assert set(places) == {"ci-c6-a", "ci-c6-b"}
    assert places["ci-c6-a"]["tags"] == {"board": "esp32c6", "bench": "a", "hb_fleet": "lab_ci"}
    assert places["ci-c6-b"]["matches"] == ["bench-b/c6-b/*"]


def test_flash_and_replay_across_both_hosts_into_one_postgresql_history(lab: Lab, tmp_path: Path, pg_url: str) -> None:
    flashed = lab.run("flash", "--device", "c6-a", "--device", "c6-b", "--logs", str(tmp_path / "flash"), "--json")
    assert flashed.returncode == ExitCode.OK, flashed.stderr[-3000:]
    assert "Traceback" not in flashed.stderr and "grpc" not in flashed.stderr
    assert {d["name"]: d["ok"] for d in json.loads(flashed.stdout)["devices"]} == {"c6-a": True, "c6-b": True}
    for name in ("c6-a", "c6-b"):  # the driver got the port the place yields (rfc2217, ser2net-safe options)
        url = f"rfc2217://{ADDRESSES['bench-' + name[-1]]}:{lab.urls[name].rsplit(':', 1)[1]}"
        assert lab.urls[name] == url  # the board listens where its bench host is reached
        assert f"on {url}?ign_set_control" in (tmp_path / "flash" / f"{name}.log").read_text()
    assert all(p["acquired"] is None for p in lab.places().values())  # released after the run

    # both bench hosts' replays at once, writing one PostgreSQL history
    session = tmp_path / "dialogue.mcap"
    write_session(session, synth_session("dialogue", 21, duration_s=3.0))
    jobs = {
        name: subprocess.Popen(
            hilbench(
                "replay",
                "--fleet",
                str(lab.fleet),
                "--device",
                name,
                "--session",
                str(session),
                "--results",
                pg_url,
                "--logs",
                str(tmp_path / f"logs-{name}"),
                "--json",
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=lab.env(),
        )
        for name in ("c6-a", "c6-b")
    }
    docs = {}
    for name, job in jobs.items():
        stdout, stderr = job.communicate(timeout=300)
        assert job.returncode == ExitCode.OK, stderr[-3000:]
        docs[name] = json.loads(stdout)
    with open_store(pg_url) as store:
        assert sorted(r.id for r in store.runs.latest()) == sorted(d["run_id"] for d in docs.values())
        for name, doc in docs.items():
            (dev,) = doc["devices"]
            assert dev["status"] == "ok" and dev["frames"] > 30
            # nothing lost: every frame and input the run reported is in the shared database
            assert store.frames.frame_count(doc["run_id"], name) == dev["frames"]
            assert len(store.frames.inputs(doc["run_id"], name)) == dev["inputs_sent"]
            # a counted board plays its fixed span of the session (replay_span_s), so it may be sent fewer
            assert 0 < dev["inputs_sent"] <= doc["inputs"]
            assert {m.name for m in store.measures.measurements(doc["run_id"], name)} >= {"fps", "decision_latency_p50"}


def test_an_alert_acknowledged_on_one_bench_host_is_acknowledged_on_the_other(lab: Lab, pg_url: str) -> None:
    # nights of the lab's shared PostgreSQL history, judged and alerted by the nightly's own steps
    rules, rng = load_thresholds(), np.random.default_rng(8)
    heavier = ("inference_latency_p50", "decision_latency_p50")
    with open_store(pg_url) as store:
        for _ in range(6):
            store_night(store, rules, rng, devices=("c6-a", "c6-b"))
        store_night(store, rules, rng, slower={"c6-b": 1.4}, models={"c6-b": "1" * 64}, devices=("c6-a", "c6-b"),
                    moved=heavier)  # fmt: skip
        (alert,) = alert_table.select(store)  # one cause, one alert: both figures the model moved
    acked = lab.run("alerts", "ack", str(alert.id), "--owner", "maria", "--note", "v2 is heavier", "--results", pg_url,
                    LG_HOSTNAME="bench-a")  # fmt: skip
    assert acked.returncode == 0, acked.stderr
    shown = lab.run("alerts", "show", str(alert.id), "--json", "--results", pg_url, LG_HOSTNAME="bench-b")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert (doc["state"], doc["owner"], doc["device"]) == ("acknowledged", "maria", "c6-b")
    assert sorted(m["metric"] for m in doc["metrics"]) == ["inference_p50", "latency_p50"]
    assert doc["events"][-1]["actor"].endswith("@bench-a")  # who acknowledged it, and on which host
    listed = lab.run("alerts", "list", "--json", "--results", pg_url, LG_HOSTNAME="bench-b")
    assert [(a["id"], a["state"]) for a in json.loads(listed.stdout)] == [(alert.id, "acknowledged")]
    with open_store(pg_url) as store:  # the next bad night (any host's) joins the acknowledged alert
        run = store_night(store, rules, rng, slower={"c6-b": 1.4}, models={"c6-b": "1" * 64}, devices=("c6-a", "c6-b"),
                          moved=(*heavier, "mem_peak"))  # fmt: skip
        night = night_alerts(store, [run], rules.alerts)
    assert night.new == [] and [(a.id, a.state) for a in night.known] == [(alert.id, "acknowledged")]
    assert night.failing == [] and len(night.known[0].metrics) == 3  # a third figure the same model moved joins it


PYTEST_DEVICE_TEST = """
import pathlib

def test_on_the_lab_board(device):
    pathlib.Path("link.txt").write_text(device.link.url)
"""


def test_pytest_plugin_runs_device_tests_on_a_lab_place(lab: Lab, tmp_path: Path) -> None:
    (tmp_path / "test_board.py").write_text(PYTEST_DEVICE_TEST)
    argv = [sys.executable, "-m", "pytest", "test_board.py", "--fleet", str(lab.fleet), "--device", "c6-b",
            "-p", "no:cacheprovider", "-q"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**lab.env(), "PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert (tmp_path / "link.txt").read_text() == f"{lab.urls['c6-b']}?ign_set_control"
    assert lab.places()["ci-c6-b"]["acquired"] is None  # released at the end of the session


@pytest.mark.slow  # opt-in (--run-slow): the lease-wait path is also covered by tests/robustness/test_leases_cli.py
def test_a_busy_place_is_waited_for_until_the_deadline_then_named(lab: Lab, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _holding(lab, "ci-c6-a"):
            t0 = time.monotonic()
            busy = await asyncio.to_thread(lab.run, "flash", "--device", "c6-a", fleet=lab.short_fleet)
            waited = time.monotonic() - t0
            assert busy.returncode == ExitCode.UNREACHABLE, busy.stderr
            assert "'ci-c6-a' is still held by other-host/ci-job-17" in busy.stderr and waited >= 2
            assert "Traceback" not in busy.stderr  # a user error, not a stack dump
            async with _holding(lab, "ci-c6-b", owner=("third-host", "ci-job-18")):  # every esp32c6 place taken
                any_busy = await asyncio.to_thread(lab.run, "flash", "--device", "any-c6", fleet=lab.short_fleet)
            assert any_busy.returncode == ExitCode.UNREACHABLE
            assert "ci-c6-a (other-host/ci-job-17)" in any_busy.stderr
            assert "ci-c6-b (third-host/ci-job-18)" in any_busy.stderr

        # waited for, then had: the holder lets go after 1 s, within the job's deadline
        fleet = load_fleet(lab.fleet)
        async with _holding(lab, "ci-c6-a") as other:
            release = asyncio.get_running_loop().call_later(
                1.0, lambda: asyncio.ensure_future(other.release("ci-c6-a"))
            )
            t0 = time.monotonic()
            async with lab_devices([fleet.get("c6-a")]) as held:
                assert time.monotonic() - t0 >= 0.9
                assert held.places == {"c6-a": "ci-c6-a"}
                assert held.devices[0].link.url.endswith(lab.urls["c6-a"].rsplit(":", 1)[1] + "?ign_set_control")
                assert lab.places()["ci-c6-a"]["acquired"] == held.owner
            release.cancel()
            await other.acquire("ci-c6-a", time.monotonic() + 5)  # released on exit: free for the next job

    asyncio.run(scenario())


@pytest.mark.slow  # opt-in (--run-slow): the janitor and SIGTERM place tests below run by default
def test_an_exporter_restarting_mid_run_is_reacquired_on_its_new_port(lab: Lab, tmp_path: Path) -> None:
    fleet = load_fleet(lab.fleet)

    async def held_across_a_restart() -> None:  # a nightly holds its places over all stages
        async with lab_devices([fleet.get("c6-a")]) as held:
            before = held.devices[0].link.url
            await asyncio.to_thread(lab.stop, "bench-a")
            after = (await asyncio.to_thread(lab.serve, "bench-a"))["c6-a"]
            (dev,) = await held.relink(held.devices)
            assert dev.link.url == f"{after}?ign_set_control" != before
            assert lab.places()["ci-c6-a"]["acquired"] == held.owner  # held all along

    asyncio.run(held_across_a_restart())

    old = lab.urls["c6-a"]
    lab.stop("bench-a")  # the bench host goes away; a job starts meanwhile and waits for the board
    job = subprocess.Popen(
        hilbench("flash", "--fleet", str(lab.fleet), "--device", "c6-a", "--logs", str(tmp_path / "flash"), "--json"),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=lab.env(),
    )  # fmt: skip
    time.sleep(2.0)
    new = lab.serve("bench-a")["c6-a"]
    assert new != old
    _, stderr = job.communicate(timeout=300)
    assert job.returncode == ExitCode.OK, stderr[-3000:]
    log = (tmp_path / "flash" / "c6-a.log").read_text()
    assert f"on {new}?ign_set_control" in log and old not in log


def test_a_job_stopped_with_sigterm_releases_its_place(lab: Lab, tmp_path: Path) -> None:
    session = tmp_path / "long.mcap"
    write_session(session, synth_session("dialogue", 5, duration_s=30.0))
    job = subprocess.Popen(
        hilbench("replay", "--fleet", str(lab.fleet), "--device", "c6-a", "--session", str(session),
                 "--results", str(tmp_path / "r.sqlite"), "--json"),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=lab.env(),
    )  # fmt: skip
    try:
        assert asyncio.run(_first_holder(lab, "ci-c6-a", timeout_s=60))
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert lab.places()["ci-c6-a"]["acquired"] is None


def test_a_job_killed_with_sigkill_leaves_a_place_the_janitor_frees(lab: Lab, tmp_path: Path) -> None:
    session = tmp_path / "long.mcap"
    write_session(session, synth_session("dialogue", 5, duration_s=30.0))
    job = subprocess.Popen(
        hilbench("replay", "--fleet", str(lab.fleet), "--device", "c6-b", "--session", str(session),
                 "--results", str(tmp_path / "r.sqlite"), "--json"),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=lab.env(),
    )  # fmt: skip
    try:
        holder = asyncio.run(_first_holder(lab, "ci-c6-b", timeout_s=60))
        assert holder and re.fullmatch(rf"{re.escape(socket.gethostname())}/hb\.[^.]+\.{job.pid}\.\d+", holder)
        os.kill(job.pid, signal.SIGKILL)
        job.wait(timeout=10)
    finally:
        if job.poll() is None:
            job.kill()
    assert lab.places()["ci-c6-b"]["acquired"] == holder  # labgrid's lock outlives the job

    async def someone_elses() -> None:  # a live job of another host is never touched
        async with _holding(lab, "ci-c6-a"):
            swept = lab.run("lab", "janitor", "--json")
            assert swept.returncode == 0, swept.stderr
            doc = json.loads(swept.stdout)
            assert doc["released"] == [{"place": "ci-c6-b", "holder": holder}]
            assert doc["kept"] == [
                {"place": "ci-c6-a", "holder": "other-host/ci-job-17", "why": "not a bench job of this host"}
            ]

    asyncio.run(someone_elses())
    assert lab.places()["ci-c6-b"]["acquired"] is None
