"""Links to devices: SSH (OpenSSH client)."""
