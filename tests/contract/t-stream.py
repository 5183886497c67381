#!/usr/bin/env python3
# /exec with "stream": true (issue 18; ours, not the reference's): chunked
# JSON lines over pinned HTTPS with auth. Events arrive while the command
# runs (each line stamped with CLOCK_REALTIME by the command itself, read
# on arrival here: the same host clock), in order, none lost, stdout and
# stderr apart; bytes that are not UTF-8 round-trip exactly; a UTF-8
# sequence split between two writes stays text; a secret split between two
# writes is redacted; the client hanging up kills the command; 401 without
# the token; the exit event carries a receipt that verifies as the plain
# answer's does; without "stream" the answer is the plain one.
import base64
import json
import os
import subprocess
import tempfile
import time
from manager import *

SCALE = int(os.environ.get("BK_TIME_SCALE", "1"))
secret = os.environ["BK_SECRET_VALUE"]
PUB = os.environ.get("BK_RECEIPT_PUB", "")


def stream(command, token=TOKEN, secret_env=None, timeout=30, hang_up_after=None):
    """Run a streamed exec; returns (http_code, [(arrival_time, event)], raw_text).
    hang_up_after(event) -> True: the client closes the connection there."""
    body = {"command": command, "timeout": timeout, "stream": True}
    if secret_env is not None:
        body["secret_env"] = secret_env
    args = ["curl", "-sk", "-N", "--max-time", str(timeout + 30), "--pinnedpubkey", PIN, "-X", "POST",
            "-H", "Content-Type: application/json", "-H", "Expect:", "--data-binary", json.dumps(body),
            "-w", "\n%{http_code}\n"]
    if token is not None:
        args += ["-H", f"{HEADER}: {token}"]
    p = subprocess.Popen(args + [URL + "/exec"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    events, raw = [], b""
    for line in p.stdout:
        t = time.time()
        raw += line
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        events.append((t, ev))
        if hang_up_after and hang_up_after(ev):
            p.kill()
            p.wait()
            return 0, events, raw
    p.wait()
    code = raw.rstrip(b"\n").rpartition(b"\n")[2]
    return int(code) if code.isdigit() else 0, events, raw


def data_of(events, kind):
    out = b""
    for _, e in events:
        if e.get("type") == kind:
            if "data" in e:
                out += e["data"].encode()
            if "data_base64" in e:
                out += base64.b64decode(e["data_base64"])
    return out


configure("sess-stream", secret_names=["contract-key"])

# --- arrival while it runs; order; separation; latency -------------------------------------
cmd = ("for i in 1 2 3 4 5 6; do echo \"out $i $(date +%s.%N)\"; echo \"err $i\" >&2; sleep 0.2; done")
code, evs, raw = stream(cmd)
check("stream: 200 with chunked JSON lines", code == 200 and evs and evs[0][1].get("type") == "start",
      raw[:300])
outs = [(t, e["data"]) for t, e in evs if e.get("type") == "stdout" and "data" in e]
lines = data_of(evs, "stdout").decode(errors="replace").splitlines()
errs = data_of(evs, "stderr").decode(errors="replace").splitlines()
check("stream: stdout in order, none lost, only stdout", [l.split()[:2] for l in lines] ==
      [["out", str(i)] for i in range(1, 7)], lines)
check("stream: stderr in order, none lost, only stderr", errs == [f"err {i}" for i in range(1, 7)], errs)
# latency of each stdout line: its arrival here minus the time the command wrote into it
lat = []
for t, d in outs:
    for l in d.splitlines():
        f = l.split()
        if len(f) == 3:
            lat.append(t - float(f[2]))
spread = outs[-1][0] - outs[0][0] if len(outs) > 1 else 0
check(f"stream: lines arrive while the command runs (spread {spread:.2f}s over its ~1 s)",
      len(outs) >= 5 and spread >= 0.8, [round(t - outs[0][0], 3) for t, _ in outs])
check(f"stream: first byte within 50 ms of being written ({lat[0] * 1000 if lat else -1:.1f} ms; "
      f"max {max(lat) * 1000 if lat else -1:.1f} ms)", lat and 0 <= lat[0] <= 0.05 * SCALE, lat)
ex = evs[-1][1] if evs else {}
check("stream: the last event is exit (exit_code 0, timed_out false, isolation, receipt)",
      ex.get("type") == "exit" and ex.get("exit_code") == 0 and ex.get("timed_out") is False and
      isinstance(ex.get("isolation"), dict) and isinstance(ex.get("receipt"), dict), str(ex)[:300])

# --- the receipt verifies as the plain answer's -------------------------------------------
plain = exec_("echo plain")
pb = plain.json() if plain.status_code == 200 else {}
plain_keys = [k for k in pb if k not in ("stdout", "stderr")]
check("exit event: the plain answer's fields, in its order, without stdout/stderr",
      [k for k in ex if k != "type"] == plain_keys, f"{list(ex)} vs {list(pb)}")


def verifies(rc):
    if not PUB or not isinstance(rc, dict):
        return None
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/doc", "w").write(rc["document"])
        open(f"{d}/sig", "wb").write(base64.b64decode(rc["signature"]))
        p = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", PUB, "-rawin", "-in", f"{d}/doc",
                            "-sigfile", f"{d}/sig"], capture_output=True, text=True)
        return "Signature Verified Successfully" in p.stdout


if PUB:
    doc = json.loads(ex["receipt"]["document"]) if isinstance(ex.get("receipt"), dict) else {}
    check("exit event: the receipt verifies with stock openssl, as the plain one",
          verifies(ex.get("receipt")) is True and verifies(pb.get("receipt")) is True and
          doc.get("exec_id") == ex.get("exec_id") and doc.get("exit_code") == 0, str(ex.get("receipt"))[:200])
else:
    skip("exit event: the receipt verifies", "BK_RECEIPT_PUB not set")

# --- a denial as it happens (the BPF ring buffer's event for this exec, before the command ends) ---
cmd = "curl -s --max-time 2 http://169.254.169.254/ >/dev/null; echo rc=$?; sleep 0.5"
code, evs, raw = stream(cmd)
den = [(t, e) for t, e in evs if e.get("type") == "denied"]
end = evs[-1][0] if evs else 0
ex = evs[-1][1] if evs else {}
check(f"denied: the metadata connect streamed as it happened ({(end - den[0][0]) if den else 0:.2f}s before exit)",
      den and den[0][1].get("dst") == "169.254.169.254" and den[0][1].get("port") == 80 and
      den[0][1].get("layer") == "bpf" and end - den[0][0] >= 0.3 and
      any(d.get("dst") == "169.254.169.254" for d in ex.get("denied", [])), [e for _, e in den][:2])

# --- bytes: invalid UTF-8 exactly; a sequence split between writes stays text -----------------
cmd = ("printf 'a\\377\\376b\\303'; sleep 0.3; printf '\\251 caf\\303\\251 au lait \\000z un smiley: \\360\\237'; "
       "sleep 0.3; printf '\\230\\200!'")
code, evs, raw = stream(cmd)
want = b"a\xff\xfeb\xc3\xa9 caf\xc3\xa9 au lait \x00z un smiley: \xf0\x9f\x98\x80!"
got = data_of(evs, "stdout")
check("bytes: stdout round-trips exactly (invalid UTF-8 and NUL in data_base64)", got == want, repr(got))
texts = "".join(e.get("data", "") for _, e in evs if e.get("type") == "stdout")
check("bytes: a UTF-8 sequence split between two writes arrives as text, not base64",
      "\u00e9 caf" in texts and "\U0001f600" in texts, repr(texts))

# --- a secret split between two writes is redacted ---------------------------------------------
cmd = ("printf 'key=%s' \"$(printf %s \"$MY_KEY\" | head -c 10)\"; sleep 0.4; "
       "printf '%s;\\n' \"$(printf %s \"$MY_KEY\" | tail -c +11)\"; echo \"${#MY_KEY}\"")
code, evs, raw = stream(cmd, secret_env={"MY_KEY": "contract-key"})
got = data_of(evs, "stdout").decode(errors="replace")
check("secret split across two writes: redacted in the stream",
      secret.encode() not in raw and secret[:10] not in got and
      got.startswith("key=[REDACTED_SECRET:contract-key];\n") and got.endswith(f"{len(secret)}\n"), got[:200])

# --- hang-up kills (the command's process seen from the host: this test runs in the host's
# pid namespace; a sleep under a name of its own) -------------------------------------------------
def running():
    return subprocess.run(["pgrep", "-f", "^sleep 1337[.]25"], capture_output=True).returncode == 0


t0 = [0.0]
seen = [False]


def after_first_tick(ev):
    if ev.get("type") == "stdout":
        for _ in range(40):  # the sleep is exec'd right after the tick
            if running():
                seen[0] = True
                break
            time.sleep(0.05)
        t0[0] = time.time()
        return True
    return False


code, evs, raw = stream("echo tick; exec sleep 1337.25", hang_up_after=after_first_tick)
waited = 0.0
while running() and waited < 5:
    time.sleep(0.02)
    waited = time.time() - t0[0]
waited = time.time() - t0[0]
check(f"hang-up: the command (running before: {seen[0]}) is dead {waited:.2f}s after the client closed",
      seen[0] and not running() and waited <= 2.0 * SCALE, evs)

# --- auth, validation, no stream ----------------------------------------------------------------
code, evs, raw = stream("echo hi", token=None)
check("no token: 401, nothing streamed", code == 401 and not any(e.get("type") for _, e in evs), raw[:200])
code, evs, raw = stream("echo hi", token="wrong-token")
check("wrong token: 401", code == 401, raw[:200])
r = request("POST", "/exec", {"command": "echo hi", "stream": "yes"})
check("stream not a boolean: 422", r.status_code == 422, f"{r.status_code} {r.text[:200]}")
r = request("POST", "/exec", {"command": "echo hi", "stream": False})
check("stream false: the plain answer", r.status_code == 200 and r.json().get("stdout") == "hi\n" and
      "type" not in r.json(), r.text[:200])
r = stream("exec sleep 5", timeout=1)
ex = r[1][-1][1] if r[1] else {}
check("timeout: exit event with exit_code 124, timed_out true", ex.get("type") == "exit" and
      ex.get("exit_code") == 124 and ex.get("timed_out") is True, str(ex)[:200])
code, evs, raw = stream("head -c 1100000 /dev/zero | tr '\\0' a")
ex = evs[-1][1] if evs else {}
n = len(data_of(evs, "stdout"))
check(f"cap: stdout stops at the output cap ({n} bytes), truncated in the exit event",
      n == 1024 * 1024 and ex.get("truncated") is True, str(ex)[:200])
done()
