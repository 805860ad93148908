# Main script of a virtual ESP32-C6's MicroPython VM (MicroPython code).
# argv: root_folder ctl_in_fd ctl_out_fd mac_hex reset_cause shim_dir base_dir (base_dir: the counted firmware's
# frozen modules, whose _machinebase the board's machine imports)
# Mounts the board's folder as "/" (paths confined to it), installs the board's machine/os modules, then runs
# the programs the board sends on the control pipe ("exec|single <length> <filename>\n" + source), answering on
# the other control pipe with "ok\n" or "error <length>\n" + traceback. stdin/stdout are the board's UART.
import io
import os
import sys

import vfs

_root, _in_fd, _out_fd, _mac, _cause, _shim, _base = sys.argv[1:8]
sys.path[:0] = [_shim, _base]
import board_machine  # noqa: E402
import board_os  # noqa: E402
import board_stdio  # noqa: E402

_ctl_in = open("/proc/self/fd/" + _in_fd, "rb")  # noqa: SIM115 (open for the VM's lifetime)
_ctl_out = open("/proc/self/fd/" + _out_fd, "wb")  # noqa: SIM115
board_machine.setup(bytes(int(_mac[i : i + 2], 16) for i in range(0, 12, 2)), _ctl_out, int(_cause))
board_stdio.install()
sys.modules["machine"] = board_machine
sys.modules["os"] = sys.modules["uos"] = board_os  # the unix port's os (system, getenv, VfsPosix) is not reachable
_capacity = int(os.getenv("HILBENCH_VFS_BYTES") or 0)  # the chip's vfs partition (bench.virtual.esp32c6.flash)
del os
vfs.umount("/")
vfs.mount(board_os.board_fs(vfs.VfsPosix(_root), _capacity), "/")
board_os.chdir("/")
del board_os.board_fs


class _Vfs:  # the board's `vfs`, as the esp32 port's: no VfsPosix (the host's files)
    __name__ = "vfs"
    mount = vfs.mount
    umount = vfs.umount
    VfsFat = vfs.VfsFat
    VfsLfs2 = vfs.VfsLfs2


board_os.mount, board_os.umount = vfs.mount, vfs.umount  # os.mount is vfs.mount on the chip
board_os.VfsFat, board_os.VfsLfs2 = vfs.VfsFat, vfs.VfsLfs2
sys.modules["vfs"] = sys.modules["uvfs"] = _Vfs
del vfs
sys.path[:] = ["", "/lib"]
_ME = __file__ if "__file__" in globals() else "vm_main.py"


def _read_exact(n):
    parts = []
    while n > 0:
        part = _ctl_in.read(n)
        if not part:
            raise SystemExit
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _traceback(exc):
    buf = io.StringIO()
    sys.print_exception(exc, buf)
    # the board's machine/os are built in on the chip: their source lines never show in a traceback
    lines = [line for line in buf.getvalue().split("\n") if _ME not in line and _shim not in line and _base not in line]
    return "\n".join(lines).encode()


def _serve():
    scope = {"__name__": "__main__"}
    while True:
        header = _ctl_in.readline()
        if not header:
            return
        mode, length, filename = header.decode().split()
        source = _read_exact(int(length))
        try:
            exec(compile(source, filename, mode), scope)
            reply = b"ok\n"
        except SystemExit:
            reply = b"ok\n"
        except BaseException as exc:  # the board prints it like the REPL does
            text = _traceback(exc)
            reply = b"error " + str(len(text)).encode() + b"\n" + text
        _ctl_out.write(reply)


while True:
    try:
        _serve()
        break
    except KeyboardInterrupt:  # an interrupt that arrived between programs: nothing to stop
        pass
