#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The layout's rules, checked on the source (make check, lane "layout").

Rooms in dependency order, top to bottom (agent/README.md):
    agent/main.c → api → observe → session → files → agent/agent.h
                 → isolate → caller → parse → lib → bpf/egress.h
A file may include headers of its own room or of rooms below it, never
above; no two files may depend on each other through any chain (a .c and
its .h are one unit); boxkitectl (agent/ctl) and the shim use lib/ only;
JSON (cJSON) is built only at the API edge: never in isolate, session,
files or observe. Prints one "ok - " / "not ok - " line per rule; exits 1
when one fails.  Usage: check.py [ROOT]"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
ORDER = ["agent/main", "agent/api", "agent/observe", "agent/session", "agent/files", "agent/agent",
         "agent/isolate", "agent/caller", "agent/parse", "lib", "bpf"]
NO_JSON = ["agent/isolate", "agent/session", "agent/files", "agent/observe"]
LIB_ONLY = ["agent/ctl", "sidecar-shim"]
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room(path):
    for r in ORDER + LIB_ONLY:
        if path == r + ".c" or path == r + ".h" or path.startswith(r + "/"):
            return r
    return None


def sources():
    out = []
    for top in ("agent", "lib", "bpf", "sidecar-shim"):
        for d, _, fs in os.walk(os.path.join(ROOT, top)):
            for f in fs:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return sorted(out)


results = []


def rule(name, problems):
    results.append((name, problems))


files = sources()
text = {f: open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read() for f in files}
unit = lambda p: os.path.splitext(p)[0]

# 1. includes resolve, root-relative (the shim's and the BPF object's own headers sit beside them)
edges, bad = {}, []
for f in files:
    for inc in INC.findall(text[f]):
        if inc.endswith(".skel.h"):
            continue  # generated into build/
        here = os.path.normpath(os.path.join(os.path.dirname(f), inc))
        if os.path.exists(os.path.join(ROOT, inc)):
            target = inc
        elif room(f) in ("sidecar-shim", "bpf") and os.path.exists(os.path.join(ROOT, here)):
            target = here
        else:
            bad.append(f"{f}: #include \"{inc}\" is not a path from the top of the tree")
            continue
        edges.setdefault(unit(f), set()).add(unit(target))
rule("every include names a file by its path from the top of the tree", bad)

# 2. dependencies run downward only
bad = []
for a, tos in sorted(edges.items()):
    ra = room(a + ".c") or room(a + ".h")
    for b in sorted(tos):
        rb = room(b + ".c") or room(b + ".h")
        if ra is None or rb is None or ra == rb:
            continue
        if ra in LIB_ONLY:
            if rb != "lib":
                bad.append(f"{a} ({ra}) uses {b} ({rb}): boxkitectl and the shim use lib/ only")
            continue
        if rb in LIB_ONLY or ORDER.index(rb) < ORDER.index(ra):
            bad.append(f"{a} ({ra}) uses {b} ({rb}), a room above it")
rule("dependencies run downward only (main > api > observe > session > files > agent.h > isolate > caller > parse > lib)", bad)

# 3. no circle of units, through any chain
bad, state, stack = [], {}, []


def visit(u):
    state[u] = 1
    stack.append(u)
    for v in sorted(edges.get(u, ())):
        if v == u:
            continue
        if state.get(v) == 1:
            bad.append(" -> ".join(stack[stack.index(v):] + [v]))
        elif v not in state:
            visit(v)
    stack.pop()
    state[u] = 2


sys.setrecursionlimit(10000)
for u in sorted(edges):
    if u not in state:
        visit(u)
rule("no dependency circle among source files", bad)

# 4. JSON only at the edge
bad = []
for f in files:
    if room(f) in NO_JSON:
        for i, line in enumerate(text[f].splitlines(), 1):
            if re.search(r"\bcJSON\w*|<cJSON\.h>|<cjson/", line):
                bad.append(f"{f}:{i}: {line.strip()[:100]}")
rule("no JSON below the API edge (isolate, session, files, observe)", bad)

fail = 0
for name, problems in results:
    if problems:
        fail += 1
        print(f"not ok - layout: {name}")
        for p in problems[:20]:
            print(f"#   {p}")
        if len(problems) > 20:
            print(f"#   ... and {len(problems) - 20} more")
    else:
        print(f"ok - layout: {name}")
sys.exit(1 if fail else 0)
