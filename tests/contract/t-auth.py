#!/usr/bin/env python3
# Auth as the reference (tests/test_sidecar_auth.py): every route but
# /health needs the token; 401's detail says missing or invalid; auth
# comes before routing.
from manager import *

r = request("POST", "/exec", {"command": "echo hi"}, token=None)
check("no token: 401", r.status_code == 401, r.status_code)
check("no token: detail says missing", r.status_code == 401 and "missing" in r.json()["detail"].lower(), r.text)
r = request("POST", "/exec", {"command": "echo hi"}, token="totally-wrong-value")
check("wrong token: 401, detail says invalid",
      r.status_code == 401 and "invalid" in r.json()["detail"].lower(), r.text)
r = request("POST", "/no-such-route", {}, token=None)
check("unknown route without a token: 401 (auth before routing)", r.status_code == 401, r.status_code)
r = request("POST", "/no-such-route", {})
check("unknown route with the token: 404", r.status_code == 404, r.status_code)
r = request("GET", "/metrics", token=None)
check("/metrics needs the token", r.status_code == 401, r.status_code)
r = health()
check("/health needs no token", r.status_code == 200, r.status_code)
r = request("POST", "/configure", {"session_id": "s1"}, token=None)
check("/configure needs the token", r.status_code == 401, r.status_code)
done()
