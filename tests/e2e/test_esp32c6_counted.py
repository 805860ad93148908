"""The counted ESP32-C6 firmware (MicroPython built for RV32IMAC from its pinned sdist) in qemu-system-riscv32
-icount, driven through mpremote's own serial transport as a board is: it boots to the esp32 port's banner,
runs code over the raw REPL and raw-paste, compiles viper to RV32, keeps its files in the flash partition, and
its counted clock gives the same ticks on every run."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from mpremote.transport_serial import SerialTransport

from bench.bundles.c6_firmware import BuiltFirmware, build_firmware
from bench.config.kinds import get_kind
from bench.devices.qemu_machine import free_port
from bench.virtual.esp32c6.counted import FirmwareExit, ResetCause, Vfs, qemu_command
from tests.esp32c6_support import (
    MACHINE_BASE_PROGRAM,
    VIPER_DOT,
    AgentMessages,
    check_machine_base,
    console_socket,
    counted_repl,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]

MAC = bytes.fromhex("6055f9c61001")
FLASH_SIZE = 8 * 1024 * 1024
VFS_OFFSET = 0x200000
# mpremote moves a file in one raw-paste exec per chunk, about 0.1 s each on this UART: its default 256-byte
# chunks made the agent's deployment take a minute; 4 KB chunks (which the firmware's heap compiles) take ~15 s
CHUNK = 4096
SEED_SIZED = "npc-policy-63k-int8"  # the size of the seed's smallest C6 model (docs/esp32c6.md)
HEAP_US = 45  # an inference's counted time on two boots: the same to this, 0.1% of the seed-sized model's 42 ms
# (the heap's layout after host-paced serial reads moves an allocation's search: 2-3 us seen on most inferences,
# 24 us on a model's first, docs/replay.md)


@pytest.fixture(scope="module")
def firmware() -> BuiltFirmware:
    return build_firmware()


def blank_flash(path: Path) -> Vfs:
    path.write_bytes(b"\xff" * FLASH_SIZE)
    return Vfs(path, VFS_OFFSET, FLASH_SIZE - VFS_OFFSET)


def flash_copy(flash: Path, path: Path) -> Vfs:
    """A board's own copy of a prepared flash image (what it writes stays in its copy)."""
    shutil.copyfile(flash, path)
    return Vfs(path, VFS_OFFSET, FLASH_SIZE - VFS_OFFSET)


def board(
    elf: Path, vfs: Vfs | None = None, cause: ResetCause = ResetCause.PWRON_RESET
) -> contextlib.AbstractContextManager[SerialTransport]:
    """The firmware in QEMU with its UART on a loopback socket, opened by mpremote's serial transport."""
    return counted_repl(elf, mac=MAC, reset_cause=cause, vfs=vfs)


def run(transport: SerialTransport, code: str) -> str:
    return transport.exec(code).decode()


@pytest.fixture(scope="module")
def agent_flash(firmware: BuiltFirmware, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the board folder, a flash image): the MicroPython agent, its modules, the bundled and the seed-sized int8
    models, the trust key and the kind's memory limit (`agent.json`) deployed once into the flash over the UART
    (as `hilbench flash` puts files on a board); tests boot copies."""
    from tests.e2e.mpy_agent_proc import make_board

    tmp = tmp_path_factory.mktemp("agent-flash")
    local = make_board(tmp, ("npc-policy-int8", SEED_SIZED))
    limit = get_kind("esp32c6").defaults().memory_limit_kb * 1024
    (local / "agent.json").write_text(json.dumps({"mem_limit": limit}) + "\n")
    flash = tmp / "flash.bin"
    with board(firmware.elf, blank_flash(flash)) as t:
        for path in sorted(local.rglob("*")):
            name = path.relative_to(local).as_posix()
            t.fs_mkdir(name) if path.is_dir() else t.fs_writefile(name, path.read_bytes(), chunk_size=CHUNK)
        listed = {e.name for e in t.fs_listdir("/")}
    assert {"npc_agent.py", "npcnn.py", "npcnn_viper.py", "npcfeat.py", "trust.key", "models"} <= listed, listed
    return local, flash


def test_boots_to_the_esp32_banner(firmware: BuiltFirmware):
    cmd = qemu_command(firmware.elf, mac=MAC)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + 20
        while not seen.endswith(b">>> ") and time.monotonic() < deadline:
            seen += proc.stdout.read1(256)
    finally:
        proc.kill()
        proc.wait()
    assert b"MicroPython v1.26.1 on 2026-01-01; ESP32C6 module with ESP32C6\r\n" in seen
    assert seen.endswith(b'Type "help()" for more information.\r\n>>> ')


def test_raw_repl_and_raw_paste_run_code_and_identify_as_an_esp32c6(firmware: BuiltFirmware):
    with board(firmware.elf, cause=ResetCause.HARD_RESET) as t:
        out = run(t, "import sys, os, machine\nprint(sys.platform, os.uname().sysname, sys.implementation._machine)")
        assert t.use_raw_paste  # mpremote fell back to the plain raw REPL if the board refused raw-paste
        assert out.strip() == "esp32 esp32 ESP32C6 module with ESP32C6"
        assert t.eval("sys.implementation._build") == "ESP32_GENERIC_C6"
        assert t.eval("machine.unique_id()") == MAC
        assert t.eval("machine.reset_cause()") == int(ResetCause.HARD_RESET)
        assert t.eval("machine.freq()") == 160_000_000


def test_uart_timer_watchdog_signal_and_sleep_behave_as_on_the_vm(firmware: BuiltFirmware):
    """The part of `machine` the counted firmware shares with the unix-port VM (test_esp32c6_machine runs it
    there); here the timers are the chip's and a UART write takes its wire time on the counted clock."""
    with board(firmware.elf) as t:
        check_machine_base(run(t, MACHINE_BASE_PROGRAM))


VIPER = (
    "import micropython, sys, time"
    + VIPER_DOT.replace("NAME", "mac_viper")
    + """def mac_bytecode(a, b, n):
    s = 0
    for i in range(n):
        s += a[i] * b[i]
    return s
a = bytes(range(200)); b = bytes(range(200, 0, -1))
c0 = time.ticks_cpu(); v = mac_viper(a, b, 200); c1 = time.ticks_cpu()
p = mac_bytecode(a, b, 200); c2 = time.ticks_cpu()
print(sys.implementation._mpy >> 10 & 15, v == p, time.ticks_diff(c1, c0), time.ticks_diff(c2, c1))
"""
)


def test_viper_is_compiled_by_the_rv32_emitter(firmware: BuiltFirmware):
    with board(firmware.elf) as t:
        arch, same, viper_cycles, bytecode_cycles = run(t, VIPER).split()
    assert arch == "11"  # MP_NATIVE_ARCH_RV32IMC: native and viper code is emitted for the chip's core
    assert same == "True"
    assert int(viper_cycles) * 5 < int(bytecode_cycles)  # the same loop as RV32 machine code, not bytecode


COUNTED = """
import time
def work():
    s = 0
    for i in range(3000):
        s += i * i
    return s
c0 = time.ticks_cpu(); t0 = time.ticks_us()
work()
busy = time.ticks_diff(time.ticks_cpu(), c0), time.ticks_diff(time.ticks_us(), t0)
c0 = time.ticks_cpu(); time.sleep_ms(30); work(); time.sleep_us(700)
print(busy[0], busy[1], time.ticks_diff(time.ticks_cpu(), c0))
"""


def test_counted_ticks_are_the_same_on_every_boot(firmware: BuiltFirmware):
    runs = []
    for _ in range(3):
        with board(firmware.elf) as t:
            runs.append(tuple(int(x) for x in run(t, COUNTED).split()))
    cycles = {(r[0], r[2]) for r in runs}
    assert len(cycles) == 1, runs  # cycle-exact on every boot
    busy_cycles, with_sleeps_cycles = cycles.pop()
    # ticks_us is the same clock in whole microseconds: a difference of two readings may be 1 us apart
    # between boots (each reading is truncated; the sub-microsecond phase at the start differs)
    assert all(abs(busy_cycles / 160 - r[1]) < 10 for r in runs)  # the windows differ by a call
    assert 0 <= (with_sleeps_cycles - busy_cycles) / 160 - 30_700 < 200  # the sleeps add their own time


def test_files_live_in_the_flash_partition_across_power_cycles(firmware: BuiltFirmware, tmp_path: Path):
    vfs = blank_flash(tmp_path / "flash.bin")
    with board(firmware.elf, vfs) as t:
        run(t, "import os")
        assert t.eval("os.statvfs('/')[:3]") == (4096, 4096, 1536)  # the 6 MB partition in 4 KB blocks
        t.fs_mkdir("lib")
        t.fs_writefile("lib/data.bin", bytes(range(256)) * 40, chunk_size=CHUNK)
        assert run(t, "os.rename('lib/data.bin', '/lib/moved.bin')") == ""
    raw = (tmp_path / "flash.bin").read_bytes()
    assert raw[:VFS_OFFSET] == b"\xff" * VFS_OFFSET  # nothing outside the vfs partition was written
    assert b"littlefs" in raw[VFS_OFFSET : VFS_OFFSET + 8192]  # the superblock, at the partition's start
    with board(firmware.elf, vfs) as t:
        assert [(e.name, e.st_size) for e in t.fs_listdir("/lib")] == [("moved.bin", 10240)]
        assert t.fs_readfile("/lib/moved.bin", chunk_size=CHUNK) == bytes(range(256)) * 40
        run(t, "import os")
        free = t.eval("os.statvfs('/')[3]")
        assert 1500 < free < 1536
        with pytest.raises(OSError, match="Errno 2"):
            t.fs_stat("/nope")


def test_machine_reset_and_bootloader_end_qemu_with_their_exit_codes(firmware: BuiltFirmware):
    for call, code in (("machine.reset()", FirmwareExit.RESET), ("machine.bootloader()", FirmwareExit.BOOTLOADER)):
        cmd = qemu_command(firmware.elf, mac=MAC)
        with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
            # typed at the prompt, as on a board: input before the firmware sets its UART up is not received
            seen = b""
            while not seen.endswith(b">>> "):
                byte = proc.stdout.read(1)
                assert byte, seen[-300:]
                seen += byte
            proc.stdin.write(f"import machine\r{call}\r".encode())
            proc.stdin.close()
            assert proc.wait(timeout=30) == code, (seen + proc.stdout.read())[-300:]


MODULES = r"""
import json, hashlib, binascii, random, select, sys, time
d = json.loads('{"a": [1, 2.5, -3e2, true, false, null, "x\\u00e9\\n"], "b": {"c": "d\\"q"}, '
               '"n": 12345678901234567890}')
bad = 0
for text in ('{"a" 1}', '[1,]', '"abc', 'tru', '{"a": 1} x'):
    try:
        json.loads(text)
    except ValueError:
        bad += 1
h = hashlib.sha256(b"abc")
h2 = hashlib.sha256()
for _ in range(10):
    h2.update(b"0123456789" * 100)
poller = select.poll()
poller.register(sys.stdin, select.POLLIN)
t0 = time.ticks_us()
idle = poller.poll(40)
waited = time.ticks_diff(time.ticks_us(), t0)
print(json.dumps([d, bad, h.digest().hex(), h2.digest().hex(), binascii.hexlify(b"\x01\xfe", ":"),
      binascii.b2a_base64(b"hello world"), binascii.a2b_base64(b"aGVsbG8gd29ybGQ="), binascii.crc32(b"hello"),
      binascii.unhexlify("deadBEEF").hex(), 0 <= random.getrandbits(16) < 65536, 1 <= random.randint(1, 6) <= 6,
      idle, waited], separators=(",", ":")))
"""


def test_modules_the_agent_needs_agree_with_cpython(firmware: BuiltFirmware):
    import binascii
    import hashlib
    import json
    import zlib

    with board(firmware.elf) as t:
        got = json.loads(run(t, MODULES))
    assert got[0] == {
        "a": [1, 2.5, -300.0, True, False, None, "x\u00e9\n"],
        "b": {"c": 'd"q'},
        "n": 12345678901234567890,
    }
    # upstream's json, as on the chip: lenient on a missing colon ('{"a" 1}') and a trailing comma ('[1,]'),
    # strict on an open string, a bad literal and trailing text
    assert got[1] == 3
    assert got[2] == hashlib.sha256(b"abc").hexdigest()
    assert got[3] == hashlib.sha256(b"0123456789" * 1000).hexdigest()
    assert got[4:9] == ["01:fe", "aGVsbG8gd29ybGQ=\n", "hello world", zlib.crc32(b"hello"), "deadbeef"]
    assert binascii.a2b_base64(got[5]) == b"hello world"
    assert got[9:11] == [True, True]
    # nothing on stdin: poll idled its 40 ms of chip time. Upstream's poll counts them in whole ticks_ms from the
    # tick it started in, so it ends in the 40th tick after: 39-40 ms, as on the chip, by when in its millisecond
    # the code arrived; the call's own instructions add microseconds
    assert got[11] == [] and 39_000 < got[12] < 40_200


INFERENCE = """
import time, gc, npcnn
model = npcnn.load("models/npc-policy-int8.npcm")
x = [((k * 37) % 100) / 50.0 - 1.0 for k in range(48)]
times = []
for _ in range(10):
    gc.collect()
    t0 = time.ticks_cpu()
    model.infer(x)
    times.append(time.ticks_diff(time.ticks_cpu(), t0))
    time.sleep_ms(50)
print(npcnn.KERNEL, " ".join(str(t) for t in times))
"""


def test_bundled_model_inference_runs_viper_on_the_counted_clock(
    firmware: BuiltFirmware, agent_flash: tuple[Path, Path], tmp_path: Path
):
    vfs = flash_copy(agent_flash[1], tmp_path / "flash.bin")  # npcnn, npcnn_viper, npcfeat and the int8 model
    runs = []
    for _ in range(2):  # two boots that do the same: the heap, and so the counted time, is the same
        with board(firmware.elf, vfs) as t:
            kernel, *times = run(t, INFERENCE).split()
            runs.append([int(x) for x in times])
    assert kernel == "viper"  # the MAC loops compiled by the RV32 emitter
    assert runs[0] == runs[1]  # the same inferences take the same cycles on every boot
    median_us = sorted(runs[0])[len(runs[0]) // 2] / 160
    print(f"\nbundled policy, one inference, counted RV32 at 160 MHz: median {median_us:.0f} us (silicon: 24.6 ms)")
    assert 1_000 < median_us < 100_000


def agent_messages(t: SerialTransport) -> Callable[..., dict]:
    """Start the agent on the board behind `t`; the function returning its next wire message."""
    t.exec_raw_no_follow("import npc_agent; npc_agent.run()")
    messages = AgentMessages(t.serial)

    def message(timeout_s: float = 60) -> dict:
        return messages.next(timeout_s)

    return message


def test_the_micropython_agent_runs_on_the_counted_firmware(
    firmware: BuiltFirmware, agent_flash: tuple[Path, Path], tmp_path: Path
):
    """The reference agent, deployed to the flash as `hilbench flash` does, verifies a signed model and infers."""
    from bench.agent import wire
    from tests.e2e.mpy_agent_proc import signed

    local, flash = agent_flash
    with board(firmware.elf, flash_copy(flash, tmp_path / "flash.bin")) as t:
        message = agent_messages(t)
        hello = message()
        assert hello["platform"].endswith("/qemu-icount")
        manifest = signed(local, "npc-policy-int8", 1)
        t.serial.write(wire.encode({"t": "load", "path": "models/npc-policy-int8.npcm", "manifest": manifest, "id": 1}))
        loaded = message()
        assert loaded["t"] == "loaded", loaded
        x = [((k * 37) % 100) / 50.0 - 1.0 for k in range(48)]
        results = []
        for rid in range(2, 5):
            t.serial.write(wire.encode({"t": "infer", "x": x, "id": rid}))
            results.append(message())
    assert [r["t"] for r in results] == ["result"] * 3
    assert len({r["act"] for r in results}) == 1
    print(f"\nagent on the counted core: verify {loaded['verify_us']} us, infer {[r['us'] for r in results]} us")
    assert all(1_000 < r["us"] < 100_000 for r in results)


# The agent's files of one update and its rollback (npc_agent's own helpers), UPDATE_CYCLES times, on the board's
# littlefs mounted with 2048-byte programs (prog size is not stored in the filesystem): models/ is compacted every
# second commit, so its wear-levelling relocation, every 100 compactions, comes within a few dozen updates
UPDATE_CYCLES = 150  # the unfixed agent's board panicked in the 102nd
UPDATES_AND_ROLLBACKS = f"""
import os, vfs
from _c6flash import Flash
vfs.umount("/")
vfs.mount(vfs.VfsLfs2(Flash(), readsize=2048, progsize=2048), "/")
import npc_agent as a
body = bytes(6376)
def remember():
    with open(a.CURRENT + ".tmp", "w") as f:
        f.write("x" * 308)
    a._replace(a.CURRENT + ".tmp", a.CURRENT)
for i in range({UPDATE_CYCLES}):
    dest = "models/npc-policy-%d.npcm" % (i + 3)
    tmp = a._updates_dir() + dest[len("models"):]
    with open(tmp, "wb") as f:
        f.write(body)
    a._replace(tmp, dest)
    remember()
    os.remove(dest)
    for _ in range(1 + i % 3):
        remember()
print(i + 1, sorted(os.listdir("models")))
"""


@pytest.mark.slow  # opt-in (--run-slow): 150 updates, minutes of a counted board (test_mpy_agent.py: the keeper)
def test_an_update_moved_out_of_updates_survives_the_relocation_of_models(
    firmware: BuiltFirmware, agent_flash: tuple[Path, Path], tmp_path: Path
):
    """The rename of a verified model from updates/ into models/, with the rollback that deletes it again, through
    the relocations of models/: littlefs 2.11 dereferenced NULL (the board panicked, "Guru Meditation", MEPC in
    lfs2_fs_pred) when one came in that rename's commit while updates/ held only the moved file (docs/ota.md)."""
    _, flash = agent_flash
    with board(firmware.elf, flash_copy(flash, tmp_path / "flash.bin")) as t:
        out, err = t.exec_raw(UPDATES_AND_ROLLBACKS, timeout=600)
    assert err == b"", (out, err)
    listed = ["current.json", "npc-policy-63k-int8.npcm", "npc-policy-int8.npcm"]
    assert out.decode().strip() == f"{UPDATE_CYCLES} {listed!r}"


def test_the_seed_sized_model_loads_beside_the_agent_and_infers_as_the_reference(
    firmware: BuiltFirmware, agent_flash: tuple[Path, Path], tmp_path: Path
):
    """The model of the seed's smallest C6 size (64 KB as .tflite, 55 KB as .npcm), sent as an update to the
    agent running the bundled policy: it loads beside it on the 300 KB heap, its probation (the live heap
    checked against the kind's 160 KB limit at every inference) keeps it, and it gives the reference's
    integers; its inference is about 42 ms of counted time, the same on every boot (to the heap's few us)."""
    from bench.agent import wire
    from bench.models import model_file
    from bench.models.tflite_read import read_int8_policy
    from bench.testkit import reference as R
    from tests.e2e.mpy_agent_proc import signed

    local, flash = agent_flash
    x = [((k * 37) % 100) / 50.0 - 1.0 for k in range(48)]
    runs = []
    for _ in range(2):
        with board(firmware.elf, flash_copy(flash, tmp_path / "flash.bin")) as t:
            message = agent_messages(t)
            message()  # hello
            for rid, (name, version) in enumerate((("npc-policy-int8", 1), (SEED_SIZED, 2)), 1):
                load = {"t": "load", "path": f"models/{name}.npcm", "manifest": signed(local, name, version)}
                t.serial.write(wire.encode({**load, "id": rid}))
                loaded = message()
                assert loaded["t"] == "loaded", loaded
            results = []
            for rid in range(3, 6):  # well inside the 3 s probation of counted time
                t.serial.write(wire.encode({"t": "infer", "x": x, "id": rid}))
                results.append(message())
            t.serial.write(wire.encode({"t": "stats", "heap": True, "id": 6}))
            stats = message()
        assert [(r["t"], r["model"]) for r in results] == [("result", 2)] * 3, results  # no rollback
        runs.append([r["us"] for r in results])
    policy = read_int8_policy(model_file(SEED_SIZED))
    want = R.int8_infer(policy.mlp, R.quantize_input([x], policy.mlp.in_scale, policy.mlp.in_zp))[0]
    assert results[0]["q"] == want.tolist() and results[0]["act"] == int(want.argmax())
    for first, again in zip(runs[0], runs[1], strict=True):  # the same counted time on every boot
        assert abs(first - again) <= HEAP_US, runs
    print(f"\nseed-sized model on the counted core: infer {runs[0]} us; stats {stats}")
    assert all(30_000 < us < 60_000 for us in runs[0])


def test_deflateio_reads_what_cpython_compressed(firmware: BuiltFirmware, tmp_path: Path):
    import gzip
    import hashlib
    import random
    import zlib

    rnd = random.Random(1)
    data = bytes(rnd.choice(b"abcdefgh  \n0123") for _ in range(20000)) + rnd.randbytes(2000)

    def compressed(level: int, wbits: int) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, wbits)
        return c.compress(data) + c.flush()

    cases = {  # name: (stream, DeflateIO format, wbits); what npcpatch reads is zlib with a 1 KB window
        "zlib10": (compressed(9, 10), 2, 10),
        "stored": (compressed(0, 15), 0, 0),
        "raw": (compressed(6, -12), 1, 12),
        "gzip": (gzip.compress(data), 3, 0),
    }
    vfs = blank_flash(tmp_path / "flash.bin")
    with board(firmware.elf, vfs) as t:
        for name, (blob, fmt, wbits) in cases.items():
            t.fs_writefile(f"{name}.z", blob, chunk_size=CHUNK)
            code = (
                "import deflate, hashlib\nh = hashlib.sha256()\n"
                f"with open('{name}.z', 'rb') as f:\n    d = deflate.DeflateIO(f, {fmt}, {wbits})\n"
                "    while b := d.read(700):\n        h.update(b)\nprint(h.digest().hex())"
            )
            assert run(t, code).strip() == hashlib.sha256(data).hexdigest(), name
        t.fs_writefile("bad.z", cases["zlib10"][0][:500], chunk_size=CHUNK)
        with pytest.raises(Exception, match="EOFError"):  # a truncated stream is an error, not a short file
            t.exec("import deflate\ndeflate.DeflateIO(open('bad.z', 'rb'), 2).read()")


def test_mpremote_cli_mount_df_cp_ls_rtc(firmware: BuiltFirmware, tmp_path: Path):
    """The real mpremote CLI on the firmware's UART: `mount` (os.mount of its remote filesystem, imports from
    the host folder), `df` (vfs.mount()), `cp`/`ls` on the flash, `rtc --set`."""
    import sys

    host = tmp_path / "host"
    (host / "sub").mkdir(parents=True)
    (host / "hostmod.py").write_text('print("hello from the host", 6 * 7)\n')
    (host / "sub" / "f.txt").write_text("data123\n")
    port = free_port()
    vfs = blank_flash(tmp_path / "flash.bin")
    proc = subprocess.Popen(qemu_command(firmware.elf, mac=MAC, vfs=vfs, console=console_socket(port)))
    mpremote = [sys.executable, "-m", "mpremote", "connect", f"socket://127.0.0.1:{port}"]

    def cli(*args: str) -> str:
        done = subprocess.run([*mpremote, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    try:
        time.sleep(0.5)
        code = "import os; print(os.getcwd(), sorted(os.listdir())); import hostmod; print(open('sub/f.txt').read())"
        out = cli("mount", str(host), "exec", code)
        assert "/remote ['hostmod.py', 'sub']" in out and "hello from the host 42" in out and "data123" in out
        df = cli("df").splitlines()
        assert df[1].split() == ["<VfsLfs2>", "6291456", "8192", "6283264", "0", "/"]
        cli("fs", "cp", str(host / "hostmod.py"), ":main_copy.py")
        assert "main_copy.py" in cli("fs", "ls", ":")
        cli("rtc", "--set")
        year = int(cli("exec", "import time; print(time.localtime()[0])"))
        assert year == time.gmtime()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_hilbench_image_firmware_prints_the_elf_and_a_flashable_c6_image(firmware: BuiltFirmware):
    import json
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "bench", "image", "firmware", "--json"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert Path(info["elf"]) == firmware.elf and info["elf_sha256"] == firmware.elf_sha256
    image = Path(info["image"]).read_bytes()
    assert image[0] == 0xE9 and int.from_bytes(image[12:14], "little") == 13  # an ESP image for chip id 13 (C6)
