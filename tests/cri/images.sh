#!/usr/bin/env bash
# images.sh BK_BIN OUTDIR: the cri lane's four images as OCI layout tars.
#   pause    a static pause program (pause.c, gcc -static)
#   sandbox  busybox-static, curl and python3-minimal (the files `dpkg -L`
#            lists, their libraries as ldd resolves them), a passwd/group
#            naming uid 1000
#   shim     deploy/images/shim.Dockerfile: the same collect-libs.sh call,
#            its ENTRYPOINT and USER
#   agent    deploy/images/agent.Dockerfile: the two binaries it copies to
#            /usr/local/bin (their libraries through collect-libs.sh instead
#            of the runtime stage's apt packages), its ENTRYPOINT and CMD
set -euo pipefail
BK_BIN=$1 OUT=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
oci=$here/oci.py
mkdir -p "$OUT"
W=$(mktemp -d "$OUT/work.XXXXXX")
trap 'rm -rf "$W"' EXIT

# pause
gcc -static -O2 -o "$W/pause" "$here/pause.c"
"$oci" "$OUT/pause.tar" bk-cri/pause:lane --file "$W/pause=/pause" --entrypoint '["/pause"]'

# sandbox: the files of Debian packages (dpkg -L; documentation left out),
# ELF programs and modules with the libraries ldd resolves for them; never
# the host's /usr bind-mounted
py=$(basename "$(readlink -f /usr/bin/python3)")
SANDBOX_PKGS=(busybox-static curl "$py-minimal" "lib$py-minimal")
args=()
mkdir -p "$W/sb"
for pkg in "${SANDBOX_PKGS[@]}"; do
	while read -r f; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		case $f in /usr/share/*|*/__pycache__/*|/etc/*) continue ;; esac
		if [ "$(head -c4 "$f" | tr -d '\0')" = "$(printf '\177ELF')" ] && ldd "$f" >/dev/null 2>&1; then
			"$repo/deploy/images/collect-libs.sh" "$W/sb" "$f" "$f"
		else
			args+=(--file "$f=$f")
		fi
	done < <(dpkg -L "$pkg")
done
for a in sh ash sleep id cat ls echo ip grep sed awk head tail wc tr cut env ps kill mkdir rm touch stat true false printf test uname nc wget timeout readlink date; do
	args+=(--link "/bin/busybox=/bin/$a")
done
args+=(--link "$py=/usr/bin/python3")
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/workspace:/bin/sh\nnonroot:x:65532:65532:nonroot:/:/bin/false\n' > "$W/passwd"
printf 'root:x:0:\nsandbox:x:1000:\nnonroot:x:65532:\n' > "$W/group"
"$oci" "$OUT/sandbox.tar" bk-cri/sandbox:lane --rootfs "$W/sb" "${args[@]}" \
	--file "$W/passwd=/etc/passwd" --file "$W/group=/etc/group" \
	--dir /workspace --dir /tmp --dir /mnt/user-data/outputs --cmd '["/bin/sh"]'

# shim: the Dockerfile's own collect-libs.sh line(s), with build/ = BK_BIN
df=$repo/deploy/images/shim.Dockerfile
mkdir -p "$W/shim"
n=0
while read -r _run _script _root bin dest; do
	"$repo/deploy/images/collect-libs.sh" "$W/shim" "$BK_BIN/${bin#build/}" "$dest"; n=$((n + 1))
done < <(grep -E '^RUN deploy/images/collect-libs.sh ' "$df")
[ "$n" -gt 0 ] || { echo "images.sh: no collect-libs.sh line in $df" >&2; exit 1; }
"$oci" "$OUT/shim.tar" boxkite-shim:dev --dockerfile "$df" --rootfs "$W/shim"

# agent: the binaries of the Dockerfile's final COPY --from=build line
df=$repo/deploy/images/agent.Dockerfile
mkdir -p "$W/agent"
line=$(grep -E '^COPY --from=build ' "$df" | tail -1)
read -r -a words <<<"${line#COPY --from=build }"
dest=${words[-1]}
n=0
for src in "${words[@]:0:${#words[@]}-1}"; do
	b=$(basename "$src")
	"$repo/deploy/images/collect-libs.sh" "$W/agent" "$BK_BIN/$b" "${dest%/}/$b"; n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "images.sh: no COPY --from=build line in $df" >&2; exit 1; }
"$oci" "$OUT/agent.tar" boxkite-agent:dev --dockerfile "$df" --rootfs "$W/agent"
