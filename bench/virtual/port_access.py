"""Who may open a virtual board's serial port: what a real `/dev/ttyACM0` (root:dialout, mode 0660) allows.

The serial ports of a virtual board are TCP ports (esptool and mpremote reach them as `rfc2217://` and
`socket://`, whose URLs pyserial cannot add a token to), so the board asks the kernel who is on the other end
of each connection, as the kernel asks who opens a device file: the peer's socket is found in the socket table
(`/proc/net/tcp`, `tcp6`: its owner and inode), then the processes that hold it (`/proc/PID/fd`). A holder is
admitted when it runs as root or as the board's own user (the bench), or has group `dialout` (its fs gid or a
supplementary group), as `usermod -aG dialout` grants on a desk. A connection whose peer cannot be found is
refused, except from another host when the board was told to listen beyond loopback (`hilbench lab serve
--address`: the lab's network is then the boundary, as with ser2net)."""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import os
import socket
import struct
import termios
import tty
from dataclasses import dataclass
from pathlib import Path

SERIAL_GROUP = "dialout"
RULE = f"root, the bench's user or group {SERIAL_GROUP}, like /dev/ttyACM0"


@dataclass(frozen=True)
class PortVerdict:
    """Whether a connection may use the port, and who the peer was (for the board's log)."""

    admitted: bool
    who: str


def _address(hex_addr: str) -> tuple[str, int]:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(host, 16)))
    else:  # four 32-bit words, each in host (little-endian) order
        words = b"".join(struct.pack("<I", int(host[i : i + 8], 16)) for i in range(0, 32, 8))
        addr = ipaddress.IPv6Address(words)
        ip = str(addr.ipv4_mapped or addr)
    return ip, int(port, 16)


def _plain(addr: tuple) -> tuple[str, int]:
    ip = ipaddress.ip_address(addr[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip), int(addr[1])


def peer_socket(peer: tuple, local: tuple) -> tuple[int, str] | None:
    """(owner uid, inode) of the local socket at `peer` connected to `local`, None when it is not on this host."""
    want_local, want_remote = _plain(peer), _plain(local)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if _address(cols[1]) == want_local and _address(cols[2]) == want_remote:
                    return int(cols[7]), cols[9]
    return None


def holders(inode: str) -> list[int]:
    """The pids that hold socket `inode` (those this process may look at)."""
    target = f"socket:[{inode}]"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == target:
                        found.append(int(proc.name))
                        break
    return found


def _credentials(pid: int) -> tuple[int, set[int]] | None:
    """(fs uid, {fs gid, supplementary groups}) of a process, None when it is gone."""
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
    except OSError:
        return None
    fsuid = int(fields["Uid"].split()[3])
    groups = {int(fields["Gid"].split()[3]), *(int(g) for g in fields.get("Groups", "").split())}
    return fsuid, groups


def serial_gid() -> int | None:
    """The gid of the serial group (dialout), None when this host has none."""
    try:
        return grp.getgrnam(SERIAL_GROUP).gr_gid
    except KeyError:
        return None


def open_serial_pty() -> tuple[int, int, str]:
    """A pseudo-terminal in raw mode (no \\r\\n rewriting) for a virtual device's serial port, its master
    non-blocking, its slave root:dialout 0660 as udev sets a /dev/ttyACM* (0600 on a host with no dialout group):
    (master fd, slave fd, slave path)."""
    master, slave = os.openpty()
    tty.setraw(slave, termios.TCSANOW)
    os.set_blocking(master, False)
    path = os.ttyname(slave)
    gid = serial_gid()
    with contextlib.suppress(OSError):
        os.chown(path, -1, gid if gid is not None else -1)
        os.chmod(path, 0o660 if gid is not None else 0o600)
    return master, slave, path


def check(peer: tuple, local: tuple, *, remote_ok: bool) -> PortVerdict:
    """May the process at `peer` (connected to our `local`) use the serial port? Blocking: call in a thread."""
    owner = peer_socket(peer, local)
    if owner is None:
        return PortVerdict(
            remote_ok, f"{peer[0]}:{peer[1]} (another host)" if remote_ok else f"{peer[0]}:{peer[1]} (unknown)"
        )
    uid, inode = owner
    bench = {0, os.geteuid()}
    if uid in bench:
        return PortVerdict(True, f"uid {uid}")
    pids = holders(inode)
    gid = serial_gid()
    creds = [c for c in map(_credentials, pids) if c is not None]
    ok = bool(creds) and all(fsuid in bench or (gid is not None and gid in groups) for fsuid, groups in creds)
    return PortVerdict(ok, f"uid {uid}, pid {','.join(map(str, pids)) or '?'}")


def remote_allowed(host: str) -> bool:
    """Peers on other hosts are admitted only when the board listens beyond loopback."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host not in ("localhost",)
