"""Linux boards reimaged the way a lab does it: the OS image written to the board's storage with bmaptool and
checked against its bmap, the board booted and its OS fingerprint verified (`hilbench flash --os`)."""
