"""Errors that reach the user, each with the exit code it maps to."""

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `hilbench` exit status means."""

    OK = 0
    FAILED = 1  # a test failed or a regression was found
    USAGE = 2  # bad command line or configuration
    UNREACHABLE = 3  # a device could not be reached


class BenchError(Exception):
    """An error the user can act on; printed without a traceback."""

    exit_code: ExitCode = ExitCode.FAILED

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        file: str | None = None,
        field: str | None = None,
        device: str | None = None,
    ) -> None:
        super().__init__(message)
        self.hint = hint
        self.file = file  # what the error is about, for `--json` (bench.cli): the file, field and device named
        self.field = field
        self.device = device

    @property
    def message(self) -> str:
        """The message without its hint."""
        return super().__str__()

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class ConfigError(BenchError):
    """Bad configuration: a fleet file, baseline file or command-line value."""

    exit_code = ExitCode.USAGE


class DeviceUnreachable(BenchError):
    """A device did not answer on its link."""

    exit_code = ExitCode.UNREACHABLE


class LeaseBusy(BenchError):
    """Another bench process holds the device."""

    exit_code = ExitCode.UNREACHABLE


class ProductFailure(BenchError):
    """The product failed, not the bench: the agent crashed, a model was refused or rolled back, the decision
    budget was missed (bench.core.outcomes: a product failure, exit 1)."""
