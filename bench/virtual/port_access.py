"""Who may open a virtual board's serial port: what a real `/dev/ttyACM0` (root:dialout, mode 0660) allows.

The serial ports of a virtual board are TCP ports (esptool and mpremote reach them as `rfc2217://` and
`socket://`, whose URLs pyserial cannot add a token to), so the board asks the kernel who is on the other end
of each connection, as the kernel asks who opens a device file: the peer's socket is found (its owner and
inode), then the processes that hold it (`/proc/PID/fd`). A holder is
admitted when it runs as root or as the board's own user (the bench), or has group `dialout` (its fs gid or a
supplementary group), as `usermod -aG dialout` grants on a desk. A connection whose peer cannot be found is
refused, except from another host when the board was told to listen beyond loopback (`hilbench lab serve
--address`: the lab's network is then the boundary, as with ser2net).

A flood of connections costs little (`Gate`): the peer's socket is found by the kernel's sock_diag (one lookup,
no walk of the socket table; where it cannot be asked, one search of the table), on the event loop, and root's
or the bench's own connection is admitted there and then; only a connection of another uid needs its holders
found, which looks at that uid's processes only, at most MAX_SCANS at a time (more are refused at once); a
uid refused FLOOD_REFUSALS times within REFUSAL_MEMORY_S is refused without a look for the rest of that time (one
refusal does not keep out the same user's next, rightful connection). Refusals are logged at most once per uid
every LOG_EVERY_S, with the count since the last line."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import ipaddress
import os
import socket
import struct
import termios
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SERIAL_GROUP = "dialout"
RULE = f"root, the bench's user or group {SERIAL_GROUP}, like /dev/ttyACM0"
MAX_SCANS = 4  # connections of other uids being looked into at once; more are refused at once
REFUSAL_MEMORY_S = 5.0  # a uid refused FLOOD_REFUSALS times within this long is refused without a look until it ends
FLOOD_REFUSALS = 8
LOG_EVERY_S = 60.0  # a refused uid gets at most one log line this often


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


def _row_key(ip: str, port: int, six: bool) -> str | None:
    """How the socket table writes `ip:port` (None when the table cannot hold it)."""
    addr = ipaddress.ip_address(ip)
    if not six:
        return f"{int.from_bytes(addr.packed, 'little'):08X}:{port:04X}" if addr.version == 4 else None
    packed = addr.packed if addr.version == 6 else ipaddress.IPv6Address(b"\0" * 10 + b"\xff" * 2 + addr.packed).packed
    words = "".join(f"{int.from_bytes(packed[i : i + 4], 'little'):08X}" for i in range(0, 16, 4))
    return f"{words}:{port:04X}"


SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, NLMSG_ERROR, NETLINK_SOCK_DIAG = 20, 1, 2, 4
NOCOOKIE = 0xFFFFFFFF


def _diag(family: int, local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, str] | bool | None:
    """(uid, inode) of the TCP socket `local` -> `remote` of `family`, as the kernel's sock_diag finds that one
    socket (no table walk); None when there is none; False when sock_diag cannot be asked."""

    def packed(ip: str) -> bytes:
        raw = socket.inet_pton(family, ip)
        return raw + b"\0" * (16 - len(raw))

    sockid = struct.pack(">HH16s16s", local[1], remote[1], packed(local[0]), packed(remote[0]))
    sockid += struct.pack("=III", 0, NOCOOKIE, NOCOOKIE)
    body = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF) + sockid
    message = struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(1.0)
            nl.send(message)
            reply = nl.recv(8192)
    except (OSError, ValueError):
        return False
    if len(reply) < 16 or struct.unpack_from("=H", reply, 4)[0] == NLMSG_ERROR:
        return None
    uid, inode = struct.unpack_from("=II", reply, 16 + 4 + 48 + 12)
    return (uid, str(inode)) if inode else None  # inode 0: no process holds it (closed, TIME_WAIT): nobody's


def peer_socket(peer: tuple, local: tuple) -> tuple[int, str] | None:
    """(owner uid, inode) of the local socket at `peer` connected to `local`, None when it is not on this host
    (or no process holds it any more). The kernel's sock_diag looks up that one socket; where it cannot be asked,
    one search of each socket table for the pair (no parsing of every row)."""
    want_local, want_remote = _plain(peer), _plain(local)
    v4 = ipaddress.ip_address(want_local[0]).version == 4
    for family in (socket.AF_INET, socket.AF_INET6) if v4 else (socket.AF_INET6,):
        if family == socket.AF_INET6 and v4:
            found = _diag(
                family, (f"::ffff:{want_local[0]}", want_local[1]), (f"::ffff:{want_remote[0]}", want_remote[1])
            )
        else:
            found = _diag(family, want_local, want_remote)
        if found is False:
            return _table_lookup(want_local, want_remote)
        if found is not None:
            return found  # type: ignore[return-value]
    return None


def _table_lookup(want_local: tuple[str, int], want_remote: tuple[str, int]) -> tuple[int, str] | None:
    for table, six in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        mine, theirs = _row_key(*want_local, six), _row_key(*want_remote, six)
        if mine is None or theirs is None:
            continue
        try:
            text = Path(table).read_text()
        except OSError:
            continue
        at = text.find(f" {mine} {theirs} ")
        if at >= 0:
            cols = text[at : text.find("\n", at)].split()
            # inode 0: a socket no process holds any more (closed, TIME_WAIT; the kernel shows uid 0): nobody's
            return (int(cols[6]), cols[8]) if cols[8] != "0" else None
    return None


def holders(inode: str, uid: int | None = None) -> list[int]:
    """The pids that hold socket `inode` (those this process may look at), among the processes running as `uid`
    (all when None)."""
    target = f"socket:[{inode}]"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if uid is not None and proc.stat().st_uid != uid:
                continue
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
        return _unknown(peer, remote_ok)
    uid, inode = owner
    return PortVerdict(True, f"uid {uid}") if uid in {0, os.geteuid()} else _by_holders(uid, inode)


def _unknown(peer: tuple, remote_ok: bool) -> PortVerdict:
    return PortVerdict(
        remote_ok, f"{peer[0]}:{peer[1]} (another host)" if remote_ok else f"{peer[0]}:{peer[1]} (unknown)"
    )


def _by_holders(uid: int, inode: str) -> PortVerdict:
    """A socket of another uid: admitted when every process holding it runs as root or the bench's user or has
    the serial group."""
    bench = {0, os.geteuid()}
    pids = holders(inode, uid)
    gid = serial_gid()
    creds = [c for c in map(_credentials, pids) if c is not None]
    ok = bool(creds) and all(fsuid in bench or (gid is not None and gid in groups) for fsuid, groups in creds)
    return PortVerdict(ok, f"uid {uid}, pid {','.join(map(str, pids)) or '?'}")


class Gate:
    """Admission to one board's serial ports, cheap under a flood of connections (see the module's text); `log`
    gets the refusal lines."""

    def __init__(self, remote_ok: bool, log: Callable[[str], None]) -> None:
        self.remote_ok = remote_ok
        self.log = log
        self.refused = 0  # connections refused, all told
        self._scans = 0
        self._refusals: dict[int, tuple[float, int]] = {}  # uid -> (start of its window, refusals in it)
        self._logged: dict[str, tuple[float, int]] = {}  # who -> (last line, refusals since)

    async def admit(self, peer: tuple, local: tuple, port: str) -> PortVerdict:
        """The verdict on a new connection to `port` (its name, for the log)."""
        verdict = await self._verdict(peer, local)
        if not verdict.admitted:
            self.refused += 1
            self._log_refusal(port, verdict.who)
        return verdict

    async def _verdict(self, peer: tuple, local: tuple) -> PortVerdict:
        owner = peer_socket(peer, local)
        if owner is None:
            return _unknown(peer, self.remote_ok)
        uid, inode = owner
        if uid in {0, os.geteuid()}:
            return PortVerdict(True, f"uid {uid}")
        now = time.monotonic()
        since, count = self._refusals.get(uid, (now, 0))
        if now - since >= REFUSAL_MEMORY_S:
            since, count = now, 0
        if count >= FLOOD_REFUSALS or self._scans >= MAX_SCANS:
            self._refusals[uid] = (since, count + 1)
            return PortVerdict(False, f"uid {uid}")
        self._scans += 1
        try:
            verdict = await asyncio.to_thread(_by_holders, uid, inode)
        finally:
            self._scans -= 1
        if len(self._refusals) > 1024:
            self._refusals.clear()
        if verdict.admitted:
            self._refusals.pop(uid, None)
        else:
            self._refusals[uid] = (since, count + 1)
        return verdict

    def _log_refusal(self, port: str, who: str) -> None:
        who_key = who.split(",")[0]  # "uid N", or "IP:PORT (unknown)": one line per uid or peer address
        key = f"{port} {who_key if who_key.startswith('uid ') else who_key.split(' ')[0].rpartition(':')[0]}"
        last, since = self._logged.get(key, (-LOG_EVERY_S, 0))
        now = time.monotonic()
        if now - last < LOG_EVERY_S:
            self._logged[key] = (last, since + 1)
            return
        if len(self._logged) > 1024:
            self._logged.clear()
        self._logged[key] = (now, 0)
        more = f" ({since} more refused since the last line)" if since else ""
        self.log(f"{port} port: refused {who}: the port admits {RULE}{more}")


def remote_allowed(host: str) -> bool:
    """Peers on other hosts are admitted only when the board listens beyond loopback."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host not in ("localhost",)
