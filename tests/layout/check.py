#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The layout's rules, checked on the source (make check, lane "layout").

Rooms in dependency order, top to bottom (agent/README.md):
    agent/main.c → api → observe → session → files → agent/agent.h
                 → isolate → caller → parse → lib → bpf/egress.h
A file may include headers of its own room or of rooms below it, never
above, and call only into files of its own room or below; no file
includes, or calls into, a file that depends on it, through any chain.
Calls are read from the objects the build made (nm: what each object
needs and what each defines), so they are exact. boxkitectl (agent/ctl)
and the shim use lib/ only; JSON (cJSON) is built only at the API edge:
never in isolate, session, files or observe. Prints one "ok - " /
"not ok - " line per rule; exits 1 when one fails.
Usage: check.py [ROOT [BUILD]]"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
BUILD = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build"))
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

# 1. includes resolve, root-relative (the shim's and the BPF object's own headers sit beside them)
inc_edges, bad = {}, []
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
        inc_edges.setdefault(f, set()).add(target)
rule("every include names a file by its path from the top of the tree", bad)

# 2. calls, from the objects: a needs a symbol that b defines
def nm(obj, flags):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True).stdout
    return {l.split()[-1] for l in out.splitlines() if l.strip()}


call_edges, defined, needs, objs = {}, {}, {}, 0
# stand-ins for a system library's own functions (boxkitectl's OpenSSL,
# loaded on first use): what they define is the library's, not a room's
STAND_INS = {"agent/ctl/ossl.c"}
for f in files:
    if not f.endswith(".c") or room(f) == "bpf" or f in STAND_INS:
        continue
    obj = os.path.join(BUILD, "obj", f[:-2] + ".o")
    if not os.path.exists(obj):
        continue
    objs += 1
    for sym in nm(obj, ["--defined-only", "--extern-only"]):
        defined[sym] = f
    needs[f] = nm(obj, ["--undefined-only"])
for f, syms in needs.items():
    for sym in syms:
        if sym in defined and defined[sym] != f:
            call_edges.setdefault(f, set()).add(defined[sym])
rule(f"the objects of the build were read ({objs} found in {os.path.relpath(BUILD, ROOT)}/obj)",
     [] if objs >= 20 else [f"only {objs} objects: run make first"])


# 3. dependencies run downward only, in includes and in calls
def downward(edges, verb):
    bad = []
    for a, tos in sorted(edges.items()):
        ra = room(a)
        for b in sorted(tos):
            rb = room(b)
            if ra is None or rb is None or ra == rb:
                continue
            if ra in LIB_ONLY:
                if rb != "lib":
                    bad.append(f"{a} ({ra}) {verb} {b} ({rb}): boxkitectl and the shim use lib/ only")
                continue
            if rb in LIB_ONLY or ORDER.index(rb) < ORDER.index(ra):
                bad.append(f"{a} ({ra}) {verb} {b} ({rb}), a room above it")
    return bad


rule("dependencies run downward only (main > api > observe > session > files > agent.h > isolate > caller > parse > lib)",
     downward(inc_edges, "includes") + downward(call_edges, "calls into"))


# 4. no circle: in the include graph, and in the call graph
def circles(edges):
    bad, state, stack = [], {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                bad.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u)
    return bad


sys.setrecursionlimit(10000)
rule("no circle of includes", circles(inc_edges))
rule("no circle of calls (no file calls into a file that calls back into it, through any chain)", circles(call_edges))

# 5. JSON only at the edge
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
