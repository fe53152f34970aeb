#!/usr/bin/env bash
# Fetch Cluster API's `Cluster` CRD (cluster.x-k8s.io) from the Go module proxy, for the tests that
# treat Cluster API clusters as Sveltos does (docs/adr/0109).
#
#   tools/capi/fetch.sh      fetch (or reuse) and print the directory holding crds/*.yaml
#
# The pinned release's module zip (versions.env) is downloaded, its sha256 checked, and the one CRD
# taken out of it and checked too, into a cache outside the repository keyed by the version: the
# repository never carries a copy of the CRD, and a second run only checks the cached file.
# FLEETWAVE_CAPI_DIR skips all of this and uses a directory of that shape instead (verified the same way).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

die() { echo "fleetwave capi: $*" >&2; exit 1; }
log() { echo "fleetwave capi: $*" >&2; }

MODULE=sigs.k8s.io/cluster-api
CRD=cluster.x-k8s.io_clusters.yaml
proxy="${GOPROXY_URL:-https://proxy.golang.org}"
cache_root="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}"
out="$cache_root/capi/$CLUSTER_API_VERSION"

sha() { sha256sum "$1" | cut -d' ' -f1; }

verify() { # verify DIR: the CRD is there, and is the pinned one
  [[ -s "$1/crds/$CRD" ]] && [[ "$(sha "$1/crds/$CRD")" == "$CLUSTERS_CRD_SHA256" ]]
}

if [[ -n "${FLEETWAVE_CAPI_DIR:-}" ]]; then
  verify "$FLEETWAVE_CAPI_DIR" || die "FLEETWAVE_CAPI_DIR=$FLEETWAVE_CAPI_DIR does not hold crds/$CRD of Cluster API $CLUSTER_API_VERSION (sha256 $CLUSTERS_CRD_SHA256)"
  echo "$FLEETWAVE_CAPI_DIR"; exit 0
fi
if verify "$out"; then echo "$out"; exit 0; fi

command -v curl >/dev/null 2>&1 || die "curl is not installed (Debian: apt-get install curl)."
command -v unzip >/dev/null 2>&1 || die "unzip is not installed (Debian: apt-get install unzip)."

# One fetch at a time per cache: parallel test sessions wait here.
mkdir -p "$cache_root/capi"
exec 9>"$cache_root/capi/.fetch.lock"
flock 9
if verify "$out"; then echo "$out"; exit 0; fi

partial="$out.partial"
rm -rf "$partial" && mkdir -p "$partial/crds"
zip="$partial/module.zip"
url="$proxy/$MODULE/@v/$CLUSTER_API_VERSION.zip"
log "fetching $url"
curl -fsSL --retry 3 -o "$zip" "$url" || die "could not download $url (check network access to the Go module proxy)."
got="$(sha "$zip")"
[[ "$got" == "$CLUSTER_API_ZIP_SHA256" ]] || die "$url has sha256 $got, not the pinned $CLUSTER_API_ZIP_SHA256; refusing it"
# The CRD moved between releases (config/ in v1.12, core/config/ later): whichever the zip holds.
path="$(unzip -Z1 "$zip" | grep -E "^$MODULE@$CLUSTER_API_VERSION/(core/)?config/crd/bases/$CRD\$" | head -n 1 || true)"
[[ -n "$path" ]] || die "the $MODULE@$CLUSTER_API_VERSION module has no config/crd/bases/$CRD"
unzip -p "$zip" "$path" > "$partial/crds/$CRD"
rm -f "$zip"
verify "$partial" || die "$path has sha256 $(sha "$partial/crds/$CRD"), not the pinned $CLUSTERS_CRD_SHA256"
rm -rf "$out" && mv "$partial" "$out"
log "Cluster API $CLUSTER_API_VERSION's Cluster CRD ready in $out"
echo "$out"
