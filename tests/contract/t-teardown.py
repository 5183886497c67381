#!/usr/bin/env python3
# The manager's teardown and monitoring calls, and the routes boxkite does
# not serve (501 with a clear code).
from manager import *

r = request("POST", "/process/kill-all", None)
check("/process/kill-all: 200 {killed: int}", r.status_code == 200 and isinstance(r.json().get("killed"), int), r.text)
r = request("POST", "/flush", None)
check("/flush: 200 {status: flushed, files: []}",
      r.status_code == 200 and r.json() == {"status": "flushed", "files": []}, r.text)
r = request("POST", "/flush/confirmed", None)
b = r.json() if r.status_code == 200 else {}
check("/flush/confirmed: status, storage_prefix, storage_keys",
      b.get("status") == "flushed" and "storage_prefix" in b and b.get("storage_keys") == [], r.text)
for path in ("/interpreter/exec", "/browser/navigate", "/http-request", "/ensure-skills", "/prefetch-uploads",
             "/lsp/start", "/watch", "/mount-bucket"):
    r = request("POST", path, {})
    check(f"{path}: 501 not_implemented",
          r.status_code == 501 and r.json().get("code") == "not_implemented", f"{r.status_code} {r.text[:200]}")
exec_("true")
exec_("false")
r = request("GET", "/metrics")
t = r.text
check("/metrics: text/plain", r.status_code == 200 and "text/plain" in r.headers.get("content-type", ""))
check("/metrics: boxkite_sidecar_requests_total by route", 'boxkite_sidecar_requests_total{route="/exec"}' in t)
check("/metrics: /health counted", 'boxkite_sidecar_requests_total{route="/health"}' in t)
check("/metrics: boxkite_sidecar_request_errors_total", "boxkite_sidecar_request_errors_total" in t)
check("/metrics: boxkite_sidecar_exec_total and exec_errors_total",
      "boxkite_sidecar_exec_total " in t and "boxkite_sidecar_exec_errors_total " in t)
check("/metrics: ours still there (boxkite_ agent series)",
      any(l.startswith("boxkite_") and not l.startswith("boxkite_sidecar_") for l in t.splitlines()))
r = request("POST", "/tool-call", {"tool_name": "web_search", "arguments": {"q": "x"}, "session_id": "other"})
check("/tool-call: always 200 with the backend's JSON or {error} (no backend here)",
      r.status_code == 200 and "error" in r.json(), f"{r.status_code} {r.text[:200]}")
done()
