# The cri lane's runtime, sourced by lane.sh inside the lane's own mount
# namespace (run.sh: `unshare --mount --propagation shared`). That namespace
# gets a fresh tmpfs on /run, so containerd's state (/run/containerd, runc's
# /run/containerd/runc/k8s.io), /run/boxkite and /run/netns are the lane's
# own while keeping the paths of a real node, and mounts are shared as on a
# systemd host (Bidirectional propagation needs that) without touching the
# host's. Global things (cgroups, the bridge, veths, bpffs pins) are removed
# by cri_down; run.sh checks afterwards that nothing is left.
#
# Needs: L (the lane's directory), CRI_SUBNET, CRI_BRIDGE, CRI_MGR_IP.
CRI_SOCK=/run/containerd/containerd.sock
CRI_MGR_NS=bk-cri-mgr
CRI_PAUSE=bk-cri/pause:lane

cri_up() {
	mount -t tmpfs -o mode=0755 bk-cri-run /run
	mkdir -p /run/netns /run/containerd "$L/root" "$L/cni" "$L/log"
	cat > "$L/containerd.toml" <<EOT
version = 2
root = "$L/root"
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CRI_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$CRI_PAUSE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["boxkite.dev/*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$L/cni"
EOT
	# the pod network: a bridge with no address on the host, no gateway,
	# no masquerading; the pods reach their own subnet only
	cat > "$L/cni/10-bk-cri.conflist" <<EOT
{ "cniVersion": "0.4.0", "name": "bk-cri",
  "plugins": [ { "type": "bridge", "bridge": "$CRI_BRIDGE", "isGateway": false,
                 "isDefaultGateway": false, "ipMasq": false, "hairpinMode": false,
                 "ipam": { "type": "host-local", "ranges": [[ { "subnet": "$CRI_SUBNET",
                           "rangeStart": "${CRI_SUBNET%.*}.10", "rangeEnd": "${CRI_SUBNET%.*}.200" } ]],
                           "dataDir": "$L/cni-ipam" } } ] }
EOT
	containerd --config "$L/containerd.toml" --log-level warn > "$L/containerd.log" 2>&1 &
	CRI_CONTAINERD_PID=$!
	echo "$CRI_CONTAINERD_PID" > "$L/containerd.pid"
	local i
	for i in $(seq 1 100); do [ -S "$CRI_SOCK" ] && break; sleep 0.05; done
	[ -S "$CRI_SOCK" ] || { cat "$L/containerd.log" >&2; return 1; }
	local img
	for img in pause sandbox shim agent; do
		ctr -a "$CRI_SOCK" -n k8s.io images import --no-unpack "$L/images/$img.tar" > /dev/null || return 1
	done
	# the manager: a netns on the same bridge, an address outside the pods' range
	ip link add "$CRI_BRIDGE" type bridge 2>/dev/null || true
	ip link set "$CRI_BRIDGE" up
	ip netns add "$CRI_MGR_NS"
	ip link add bk-cri-mgr0 type veth peer name bk-cri-mgr1
	ip link set bk-cri-mgr1 netns "$CRI_MGR_NS"
	ip link set bk-cri-mgr0 master "$CRI_BRIDGE" up
	ip -n "$CRI_MGR_NS" addr add "$CRI_MGR_IP/${CRI_PREFIX}" dev bk-cri-mgr1
	ip -n "$CRI_MGR_NS" link set bk-cri-mgr1 up
	ip -n "$CRI_MGR_NS" link set lo up
}

# Everything the lane made, in reverse, each step whatever the others did.
cri_down() {
	set +e
	if [ -S "$CRI_SOCK" ]; then
		/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/lane.py" teardown > "$L/teardown.log" 2>&1
	fi
	local pid
	pid=$(cat "$L/containerd.pid" 2>/dev/null)
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$pid" 2>/dev/null
	fi
	# shims and container processes left behind (a crash of the above)
	# (only those of this mount namespace: the lane's containerd started them)
	local me p
	me=$(readlink /proc/self/ns/mnt)
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$me" ] || continue
		case $(readlink "$p/exe" 2>/dev/null) in
		*/containerd-shim-runc-v2) kill -KILL "${p#/proc/}" 2>/dev/null ;;
		esac
	done
	ip netns del "$CRI_MGR_NS" 2>/dev/null
	ip link del bk-cri-mgr0 2>/dev/null
	ip link del "$CRI_BRIDGE" 2>/dev/null
	for p in /run/netns/cni-*; do [ -e "$p" ] && { umount "$p"; rm -f "$p"; }; done
	cri_rm_cgroups
	# the agent's pins outlive it on purpose (a restarted agent adopts
	# them); the lane removes them when it made them (run.sh: CRI_PINS_OWNED)
	[ "${CRI_PINS_OWNED:-0}" = 1 ] && rm -rf /sys/fs/bpf/boxkite
	# and its keepalive cgroup (kept for a successor too)
	[ "${CRI_PINS_OWNED:-0}" = 1 ] && rmdir "$(findmnt -t cgroup2 -n -o TARGET | head -1)/boxkite-keepalive" 2>/dev/null
	# the overlay mounts of the lane's snapshots (in this namespace only)
	grep -o " $L/root[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m"; done
	true
}

# The pod-level cgroup directories (kubelet removes them; containerd does
# not): kubepods/<qos>/pod<uid> of the lane's pods, deepest first, in every
# hierarchy; kubepods/<qos> and kubepods only when empty.
cri_rm_cgroups() {
	local root d
	# a process still in a lane pod's cgroup (its shim died) goes first
	for root in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		[ -d "${root}kubepods" ] || continue
		find "${root}kubepods" -path '*/pod'"${CRI_UID_PREFIX}"'*' -name cgroup.procs 2>/dev/null |
			xargs -r cat 2>/dev/null | xargs -r kill -KILL 2>/dev/null
	done
	sleep 0.1
	for root in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		[ -d "${root}kubepods" ] || continue
		while read -r d; do rmdir "$d" 2>/dev/null; done < <(
			find "${root}kubepods" -depth -mindepth 2 -type d -path '*/pod'"${CRI_UID_PREFIX}"'*' 2>/dev/null)
		rmdir "${root}kubepods"/*/ 2>/dev/null
		rmdir "${root}kubepods" 2>/dev/null
	done
	true
}
