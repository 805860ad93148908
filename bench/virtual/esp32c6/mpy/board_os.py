# The `os` module of the virtual ESP32-C6 (MicroPython code): what the board's `os` has, nothing more.
# The unix port's `os` can run host commands (system), read the host's environment (getenv) and mount
# the host's filesystem (VfsPosix); none of that exists on the chip, so none of it is reachable from here:
# every name is bound one by one (no `import os` kept: a function's __globals__ would hand it out), and the
# board's folder is served through `board_fs`, whose paths cannot leave it (no `..` above "/"), and which is
# as big as the chip's vfs partition: a write past it fails with ENOSPC, as littlefs does, and statvfs says
# the partition's size, not the host disk's.
# mount/umount/VfsFat/VfsLfs2 are the VM's own (set by vm_main): mounting needs a VFS object, and the only
# host-backed one (VfsPosix) is not reachable from here.
from io import IOBase as _IOBase
from os import chdir, getcwd, listdir, mkdir, remove, rename, rmdir, stat, statvfs, urandom  # noqa: F401
from os import ilistdir as _ilistdir
from os import remove as unlink  # noqa: F401

__name__ = "os"
del __file__  # the chip's os is built in: no host path in its repr
sep = "/"
# set by vm_main: mount, umount (the VM's vfs.mount/umount, as os.mount is vfs.mount on the chip), VfsFat,
# VfsLfs2 (filesystems on a block device the program gives: nothing of the host's)


class _Uname:
    sysname = "esp32"
    nodename = "esp32"
    release = "1.29.0"
    version = "v1.29.0 (virtual)"
    machine = "ESP32C6 module with ESP32C6"

    def __iter__(self):
        return iter((self.sysname, self.nodename, self.release, self.version, self.machine))


def uname():
    return _Uname()


def ilistdir(path="."):
    for entry in _ilistdir(path):
        name = entry[0]
        full = name if path in (".", "") else path.rstrip("/") + "/" + name
        size = 0
        if entry[1] == 0x8000:
            size = stat(full)[6]
        yield (name, entry[1], entry[2], size)


def sync():
    pass


def _normpath(path, cwd="/"):
    """`path` (absolute, or relative to `cwd`) as an absolute path with no `.` or `..`, never above "/"."""
    parts = [] if path.startswith("/") else [p for p in cwd.split("/") if p]
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


_BLOCK = 4096  # littlefs block size of MicroPython's esp32 port
_ENOSPC = 28


def _blocks(size):
    return (size + _BLOCK - 1) // _BLOCK


def board_fs(inner, capacity):
    """A VFS object serving `inner` (a VfsPosix on the board's folder) with every path confined to it and
    `capacity` bytes of space (the vfs partition). `inner` stays in the closure: MicroPython functions do not
    expose their closures.

    `inner` gets paths relative to the process's working folder, which stays the board's folder (the
    board's current folder is kept here): VfsPosix builds an absolute path in one shared buffer, so
    rename(absolute, absolute) would pass the new name twice.

    Space is counted as littlefs would, roughly: a block per started 4 KB of each file, two per folder
    (a metadata pair), the root's pair included; littlefs's inline small files and its copy-on-write
    blocks make its own count differ by a few blocks."""
    cwd = ["/"]
    total = capacity // _BLOCK if capacity > 0 else 1 << 30  # 0: unbounded (a VM started without a board)
    used = [0]
    inner.chdir("/")  # the process's working folder: the board's folder, for good

    def p(path):
        return _normpath(path, cwd[0])[1:] or "."

    def walk(path):
        n = 2
        for entry in inner.ilistdir(path):
            full = entry[0] if path == "." else path + "/" + entry[0]
            n += walk(full) if entry[1] == 0x4000 else _blocks(inner.stat(full)[6])
        return n

    def recount():
        used[0] = walk(".")

    def claim(blocks):
        if blocks > 0 and used[0] + blocks > total:
            raise OSError(_ENOSPC)
        used[0] += blocks

    class Written(_IOBase):
        """A file open for writing: each write claims the blocks it adds, or fails with ENOSPC first."""

        def __init__(self, f, size, append):
            self._f = f
            self._size = size
            self._append = append

        def write(self, data, n=-1):
            if n >= 0:
                data = memoryview(data)[:n]
            length = len(data.encode()) if isinstance(data, str) else len(data)
            start = self._size if self._append else self._f.tell()
            grown = max(self._size, start + length)
            claim(_blocks(grown) - _blocks(self._size))
            written = self._f.write(data)
            self._size = grown
            return written

        def readinto(self, buf, n=-1):
            return self._f.readinto(buf) if n < 0 else self._f.readinto(memoryview(buf)[:n])

        def read(self, n=-1):
            return self._f.read(n)

        def readline(self, n=-1):
            return self._f.readline(n)

        def readlines(self):
            return self._f.readlines()

        def seek(self, offset, whence=0):
            return self._f.seek(offset, whence)

        def tell(self):
            return self._f.tell()

        def flush(self):
            return self._f.flush()

        def ioctl(self, request, arg):
            if request == 1:  # MP_STREAM_FLUSH
                self._f.flush()
            elif request == 4:  # MP_STREAM_CLOSE
                self.close()
            else:
                return -1
            return 0

        def close(self):
            if self._f is not None:
                self._f.close()
                self._f = None
                recount()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def __iter__(self):
            return self

        def __next__(self):
            line = self._f.readline()
            if not line:
                raise StopIteration
            return line

    class BoardFs:
        def mount(self, readonly, mkfs):
            recount()

        def umount(self):
            pass

        def open(self, path, mode):
            if not any(c in mode for c in "wax+"):
                return inner.open(p(path), mode)
            try:
                before = inner.stat(p(path))[6]
            except OSError:
                before = -1
            if before < 0 and used[0] >= total:
                raise OSError(_ENOSPC)  # a new file: littlefs needs room for its entry
            f = inner.open(p(path), mode)
            if "w" in mode and before > 0:
                used[0] -= _blocks(before)  # truncated
            return Written(f, 0 if "w" in mode else max(before, 0), "a" in mode)

        def ilistdir(self, path):
            return inner.ilistdir(p(path))

        def stat(self, path):
            return inner.stat(p(path))

        def statvfs(self, path):
            recount()
            free = max(total - used[0], 0)
            return (_BLOCK, _BLOCK, total, free, free, 0, 0, 0, 0, 255)  # what vfs_lfs2 reports

        def mkdir(self, path):
            claim(2)
            try:
                inner.mkdir(p(path))
            finally:
                recount()

        def rmdir(self, path):
            inner.rmdir(p(path))
            recount()

        def remove(self, path):
            inner.remove(p(path))
            recount()

        def rename(self, old, new):
            inner.rename(p(old), p(new))
            recount()

        def chdir(self, path):
            target = _normpath(path, cwd[0])
            if inner.stat(target[1:] or ".")[0] & 0x4000 == 0:
                raise OSError(20)  # ENOTDIR
            cwd[0] = target

        def getcwd(self):
            return cwd[0]

    return BoardFs()
