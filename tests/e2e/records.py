# The exec records in an agent's state directory, counted: its files
# (execs/*.json) and the slots in use of its record table (execs.table,
# agent/isolate/records.h). Usage: records.py STATE_DIR
import glob
import os
import struct
import sys

USED = 0x44455355
MAGIC = b"BKXTABL1"


def count(state):
    n = len(glob.glob(os.path.join(state, "execs", "*.json")))
    try:
        with open(os.path.join(state, "execs.table"), "rb") as f:
            h = f.read(16)
            if h[:8] != MAGIC:
                raise SystemExit("records.py: %s/execs.table is no record table" % state)
            size, slots = struct.unpack("<II", h[8:16])
            for i in range(slots):
                f.seek(size * (i + 1))
                s = f.read(4)
                if len(s) == 4 and struct.unpack("<I", s)[0] == USED:
                    n += 1
    except FileNotFoundError:
        pass
    return n


if __name__ == "__main__":
    print(count(sys.argv[1]))
