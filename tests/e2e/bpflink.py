#!/usr/bin/env python3
# What an agent built before December 2026 left for each exec: its programs
# attached to the exec's cgroup as BPF links, pinned under
# <bpffs>/exec-<id>/<program> (BPF_LINK_CREATE + BPF_OBJ_PIN, bpf(2)
# itself, no library).
#
#   bpflink.py CGROUP BPFFS PINDIR
#
# Links each of the agent's eight programs (from its pins in BPFFS) to
# CGROUP and pins the link as PINDIR/<program>. Prints "linked N".
import os
import struct
import sys

from bpfsys import BPF_LINK_CREATE, BPF_OBJ_GET, BPF_OBJ_PIN, PROGS, bpf, path_op


def must(r):
    if r < 0:
        raise OSError(-r, os.strerror(-r))
    return r


def main():
    cg, bpffs, pindir = sys.argv[1:4]
    cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
    os.makedirs(pindir, mode=0o700, exist_ok=True)
    n = 0
    for name, atype in PROGS.items():
        pfd = must(path_op(BPF_OBJ_GET, os.path.join(bpffs, name)))
        lfd = must(bpf(BPF_LINK_CREATE, struct.pack("IIII", pfd, cgfd, atype, 0)))
        must(path_op(BPF_OBJ_PIN, os.path.join(pindir, name), lfd))
        os.close(lfd)
        os.close(pfd)
        n += 1
    print("linked", n)


main()
