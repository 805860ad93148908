"""Test helpers: ready devices for tests (agent, console, recovery, crash decoding) behind the pytest plugin."""
