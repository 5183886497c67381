#!/usr/bin/env bash
# Offline validation of deploy/ and scripts/new-sandbox.sh (see check.js).
# Run from anywhere, as root, non-interactively; `make check` runs it from the
# repository root. Installs what it needs:
#   - Debian packages openssl, curl (and nodejs/npm when there is no node)
#   - the npm packages pinned in package-lock.json, into
#     tests/manifests/node_modules (npm ci, only when the lock file changed)
# Output: one `ok - ...` / `not ok - ...` line per check, then
# `N passed, M failed, K skipped` as the last line (a check that cannot run
# here, e.g. kustomize without kubectl, is `skip - ...`, never a pass). Exit status 1 if any check failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "tests/manifests: missing packages (${missing[*]}); run as root" >&2
    return 1
  fi
  echo "tests/manifests: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

setup() {
  command -v openssl >/dev/null || apt_install openssl || return 1
  command -v curl >/dev/null || apt_install curl ca-certificates || return 1
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install nodejs npm || return 1
  fi
  # npm ci only when node_modules does not match package-lock.json; a stamp
  # holds the lock file's hash. --ignore-scripts: no dependency needs an
  # install script, so none runs.
  local stamp=node_modules/.boxkite-lock.sha256 want
  want=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "tests/manifests: npm ci" >&2
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2 || return 1
    printf '%s\n' "$want" >"$stamp"
  fi
}

# A failed set-up is a failed check, reported in the same format.
if ! setup; then
  echo "not ok - manifest test set-up (packages, npm ci): see the messages above"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

exec node "$here/check.js"
