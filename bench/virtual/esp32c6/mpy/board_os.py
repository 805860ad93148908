# The `os` module of the virtual ESP32-C6 (MicroPython code): the unix port's `os` plus what the
# board's has and the unix port lacks (sizes in ilistdir, uname, sync).
import os as _os
from os import *  # noqa: F403


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
    for entry in _os.ilistdir(path):
        name = entry[0]
        full = name if path in (".", "") else path.rstrip("/") + "/" + name
        size = 0
        if entry[1] == 0x8000:
            size = _os.stat(full)[6]
        yield (name, entry[1], entry[2], size)


def sync():
    pass
