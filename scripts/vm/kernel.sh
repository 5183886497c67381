#!/usr/bin/env bash
# scripts/vm/kernel.sh NAME: fetch and unpack a Debian kernel for the VM lane.
#
#   NAME   suite                          package
#   6.1    bookworm (+ bookworm-security)  linux-image-amd64's linux-image-6.1.0-*-amd64
#   6.12   bookworm-backports             linux-image-amd64's linux-image-6.12.*-amd64
#   7      trixie-backports               linux-image-amd64's linux-{image,binary,modules,base}-7.*
#
# The packages are only downloaded (`apt-get download`, through a private apt
# configuration under build/kernels/apt/NAME — the host's sources, lists and
# dpkg status are never used or changed) and unpacked with `dpkg-deb -x`;
# nothing is installed on the host. Result, in build/kernels/NAME/:
#   lib/modules/RELEASE/   the modules, indexed with `depmod -b`
#   vmlinux                the uncompressed ELF kernel (booted directly, PVH)
#   release                RELEASE (what `uname -r` says in the VM)
# Cached: when build/kernels/NAME/.done exists the script does nothing.
# Prints the kernel directory on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

NAME=${1:-}
# BK_DEBIAN_MIRROR / BK_DEBIAN_SECURITY_MIRROR: other Debian archive URIs
M=${BK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
MS=${BK_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
case $NAME in
6.1)  SUITES=("$M bookworm main" "$MS bookworm-security main") ;;
6.12) SUITES=("$M bookworm-backports main") ;;
7)    SUITES=("$M trixie-backports main") ;;
*) echo "usage: $0 6.1|6.12|7" >&2; exit 2 ;;
esac

K=$ROOT/build/kernels/$NAME
if [ -f "$K/.done" ]; then echo "$K"; exit 0; fi
# one fetch at a time per kernel; a second caller waits and finds it done
mkdir -p "$ROOT/build/kernels"
exec 8> "$ROOT/build/kernels/.lock-$NAME"
flock 8
if [ -f "$K/.done" ]; then echo "$K"; exit 0; fi

log() { echo "kernel.sh[$NAME]: $*" >&2; }
trap 'log "failed at line $LINENO"' ERR
for tool in apt-get apt-cache dpkg-deb depmod xz zstd od dd; do
	command -v "$tool" >/dev/null || { log "missing $tool (scripts/install-deps.sh)"; exit 1; }
done

# ---- private apt configuration -------------------------------------------
A=$ROOT/build/kernels/apt/$NAME
rm -rf "$A"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/parts" "$A/prefs"
: > "$A/status"
for s in "${SUITES[@]}"; do echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $s"; done > "$A/sources.list"
APT=(-o "Dir::Etc::SourceList=$A/sources.list" -o "Dir::Etc::SourceParts=$A/parts"
     -o "Dir::Etc::Preferences=$A/prefs/none" -o "Dir::Etc::PreferencesParts=$A/prefs"
     -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache" -o "Dir::State::status=$A/status"
     -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -o "APT::Get::List-Cleanup=0")
log "apt-get update (${SUITES[*]})"
apt-get "${APT[@]}" -qq update >&2

# linux-image-amd64 -> linux-image-ABI; keep every linux-*-ABI package of its
# dependency closure (7.x splits the kernel into image/binary/modules/base).
img=$(apt-cache "${APT[@]}" depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
[ -n "$img" ] || { log "no linux-image-amd64 dependency found"; exit 1; }
abi=${img#linux-image-}
mapfile -t pkgs < <(apt-cache "${APT[@]}" depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances "$img" |
	grep -E "^linux-(image|binary|modules|base)-${abi//+/\\+}\$" | sort -u)
log "packages: ${pkgs[*]}"

D=$ROOT/build/kernels/debs/$NAME
rm -rf "$D" "$K"; mkdir -p "$D" "$K"
(cd "$D" && apt-get "${APT[@]}" -qq download "${pkgs[@]}" >&2)
log "downloaded $(du -ch "$D"/*.deb | tail -1 | cut -f1)"
for deb in "$D"/*.deb; do dpkg-deb -x "$deb" "$K"; done

# merged-/usr packages put modules in usr/lib/modules; depmod -b wants lib/
if [ ! -d "$K/lib/modules" ] && [ -d "$K/usr/lib/modules" ]; then ln -s usr/lib "$K/lib"; fi
rel=$(ls "$K/lib/modules" | head -1)
[ -n "$rel" ] || { log "no lib/modules/<release> in the packages"; exit 1; }
depmod -b "$K" "$rel"

# ---- vmlinux from the bzImage -----------------------------------------------
# boot protocol header: setup_sects at 0x1f1 (0 means 4), "HdrS" at 0x202,
# payload_offset at 0x248 and payload_length at 0x24c, both relative to the
# protected-mode code, which starts at (setup_sects + 1) * 512.
# boot/vmlinuz-RELEASE (6.x) or lib/modules/RELEASE/vmlinuz (7.x)
bz=
for f in "$K"/boot/vmlinuz-* "$K/lib/modules/$rel/vmlinuz"; do [ -f "$f" ] && bz=$f && break; done
[ -n "$bz" ] || { log "no vmlinuz in the packages"; exit 1; }
u8()  { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
[ "$(dd if="$bz" bs=1 skip=$((0x202)) count=4 status=none)" = HdrS ] || { log "$bz: not a bzImage"; exit 1; }
ss=$(u8 "$bz" $((0x1f1))); [ "$ss" -ne 0 ] || ss=4
off=$(( (ss + 1) * 512 + $(u32 "$bz" $((0x248))) ))
len=$(u32 "$bz" $((0x24c)))
magic=$(od -An -tx1 -j "$off" -N6 "$bz" | tr -d ' ')
payload() { dd if="$bz" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=1M status=none; }
case $magic in
fd377a585a00*) payload | xz -dc --single-stream > "$K/vmlinux.tmp" ;;
28b52ffd*)     payload | zstd -dcq > "$K/vmlinux.tmp" 2>/dev/null || true ;;  # the kernel appends its size: zstd complains about the trailing bytes
1f8b*)         payload | gzip -dc > "$K/vmlinux.tmp" 2>/dev/null || true ;;
*) log "$bz: unknown payload compression (magic $magic)"; exit 1 ;;
esac
[ "$(od -An -tx1 -N4 "$K/vmlinux.tmp" | tr -d ' ')" = 7f454c46 ] || { log "$bz: decompressed payload is not an ELF"; exit 1; }
mv "$K/vmlinux.tmp" "$K/vmlinux"
echo "$rel" > "$K/release"
log "$rel: vmlinux $(du -h "$K/vmlinux" | cut -f1), $(find "$K/lib/modules/$rel" -name '*.ko*' | wc -l) modules"
rm -rf "$D"   # the unpacked tree is the cache
touch "$K/.done"
echo "$K"
