# SPDX-License-Identifier: Apache-2.0
"""A client that speaks to the shim exactly as the reference boxkite manager
(src/boxkite/_manager_*.py at cac4559) speaks to its sidecar: the same
routes, request bodies and header, and it reads the same fields. Our own
code; transport: curl over HTTPS with the shim's SPKI pinned (the manager
pins its per-pod certificate too). Each t-*.py prints TAP-style lines.

Environment (tests/contract/api.sh): BK_URL, BK_PIN, BK_TOKEN_FILE."""
import json
import os
import subprocess
import sys

URL = os.environ["BK_URL"]
PIN = os.environ["BK_PIN"]
TOKEN = open(os.environ["BK_TOKEN_FILE"]).read().strip()
HEADER = "X-Sidecar-Auth-Token"  # src/boxkite/sidecar_auth.py
GROUP = os.path.basename(sys.argv[0]).removesuffix(".py")
FAILED = 0


class Answer:
    def __init__(self, status, text, headers):
        self.status_code = status
        self.text = text
        self.headers = headers

    def json(self):
        return json.loads(self.text)


def request(method, path, body=None, token=TOKEN, raw=None, extra=(), timeout=120):
    """One request; body is JSON-encoded as httpx's json= does; raw: bytes."""
    args = ["curl", "-sk", "--max-time", str(timeout), "--pinnedpubkey", PIN, "-X", method,
            "-D", "/dev/stderr", "-o", "-", "-w", "\n%{http_code}"]
    if token is not None:
        args += ["-H", f"{HEADER}: {token}"]
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
    if data is not None:
        args += ["-H", "Content-Type: application/json", "-H", "Expect:", "--data-binary", "@-"]
    args += list(extra) + [URL + path]
    p = subprocess.run(args, input=data, capture_output=True)
    out = p.stdout.decode("utf-8", "replace")
    text, _, code = out.rpartition("\n")
    hdrs = {}
    for line in p.stderr.decode("latin-1").splitlines():
        k, sep, v = line.partition(":")
        if sep:
            hdrs[k.strip().lower()] = v.strip()
    return Answer(int(code or 0), text, hdrs)


# ---- the manager's calls (names after the reference's call sites) ----------------------
def health(**kw):  # _manager_warm_pool.py: idle reaper, readiness
    return request("GET", "/health", token=None, **kw)


def configure(session_id, **fields):  # _manager_create.py claim; session_id=None: recycle
    return request("POST", "/configure", {"session_id": session_id, **fields})


def exec_(command, timeout=30, secret_env=None):  # tools/bash_tool.py
    body = {"command": command, "timeout": timeout}
    if secret_env is not None:
        body["secret_env"] = secret_env
    return request("POST", "/exec", body, timeout=timeout + 30)


def file_create(path, content):  # _manager_files_skills.py write_file
    return request("POST", "/file-create", {"path": path, "content": content})


def check(name, cond, detail=""):
    global FAILED
    if cond:
        print(f"ok - contract/{GROUP}: {name}")
    else:
        FAILED += 1
        print(f"not ok - contract/{GROUP}: {name}" + (f" ({detail})" if detail else ""))


def skip(name, why):
    print(f"skip - contract/{GROUP}: {name}: {why}")


def done():
    sys.exit(1 if FAILED else 0)
