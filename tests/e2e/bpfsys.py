# bpf(2) itself, for the tests that act on boxkite's programs as another
# privileged process on the node could (bpfdetach.py, bpflink.py).
import ctypes
import os
import struct

BPF_OBJ_PIN, BPF_OBJ_GET, BPF_PROG_DETACH, BPF_LINK_CREATE = 6, 7, 9, 28
# the agent's program pins -> enum bpf_attach_type
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
_libc = ctypes.CDLL(None, use_errno=True)
_SYS_bpf = 321  # x86-64


def bpf(cmd, attr):
    """bpf(cmd, attr): the result, or -errno."""
    buf = ctypes.create_string_buffer(attr, 128)
    r = _libc.syscall(_SYS_bpf, cmd, buf, 128)
    return r if r >= 0 else -ctypes.get_errno()


def path_op(cmd, path, fd=0):
    """BPF_OBJ_GET (fd 0) or BPF_OBJ_PIN of fd, at path."""
    p = ctypes.create_string_buffer(os.fsencode(path))
    return bpf(cmd, struct.pack("QII", ctypes.addressof(p), fd, 0))
