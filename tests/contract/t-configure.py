#!/usr/bin/env python3
# /configure as the manager calls it: claim (a session id) and recycle
# (session_id null, or {}): reset to no session, data wiped, execs killed.
from manager import *

r = configure("sess-contract-1")
check("claim: 200 configured", r.status_code == 200 and r.json().get("status") == "configured", r.text)
check("claim: session_id echoed, prefetched_files a list",
      r.status_code == 200 and r.json().get("session_id") == "sess-contract-1"
      and isinstance(r.json().get("prefetched_files"), list), r.text)
check("/health names the session", health().json().get("session_id") == "sess-contract-1")
exec_("echo left-behind > /workspace/recycle-marker")
r = configure(None)
check("recycle (session_id null): 200, session_id null",
      r.status_code == 200 and r.json().get("session_id", "x") is None, f"{r.status_code} {r.text}")
check("recycle: /health session_id null", health().json().get("session_id", "x") is None)
r = exec_("test -e /workspace/recycle-marker && echo still-there || echo wiped")
check("recycle wiped the session's data", r.status_code == 200 and r.json().get("stdout") == "wiped\n", r.text[:200])
r = request("POST", "/configure", {})
check("recycle ({}): 200", r.status_code == 200, f"{r.status_code} {r.text}")
r = request("POST", "/configure", {"session_id": 5})
check("session_id not a string: 422 with a list detail",
      r.status_code == 422 and isinstance(r.json().get("detail"), list), f"{r.status_code} {r.text}")
done()
