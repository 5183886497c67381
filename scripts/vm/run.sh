#!/usr/bin/env bash
# scripts/vm/run.sh --kernel NAME [--timeout S] [--mem MB] [--cpus N] -- CMD [ARGS...]
#
# Boots a Debian kernel (scripts/vm/kernel.sh NAME: 6.1, 6.12, 7) in QEMU
# under TCG and runs CMD as root inside it, in the current directory's path.
# The VM sees the host's / read-only (virtio-9p) under a tmpfs overlay, so
# host paths (/work/..., build/...) work and nothing it writes reaches the
# host; cgroup2 is mounted alone at /sys/fs/cgroup with every controller
# enabled (pure v2), bpffs at /sys/fs/bpf; no network device (loopback only).
# CMD's output (stdout and stderr together) is printed live; run.sh exits
# with CMD's exit code, or 124 on timeout and 125 when the VM could not be
# started, did not boot or died before CMD finished (with the tail of the
# console log).
# Run it under the e2e lock: flock /tmp/bk-e2e.lock scripts/vm/run.sh ...
# BK_VM_APPEND adds kernel command-line parameters; BK_VM_KEEP=1 keeps the
# run's directory (console log, output) under build/vm/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
usage() { echo "usage: $0 --kernel 6.1|6.12|7 [--timeout S] [--mem MB] [--cpus N] -- CMD [ARGS...]" >&2; exit 2; }

NAME='' TIMEOUT=600 MEM=2048 CPUS=1
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) NAME=${2:-}; shift 2 ;;
	--timeout) TIMEOUT=${2:-}; shift 2 ;;
	--mem) MEM=${2:-}; shift 2 ;;
	--cpus) CPUS=${2:-}; shift 2 ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
[ -n "$NAME" ] && [ $# -gt 0 ] || usage
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (9p passthrough of /)" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null && [ -x /bin/busybox ] ||
	{ echo "run.sh: needs qemu-system-x86 and busybox-static (scripts/install-deps.sh)" >&2; exit 125; }

K=$("$ROOT/scripts/vm/kernel.sh" "$NAME") || { echo "run.sh: cannot fetch kernel $NAME" >&2; exit 125; }
rel=$(cat "$K/release")

# ---- initramfs: static busybox, the modules for 9p + overlay, stage 1 ----
# (rebuilt when the stage-1 script or busybox changed)
INITRD=$K/initramfs.cpio
if [ ! -f "$INITRD" ] || [ "$ROOT/scripts/vm/init" -nt "$INITRD" ] || [ /bin/busybox -nt "$INITRD" ]; then
	w=$(mktemp -d "$ROOT/build/vm-initrd.XXXXXX")
	mkdir -p "$w/bin" "$w/modules" "$w/proc" "$w/sys" "$w/dev"
	cp /bin/busybox "$w/bin/busybox"
	cp "$ROOT/scripts/vm/init" "$w/init"; chmod 755 "$w/init"
	: > "$w/modules/order"
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe -d "$K" -S "$rel" --show-depends "$m" | sed -n 's/^insmod \([^ ]*\).*/\1/p'
	done | awk '!seen[$0]++' | while read -r ko; do
		b=$(basename "$ko"); b=${b%.xz}; b=${b%.zst}
		case $ko in
		*.xz) xz -dc "$ko" > "$w/modules/$b" ;;
		*.zst) zstd -dcq "$ko" > "$w/modules/$b" ;;
		*) cp "$ko" "$w/modules/$b" ;;
		esac
		echo "$b" >> "$w/modules/order"
	done
	(cd "$w" && find . | cpio -o -H newc --quiet) > "$INITRD.tmp.$$"
	mv "$INITRD.tmp.$$" "$INITRD"
	rm -rf "$w"
fi

# ---- the run's control share: CMD in, output and exit code out ----------
mkdir -p "$ROOT/build/vm"
D=$(mktemp -d "$ROOT/build/vm/run.XXXXXX")
QPID=
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null
	[ -n "${BK_VM_KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
{
	printf 'cd %q || exit 126\n' "$PWD"
	printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$D/cmd.sh"
: > "$D/out"

t0=$(date +%s.%N)
timeout --kill-after=5 "$TIMEOUT" qemu-system-x86_64 \
	-nodefaults -no-user-config -display none -no-reboot \
	-M pc -accel tcg -cpu "${BK_VM_CPU:-max}" -smp "$CPUS" -m "$MEM" \
	-serial "file:$D/console.log" \
	-kernel "$K/vmlinux" -initrd "$INITRD" \
	-append "console=ttyS0 loglevel=4 panic=-1 cgroup_no_v1=all bkinit=$ROOT/scripts/vm/guest-init.sh bkkdir=$K ${BK_VM_APPEND:-}" \
	-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-fsdev "local,id=bkvm,path=$D,security_model=none" \
	-device virtio-9p-pci,fsdev=bkvm,mount_tag=bkvm \
	> "$D/qemu.log" 2>&1 &
QPID=$!
tail -n +1 -s 0.2 -f --pid="$QPID" "$D/out"
qrc=0; wait "$QPID" || qrc=$?
QPID=
t1=$(date +%s.%N)

if [ -f "$D/rc" ]; then
	rc=$(cat "$D/rc")
	boot=$(cat "$D/t-boot"); end=$(cat "$D/t-end")
	printf '# vm[%s %s]: booted in %.1f s (guest uptime), command %.1f s, wall %.1f s, exit %s\n' \
		"$NAME" "$rel" "$boot" "$(echo "$end - $boot" | bc)" "$(echo "$t1 - $t0" | bc)" "$rc" >&2
	exit "$rc"
fi
if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
	echo "run.sh: TIMEOUT: the VM (kernel $NAME) did not finish within $TIMEOUT s" >&2
	rc=124
else
	echo "run.sh: the VM (kernel $NAME) stopped before the command finished (qemu exit $qrc)" >&2
	rc=125
fi
echo "run.sh: qemu: $(tail -3 "$D/qemu.log" | tr '\n' ' ')" >&2
echo "run.sh: console log (tail):" >&2
tail -25 "$D/console.log" | sed 's/^/#   /' >&2
exit "$rc"
