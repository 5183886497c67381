#!/usr/bin/env python3
# /tool-call as the reference sidecar serves it (sidecar_execution.py
# tool_call_proxy): {tool_name, arguments} forwarded with the pod's own
# session id to $BACKEND_URL/api/v1/internal/tool-call, always 200 with the
# backend's JSON or {"error": ...}. Run by run.sh against sandboxes whose
# shim has BACKEND_URL pointing at tests/contract/backend.py in the pod's
# network namespace: BK_BACKEND_SCHEME http or https (with a CA of the
# test's own given as SSL_CERT_FILE), BK_BACKEND_DIR its log and mode.
import json
import os

from manager import *

D = os.environ["BK_BACKEND_DIR"]
SCHEME = os.environ["BK_BACKEND_SCHEME"]


def set_mode(m):
    with open(os.path.join(D, "mode"), "w") as f:
        f.write(m)


def seen():
    try:
        return [json.loads(l) for l in open(os.path.join(D, "requests"))]
    except OSError:
        return []


def call(**kw):
    body = {"tool_name": "web_search", "arguments": {"query": "boxkite", "n": 3}, "session_id": "someone-else"}
    body.update(kw)
    return request("POST", "/tool-call", body)


set_mode("ok")
r = configure(f"sess-toolcall-{SCHEME}")
check(f"{SCHEME}: claim", r.status_code == 200, r.text)
n0 = len(seen())
r = call()
got = seen()[n0:]
check(f"{SCHEME}: 200 with the backend's JSON",
      r.status_code == 200 and r.json().get("result") == "from-backend", f"{r.status_code} {r.text[:300]}")
check(f"{SCHEME}: one POST to /api/v1/internal/tool-call, JSON",
      len(got) == 1 and got[0]["path"] == "/api/v1/internal/tool-call"
      and (got[0]["content_type"] or "").startswith("application/json"), got)
b = got[0]["body"] if got else {}
check(f"{SCHEME}: tool_name and arguments forwarded unchanged",
      isinstance(b, dict) and b.get("tool_name") == "web_search" and b.get("arguments") == {"query": "boxkite", "n": 3}, b)
check(f"{SCHEME}: the pod's own session id, never the caller's",
      isinstance(b, dict) and b.get("session_id") == f"sess-toolcall-{SCHEME}", b)
r = request("POST", "/tool-call", {"tool_name": "web_search"})
b = seen()[-1]["body"]
check(f"{SCHEME}: no arguments -> {{}} forwarded", r.status_code == 200 and b.get("arguments") == {}, b)
n0 = len(seen())
r = call(arguments=None)
check(f"{SCHEME}: arguments null -> 422 list detail, nothing forwarded",
      r.status_code == 422 and isinstance(r.json().get("detail"), list) and len(seen()) == n0, f"{r.status_code} {r.text[:200]}")

set_mode("error500")
r = call()
check(f"{SCHEME}: backend 500 -> 200 {{error: 'Backend error (500): ...'}}",
      r.status_code == 200 and r.json() == {"error": "Backend error (500): backend exploded"}, f"{r.status_code} {r.text[:300]}")
set_mode("notjson")
r = call()
check(f"{SCHEME}: backend answer not JSON -> 200 {{error}}",
      r.status_code == 200 and "error" in r.json(), f"{r.status_code} {r.text[:300]}")

if SCHEME == "https":
    for m, what in (("wronghost", "a certificate for another name"), ("selfsigned", "a certificate from no trusted CA")):
        set_mode(m)
        n0 = len(seen())
        r = call()
        ok_ = r.status_code == 200 and "certificate verify failed" in r.json().get("error", "")
        check(f"https: {what} -> 200 {{error: certificate verify failed}}", ok_, f"{r.status_code} {r.text[:300]}")
        check(f"https: {what} -> the backend received nothing", len(seen()) == n0, seen()[n0:])
    set_mode("ok")

r = configure(None)
r = call()
b = seen()[-1]["body"] if seen() else {}
check(f"{SCHEME}: after recycle the session id forwarded is null",
      r.status_code == 200 and "session_id" in b and b["session_id"] is None, b)
done()
