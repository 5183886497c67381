#!/usr/bin/env bash
# Installs the Debian packages that building, testing and the demo need.
# Idempotent: a package already installed is not fetched again, and apt is
# not touched at all when nothing is missing.
set -euo pipefail

PKGS=(
  build-essential clang llvm pkg-config make
  libbpf-dev bpftool libelf-dev zlib1g-dev
  libmnl-dev libssl-dev libmicrohttpd-dev libcjson-dev libcmocka-dev libpcre2-dev
  libclang-rt-14-dev
  runc iproute2 curl jq openssl procps util-linux kmod python3 bc python3-prometheus-client valgrind
  # the VM lanes (scripts/vm/, tests/vm/): QEMU under TCG, a static busybox
  # for the initramfs, apt/dpkg tools to fetch and unpack Debian kernels
  qemu-system-x86 busybox-static cpio xz-utils zstd debian-archive-keyring
  # the cri lane (tests/cri/): containerd with its CRI plugin, the CNI
  # plugins (/usr/lib/cni) and a gRPC client for /usr/bin/python3
  containerd containernetworking-plugins python3-grpcio python3-grpc-tools python3-protobuf
  # the ops lane (tests/ops/): promtool for the alert rules, scdoc for the
  # man pages, man-db to read them
  prometheus scdoc man-db
  # make bench's latency CDF plot (build/bench/exec-cdf.png)
  gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# the CRI client runs on Debian's interpreter: another python3 may be first on PATH
check_grpc() {
  /usr/bin/python3 -c 'import grpc, grpc_tools.protoc, google.protobuf' ||
    { echo "install-deps: /usr/bin/python3 cannot import grpc/grpc_tools/protobuf" >&2; exit 1; }
}

if [ "${#missing[@]}" -eq 0 ]; then
  check_grpc
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# only promtool is wanted from prometheus: a booted systemd starts the
# server (port 9090) on install; stop it and keep it off
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
check_grpc
