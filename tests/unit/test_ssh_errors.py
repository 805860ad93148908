"""OpenSSH's error text becomes an error that names the device, maps to the right exit code and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.config.fleet import SshLink
from bench.core.errors import ConfigError, DeviceUnreachable, ExitCode
from bench.links.ssh import Backoff, classify_ssh_error

LINK = SshLink(user="nvidia", host="10.0.0.21", port=22, key=Path("/keys/bench"), host_key="ssh-ed25519 AAAA")


@pytest.mark.parametrize(
    ("stderr", "kind", "code", "words"),
    [
        ("ssh: connect to host 10.0.0.21 port 22: Connection refused\n", DeviceUnreachable, 3, "Connection refused"),
        ("ssh: connect to host 10.0.0.21 port 22: Connection timed out\n", DeviceUnreachable, 3, "timed out"),
        ("nvidia@10.0.0.21: Permission denied (publickey).\n", DeviceUnreachable, 3, "authorized_keys"),
        ("Host key verification failed.\n", ConfigError, 2, "host_key pinned in the fleet file"),
        (
            "No ED25519 host key is known for [10.0.0.21]:22 and you have requested strict checking.\n"
            "Host key verification failed.\n",
            ConfigError,
            2,
            "host key",
        ),
    ],
)
def test_classify(stderr: str, kind: type, code: int, words: str) -> None:
    exc = classify_ssh_error("orin-lab-1", LINK, stderr)
    assert isinstance(exc, kind) and exc.exit_code == ExitCode(code)
    assert "device 'orin-lab-1' (nvidia@10.0.0.21:22)" in str(exc) and words in str(exc)


def test_backoff_grows_to_its_ceiling() -> None:
    delays = Backoff(first_s=0.2, factor=2, max_s=1.0).delays()
    assert [next(delays) for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
