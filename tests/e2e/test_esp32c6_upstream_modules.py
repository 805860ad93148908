"""What the counted ESP32-C6 firmware has because it is MicroPython's own build (py/, extmod/ and the release's
mpy-cross): an asyncio program with tasks, an Event and a StreamReader on stdin; re and heapq; a native .mpy
built by mpy-cross -march=rv32imc; a random seed that differs from boot to boot, as the chip's RNG gives; and
md5, sha1, cryptolib and tls through mbedTLS."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from bench.bundles.c6_firmware import BuiltFirmware, build_firmware, mpy_cross
from bench.virtual.esp32c6.counted import Vfs
from tests.esp32c6_support import counted_repl

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
MAC = bytes.fromhex("6055f9c61101")
FLASH_BYTES = 1024 * 1024

ASYNC_PROGRAM = """
import asyncio, sys, time
log = []
async def ticker(done):
    for i in range(3):
        t0 = time.ticks_ms()
        await asyncio.sleep_ms(20)
        log.append(("tick", i, time.ticks_diff(time.ticks_ms(), t0) >= 20))
    done.set()
async def reader(done):
    line = await asyncio.StreamReader(sys.stdin).readline()
    log.append(("line", line.strip()))
    await done.wait()
    log.append(("done",))
async def main():
    done = asyncio.Event()
    await asyncio.gather(reader(done), ticker(done))
asyncio.run(main())
print(repr(log))
"""

NATIVE_MODULE = """
import micropython

@micropython.native
def total(n):
    s = 0
    for i in range(n):
        s += i
    return s

@micropython.viper
def dot(a, b, n: int) -> int:
    pa = ptr8(a)
    pb = ptr8(b)
    s = 0
    for i in range(n):
        s += pa[i] * pb[i]
    return s
"""


@pytest.fixture(scope="module")
def firmware() -> BuiltFirmware:
    return build_firmware()


def test_asyncio_tasks_event_and_a_streamreader_on_stdin(firmware: BuiltFirmware) -> None:
    with counted_repl(firmware.elf, mac=MAC) as t:
        t.exec_raw_no_follow(ASYNC_PROGRAM)
        t.serial.write(b"ping\n")  # what the reader task awaits, while the ticker's sleeps go on
        out, err = t.follow(timeout=30)
    assert not err, err.decode()
    log = ast.literal_eval(out.decode().strip())
    assert log[0] == ("line", b"ping")  # read while the other task slept
    assert log[1:4] == [("tick", 0, True), ("tick", 1, True), ("tick", 2, True)]
    assert log[4] == ("done",)  # the Event set by the ticker released the reader


def test_re_match_and_heapq(firmware: BuiltFirmware) -> None:
    code = (
        "import re, heapq\n"
        "m = re.match(r'(\\w+)=(\\d+)', 'speed=42;')\n"
        "h = []\n"
        "for x in (5, 1, 4, 2, 3): heapq.heappush(h, x)\n"
        "print(m.group(1), m.group(2), re.match('x', 'y'), [heapq.heappop(h) for _ in range(5)])"
    )
    with counted_repl(firmware.elf, mac=MAC) as t:
        assert t.exec(code).decode().strip() == "speed 42 None [1, 2, 3, 4, 5]"


def test_a_native_mpy_from_mpy_cross_imports_and_runs(firmware: BuiltFirmware, tmp_path: Path) -> None:
    source = tmp_path / "fastmath.py"
    source.write_text(NATIVE_MODULE, encoding="utf-8")
    built = subprocess.run([str(mpy_cross()), "-march=rv32imc", str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    mpy = source.with_suffix(".mpy").read_bytes()
    assert mpy[0] == ord("M") and mpy[2] >> 2 == 11  # an .mpy with native code for RV32IMC (arch 11)
    flash = tmp_path / "flash.bin"
    flash.write_bytes(b"\xff" * FLASH_BYTES)
    with counted_repl(firmware.elf, mac=MAC, vfs=Vfs(flash, 0, FLASH_BYTES)) as t:
        t.fs_writefile("fastmath.mpy", mpy)
        out = t.exec(
            "import fastmath\nprint(fastmath.total(1000), fastmath.dot(b'\\x01\\x02\\x03', b'\\x04\\x05\\x06', 3))"
        )
    assert out.decode().split() == ["499500", "32"]


def test_the_random_seed_differs_from_boot_to_boot(firmware: BuiltFirmware) -> None:
    draws = []
    for _ in range(2):
        with counted_repl(firmware.elf, mac=MAC) as t:
            draws.append(t.exec("import random, os\nprint(random.getrandbits(30), os.urandom(8).hex())").decode())
    assert draws[0] != draws[1]  # the same board and firmware, a new seed at each boot (the chip's RNG)


def test_md5_sha1_cryptolib_and_tls_through_mbedtls(firmware: BuiltFirmware) -> None:
    """What the chip's build has through ESP-IDF's mbedTLS: hashlib's md5 and sha1 (as CPython's), cryptolib's
    AES (FIPS-197's example vector, ECB and CBC there and back) and the tls module with its contexts."""
    import hashlib

    code = (
        "import hashlib, cryptolib, tls\n"
        "key = bytes(range(16)); block = bytes.fromhex('00112233445566778899aabbccddeeff')\n"
        "cbc = cryptolib.aes(key, 2, bytes(16)).encrypt(block * 2)\n"
        "back = cryptolib.aes(key, 2, bytes(16)).decrypt(cbc) == block * 2\n"
        "print(hashlib.md5(b'abc' * 100).digest().hex(), hashlib.sha1(b'abc' * 100).digest().hex(),\n"
        "      cryptolib.aes(key, 1).encrypt(block).hex(), back,\n"
        "      type(tls.SSLContext(tls.PROTOCOL_TLS_CLIENT)).__name__, tls.CERT_REQUIRED)"
    )
    with counted_repl(firmware.elf, mac=MAC) as t:
        md5, sha1, aes, cbc_back, context, required = t.exec(code).decode().split()
    assert md5 == hashlib.md5(b"abc" * 100).hexdigest()
    assert sha1 == hashlib.sha1(b"abc" * 100).hexdigest()
    assert aes == "69c4e0d86a7b0430d8cdb78070b4c55a"  # FIPS-197, appendix C.1
    assert (cbc_back, context, required) == ("True", "SSLContext", "2")
