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
import ctypes
import os
import struct
import sys

BPF_OBJ_PIN, BPF_OBJ_GET, BPF_LINK_CREATE = 6, 7, 28
PROGS = {  # program pin name -> enum bpf_attach_type
    "bk_egress": 1, "bk_sock_create": 2, "bk_connect4": 10, "bk_connect6": 11,
    "bk_sendmsg4": 14, "bk_sendmsg6": 15, "bk_recvmsg4": 19, "bk_recvmsg6": 20,
}
libc = ctypes.CDLL(None, use_errno=True)
SYS_bpf = 321  # x86-64


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_bpf, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def main():
    cg, bpffs, pindir = sys.argv[1:4]
    cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
    os.makedirs(pindir, mode=0o700, exist_ok=True)
    n = 0
    for name, atype in PROGS.items():
        src = ctypes.create_string_buffer(os.path.join(bpffs, name).encode())
        pfd = bpf(BPF_OBJ_GET, struct.pack("QII", ctypes.addressof(src), 0, 0))
        lfd = bpf(BPF_LINK_CREATE, struct.pack("IIII", pfd, cgfd, atype, 0))
        dst = ctypes.create_string_buffer(os.path.join(pindir, name).encode())
        bpf(BPF_OBJ_PIN, struct.pack("QII", ctypes.addressof(dst), lfd, 0))
        os.close(lfd)
        os.close(pfd)
        n += 1
    print("linked", n)


main()
