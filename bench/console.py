"""Output helpers shared by the CLI commands: rich for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console()
err = Console(stderr=True)


def emit_json(data: Any) -> None:
    """Print `data` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
