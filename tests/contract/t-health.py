#!/usr/bin/env python3
# /health as the reference: the manager's warm-pool reaper reads
# idle_seconds (seconds since the last request other than /health).
import time
from manager import *

r = health()
b = r.json() if r.status_code == 200 else {}
check("/health: status healthy", b.get("status") == "healthy", r.text)
for k in ("session_id", "skills_rev", "runtime_mode", "storage_backend", "idle_seconds"):
    check(f"/health has {k}", k in b, r.text)
check("/health keeps our agent field", b.get("agent") == "connected", r.text)
check("/health: storage_backend says none", b.get("storage_backend") == "none", r.text)
request("POST", "/flush", None)
time.sleep(2.2)
health()  # a /health is no activity
b = health().json()
idle = b.get("idle_seconds")
check("idle_seconds counts from the last request other than /health (>= 2.0)",
      isinstance(idle, (int, float)) and 2.0 <= idle < 30, idle)
exec_("true")
b = health().json()
check("a request resets idle_seconds (< 1)", isinstance(b.get("idle_seconds"), (int, float)) and b["idle_seconds"] < 1,
      b.get("idle_seconds"))
done()
