"""Line transports: subprocess pipes, pyserial URLs, TCP url parsing."""

import asyncio
import sys

import pytest

from bench.agent.transport import ProcessTransport, SerialTransport, open_transport
from bench.core.errors import ConfigError, DeviceUnreachable

ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('echo ' + line)\n    sys.stdout.flush()\n"


def test_process_transport_round_trip(tmp_path):
    async def body():
        t = await ProcessTransport.spawn([sys.executable, "-c", ECHO], stderr_path=tmp_path / "err.log")
        await t.send(b"one\ntwo\n")
        lines = [await t.readline(), await t.readline()]
        await t.close()
        assert t.proc.returncode == 0
        return lines

    assert asyncio.run(body()) == [b"echo one\n", b"echo two\n"]


def test_serial_loop_url_round_trip():
    async def body():
        t = await open_transport("loop://", baud=115200)
        assert isinstance(t, SerialTransport)
        await t.send(b"~{}*0\nconsole\n")
        lines = [await t.readline(), await t.readline()]
        await t.close()
        return lines

    assert asyncio.run(body()) == [b"~{}*0\n", b"console\n"]


def test_bad_urls():
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        asyncio.run(open_transport("tcp://nohost"))
    with pytest.raises(DeviceUnreachable, match="/dev/does-not-exist"):
        asyncio.run(open_transport("/dev/does-not-exist"))


def test_tcp_refused_is_unreachable():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DeviceUnreachable, match=f"tcp://127.0.0.1:{port}"):
        asyncio.run(open_transport(f"tcp://127.0.0.1:{port}", timeout=2))
