#!/bin/busybox sh
# /init of /boot/initrd.img on the bench's Linux-board disk images: load the disk and filesystem modules,
# mount the root the kernel command line names (root=, rootfstype=), hand over to busybox init on it.
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
say() { echo "NPC-INIT $*"; }
say "boot uptime=$(/bin/busybox cut -d' ' -f1 /proc/uptime)"
while read -r module; do
    /bin/busybox insmod "$module" || say "error insmod $module"
done < /etc/npc/modules
root=/dev/vda; fstype=ext4
for arg in $(/bin/busybox cat /proc/cmdline); do
    case "$arg" in root=*) root="${arg#root=}" ;; rootfstype=*) fstype="${arg#rootfstype=}" ;; esac
done
n=0
while [ ! -b "$root" ] && [ $n -lt 50 ]; do /bin/busybox sleep 0.1; n=$((n + 1)); done
if ! /bin/busybox mount -t "$fstype" -o rw "$root" /newroot; then
    say "error cannot mount $root ($fstype)"
    /bin/busybox poweroff -f
fi
say "root-mounted dev=$root"
/bin/busybox mount --move /dev /newroot/dev
/bin/busybox umount /proc /sys
exec /bin/busybox switch_root /newroot /bin/busybox init
