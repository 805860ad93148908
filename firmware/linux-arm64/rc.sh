#!/bin/busybox sh
# The OS setup of the bench's Linux-board disk images (busybox init's sysinit): filesystems, network,
# sshd. Status lines on the console start with "NPC-INIT "; the virtual board logs them.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox --install -s 2>/dev/null
say() { echo "NPC-INIT $*" > /dev/console; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
mount -o remount,rw /
[ -f /etc/hostname ] && hostname -F /etc/hostname
say "os-up kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"

ip link set lo up
if ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2; then
    echo "nameserver 10.0.2.3" > /etc/resolv.conf
    say "net-up ip=10.0.2.15"
else
    say "error network"
fi

# The agent's cgroup (cgroup v2): the bench starts its agent there (bench.devices.linux), so that its CPU time is
# counted apart from the bench's own traffic and probes; the virtual boards' rails model their power from it
# (/usr/lib/npc-board/rails).
mount -t cgroup2 cgroup2 /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/agent || say "error cgroups"

# the board's own services, when its recipe gives them (the virtual Jetson: its INA3221's hwmon files)
[ -f /etc/npc/board.sh ] && sh /etc/npc/board.sh

mkdir -p /run/sshd /root/.ssh
chmod 0600 /etc/ssh/ssh_host_ed25519_key
chmod 0700 /root /root/.ssh
if /usr/sbin/sshd -f /etc/ssh/sshd_config; then
    say "sshd-up uptime=$(cut -d' ' -f1 /proc/uptime)"
else
    say "error sshd"
fi

# The virtual board's control port (virtio-serial "bench.ctl"; absent on real boards): a clean shutdown
# when the bench is done with the board, so nothing written is lost (power cuts are hard kills instead).
for port in /sys/class/virtio-ports/*; do
    [ "$(cat "$port/name" 2>/dev/null)" = "bench.ctl" ] || continue
    ctl="/dev/$(basename "$port")"
    (exec 3<>"$ctl"  # kept open: the driver drops what arrives for a closed port (firmware/switch-arm64/init.sh)
     while true; do
        while read -r cmd <&3; do
            case "$cmd" in
                poweroff) echo "bye" >&3; say "poweroff"; sync; poweroff ;;
                *) echo "error unknown command $cmd" >&3 ;;
            esac
        done
        sleep 0.3
    done) &
done
