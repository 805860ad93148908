"""`python -m bench` is the `hilbench` CLI."""

import sys

try:
    from bench.cli import main
except KeyboardInterrupt:  # Ctrl-C before the CLI could catch it itself: still no traceback
    sys.stderr.write("interrupted (SIGINT)\n")
    raise SystemExit(130) from None

raise SystemExit(main())
