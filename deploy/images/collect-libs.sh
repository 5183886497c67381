#!/bin/sh
# collect-libs.sh ROOTFS BINARY DEST
#
# Copies the dynamically linked ELF BINARY to ROOTFS/DEST, and every shared
# library it loads (as ldd resolves them, the dynamic loader included) to the
# same path under ROOTFS. The result is a root filesystem holding that one
# program and nothing else: no shell, no package manager, no passwd file.
# Used by shim.Dockerfile; tests/manifests/run.sh checks it by running a
# program from such a root with chroot.
set -eu

if [ $# -ne 3 ]; then
  echo "usage: collect-libs.sh ROOTFS BINARY DEST" >&2
  exit 2
fi
root=$1 bin=$2 dest=$3

case $dest in
  /*) ;;
  *) echo "collect-libs.sh: DEST must be absolute: $dest" >&2; exit 2 ;;
esac

# ldd prints "name => /path (addr)", "/path/to/ld.so (addr)", the vDSO
# "linux-vdso.so.1 (addr)" and, for a missing library, "name => not found".
out=$(ldd "$bin") || { echo "collect-libs.sh: ldd failed on $bin (static or not ELF?)" >&2; exit 1; }
if printf '%s\n' "$out" | grep -q 'not found'; then
  printf '%s\n' "$out" >&2
  echo "collect-libs.sh: unresolved libraries for $bin" >&2
  exit 1
fi

install -D -m 0755 "$bin" "$root$dest"
printf '%s\n' "$out" | awk '
  $2 == "=>" && $3 ~ /^\// { print $3; next }
  $1 ~ /^\// { print $1 }
' | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  # -L: copy the file a symlink points to, under the name ldd used.
  cp -L "$lib" "$root$lib"
  chmod 0755 "$root$lib"
done
