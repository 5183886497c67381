#!/bin/busybox sh
# shellcheck shell=dash
# Stage 2 of the VM: PID 1 on the overlay of the host's tree, with the
# node's mounts already in place (scripts/vm/init). Runs the command run.sh
# left in the control share (/run/bkvm/cmd.sh) as root, its output streamed
# to /run/bkvm/out and its exit code to /run/bkvm/rc, then powers off.
# (The static busybox: a dynamic shell costs ~0.2 s to start under TCG.)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
umask 022
read -r up _ < /proc/uptime; echo "$up" > /run/bkvm/t-boot
/bin/bash /run/bkvm/cmd.sh > /run/bkvm/out 2>&1 < /dev/null
echo $? > /run/bkvm/rc
read -r up _ < /proc/uptime; echo "$up" > /run/bkvm/t-end
sync
/bin/busybox poweroff -f
echo o > /proc/sysrq-trigger
