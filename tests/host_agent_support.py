"""The host agent (host/) deployed from its bundle into a folder on this bench host, as a board gets it, and run
there as a local process listening on loopback TCP."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import bundles
from bench.config.fleet import Device


def deploy_host_bundle(device: Device, folder: Path) -> None:
    """Copy `device`'s host/ bundle (its signed manifest written under `folder`/.manifests) into `folder`."""
    for src, dest in bundles.host_bundle(device, folder / ".manifests"):
        (folder / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, folder / dest)


class HostAgentProcess:
    """host/ deployed into `folder` and run isolated from the checkout, listening on a free loopback port
    (`port`); its output goes to `folder`/agent.log."""

    def __init__(self, device: Device, folder: Path, start_timeout_s: float = 60) -> None:
        deploy_host_bundle(device, folder)
        port_file = folder / "port"
        argv = bundles.host_agent_command(
            device, str(folder), python=sys.executable, listen="127.0.0.1:0", isolated=True
        )
        self.log_path = folder / "agent.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen([*argv, "--port-file", str(port_file)], cwd=folder, stdout=self.log,
                                     stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + start_timeout_s
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the host agent did not start listening: {self.log_path.read_text()}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())

    def stop(self) -> None:
        """Terminate the agent (kill it when it does not end within 10 s) and close its log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
