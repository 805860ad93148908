"""`python -m bench.virtual.esp32c6`: serve one virtual board (see server.py)."""

from bench.virtual.esp32c6.server import main

raise SystemExit(main())
