"""Power meters: the fleet's `energy` table, the parsers on recorded real-format output, the Joulescope recording
reader, and energy per decision from samples and inference windows."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from bench.agent.frame import Frame
from bench.config.fleet import parse_fleet
from bench.core.errors import ConfigError
from bench.energy.hwmon import BenchHwmonMeter
from bench.energy.meters import meter_for
from bench.energy.parse import hwmon_power_mw, pmic_power_mw, pmic_rails, read_jls, tegrastats_power_mw
from bench.energy.ppk2_reader import Bins
from bench.energy.protocol import MeterError, PowerSample
from bench.energy.remote import DeviceHwmonMeter, PmicMeter, TegrastatsMeter, device_ns
from bench.energy.spec import HwmonSettings, Ppk2Settings, parse_energy
from bench.energy.supply import SupplyMeter, console_modelled, parse_supply
from bench.measure.device import DeviceMeasurements, add_energy
from bench.measure.energy import ACTIVE, ATTRIBUTED, DEVICE_CLOCK, MARKER, TOO_SLOW, Integrator, energy_figures
from bench.measure.records import OffsetClock

# tegrastats as printed by a Jetson Orin Nano (JetPack 6) and a Jetson Nano (JetPack 4)
ORIN = ("12-02-2026 02:20:43 RAM 2448/6480MB (lfb 4x4MB) SWAP 0/3240MB (cached 0MB) CPU [2%@729,0%@729,0%@729,"
        "0%@729,off,off] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[305] NVDEC off NVJPG off NVJPG1 off VIC off OFA off APE 200 "
        "cpu@49.5C soc2@48.156C soc0@48.531C gpu@48.062C tj@49.5C soc1@48.343C VDD_IN 4424mW/4424mW "
        "VDD_CPU_GPU_CV 483mW/483mW VDD_SOC 1450mW/1450mW")  # fmt: skip
NANO = ("RAM 1216/3956MB (lfb 101x4MB) SWAP 0/1978MB (cached 0MB) CPU [10%@102,5%@102,3%@102,2%@102] EMC_FREQ 0% "
        "GR3D_FREQ 0% PLL@26C CPU@29C PMIC@100C GPU@27.5C AO@35C thermal@28.25C POM_5V_IN 1239/1239 POM_5V_GPU 0/0 "
        "POM_5V_CPU 164/164")  # fmt: skip
# `vcgencmd pmic_read_adc` as printed by a Raspberry Pi 5 (firmware 2024-09), cut to four rails and the 5V input
PMIC = """     3V7_WL_SW_A current(0)=0.00000000A
       3V3_SYS_A current(1)=0.05270000A
      VDD_CORE_A current(7)=0.71556000A
       1V1_SYS_A current(5)=0.18837000A
     3V7_WL_SW_V volt(8)=3.71613800V
       3V3_SYS_V volt(9)=3.31094400V
      VDD_CORE_V volt(15)=0.88237450V
       1V1_SYS_V volt(13)=1.10622200V
         EXT5V_V volt(24)=5.14123000V
"""


def test_tegrastats_rails_of_orin_and_nano() -> None:
    assert tegrastats_power_mw(ORIN, "VDD_IN") == 4424.0
    assert tegrastats_power_mw(NANO, "POM_5V_IN") == 1239.0
    assert tegrastats_power_mw("not a tegrastats line", "VDD_IN") is None
    with pytest.raises(MeterError) as err:
        tegrastats_power_mw(NANO, "VDD_IN")
    assert "POM_5V_IN" in (err.value.hint or "")


def test_pmic_read_adc_sums_current_times_voltage() -> None:
    rails = pmic_rails(PMIC)
    assert set(rails) == {"3V7_WL_SW", "3V3_SYS", "VDD_CORE", "1V1_SYS"}  # EXT5V has a voltage, no current
    want = (0.0527 * 3.310944 + 0.71556 * 0.8823745 + 0.18837 * 1.106222) * 1000
    assert pmic_power_mw(PMIC) == pytest.approx(want)
    with pytest.raises(MeterError):
        pmic_power_mw('error=1 error_msg="Command not registered"')


RAILS = Path(__file__).resolve().parents[2] / "bench/virtual/linux_tools/rails"
PI5_IDLE_MW = (0.0527 * 3.310944 + 0.165976 * 1.801466 + 0.020496 * 1.111017 + 0.18837 * 1.106222
               + 0.33669 * 0.8010092 + 0.71556 * 0.8823745) * 1000  # fmt: skip


def _board(tmp_path: Path, uptime_cs: int, ran_ns: tuple[int, int]) -> dict[str, str]:
    """A virtual Pi 5's profile and kernel counters (uptime, each core's run time) for the rails' shell model."""
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "profile.json").write_text('{\n "cpus": 4,\n "idle_mw": 1605,\n "mw_per_load": 6100\n}\n')
    (tmp_path / "proc/uptime").write_text(f"{uptime_cs // 100}.{uptime_cs % 100:02d} 1.00\n")
    cpus = "".join(f"cpu{n} 0 0 0 0 0 0 {ns} 0 0\ndomain0 3 0 0\n" for n, ns in enumerate(ran_ns))
    (tmp_path / "proc/schedstat").write_text(f"version 15\ntimestamp 4294901048\n{cpus}")
    return {"HILBENCH_VIRTUAL": str(tmp_path), "HILBENCH_PROC": str(tmp_path / "proc"),
            "HILBENCH_RUN": str(tmp_path / "run"), "HILBENCH_WORK": str(tmp_path / "no-cgroup"),
            "PATH": "/usr/bin:/bin"}  # fmt: skip


def _rails(env: dict[str, str], *args: str) -> str:
    import subprocess

    return subprocess.run(["sh", str(RAILS), *args], env=env, capture_output=True, text=True, check=True).stdout


def test_the_rails_model_follows_each_cores_busy_time_since_the_last_reading(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    assert _rails(_board(tmp_path, 10_000, (0, 0)), "power", state) == "1605\n"  # the first: idle
    # 0.5 s later core 0 ran 0.25 s and core 1 0.5 s: 1.5 cores busy, of 4 loaded at +6100 mW
    assert _rails(_board(tmp_path, 10_050, (250_000_000, 500_000_000)), "power", state) == f"{1605 + 2287}\n"
    # within the same centisecond: idle, and the busy time goes to the next reading
    assert _rails(_board(tmp_path, 10_050, (260_000_000, 500_000_000)), "power", state) == "1605\n"
    assert _rails(_board(tmp_path, 10_100, (260_000_000, 500_000_000)), "power", state) == f"{1605 + 30}\n"


def test_the_rails_count_the_agents_cgroup_and_not_the_benchs_traffic(tmp_path: Path) -> None:
    # where the guest keeps its agent in a cgroup, that cgroup's time is the busy time: the cores' counters also
    # hold sshd carrying the bench's traffic and the bench's probes, which are left out
    agent = tmp_path / "agent"
    agent.mkdir()
    env = {**_board(tmp_path, 10_000, (0, 0)), "HILBENCH_WORK": str(agent)}
    state = str(tmp_path / "state")
    (agent / "cpu.stat").write_text("usage_usec 1000\nuser_usec 600\nsystem_usec 400\n")
    assert _rails(env, "power", state) == "1605\n"
    (agent / "cpu.stat").write_text("usage_usec 251000\nuser_usec 600\nsystem_usec 400\n")
    busy_cores = _board(tmp_path, 10_050, (500_000_000, 500_000_000))  # 2 cores busy, the bench's work with it
    assert _rails({**busy_cores, "HILBENCH_WORK": str(agent)}, "power", state) == f"{1605 + 762}\n"  # 0.5 core


def test_the_virtual_pis_pmic_read_adc_parses_like_a_real_one(tmp_path: Path) -> None:
    env = _board(tmp_path, 10_000, (0, 0))
    idle = _rails(env, "pmic")
    assert {"VDD_CORE", "3V3_SYS", "DDR_VDD2"} <= set(pmic_rails(idle))
    assert pmic_power_mw(idle) == pytest.approx(PI5_IDLE_MW, abs=1)
    busy = _rails(_board(tmp_path, 10_100, (1_000_000_000, 1_000_000_000)), "pmic")  # both cores busy for 1 s
    assert pmic_power_mw(busy) == pytest.approx(PI5_IDLE_MW + 3050, abs=2)  # the core rail carries it
    assert pmic_rails(busy)["3V3_SYS"] == pmic_rails(idle)["3V3_SYS"]


def test_the_virtual_jetsons_ina3221_converts_when_read(tmp_path: Path) -> None:
    # each read of curr1_input is one conversion: the power since the read before, one line, however the reads
    # fall against any period (a sensor converting on its own period put the decisions' first readings a phase away)
    import subprocess
    import time

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "cpu.stat").write_text("usage_usec 0\n")
    env = {**_board(tmp_path, 10_000, (0, 0)), "HILBENCH_WORK": str(agent)}
    (tmp_path / "profile.json").write_text('{\n "cpus": 8,\n "idle_mw": 4600,\n "mw_per_load": 20400\n}\n')
    hwmon = tmp_path / "hwmon0"
    daemon = subprocess.Popen(["sh", str(RAILS), "ina3221", str(hwmon)], env=env)

    def read() -> float:
        current = subprocess.run(["cat", str(hwmon / "curr1_input")], capture_output=True, text=True, timeout=10)
        assert len(current.stdout.splitlines()) == 1, current.stdout  # one reading, one line
        return hwmon_power_mw(current_ma=current.stdout, voltage=(hwmon / "in1_input").read_text())

    try:
        deadline = time.monotonic() + 10
        while not (hwmon / "in1_input").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (hwmon / "in1_label").read_text() == "VDD_IN\n" and (hwmon / "name").read_text() == "ina3221\n"
        assert read() == pytest.approx(4600, abs=5)  # the first: the clock starts
        _board(tmp_path, 10_050, (0, 0))  # 0.5 s later the agent had run 0.25 s: half a core of 8 at +20.4 W
        (agent / "cpu.stat").write_text("usage_usec 250000\n")
        assert read() == pytest.approx(4600 + 1275, abs=5)
        _board(tmp_path, 10_100, (0, 0))
        assert all(r == pytest.approx(4600, abs=5) for r in (read(), read(), read()))  # idle since; each answered
    finally:
        daemon.kill()
        daemon.wait()


def test_hwmon_files(tmp_path: Path) -> None:
    assert hwmon_power_mw(power_uw="1520000\n") == 1520.0
    assert hwmon_power_mw(current_ma="412\n", voltage="5080\n") == pytest.approx(412 * 5.08)
    assert hwmon_power_mw(current_ma="100", voltage=3300.0) == pytest.approx(330.0)
    with pytest.raises(MeterError):
        hwmon_power_mw(power_uw="n/a")
    (tmp_path / "power1_input").write_text("2500000\n")
    spec = parse_energy({"driver": "hwmon", "power": "power1_input", "on": "bench"}, "f.toml: device 'x'", tmp_path)
    meter = BenchHwmonMeter("x", spec)
    assert meter.read_once() == 2500.0
    gone = BenchHwmonMeter("x", parse_energy({"driver": "hwmon", "power": "nope", "on": "bench"}, "w", tmp_path))
    with pytest.raises(MeterError, match="nope"):
        gone.read_once()


def test_joulescope_recording_through_its_own_reader(tmp_path: Path) -> None:
    from pyjls import Writer

    path = tmp_path / "js220.jls"
    writer = Writer(str(path))
    writer.source_def(source_id=1, name="JS220-002417", vendor="Jetperch", model="JS220", version="1.2.1",
                      serial_number="002417")  # fmt: skip
    writer.signal_def(signal_id=1, source_id=1, sample_rate=100_000, name="current", units="A")
    writer.signal_def(signal_id=2, source_id=1, sample_rate=100_000, name="voltage", units="V")
    current = np.concatenate([np.full(50_000, 0.010), np.full(50_000, 0.030)]).astype(np.float32)
    writer.fsr_f32(1, 0, current)
    writer.fsr_f32(2, 0, np.full(100_000, 3.3, dtype=np.float32))
    writer.close()
    samples = read_jls(path, start_ns=1_000_000_000, bin_s=0.01)
    assert len(samples) == 100 and samples[0].dt_ns == 10_000_000
    assert samples[0].t_ns == 1_010_000_000
    assert samples[0].power_mw == pytest.approx(33.0, rel=1e-5)
    assert samples[-1].power_mw == pytest.approx(99.0, rel=1e-5)
    (tmp_path / "bad.jls").write_bytes(b"not jls")
    with pytest.raises(MeterError, match="not a Joulescope recording"):
        read_jls(tmp_path / "bad.jls")


def test_energy_table_is_validated_naming_file_device_and_field(tmp_path: Path) -> None:
    base = {"name": "c6-x", "kind": "esp32c6", "port": "/dev/ttyUSB0"}
    fleet = parse_fleet({"device": [{**base, "energy": {"driver": "ppk2", "port": "/dev/ttyACM3"},
                                     "energy_budget_mj": 5}]}, tmp_path / "f.toml")  # fmt: skip
    dev = fleet.devices[0]
    assert isinstance(dev.energy.settings, Ppk2Settings) and dev.energy.settings.voltage_mv == 3300
    assert dev.energy.budget_mj == 5.0
    cases = [
        ({"driver": "ppk3"}, "energy.driver"),
        ({"driver": "ppk2", "voltage_mv": "3V3"}, "voltage_mv"),
        ({"driver": "ppk2", "voltage_mv": 9000}, "voltage_mv"),
        ({"driver": "ppk2", "speed": 1}, "energy.speed"),
        ({"driver": "hwmon"}, "energy.power"),
        ({"driver": "hwmon", "current": "curr1_input"}, "energy.voltage"),
        ({"driver": "tegrastats", "interval_ms": 0}, "interval_ms"),
    ]
    for table, field in cases:
        with pytest.raises(ConfigError) as err:
            parse_fleet({"device": [{**base, "energy": table}]}, tmp_path / "f.toml")
        assert "f.toml" in err.value.message and "c6-x" in err.value.message and field in err.value.message
    with pytest.raises(ConfigError, match="energy_budget_mj"):
        parse_fleet({"device": [{**base, "energy_budget_mj": 3.0}]}, tmp_path / "f.toml")


def test_the_inference_marker_is_validated_naming_file_device_and_field(tmp_path: Path) -> None:
    base = {"name": "c6-x", "kind": "esp32c6", "port": "/dev/ttyUSB0"}
    wired = {**base, "marker_gpio": 6, "energy": {"driver": "ppk2", "logic_channel": 0}}
    dev = parse_fleet({"device": [wired]}, tmp_path / "f.toml").devices[0]
    assert dev.settings.marker_gpio == 6 and dev.energy.settings.logic_channel == 0
    cases = [
        ({**wired, "marker_gpio": 31}, "'marker_gpio': 31 is out of range"),
        ({**wired, "marker_gpio": 16}, "'marker_gpio': GPIO16 is U0TXD (the console UART)"),
        ({**wired, "marker_gpio": 26}, "'marker_gpio': GPIO26 is an in-package flash pin"),
        ({**wired, "energy": {"driver": "ppk2", "logic_channel": 8}}, "'energy.logic_channel': 8 is out of range"),
        ({**base, "energy": {"driver": "ppk2", "logic_channel": 2}}, "'energy.logic_channel': D2 is wired to no"),
    ]
    for device, message in cases:
        with pytest.raises(ConfigError) as err:
            parse_fleet({"device": [device]}, tmp_path / "f.toml")
        assert "f.toml" in err.value.message and "c6-x" in err.value.message and message in err.value.message
        assert err.value.exit_code == 2


def test_meter_registry_needs_ssh_for_on_device_meters(tmp_path: Path) -> None:
    fleet = parse_fleet({"device": [{"name": "orin", "kind": "jetson-orin-nx", "ssh": "npc@10.0.0.2",
                                     "energy": {"driver": "tegrastats"}}]}, tmp_path / "f.toml")  # fmt: skip
    meter = meter_for(fleet.devices[0])
    assert isinstance(meter, TegrastatsMeter) and meter.owns  # over a connection of its own to the device
    assert meter.command() == "exec tegrastats --interval 1000"
    c6 = parse_fleet({"device": [{"name": "c6", "kind": "esp32c6", "port": "/dev/ttyUSB0",
                                  "energy": {"driver": "pmic"}}]}, tmp_path / "f.toml")  # fmt: skip
    with pytest.raises(MeterError, match="SSH"):
        meter_for(c6.devices[0])
    assert isinstance(parse_energy({"driver": "hwmon", "power": "p"}, "w", tmp_path).settings, HwmonSettings)


def _samples(power_mw, start_ns: int = 0, dt_ns: int = 1_000_000) -> list[PowerSample]:
    return [PowerSample(start_ns + (i + 1) * dt_ns, dt_ns, p) for i, p in enumerate(power_mw)]


def _marked(runs: list[tuple[float, int, int]], dt_ns: int = 10_000) -> list[PowerSample]:
    """Samples of (power mW, samples, marker level) runs, one after the other."""
    flat = [(power, level) for power, count, level in runs for _ in range(count)]
    return [PowerSample((i + 1) * dt_ns, dt_ns, power, level) for i, (power, level) in enumerate(flat)]


def test_integrator_interpolates_within_samples() -> None:
    whole = Integrator(_samples([100.0, 300.0]))  # 100 mW for 1 ms, then 300 mW for 1 ms
    assert whole.energy_mj(0, 2_000_000) == pytest.approx(0.4)
    assert whole.energy_mj(500_000, 1_500_000) == pytest.approx(0.05 + 0.15)


def test_energy_per_decision_from_windows_on_the_bench_clock() -> None:
    # 10 ms frames: 4 ms inference at 500 mW, 6 ms idle at 100 mW; the device clock runs 1 s ahead
    power = ([500.0] * 4 + [100.0] * 6) * 50
    samples = _samples(power, start_ns=0)
    clock = OffsetClock(offset_ns=1_000_000_000)
    frames = [Frame(i=k, vsync=k, ran=True, t0=1_000_000 + k * 10_000, t1=1_000_000 + k * 10_000 + 4_000)
              for k in range(50)]  # fmt: skip
    fig = energy_figures(samples, frames, clock, "test meter", 0.001)
    assert fig.decisions == 50
    assert fig.p50_mj == pytest.approx(2.0)  # 500 mW x 4 ms
    assert fig.inferring_mw == pytest.approx(500.0) and fig.idle_mw == pytest.approx(100.0)
    assert fig.session_mj == pytest.approx(50 * (2.0 + 0.6))
    out = DeviceMeasurements()
    add_energy(out, fig, budget_mj=1.5)
    assert out.get("energy_per_decision_p50").unit == "mJ"
    assert "test meter" in out.get("energy_per_decision_p50").description
    assert out.get("energy_budget_exceeded").value == 50


def test_a_meter_coarser_than_the_window_attributes_each_decision() -> None:
    # truth in 0.1 ms steps: 1 ms inference at 500 mW every 40 ms, 100 mW between; the meter averages 10 ms
    fine = np.full(400 * 100, 100.0)
    starts = [k * 400 + 53 + (k % 7) * 20 for k in range(100)]  # windows land anywhere in a meter sample
    for s0 in starts:
        fine[s0 : s0 + 10] = 500.0
    coarse = fine.reshape(-1, 100).mean(axis=1)
    samples = _samples(list(coarse), dt_ns=10_000_000)
    frames = [Frame(i=k, vsync=k, ran=True, t0=s0 * 100, t1=s0 * 100 + 1_000) for k, s0 in enumerate(starts)]
    fig = energy_figures(samples, frames, OffsetClock(0), "virtual PPK2", 0.010)
    assert ATTRIBUTED in fig.flags and fig.decisions == 98  # the first and last have an open side
    assert fig.p50_mj == pytest.approx(0.5, rel=0.02)  # 500 mW x 1 ms
    assert fig.idle_mw == pytest.approx(100.0, rel=0.01)
    assert fig.inferring_mw == pytest.approx(500.0, rel=0.02)


def test_the_markers_high_runs_are_the_decisions_without_a_clock() -> None:
    # 125.4 mW while the marker is high (1377 and 1380 samples of 10 us), 89.1 mW idle; the frames' windows are on
    # a clock the meter knows nothing of, and are not used
    runs = [(89.1, 500, 1), (89.1, 3000, 0), (125.4, 1377, 1), (89.1, 3600, 0), (125.4, 1380, 1), (89.1, 50, 0)]
    runs += [(125.4, 40, 1)]  # still high when the samples end: cut short, left out (as is the first run)
    frames = [Frame(i=0, vsync=0, ran=True, t0=10**15, t1=10**15 + 1)]
    fig = energy_figures(_marked(runs), frames, OffsetClock(0), "virtual PPK2", 0.001, marker="PPK2 D0")
    assert MARKER in fig.flags and fig.marker == "PPK2 D0" and fig.decisions == 2
    assert fig.per_decision_mj == pytest.approx([125.4 * 13.77e-3, 125.4 * 13.80e-3])
    assert fig.windows_ns == [(35_000_000, 48_770_000), (84_770_000, 98_570_000)]
    assert fig.inferring_mw == pytest.approx(125.4) and fig.idle_mw == pytest.approx(89.1 + 40 * 36.3 / 7190)
    out = DeviceMeasurements()
    add_energy(out, fig)
    assert "marker: PPK2 D0" in out.get("energy_per_decision_p50").description
    # a meter whose marker never went high: the frames' windows, and a flag that says so
    quiet = [PowerSample(s.t_ns, s.dt_ns, s.power_mw, 0) for s in _marked(runs)]
    frames = [Frame(i=0, vsync=0, ran=True, t0=35_000, t1=48_770)]  # us
    fig = energy_figures(quiet, frames, OffsetClock(0), "virtual PPK2", 0.00001, marker="PPK2 D0")
    assert fig.decisions == 1 and MARKER not in fig.flags and "no_marker_windows" in fig.flags
    assert fig.marker is None and fig.p50_mj == pytest.approx(125.4 * 13.77e-3)


def test_the_readers_bins_end_at_the_logic_inputs_edges() -> None:
    bins = Bins(4)
    values = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    got = bins.add(values, [0, 0, 0, 0, 0, 1, 1, 0, 0, 0])
    assert got == [(4, 1.0, 0), (1, 1.0, 0), (2, 2.0, 1)]  # a full bin, then each edge ends one
    assert bins.add([3.0, 5.0], [0, 0]) == [(4, 3.0, 0)]  # the open bin goes on across reads
    assert bins.add([7.0], [1]) == [(1, 5.0, 0)]
    plain = Bins(3)
    assert plain.add([1.0, 2.0, 3.0, 4.0], None) == [(3, 2.0, None)]  # no logic input: fixed bins


def test_a_slow_meter_gives_session_energy_only_and_says_so() -> None:
    samples = _samples([200.0] * 5, dt_ns=1_000_000_000)  # tegrastats at 1 s
    frames = [Frame(i=k, vsync=k, ran=True, t0=k * 33_000, t1=k * 33_000 + 8_000) for k in range(100)]
    fig = energy_figures(samples, frames, OffsetClock(0), "tegrastats VDD_IN", 1.0)
    assert fig.p50_mj is None and TOO_SLOW in fig.flags
    assert fig.session_mj == pytest.approx(1000.0) and fig.mean_mw == pytest.approx(200.0)
    out = DeviceMeasurements()
    add_energy(out, fig)
    assert out.get("energy_per_decision_p50").value is None
    assert TOO_SLOW in out.get("energy_per_decision_p50").flags
    assert out.get("energy_session").value == pytest.approx(1000.0)


def test_hilbench_energy_reads_a_bench_hwmon_sensor(tmp_path: Path, monkeypatch, capsys) -> None:
    import json

    from bench.cli import main

    monkeypatch.setenv("HILBENCH_LEASE_DIR", str(tmp_path / "leases"))
    (tmp_path / "power1_input").write_text("1250000\n")  # 1.25 W, as an INA226's hwmon file says it
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[device]]\nname = "c6-x"\nkind = "esp32c6"\nport = "/dev/ttyUSB9"\n'
                     'energy = { driver = "hwmon", on = "bench", power = "power1_input", interval_ms = 50 }\n'
                     '[[device]]\nname = "c6-y"\nkind = "esp32c6"\nport = "/dev/ttyUSB8"\n')  # fmt: skip
    assert main(["energy", "--fleet", str(fleet), "--device", "c6-x", "--seconds", "0.5", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["devices"][0]
    assert row["ok"] and row["mean_mw"] == pytest.approx(1250.0) and row["samples"] >= 5
    assert main(["energy", "--fleet", str(fleet), "--device", "c6-y"]) == 2  # no energy table: a usage error


class _LateMeter(BenchHwmonMeter):
    """A bench hwmon meter whose first sample comes `delay_s` after it started (as a PPK2 reader's does)."""

    delay_s = 0.3

    async def run(self) -> None:
        import asyncio
        import time

        await asyncio.sleep(self.delay_s)
        self.samples.append(PowerSample(time.monotonic_ns(), 1_000_000, 50.0))
        await asyncio.sleep(3600)


def test_a_started_meter_is_waited_for_until_its_first_sample(tmp_path: Path, monkeypatch) -> None:
    import asyncio

    import bench.energy.protocol as protocol

    power = tmp_path / "power1_input"
    power.write_text("50000\n")
    table = {"driver": "hwmon", "on": "bench", "power": str(power), "interval_ms": 10}
    spec = parse_energy(table, "fleet.toml", tmp_path)

    async def started(meter) -> None:
        await meter.start()
        try:
            await meter.first_sample()
        finally:
            await meter.stop()

    late = _LateMeter("dev-1", spec)
    asyncio.run(started(late))
    assert len(late.samples) == 1  # returned once the sample was in, not before
    monkeypatch.setattr(protocol, "FIRST_SAMPLE_S", 0.05)
    silent = _LateMeter("dev-1", spec)
    silent.delay_s = 5.0
    with pytest.raises(MeterError, match=r"'dev-1'.*no sample within"):
        asyncio.run(started(silent))


def test_a_coarse_meter_on_the_device_clock_gives_the_decisions_active_energy() -> None:
    # a PMIC read every 250 ms of the device's clock: 2 s idle at 1600 mW, then 10 s of decisions (30 a second,
    # each 2 ms) at 1700 mW: 100 mW x 10 s over 300 decisions = 3.333 mJ each. The frames are on the same clock;
    # a bench-clock mapping, were it used, would put them outside the samples
    samples = _samples([1600.0] * 8 + [1700.0] * 40 + [1600.0] * 4, start_ns=100_000_000_000, dt_ns=250_000_000)
    start_us = 102_000_000
    frames = [Frame(i=k, vsync=k, ran=True, t0=start_us + k * 33_333, t1=start_us + k * 33_333 + 2_000)
              for k in range(300)]  # fmt: skip
    fig = energy_figures(samples, frames, OffsetClock(10**15), "pmic", 0.25, device_clock=True)
    assert ACTIVE in fig.flags and DEVICE_CLOCK in fig.flags and fig.decisions == 240  # the session's first 240
    assert fig.idle_mw == pytest.approx(1600.0)
    assert fig.p50_mj == pytest.approx(100.0 * (239 * 0.033333 + 0.002) / 240, rel=1e-3) and fig.p99_mj is None
    # other work in every 4th reading, before the decisions and among them, is not theirs: the baseline is the
    # mean power before them (a median, 1600 mW, would leave that work to the decisions: 4.9 mJ each)
    other = [PowerSample(s.t_ns, s.dt_ns, s.power_mw + (400.0 if k % 4 == 3 else 0.0)) for k, s in enumerate(samples)]
    busier = energy_figures(other, frames, OffsetClock(0), "pmic", 0.25, device_clock=True)
    assert busier.idle_mw == pytest.approx(1700.0) and busier.p50_mj == pytest.approx(fig.p50_mj, rel=0.02)
    out = DeviceMeasurements()
    add_energy(out, fig, budget_mj=1.0)
    described = out.get("energy_per_decision_p50").description
    assert "active energy over the first 240 decisions" in described and "1600.0 mW" in described
    assert "device's clock" in described
    assert out.get("energy_per_decision_p99").value is None
    # no sample before the first decision: no baseline, so no energy per decision
    late = energy_figures(samples[8:], frames, OffsetClock(0), "pmic", 0.25, device_clock=True)
    assert late.p50_mj is None and TOO_SLOW in late.flags


class _Printing:
    """A device connection whose meter command is run by the local shell (what a board's shell would print)."""

    def __init__(self, script: str) -> None:
        self.script = script

    async def stream(self, _command: str):
        import asyncio

        return await asyncio.create_subprocess_exec("sh", "-c", self.script, stdout=asyncio.subprocess.PIPE)

    async def close(self) -> None:
        pass


def test_the_pmic_and_hwmon_readings_are_stamped_on_the_devices_clock(tmp_path: Path) -> None:
    import asyncio

    prints = f"for t in 100.00 100.25 100.50; do echo \"$t 9.0\"; echo '{PMIC}'; echo @end; done"
    pmic = PmicMeter("pi5-1", parse_energy({"driver": "pmic", "interval_ms": 250}, "w", tmp_path), _Printing(prints))
    assert pmic.device_clock and pmic.command().startswith("while :; do cat /proc/uptime && vcgencmd pmic_read_adc")
    asyncio.run(pmic.run())
    # the first reading starts the clock; each one after stands for the device time since the one before
    assert [(s.t_ns, s.dt_ns) for s in pmic.samples] == [(100_250_000_000, 250_000_000), (100_500_000_000, 250_000_000)]
    assert pmic.samples[0].power_mw == pytest.approx(pmic_power_mw(PMIC))
    table = {"driver": "hwmon", "current": "/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon*/curr1_input",
             "voltage": "/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon*/in1_input", "interval_ms": 250}  # fmt: skip
    ina = DeviceHwmonMeter("orin-1", parse_energy(table, "w", tmp_path), _Printing(
        "printf '50.00 1.0\\n1000\\n5000\\n@end\\n50.30 1.0\\n1200\\n5000\\n@end\\n'"))  # fmt: skip
    assert "cat /proc/uptime /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon*/curr1_input" in ina.command()
    asyncio.run(ina.run())
    assert [(s.t_ns, s.dt_ns, s.power_mw) for s in ina.samples] == [(50_300_000_000, 300_000_000, 6000.0)]
    with pytest.raises(MeterError, match="uptime"):
        device_ns("VDD_CORE_A current(7)=0.7A")


def test_a_block_is_measured_on_the_device_clock_of_a_device_clock_meter(tmp_path: Path) -> None:
    """pytest's `power_meter.measure()` takes its block on the bench clock; a PMIC's readings are stamped with the
    device's uptime (here 1000 s after boot, far from the bench's clock): the block is moved onto that clock and
    measured there, not refused as uncovered."""
    from bench.core.loop_thread import LoopThread
    from bench.testkit.measure_fixtures import PowerMeter

    # a reading every 50 ms, its stamp the device's uptime (1000 s plus the real time since the first, in
    # centiseconds as /proc/uptime has it: a loaded host's slow loop leaves the stamps on real time), 1.5 W over idle
    prints = ("s=$(date +%s%N); t=0; while [ $t -lt 60 ]; do n=$((($(date +%s%N) - s) / 10000000 + 100000)); "
              f"echo \"$((n / 100)).$(printf %02d $((n % 100))) 9\"; echo '{PMIC}'; echo @end; t=$((t + 1)); "
              "sleep 0.05; done")  # fmt: skip
    spec = parse_energy({"driver": "pmic", "interval_ms": 50}, "w", tmp_path)
    loop = LoopThread()
    try:
        handle = PowerMeter(PmicMeter("pi5-1", spec, _Printing(prints)), lambda coro: loop.run(coro, timeout_s=20))
        with handle.measure(settle_s=0.3) as reading:
            time.sleep(0.5)
        handle.stop()
    finally:
        loop.close()
    assert 900 < reading.samples[0].t_ns / 1e9 < 1010  # on the device's clock
    assert reading.seconds == pytest.approx(0.5, abs=0.15)  # the block's length on the device clock
    assert reading.mean_mw == pytest.approx(pmic_power_mw(PMIC), rel=1e-6)
    assert handle.meter.at(time.monotonic_ns()) > 1000e9  # a bench time maps past the device's first reading


def test_a_device_clock_that_runs_slower_than_the_bench_is_interpolated_between_readings(tmp_path: Path) -> None:
    # an icount guest busy with its readings: its clock advanced 0.25 s between readings that arrived 0.5 s apart
    spec = parse_energy({"driver": "pmic", "interval_ms": 250}, "w", tmp_path)
    meter = PmicMeter("pi5-1", spec, _Printing(""))
    assert meter.at(123) == 123 and meter.arrived_after(0) is False  # no reading yet: the bench's own time
    meter.arrivals = [(10_000_000_000, 1000_000_000_000), (10_500_000_000, 1000_250_000_000),
                      (11_000_000_000, 1000_500_000_000)]  # fmt: skip
    assert meter.at(10_750_000_000) == 1000_375_000_000  # between two readings: at the guest's own rate
    assert meter.at(10_500_000_000) == 1000_250_000_000
    assert meter.at(11_100_000_000) == 1000_600_000_000  # past the last: from it, at the bench's rate
    assert meter.at(9_900_000_000) == 999_900_000_000
    assert meter.arrived_after(10_900_000_000) and not meter.arrived_after(11_000_000_000)
    bench = BenchHwmonMeter("c6-x", parse_energy({"driver": "hwmon", "on": "bench", "power": "p"}, "w", tmp_path))
    assert bench.at(42) == 42 and bench.arrived_after(42)  # a bench-side meter's samples are on the bench clock


class _Console:
    """A console driver whose guest printed `lines` (what follow_console hands a follower)."""

    timing = "icount"

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    async def follow_console(self, emit) -> None:
        import asyncio

        for line in self.lines:
            emit(line)
        await asyncio.Event().wait()


def test_the_consoles_supply_meter_reads_its_guests_lines_on_its_clock(tmp_path: Path) -> None:
    import asyncio

    assert parse_supply("[+  49.535] NPC-SUPPLY 12.50 2507") == (12_500_000_000, 2507.0)
    assert parse_supply("NPC-INIT net-up ip=10.0.2.15") is None and parse_supply("NPC-SUPPLY 1.66 ") is None
    fleet = parse_fleet({"device": [{"name": "switch-1", "kind": "switch-arm64", "virtual": True,
                                     "energy": {"driver": "supply"}}]}, tmp_path / "f.toml")  # fmt: skip
    with pytest.raises(MeterError, match="console"):
        meter_for(fleet.devices[0])  # read through the console's driver, which `hilbench energy` has not
    lines = ["NPC-SUPPLY 2.00 2400", "npc_agent: listening", "NPC-SUPPLY 2.25 2600", "NPC-SUPPLY 2.50 2500"]
    meter = meter_for(fleet.devices[0], driver=_Console(lines))
    assert isinstance(meter, SupplyMeter) and meter.device_clock and console_modelled("icount") in meter.name

    async def read() -> list[PowerSample]:
        await meter.start()
        await meter.more_samples(2, 5.0)
        return await meter.stop()

    assert [(s.t_ns, s.dt_ns, s.power_mw) for s in asyncio.run(read())] == [
        (2_250_000_000, 250_000_000, 2600.0), (2_500_000_000, 250_000_000, 2500.0)]  # fmt: skip


def test_the_nightlys_json_names_each_devices_energy_per_decision_and_its_label(tmp_path: Path) -> None:
    from bench.nightly.publish import energy_of
    from bench.store.results import open_store

    samples = _samples([1600.0] * 8 + [1700.0] * 40, start_ns=100_000_000_000, dt_ns=250_000_000)
    frames = [Frame(i=k, vsync=k, ran=True, t0=102_000_000 + k * 33_333, t1=102_002_000 + k * 33_333)
              for k in range(250)]  # fmt: skip
    out = DeviceMeasurements()
    add_energy(out, energy_figures(samples, frames, OffsetClock(0), "pmic (modelled from counted time)", 0.25,
                                   device_clock=True))  # fmt: skip
    with open_store(tmp_path / "r.sqlite") as store:
        run = store.runs.begin_run("replay", session="combat")
        store.runs.add_device(run, "pi5-1", "pi5")
        store.measures.add_measurements(run, "pi5-1", out.measurements)
        got = energy_of(store, run)
    assert set(got) == {"pi5-1"} and got["pi5-1"]["energy_per_decision_mj"] == pytest.approx(
        100 * 7.9686 / 240, abs=1e-3
    )
    assert got["pi5-1"]["label"].startswith("pmic (modelled from counted time), one sample per 250 ms; active")
    assert ACTIVE in got["pi5-1"]["flags"] and got["pi5-1"]["power_mean_mw"] is not None
