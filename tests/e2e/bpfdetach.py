#!/usr/bin/env python3
# Take boxkite's programs off a cgroup, as a privileged process on the node
# could: BPF_PROG_DETACH (bpf(2) itself, no library) with a descriptor of
# the cgroup and of each program (from the agent's pins).
#
#   bpfdetach.py CGROUP BPFFS           detach all eight now
#   bpfdetach.py CGROUP BPFFS WAITFILE  open CGROUP now, print "open", wait
#                                       until WAITFILE exists, then try
#                                       (the cgroup may be removed by then)
#
# Prints one line per program: NAME ok, or NAME and the errno's name.
import ctypes
import errno
import os
import struct
import sys
import time

BPF_OBJ_GET, BPF_PROG_DETACH = 7, 9
# program pin name -> enum bpf_attach_type
PROGS = {
    "bk_egress": 1,  # BPF_CGROUP_INET_EGRESS
    "bk_sock_create": 2,  # BPF_CGROUP_INET_SOCK_CREATE
    "bk_connect4": 10,
    "bk_connect6": 11,
    "bk_sendmsg4": 14,  # BPF_CGROUP_UDP4_SENDMSG
    "bk_sendmsg6": 15,
    "bk_recvmsg4": 19,  # BPF_CGROUP_UDP4_RECVMSG
    "bk_recvmsg6": 20,
}
libc = ctypes.CDLL(None, use_errno=True)
SYS_bpf = 321  # x86-64


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_bpf, cmd, buf, 128)
    return r if r >= 0 else -ctypes.get_errno()


def main():
    cg, bpffs = sys.argv[1], sys.argv[2]
    wait = sys.argv[3] if len(sys.argv) > 3 else None
    cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
    if wait:
        print("open", flush=True)
        while not os.path.exists(wait):
            time.sleep(0.02)
    for name, atype in PROGS.items():
        path = ctypes.create_string_buffer(os.path.join(bpffs, name).encode())
        pfd = bpf(BPF_OBJ_GET, struct.pack("QII", ctypes.addressof(path), 0, 0))
        if pfd < 0:
            print(name, "no-pin", errno.errorcode.get(-pfd, str(-pfd)))
            continue
        r = bpf(BPF_PROG_DETACH, struct.pack("IIII", cgfd, pfd, atype, 0))
        os.close(pfd)
        print(name, "ok" if r == 0 else errno.errorcode.get(-r, str(-r)), flush=True)


main()
