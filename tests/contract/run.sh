#!/usr/bin/env bash
# The contract lane: boxkite-shim as a drop-in for the reference sidecar
# (EvAlssment/boxkite at cac4559), everything over pinned HTTPS through the
# shim with the request bodies the reference's manager, tools and CLI send:
#   api.sh          auth, /health, /configure, /exec, limits, teardown,
#                   /metrics, 501s (t-*.py) and /tool-call (toolcall.py)
#   file-routes.sh  paths, /view, /read-image, /str-replace, /ls, /glob,
#                   /grep, /present-files, /file-create
# Each part starts its own agent and sandbox and removes them. Root; run
# under the e2e lock (machine-global state). BK_CONTRACT_ONLY=<substring>:
# one part or one group of api.sh ("file-routes" for the file part).
set -u
cd "$(dirname "$0")/../.."
rc=0
for part in api file-routes; do
	if [ "$part" = file-routes ] && [ -n "${BK_CONTRACT_ONLY:-}" ] && [[ file-routes != *"$BK_CONTRACT_ONLY"* ]]; then
		continue
	fi
	if [ "$part" = api ] && [[ file-routes == *"${BK_CONTRACT_ONLY:-@}"* ]]; then
		continue
	fi
	timeout --kill-after=10 900 bash "tests/contract/$part.sh" || rc=1
done
exit $rc
