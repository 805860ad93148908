"""Device images the bench builds itself (the Switch-style ARM64 console image for QEMU)."""
