"""Landlock confinement (Linux >= 5.13) for a process that runs code the bench does not trust.

`python -m bench.core.landlock --rw DIR [--ro PATH ...] -- MODULE ARGS...` imports MODULE, confines itself, then
calls MODULE.main() with sys.argv = [MODULE, ARGS...]: files only beneath the --rw folders (read and write)
and the --ro paths (read), nothing executed (no process can be spawned into another program), no TCP bind
or connect where the kernel's Landlock ABI has it (4+), no signals to processes outside (ABI 6+). Files
already open stay usable. The virtual ESP32-C6 runs its MicroPython VM this way: a board's code must not
reach the host any more than silicon can. `--exec PATH ... -- /PROGRAM ARGS...` (a PROGRAM given by its
absolute path) confines itself and then executes PROGRAM: the --exec paths (the program, its loader and
libraries) may be read and executed, nothing else may be executed; the counted ESP32-C6 core (QEMU) runs so.
Where the kernel has no Landlock (or it is disabled) it runs unconfined (`abi_version()` tells): the VM's own
confinement (board_os) still holds."""

from __future__ import annotations

import ctypes
import importlib
import os
import struct
import sys
from collections.abc import Sequence

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_BITS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_MAKE_CHAR, _MAKE_BLOCK = 1 << 6, 1 << 11
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1

SYSTEM_LIBRARIES = ("/usr/lib", "/usr/lib64", "/lib64")  # a confined program's loader and libraries (program_argv)
SYSTEM_READ = ("/etc/ld.so.cache",)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is not available."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _fs_bits(abi: int) -> int:
    return next(bits for level, bits in sorted(_FS_BITS_BY_ABI.items(), reverse=True) if abi >= level)


def confine(read_write: Sequence[str], read_only: Sequence[str], executable: Sequence[str] = ()) -> int:
    """Confine this process (see the module doc); returns the ABI used, 0 when Landlock is unavailable."""
    abi = abi_version()
    if abi < 1:
        return 0
    handled = _fs_bits(abi)
    attr = struct.pack("=Q", handled)
    if abi >= 4:
        attr += struct.pack("=Q", NET_BIND_TCP | NET_CONNECT_TCP)
    if abi >= 6:
        attr += struct.pack("=Q", SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        rw = handled & ~(EXECUTE | _MAKE_CHAR | _MAKE_BLOCK)
        rules = ((read_write, rw), (read_only, READ_FILE | READ_DIR), (executable, EXECUTE | READ_FILE | READ_DIR))
        for paths, allowed in rules:
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    # a directory may get every right; a file only the rights that apply to files
                    file_rights = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14)
                    rights = allowed if os.path.isdir(path) else allowed & file_rights
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
                    if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), rule,
                                     ctypes.c_uint32(0)) < 0:  # fmt: skip
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
                finally:
                    os.close(fd)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def program_argv(argv: Sequence[str], read_only: Sequence[str] = (), read_write: Sequence[str] = ()) -> list[str]:
    """The command line that runs the program `argv` (its absolute path first) confined: it may read `read_only`,
    read and write `read_write`, and read and execute only itself, the dynamic loader and the system libraries."""
    opts = [arg for path in read_only for arg in ("--ro", path)]
    opts += [arg for path in read_write for arg in ("--rw", path)]
    opts += ["--exec", os.path.realpath(argv[0])]
    opts += [arg for path in SYSTEM_LIBRARIES if os.path.isdir(path) for arg in ("--exec", path)]
    opts += [arg for path in SYSTEM_READ if os.path.exists(path) for arg in ("--ro", path)]
    return [sys.executable, "-m", "bench.core.landlock", *opts, "--", *argv]


def main(argv: list[str]) -> int:
    """Parse `--rw DIR --ro PATH --exec PATH ... -- MODULE ARGS`, import MODULE, confine, run MODULE.main() with
    ARGS; or, for `-- /PROGRAM ARGS`, confine and execute PROGRAM."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write(
            "usage: python -m bench.core.landlock [--rw DIR] [--ro PATH] [--exec PATH] ...\n"
            "       -- MODULE|/PROGRAM ARGS...\n"
        )
        return 2
    split = argv.index("--")
    opts, rest = argv[:split], argv[split + 1 :]
    paths = {flag: [opts[i + 1] for i, o in enumerate(opts) if o == flag] for flag in ("--rw", "--ro", "--exec")}
    if rest[0].startswith("/"):
        confine(paths["--rw"], paths["--ro"], paths["--exec"])
        try:
            os.execv(rest[0], rest)
        except OSError as exc:
            sys.stderr.write(f"landlock: cannot execute {rest[0]}: {exc.strerror}\n")
            return 126
    module = importlib.import_module(rest[0])  # before: its files are not readable afterwards
    confine(paths["--rw"], paths["--ro"], paths["--exec"])
    sys.argv = rest
    return int(module.main() or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
