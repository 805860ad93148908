"""How the bench starts a Chromium: Debian's executable, the flags of a closed network, DevTools over a pipe
(fds 3 and 4, NUL-delimited JSON: no port another local process could reach), and, where the bench runs as
root, an unprivileged user of its own with a profile folder it owns and Chromium's sandbox on where the kernel
allows one. Both the web devices' browser (bench.browser.browser) and the report check (tests.report_chromium)
start theirs here.

The user is `hilbench-browser` (a system user `.ci/setup` creates), else `nobody`. The drop is done by
util-linux `setpriv` (which also sets the death signal: the browser dies with the bench); no Python code runs
between fork and exec but the two `dup2` that place the pipe on fds 3 and 4.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import ConfigError
from bench.core.folders import copy_file
from bench.core.procs import DIE_WITH_BENCH

BROWSER_USERS = ("hilbench-browser", "nobody")  # the first that exists runs Chromium when the bench is root

# closed network: nothing in the background may try to reach out
FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def chromium_path() -> str:
    """Debian's chromium (or chromium-browser / google-chrome on PATH), or ConfigError."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError("no Chromium on PATH", hint="install Debian's `chromium` package (.ci/setup does)")


@dataclass(frozen=True)
class BrowserUser:
    """Who Chromium runs as: a name, uid and gid (the bench's own when it is not root)."""

    name: str
    uid: int
    gid: int

    @property
    def switched(self) -> bool:
        """True when Chromium runs as another user than the bench."""
        return self.uid != os.geteuid()


def browser_user() -> BrowserUser:
    """The unprivileged user Chromium runs as when the bench is root, else the bench's own user."""
    if os.geteuid() != 0:
        me = os.geteuid()
        return BrowserUser(_user_name(me), me, os.getegid())
    for name in BROWSER_USERS:
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return BrowserUser(name, entry.pw_uid, entry.pw_gid)
    raise ConfigError(
        "the bench runs as root and none of the users Chromium may run as exists: " + ", ".join(BROWSER_USERS),
        hint="create one: useradd --system --no-create-home --shell /usr/sbin/nologin hilbench-browser",
    )


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _as_user(user: BrowserUser) -> list[str]:
    """The argv prefix that runs a program as `user` (no supplementary groups) and ties it to the bench."""
    if not user.switched:
        return list(DIE_WITH_BENCH)
    return ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", *DIE_WITH_BENCH[1:]]


@functools.cache
def sandbox_allowed(user: BrowserUser) -> bool:
    """Can Chromium's sandbox run as `user` here: it needs unprivileged user namespaces (Debian's chromium has
    no setuid helper), which some kernels and containers turn off. Tried once per process, as that user."""
    if user.uid == 0:
        return False  # Chromium refuses to run its sandbox as root
    try:
        done = subprocess.run([*_as_user(user), "unshare", "--user", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def group_id(name: str) -> int | None:
    """The gid of group `name`, None when it does not exist."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


@dataclass
class Launch:
    """One Chromium to start: its argv, the pipe's ends (the bench's and the child's), its profile and user.

    `spawn_kwargs()` goes to subprocess.Popen or asyncio.create_subprocess_exec; `started()` closes the child's
    ends in the bench afterwards; `cleanup()` removes the profile."""

    user: BrowserUser
    profile: Path
    argv: list[str]
    sandbox: bool
    to_browser: int  # the bench writes commands here
    from_browser: int  # and reads replies and events here
    _child_fds: tuple[int, int] = field(default=(-1, -1), repr=False)
    _pages: Path | None = field(default=None, repr=False)  # the bench's copies of pages, readable by the browser

    def spawn_kwargs(self) -> dict[str, object]:
        """pass_fds, preexec_fn (two dup2), env (HOME in the profile) and a new session."""
        read_end, write_end = self._child_fds

        def place_fds() -> None:
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.profile),
            "XDG_CONFIG_HOME": str(self.profile / ".config"),
            "XDG_CACHE_HOME": str(self.profile / ".cache"),
            "TMPDIR": str(self.profile),
        }
        return {"pass_fds": (3, 4, read_end, write_end), "preexec_fn": place_fds, "env": env, "start_new_session": True}

    def started(self) -> None:
        """The child has its ends: close the bench's copies."""
        for fd in self._child_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child_fds = (-1, -1)

    def take_pipe(self) -> tuple[int, int]:
        """The bench's ends (to the browser, from it), now owned by the caller, who closes them."""
        ends = (self.to_browser, self.from_browser)
        self.to_browser = self.from_browser = -1
        return ends

    def cleanup(self) -> None:
        """Close what is still open of the pipe and remove the profile."""
        self.started()
        for fd in self.take_pipe():
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)
        if self._pages is not None:
            shutil.rmtree(self._pages, ignore_errors=True)

    def readable(self, path: Path) -> Path:
        """A copy of `path` the browser's user can read (the bench's own files may be in folders only the bench
        can enter, such as pytest's 0700 tmp folders): in a folder of the bench's own, mode 0755, beside the
        profile rather than in it (the browser's user owns the profile and could swap what the bench writes
        there)."""
        copy = self.bench_dir() / path.name
        copy_file(path, copy, what="browser pages folder", mode=0o644)
        return copy

    def bench_dir(self) -> Path:
        """The bench's own folder beside the profile (mode 0755: the browser's user reads, never writes, there),
        for the pages it opens and the browser's log; removed by `cleanup()`."""
        if self._pages is None:
            self._pages = Path(tempfile.mkdtemp(prefix="hilbench-pages-"))
            os.chmod(self._pages, 0o755)
        return self._pages


def prepare(extra_flags: tuple[str, ...] = ()) -> Launch:
    """A fresh profile owned by the browser's user, the DevTools pipe, and the argv to start Chromium with."""
    user = browser_user()
    profile = Path(tempfile.mkdtemp(prefix="hilbench-chromium-"))  # 0700
    if user.switched:
        os.chown(profile, user.uid, user.gid)
    sandbox = sandbox_allowed(user)
    to_child_r, to_browser = os.pipe()
    from_browser, from_child_w = os.pipe()
    # the child's ends go above fd 9 first, so that placing them on 3 and 4 cannot overwrite one with the other
    child = (fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10))
    os.close(to_child_r)
    os.close(from_child_w)
    for fd in (to_browser, from_browser):
        os.set_inheritable(fd, False)
    argv = [
        *_as_user(user),
        chromium_path(),
        *FLAGS,
        *(() if sandbox else ("--no-sandbox",)),
        *extra_flags,
        f"--user-data-dir={profile}",
    ]
    return Launch(user, profile, argv, sandbox, to_browser, from_browser, child)
