#!/usr/bin/env bash
# Debian packages the image build needs: buildah (daemonless, chroot isolation), skopeo (to inspect
# and push), mmdebstrap (a Debian base when no registry is reachable). Idempotent and quiet.
set -euo pipefail
missing=()
for tool in buildah skopeo mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
(( ${#missing[@]} == 0 )) && exit 0
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "fleetwave image: install ${missing[*]} (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "fleetwave image: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
  { apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
  { echo "fleetwave image: apt-get install ${missing[*]} failed" >&2; exit 1; }
