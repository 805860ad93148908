"""Deploy files to a Linux device over SSH, sending only what changed (sha256 compared on the device)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from bench.bundles.trust import TRUST_FILES, refuse_key_downgrade
from bench.core.errors import BenchError
from bench.core.paths import deploy_name
from bench.links.ssh import SshConnection, quote

# remote path (relative to the deploy folder) -> local file or bytes
Files = dict[str, Path | bytes]


@dataclass
class DeployResult:
    """What a deploy sent and what it found already in place."""

    sent: list[str]
    unchanged: list[str]
    bytes_sent: int


def content(source: Path | bytes) -> bytes:
    """The bytes of a file to deploy."""
    return source if isinstance(source, bytes) else Path(source).read_bytes()


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


async def remote_hashes(conn: SshConnection, folder: str, names: list[str]) -> dict[str, str]:
    """sha256 of each named file under `folder` on the device (missing files are left out)."""
    if not names:
        return {}
    # `folder` may start with $HOME, so it is double-quoted for the remote shell, not single-quoted.
    command = f'cd "{folder}" 2>/dev/null && sha256sum -- {quote(*names)} 2>/dev/null; true'
    result = await conn.run(command)
    hashes: dict[str, str] = {}
    for line in result.text.splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            hashes[name] = digest
    return hashes


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def deploy(conn: SshConnection, folder: str, files: Files) -> DeployResult:
    """Make `folder` on the device hold `files`: compare hashes, send the changed ones in one tar stream,
    and verify every sent file's hash on the device afterwards."""
    for name in files:
        deploy_name(conn.device, name)
    wanted = {name: content(src) for name, src in files.items()}
    want_hash = {name: sha256_hex(data) for name, data in wanted.items()}
    have = await remote_hashes(conn, folder, sorted(wanted))
    for name in TRUST_FILES:
        if name in wanted:
            refuse_key_downgrade(conn.device, name, wanted[name], have.get(name) not in (None, want_hash[name]))
    changed = {name: data for name, data in wanted.items() if have.get(name) != want_hash[name]}
    if changed:
        # sync: the files are on the board's storage before the deploy says so (a power cut or a killed
        # guest right after must not leave a truncated agent behind)
        await conn.run(f'mkdir -p "{folder}" && tar -xf - -C "{folder}" && sync', input=_tar(changed), timeout_s=300)
        after = await remote_hashes(conn, folder, sorted(changed))
        bad = [name for name in changed if after.get(name) != want_hash[name]]
        if bad:
            raise BenchError(f"device {conn.device!r}: deploy verify failed for {', '.join(bad)} in {folder}")
    return DeployResult(
        sent=sorted(changed),
        unchanged=sorted(set(wanted) - set(changed)),
        bytes_sent=sum(len(d) for d in changed.values()),
    )
