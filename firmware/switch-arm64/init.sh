#!/bin/busybox sh
# /init of the Switch-style ARM64 image. Settings arrive as kernel args (npc_*=value, in the environment):
#   npc_mode     agent (default) | selftest | idle (no agent; the control channel only)
#   npc_port     guest TCP port the agent listens on (default 7700)
#   npc_mem_mb   memory limit of the agent's cgroup in MiB (default 256)
#   npc_timing   realtime | icount (reported by the agent and the self-test)
#   npc_supply_ms  when given: a lab supply meter's reading on the console every so many ms (NPC-SUPPLY lines)
# Status lines on the console start with "NPC-INIT " and are parsed by bench/devices/qemu_arm64.py.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox mkdir -p /usr/sbin /usr/bin /sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts

say() { echo "NPC-INIT $*"; }
say "boot uptime=$(cut -d' ' -f1 /proc/uptime)"

mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/agent
echo $(( ${npc_mem_mb:-256} * 1024 * 1024 )) > /sys/fs/cgroup/agent/memory.max
echo 0 > /sys/fs/cgroup/agent/memory.swap.max 2>/dev/null

# Run $@ inside the agent's memory cgroup; its exit code is $?.
in_cgroup() { sh -c 'echo $$ > /sys/fs/cgroup/agent/cgroup.procs && exec "$@"' in_cgroup "$@"; }

# The agent starts first: its Python imports (numpy, tflite, asyncio: seconds under TCG) overlap the module
# loading and network setup below; it listens on 0.0.0.0, so connections reach it once eth0 is up.
# -S with the one dist-packages folder on PYTHONPATH: no site processing at start.
AGENT=""
if [ "${npc_mode:-agent}" = agent ]; then
    model=$(ls /opt/npc/models/*.tflite | head -n1)
    # the device's own model and trusted key, when the bench put them in front of the image
    # (bench/devices/console_model.py): they replace the factory ones
    if [ -d /opt/npc/device/models ]; then
        cp /opt/npc/device/models/* /opt/npc/models/ && cp /opt/npc/device/trusted.pub.pem /opt/npc/agent/
        model=/opt/npc/models/$(cd /opt/npc/device/models && ls *.tflite | head -n1)
    fi
    export NPC_PLATFORM_TAG="qemu-${npc_timing:-realtime}"  # the agent's hello: linux-aarch64/qemu-icount
    (cd /opt/npc/agent && PYTHONPATH=/usr/lib/python3/dist-packages in_cgroup python3 -S -u npc_host_agent.py \
        --listen "0.0.0.0:${npc_port:-7700}" --pubkey /opt/npc/agent/trusted.pub.pem --models-dir /opt/npc/models \
        --model "$model" --manifest "${model%.tflite}.json" --mem-limit-mb "${npc_mem_mb:-256}") &
    AGENT=$!
    say "agent-start port=${npc_port:-7700} model=$model"
fi

while read -r module; do
    insmod "$module" || say "error insmod $module"
done < /etc/npc/modules

ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 || say "error network"
echo "nameserver 10.0.2.3" > /etc/resolv.conf

CTL=""
for port in /sys/class/virtio-ports/*; do
    [ "$(cat "$port/name" 2>/dev/null)" = "bench.ctl" ] && CTL="/dev/$(basename "$port")"
done

# The control channel: one command per line from the bench.
# Reads see end-of-file while the bench side is not connected, so read again. The port stays open: the guest's
# driver drops what arrives for a port it has closed, and the bench connects anew for every command.
control() {
    exec 3<>"$CTL"
    while true; do
        while read -r cmd <&3; do
            case "$cmd" in
                status) echo "status mode=${npc_mode:-agent} agent=$(head -n1 /sys/fs/cgroup/agent/cgroup.procs)" >&3 ;;
                poweroff) echo "bye" >&3; say "poweroff"; poweroff -f ;;
                panic) echo "panicking" >&3; echo c > /proc/sysrq-trigger ;;
                *) echo "error unknown command $cmd" >&3 ;;
            esac
        done
        sleep 0.3
    done
}
[ -n "$CTL" ] && control &

# The lab supply meter's readings, when the bench's fleet gives the console one (a modelled supply: the console's
# power from its agent cgroup's busy time since the last reading, usr/lib/npc-board/rails), each with the uptime it
# was taken at: "NPC-SUPPLY <uptime s> <mW>".
if [ -n "$npc_supply_ms" ]; then
    (period=$((npc_supply_ms / 1000)).$((npc_supply_ms % 1000 / 100))$((npc_supply_ms % 100 / 10))$((npc_supply_ms % 10))
     while :; do
         read -r up _ < /proc/uptime
         mw=$(HILBENCH_VIRTUAL=/usr/lib/npc-board HILBENCH_RUN=/tmp sh /usr/lib/npc-board/rails power /tmp/supply.state)
         echo "NPC-SUPPLY $up $mw"
         sleep "$period"
     done) &
fi
say "net-up ip=10.0.2.15 ctl=${CTL:-none} uptime=$(cut -d' ' -f1 /proc/uptime)"

case "${npc_mode:-agent}" in
    selftest) in_cgroup python3 /opt/npc/selftest.py ;;
    idle) say "idle"; while true; do sleep 3600; done ;;
    *) wait "$AGENT" ;;
esac
rc=$?
oom=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/agent/memory.events)
peak=$(cat /sys/fs/cgroup/agent/memory.peak 2>/dev/null || echo "?")
say "agent-exit rc=$rc oom_kill=${oom:-0} mem_peak=$peak limit_mb=${npc_mem_mb:-256}"
sync
poweroff -f
