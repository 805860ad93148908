"""`python -m bench` is the `hilbench` CLI."""

from bench.cli import main

raise SystemExit(main())
