"""The lab methods of links to something that runs on the bench host itself (a QEMU machine, a browser)."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.core.errors import ConfigError, DeviceUnreachable


class OnTheBenchHost:
    """The lab methods of a link to something that runs on the bench host itself (a QEMU machine, a browser):
    nothing to export, no lab place. `what` names it in the errors."""

    what: ClassVar[str]

    def lab_resource(self, address: str | None, baud: int) -> dict[str, Any]:
        """Never exported."""
        raise ConfigError(f"{self.what} runs on the bench host itself and cannot be exported")

    @classmethod
    def lab_export(cls, device: Any, where: str, baud: int) -> dict[str, Any]:
        """Never exported."""
        raise ConfigError(f"{where}: kind {device.kind} runs on the bench host itself and cannot be exported")

    @classmethod
    def from_lab(cls, device: Any, params: dict[str, Any]) -> Any:
        """Never: it has no lab place."""
        raise DeviceUnreachable(f"device {device.name!r}: {cls.what} is not reached through a lab place")
