#!/usr/bin/env bash
# The cri lane: boxkite on a real container runtime. containerd 1.6 with its
# CRI plugin and the Debian CNI plugins run the shipped manifests
# (deploy/daemonset.yaml, deploy/sandbox-pod.yaml through
# scripts/new-sandbox.sh), driven through CRI the way kubelet drives it
# (tests/cri/lane.py, translate.py). No kubelet, no registry, no network.
#
#   BK_BIN=$PWD/build tests/cri/run.sh        (as root, under the e2e lock)
#   BK_CRI_MODE=demo tests/cri/run.sh          (make demo-cri: the demo instead)
#   BK_CRI_KEEP=1: keep the lane directory (logs, containerd.log)
#   BK_CRI_BREAK=state: give the agent an empty directory instead of
#     containerd's runc state (shows the identity checks failing)
#   BK_CRI_BREAK=recovery: remove the killed agent's state record and
#     program pins before restarting it (shows the recovery checks failing)
#   BK_CRI_BREAK=early: look for the exec's leftovers before the agent
#     restart and before the pod stop (shows those checks can see them)
#
# Ends with "# cri: N passed, M failed, K skipped"; exits non-zero on a
# failure. Leaves nothing behind: checked at the end.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export BK_BIN=${BK_BIN:-$repo/build}
export CRI_SUBNET=${CRI_SUBNET:-10.250.77.0} CRI_PREFIX=24
export CRI_SUBNET="$CRI_SUBNET/$CRI_PREFIX"
export CRI_BRIDGE=bk-cri0 CRI_MGR_IP=10.250.77.250 CRI_UID_PREFIX=b0c41a7e
t0=$SECONDS
out=$(mktemp)
summary() {
	local p f s
	p=$(grep -c '^ok - ' "$out"); f=$(grep -c '^not ok - ' "$out"); s=$(grep -c '^skip - ' "$out")
	echo "# cri: $p passed, $f failed, $s skipped ($((SECONDS - t0)) s)"
	rm -f "$out"
	[ "$f" -eq 0 ]
}
skip_all() { echo "skip - cri lane: $*" | tee -a "$out"; summary; exit 0; }

[ "$(id -u)" -eq 0 ] || skip_all "needs root"
for b in containerd ctr containerd-shim-runc-v2 runc unshare nsenter curl bpftool; do
	command -v "$b" >/dev/null || skip_all "$b not installed (make deps)"
done
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || skip_all "CNI plugins not installed (make deps)"
/usr/bin/python3 -c 'import grpc, grpc_tools, google.protobuf, yaml' 2>/dev/null || skip_all "python3-grpcio/grpc-tools/protobuf/yaml missing"
for b in boxkite-agent boxkite-shim boxkitectl; do
	[ -x "$BK_BIN/$b" ] || skip_all "$BK_BIN/$b not built"
done

pins0=$([ -e /sys/fs/bpf/boxkite ] && echo yes || echo no)
# the agent pins at the node default, /sys/fs/bpf/boxkite: pins found there
# are someone else's (a local agent): the lane would adopt them
[ "$pins0" = no ] || skip_all "/sys/fs/bpf/boxkite exists (another agent's pins); run under the e2e lock on a clean node"
export CRI_PINS_OWNED=1

export L
L=$(mktemp -d /tmp/bk-cri-XXXXXX)
chmod 755 "$L"
fwd0=$(cat /proc/sys/net/ipv4/ip_forward)

if ! "$here/images.sh" "$BK_BIN" "$L/images" > "$L/images.log" 2>&1; then
	echo "not ok - images built as OCI layouts  # $(tail -3 "$L/images.log" | tr '\n' ' ')" | tee -a "$out"
else
	ti=$SECONDS
	# the lane's own mount namespace: see env.sh
	unshare --mount --propagation shared "$here/lane.sh" "${BK_CRI_MODE:-run}" 2>"$L/lane.err" | tee -a "$out"
	[ -s "$L/lane.err" ] && sed 's/^/# /' "$L/lane.err" | tail -20
fi

# Nothing left behind: the namespace is gone with its mounts; global things
# are checked here.
left=()
pgrep -f "containerd --config $L/" >/dev/null && left+=("containerd")
for p in /proc/[0-9]*; do
	case $(readlink "$p/exe" 2>/dev/null) in */containerd-shim-runc-v2)
		grep -q "$L" "$p/cmdline" 2>/dev/null && left+=("shim ${p#/proc/}") ;;
	esac
done
ip link show "$CRI_BRIDGE" >/dev/null 2>&1 && left+=("bridge $CRI_BRIDGE")
ip link show bk-cri-mgr0 >/dev/null 2>&1 && left+=("veth bk-cri-mgr0")
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$d" ] && find "$d" -type d -name "pod$CRI_UID_PREFIX*" | grep -q . && left+=("cgroups under $d")
done
if [ "$pins0" = no ] && [ -e /sys/fs/bpf/boxkite ]; then
	left+=("pins: $(find /sys/fs/bpf/boxkite | head -5 | tr '\n' ' ')")
fi
cg2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
[ "$pins0" = no ] && [ -d "$cg2/boxkite-keepalive" ] && left+=("cgroup $cg2/boxkite-keepalive")
grep -q " $L" /proc/self/mountinfo && left+=("mounts under $L")
[ "$(cat /proc/sys/net/ipv4/ip_forward)" = "$fwd0" ] || left+=("ip_forward changed")
if [ ${#left[@]} -eq 0 ]; then
	echo "ok - teardown: containerd, shims, pods, netns, cgroups, mounts, bridge, pins all gone; ip_forward still $fwd0" | tee -a "$out"
else
	echo "not ok - teardown left: ${left[*]}" | tee -a "$out"
fi
[ -n "${BK_CRI_KEEP:-}" ] || rm -rf "$L"
summary
