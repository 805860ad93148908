"""The pre-merge check: a candidate build against the fleet's own build, replayed interleaved in one job and
judged by the nightly's rules (`hilbench check`, docs/alerts.md)."""
