#!/usr/bin/env python3
# /exec as bash_tool calls it: secret_env maps ENV -> granted secret name,
# scrubbed as [REDACTED_SECRET:name]; dangerous names dropped silently;
# timeout answer; stderr cap; validation 422.
import os
from manager import *

secret = os.environ["BK_SECRET_VALUE"]
configure("sess-exec", secret_names=["contract-key"])
r = exec_("echo $MY_KEY; echo ${#MY_KEY}", secret_env={"MY_KEY": "contract-key"})
b = r.json() if r.status_code == 200 else {}
check("secret_env: the granted secret's value is in the environment (length matches)",
      b.get("stdout", "").endswith(f"\n{len(secret)}\n"), r.text[:300])
check("secret_env: the value is scrubbed as [REDACTED_SECRET:contract-key]",
      secret not in r.text and "[REDACTED_SECRET:contract-key]" in b.get("stdout", ""), r.text[:300])
r = exec_("echo ${LD_PRELOAD:-unset}; echo ${MY_KEY:-unset}",
          secret_env={"LD_PRELOAD": "contract-key", "path": "contract-key"})
check("dangerous names dropped silently (200, not set)",
      r.status_code == 200 and r.json().get("stdout") == "unset\nunset\n", f"{r.status_code} {r.text[:300]}")
r = exec_("echo ${MY_KEY:-unset}", secret_env={"MY_KEY": "not-granted"})
check("a name not granted is omitted (200, not set)",
      r.status_code == 200 and r.json().get("stdout") == "unset\n", f"{r.status_code} {r.text[:300]}")
configure("sess-exec-2")  # no secret_names: nothing granted
r = exec_("echo ${MY_KEY:-unset}", secret_env={"MY_KEY": "contract-key"})
check("grants follow /configure's secret_names", r.status_code == 200 and r.json().get("stdout") == "unset\n",
      r.text[:300])
r = exec_("echo before; sleep 30", timeout=1)
b = r.json() if r.status_code == 200 else {}
check("timeout: exit 124, stdout empty, stderr 'Command timed out after 1s'",
      b.get("exit_code") == 124 and b.get("stdout") == "" and b.get("stderr") == "Command timed out after 1s",
      r.text[:300])
r = exec_("head -c 400000 /dev/zero | tr '\\0' e >&2")
b = r.json() if r.status_code == 200 else {}
check("stderr capped at 256 KiB", len(b.get("stderr", "")) == 256 * 1024, len(b.get("stderr", "")))
r = request("POST", "/exec", {"timeout": 5})
check("missing command: 422 with a list detail",
      r.status_code == 422 and isinstance(r.json().get("detail"), list), f"{r.status_code} {r.text}")
r = request("POST", "/exec", raw=b"{not json")
check("a body that is not JSON: 422 with a list detail",
      r.status_code == 422 and isinstance(r.json().get("detail"), list), f"{r.status_code} {r.text}")
done()
