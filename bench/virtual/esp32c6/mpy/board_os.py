# The `os` module of the virtual ESP32-C6 (MicroPython code): what the board's `os` has, nothing more.
# The unix port's `os` can run host commands (system), read the host's environment (getenv) and mount
# the host's filesystem (VfsPosix); none of that exists on the chip, so none of it is reachable from here:
# every name is bound one by one (no `import os` kept: a function's __globals__ would hand it out), and the
# board's folder is served through `board_fs`, whose paths cannot leave it (no `..` above "/").
from os import chdir, getcwd, listdir, mkdir, remove, rename, rmdir, stat, statvfs, urandom  # noqa: F401
from os import ilistdir as _ilistdir


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


def normpath(path, cwd="/"):
    """`path` (absolute, or relative to `cwd`) as an absolute path with no `.` or `..`, never above "/"."""
    parts = [] if path.startswith("/") else [p for p in cwd.split("/") if p]
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def board_fs(inner):
    """A VFS object serving `inner` (a VfsPosix on the board's folder) with every path confined to it.
    `inner` stays in the closure: MicroPython functions do not expose their closures.

    `inner` gets paths relative to the process's working folder, which stays the board's folder (the
    board's current folder is kept here): VfsPosix builds an absolute path in one shared buffer, so
    rename(absolute, absolute) would pass the new name twice."""
    cwd = ["/"]
    inner.chdir("/")  # the process's working folder: the board's folder, for good

    def p(path):
        return normpath(path, cwd[0])[1:] or "."

    class BoardFs:
        def mount(self, readonly, mkfs):
            pass

        def umount(self):
            pass

        def open(self, path, mode):
            return inner.open(p(path), mode)

        def ilistdir(self, path):
            return inner.ilistdir(p(path))

        def stat(self, path):
            return inner.stat(p(path))

        def statvfs(self, path):
            return inner.statvfs(p(path))

        def mkdir(self, path):
            return inner.mkdir(p(path))

        def rmdir(self, path):
            return inner.rmdir(p(path))

        def remove(self, path):
            return inner.remove(p(path))

        def rename(self, old, new):
            return inner.rename(p(old), p(new))

        def chdir(self, path):
            target = normpath(path, cwd[0])
            if inner.stat(target[1:] or ".")[0] & 0x4000 == 0:
                raise OSError(20)  # ENOTDIR
            cwd[0] = target

        def getcwd(self):
            return cwd[0]

    return BoardFs()
