#!/usr/bin/env bash
# new-sandbox.sh NAME NAMESPACE [OUTDIR]
#
# Makes the per-pod material for one Kubernetes sandbox pod and the pod
# manifest itself, then prints the pin a client passes to
# `curl --pinnedpubkey`:
#   - a 256-bit random token                   (openssl rand -hex 32)
#   - a fresh EC P-256 key and a self-signed certificate for the shim
#   - OUTDIR/secret.yaml  the Secret NAME-shim (type Opaque; keys token,
#                         tls.crt, tls.key; base64 data)           mode 0600
#   - OUTDIR/pod.yaml     deploy/sandbox-pod.yaml with its placeholders
#                         substituted                              mode 0644
#   - OUTDIR/token, OUTDIR/tls.key (mode 0600), OUTDIR/tls.crt, OUTDIR/pin
#     for the client that talks to this pod's shim.
# stdout: exactly one line, the pin `sha256//<base64 SHA-256 of the DER
# SubjectPublicKeyInfo>`. The token and the key are never printed, never put
# on a command line, and never exist in a file readable by others (umask 077).
#
# Environment: SANDBOX_IMAGE (default debian:12-slim), SHIM_IMAGE (default
# boxkite-shim:dev), CERT_DAYS (default 365).
#
# Then: kubectl apply -f OUTDIR/secret.yaml -f OUTDIR/pod.yaml
set -euo pipefail
umask 077

prog=${0##*/}
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  die "usage: $prog NAME NAMESPACE [OUTDIR]"
fi
name=$1
namespace=$2
outdir=${3:-./$name}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
template=${BOXKITE_POD_TEMPLATE:-$here/../deploy/sandbox-pod.yaml}
sandbox_image=${SANDBOX_IMAGE:-debian:12-slim}
shim_image=${SHIM_IMAGE:-boxkite-shim:dev}
cert_days=${CERT_DAYS:-365}

# Kubernetes names: DNS-1123 labels. The Secret is NAME-shim, so NAME leaves
# room for the suffix. Validating here also keeps the sed below safe.
dns_label='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
if ! [[ $name =~ $dns_label ]] || [ ${#name} -gt 58 ]; then
  die "NAME must be a DNS-1123 label of at most 58 characters: '$name'"
fi
if ! [[ $namespace =~ $dns_label ]] || [ ${#namespace} -gt 63 ]; then
  die "NAMESPACE must be a DNS-1123 label: '$namespace'"
fi
image_re='^[A-Za-z0-9][A-Za-z0-9._/:@-]*$'
[[ $sandbox_image =~ $image_re ]] || die "bad SANDBOX_IMAGE: '$sandbox_image'"
[[ $shim_image =~ $image_re ]] || die "bad SHIM_IMAGE: '$shim_image'"
[[ $cert_days =~ ^[1-9][0-9]{0,4}$ ]] || die "bad CERT_DAYS: '$cert_days'"
[ -r "$template" ] || die "pod template not found: $template"
command -v openssl >/dev/null || die "openssl is required"

# Never overwrite: a second run would make a new key that no longer matches
# a Secret already applied from the first.
for f in secret.yaml pod.yaml token tls.key tls.crt pin; do
  [ ! -e "$outdir/$f" ] || die "$outdir/$f exists; refusing to overwrite (use a new OUTDIR)"
done
mkdir -p "$outdir"

work=$(mktemp -d "$outdir/.new-sandbox.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Token: 64 hex characters, no trailing newline. Written straight to a file,
# never into argv (printf is a shell builtin).
tok=$(openssl rand -hex 32)
[[ $tok =~ ^[0-9a-f]{64}$ ]] || die "openssl rand gave an unexpected token format"
printf '%s' "$tok" >"$work/token"
unset tok

# Key: EC P-256 (prime256v1) in PKCS#8 PEM. Certificate: self-signed,
# ECDSA-SHA256, usable for TLS 1.3 (ecdsa_secp256r1_sha256). Clients pin the
# public key, so the names in it are informational.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
  -out "$work/tls.key" 2>/dev/null || die "key generation failed"
openssl req -x509 -new -key "$work/tls.key" -sha256 -days "$cert_days" \
  -subj "/CN=$name.$namespace.boxkite-sandbox" \
  -addext "subjectAltName=DNS:$name.$namespace.boxkite-sandbox" \
  -addext "basicConstraints=critical,CA:FALSE" \
  -addext "keyUsage=critical,digitalSignature" \
  -addext "extendedKeyUsage=serverAuth" \
  -out "$work/tls.crt" 2>/dev/null || die "certificate generation failed"

# The pin: SHA-256 over the DER SubjectPublicKeyInfo, base64 (what
# curl --pinnedpubkey sha256//... and the manager compare).
pin="sha256//$(openssl pkey -in "$work/tls.key" -pubout -outform DER |
  openssl dgst -sha256 -binary | base64 -w0)"
printf '%s\n' "$pin" >"$work/pin"

b64() { base64 -w0 <"$1"; }
{
  printf '%s\n' \
    "# Per-pod Secret of sandbox $name: mounted into its shim container only." \
    "# Holds the shim's auth token and TLS key: keep this file private." \
    "apiVersion: v1" \
    "kind: Secret" \
    "metadata:" \
    "  name: $name-shim" \
    "  namespace: $namespace" \
    "  labels:" \
    "    app.kubernetes.io/name: boxkite-sandbox" \
    "    app.kubernetes.io/part-of: boxkite" \
    "    boxkite.dev/sandbox: $name" \
    "type: Opaque" \
    "data:"
  printf '  token: %s\n' "$(b64 "$work/token")"
  printf '  tls.crt: %s\n' "$(b64 "$work/tls.crt")"
  printf '  tls.key: %s\n' "$(b64 "$work/tls.key")"
} >"$work/secret.yaml"

# Placeholders: SANDBOX_NAMESPACE before SANDBOX_NAME (the latter is a
# prefix of the former). The values were validated above; esc() still
# escapes what is special in a sed replacement ('&', '\\', the '|' delimiter).
esc() { printf '%s' "$1" | sed -e 's/[&|\\]/\\&/g'; }
# The template's leading comment block describes the template; the output
# gets a one-line header instead.
{
  printf '# Sandbox pod %s, generated by scripts/new-sandbox.sh from deploy/sandbox-pod.yaml.\n' "$name"
  awk 'started || !/^(#|[[:space:]]*$)/ { started = 1; print }' "$template" |
    sed -e "s|SANDBOX_NAMESPACE|$(esc "$namespace")|g" \
        -e "s|SANDBOX_NAME|$(esc "$name")|g" \
        -e "s|SANDBOX_IMAGE|$(esc "$sandbox_image")|g" \
        -e "s|SHIM_IMAGE|$(esc "$shim_image")|g"
} >"$work/pod.yaml"
if grep -qE 'SANDBOX_(NAME|NAMESPACE|IMAGE)|SHIM_IMAGE' "$work/pod.yaml"; then
  die "placeholder left in the pod manifest"
fi

chmod 0600 "$work/secret.yaml" "$work/token" "$work/tls.key"
chmod 0644 "$work/pod.yaml" "$work/tls.crt" "$work/pin"
for f in secret.yaml pod.yaml token tls.key tls.crt pin; do
  mv "$work/$f" "$outdir/$f"
done

printf '%s\n' "$pin"
