"""The bench's own readers on a Linux board (a power meter's command, the telemetry sampler): each moves itself into
the board's `npc-probes` cgroup where it has one (the bench's images make it at boot: firmware/linux-arm64/rc.sh),
so that a virtual board's modelled rails count the board's work and not the readings taken of it. On a board
without that cgroup the move fails quietly and the command runs as given."""

PROBES_CGROUP = "/sys/fs/cgroup/npc-probes"


def as_probe(command: str) -> str:
    """`command` (a remote shell command) run from the probes' cgroup where the board has one."""
    return f"{{ echo $$ > {PROBES_CGROUP}/cgroup.procs; }} 2>/dev/null; {command}"
