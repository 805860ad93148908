"""The basics every layer uses: errors and exit codes, typed fields, input files, shipped paths, processes,
progress and leases."""
