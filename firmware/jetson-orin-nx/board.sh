#!/bin/sh
# The virtual Jetson's own services (run by /etc/npc/rc.sh at boot). Its INA3221 power monitor: the hwmon files
# a Jetson Orin NX has under /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmonN (channel 1 VDD_IN, 2
# VDD_CPU_GPU_CV, 3 VDD_SOC), kept under /run/npc-board/ (QEMU's virt machine has no I2C sensor to bind), the
# VDD_IN current converted when it is read, modelled from the agent's busy time since the reading before.
HILBENCH_VIRTUAL=/usr/lib/npc-board sh /usr/lib/npc-board/rails ina3221 \
    /run/npc-board/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon0 </dev/null >/dev/null 2>&1 &
