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
import errno
import os
import struct
import sys
import time

from bpfsys import BPF_OBJ_GET, BPF_PROG_DETACH, PROGS, bpf, path_op


def main():
    cg, bpffs = sys.argv[1], sys.argv[2]
    wait = sys.argv[3] if len(sys.argv) > 3 else None
    cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
    if wait:
        print("open", flush=True)
        while not os.path.exists(wait):
            time.sleep(0.02)
    for name, atype in PROGS.items():
        pfd = path_op(BPF_OBJ_GET, os.path.join(bpffs, name))
        if pfd < 0:
            print(name, "no-pin", errno.errorcode.get(-pfd, str(-pfd)))
            continue
        r = bpf(BPF_PROG_DETACH, struct.pack("IIII", cgfd, pfd, atype, 0))
        os.close(pfd)
        print(name, "ok" if r == 0 else errno.errorcode.get(-r, str(-r)), flush=True)


main()
