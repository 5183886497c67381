#!/usr/bin/env bash
# The cri lane inside its own mount namespace (started by run.sh): bring up
# containerd + CNI + the manager netns (env.sh), run the scenarios
# (lane.py), tear everything down whatever happened (trap).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
trap 'cri_down' EXIT
if ! cri_up; then
	echo "not ok - containerd, CNI and the manager netns come up  # $(tail -3 "$L/containerd.log" 2>/dev/null | tr '\n' ' ')"
	exit 1
fi
/usr/bin/python3 "$here/lane.py" "${1:-run}"
