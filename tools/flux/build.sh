#!/usr/bin/env bash
# Build Flux's source-controller and the CNCF distribution registry (an OCI registry) from the Go
# module proxy, and extract source-controller's CRDs, for the local Flux sources (docs/adr/0104).
#
#   tools/flux/build.sh            build (or reuse) and print the directory holding
#                                  source-controller, registry and crds/*.yaml
#   tools/flux/build.sh --init     regenerate the wrapper go.mod/go.sum files (maintainers only)
#
# Everything lands in a cache outside the repository keyed by both pinned versions, so a second run
# only checks the binaries and returns; the CRDs come from the source-controller module itself, so
# the repository never carries a copy of them. FLEETWAVE_FLUX_DIR skips all of this and uses a
# directory of that shape instead (verified the same way).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

die() { echo "fleetwave flux: $*" >&2; exit 1; }
log() { echo "fleetwave flux: $*" >&2; }

SC_MODULE=github.com/fluxcd/source-controller
REG_MODULE=github.com/distribution/distribution/v3
key="source-controller${SOURCE_CONTROLLER_VERSION}-registry${DISTRIBUTION_VERSION}"
cache_root="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}"
out="$cache_root/flux/$key"
CRDS=(gitrepositories ocirepositories buckets helmrepositories helmcharts)

has() { [[ "$1" == *"$2"* ]]; } # no pipes, so pipefail/SIGPIPE cannot bite

verify() {
  local dir="$1" crd
  [[ -x "$dir/source-controller" && -x "$dir/registry" ]] || return 1
  for crd in "${CRDS[@]}"; do [[ -s "$dir/crds/source.toolkit.fluxcd.io_$crd.yaml" ]] || return 1; done
  # source-controller has no --version: its usage must list the flag the local fleet depends on.
  has "$("$dir/source-controller" --help 2>&1 || true)" "--storage-adv-addr" || return 1
  has "$("$dir/registry" --version 2>/dev/null)" "$DISTRIBUTION_VERSION" || return 1
  # Where Go is installed, the module version recorded in the binary is checked too.
  if command -v go >/dev/null 2>&1; then
    has "$(go version -m "$dir/source-controller" 2>/dev/null)" "$SC_MODULE	$SOURCE_CONTROLLER_VERSION" || return 1
  fi
}

if [[ -n "${FLEETWAVE_FLUX_DIR:-}" ]]; then
  verify "$FLEETWAVE_FLUX_DIR" || die "FLEETWAVE_FLUX_DIR=$FLEETWAVE_FLUX_DIR does not hold a working source-controller $SOURCE_CONTROLLER_VERSION, registry $DISTRIBUTION_VERSION and crds/ ($key)"
  echo "$FLEETWAVE_FLUX_DIR"; exit 0
fi

if [[ "${1:-}" != "--init" ]] && verify "$out"; then echo "$out"; exit 0; fi

# One build at a time per cache: parallel test sessions wait here.
mkdir -p "$cache_root/flux"
exec 9>"$cache_root/flux/.build.lock"
flock 9
if [[ "${1:-}" != "--init" ]] && verify "$out"; then echo "$out"; exit 0; fi

command -v go >/dev/null 2>&1 || die "Go is not installed. Install Go >= 1.25 (e.g. 'apt-get install golang-go' or from go.dev) or set FLEETWAVE_FLUX_DIR to a directory holding source-controller, registry and crds/."
free_kb=$(df -Pk "$cache_root" | awk 'NR==2{print $4}')
gocache_free_kb=$(df -Pk "$(go env GOCACHE | xargs dirname)" 2>/dev/null | awk 'NR==2{print $4}' || echo "$free_kb")
for f in "$free_kb" "$gocache_free_kb"; do
  (( f > 4 * 1024 * 1024 )) || die "less than 4 GiB free for the Go build cache / binaries ($cache_root, $(go env GOCACHE)). Free some disk, or point FLEETWAVE_CACHE_DIR / GOCACHE elsewhere."
done

# A wrapper module's replaces must be copied from the tool's own go.mod: Go ignores replace
# directives of dependencies (source-controller pins go-digest to a commit that has BLAKE3).
replaces_py='import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if "Version" in r["New"]:  # a local path (the module'"'"'s own ./api) is not ours to copy
        print(r["Old"]["Path"] + "=" + r["New"]["Path"] + "@" + r["New"]["Version"])'
copy_replaces() { # upstream-go.mod
  go mod edit -json "$1" | python3 -c "$replaces_py" | while read -r line; do go mod edit -replace="$line"; done
}

init_module() { # dir tool-package module version
  local d="$here/$1" gomod
  rm -f "$d/go.mod" "$d/go.sum"
  gomod=$(cd "$(mktemp -d)" && go mod download -json "$3@$4" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  (cd "$d" && go mod init "fleetwave.local/flux/$1" >/dev/null 2>&1 &&
   go get -tool "$2@$4" && copy_replaces "$gomod" &&
   go mod edit -go="$(go mod edit -json "$gomod" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Go"])')" &&
   # -e: a tool's own tests may import modules the proxy refuses (v1.9.0's: fluxcd/pkg/helmtestserver v0.40.0); the build never does.
   go mod tidy -e)
}

if [[ "${1:-}" == "--init" ]]; then
  init_module source-controller "$SC_MODULE" "$SC_MODULE" "$SOURCE_CONTROLLER_VERSION"
  init_module registry "$REG_MODULE/cmd/registry" "$REG_MODULE" "$DISTRIBUTION_VERSION"
fi

export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath"
rm -rf "$out.partial" && mkdir -p "$out.partial/crds"

build() { # dir output-name package ldflags
  log "building $2 (a cold build takes minutes; later runs reuse $out)"
  (cd "$here/$1" && go build -ldflags "$4" -o "$out.partial/$2" "$3") || die "go build of $2 failed (see output above). Check disk space and network access to the Go module proxy, then run again."
}

t0=$(date +%s)
build source-controller source-controller "$SC_MODULE" "-s -w"
build registry registry "$REG_MODULE/cmd/registry" "-s -w -X $REG_MODULE/version.version=$DISTRIBUTION_VERSION -X $REG_MODULE/version.mainpkg=$REG_MODULE"
sc_dir="$(cd "$here/source-controller" && go list -m -f '{{.Dir}}' "$SC_MODULE")"
[[ -d "$sc_dir/config/crd/bases" ]] || die "the $SC_MODULE@$SOURCE_CONTROLLER_VERSION module has no config/crd/bases ($sc_dir)"
for crd in "$sc_dir"/config/crd/bases/*.yaml; do install -m 0644 "$crd" "$out.partial/crds/"; done

verify "$out.partial" || die "the built binaries do not run or do not report the pinned versions ($key); remove $out.partial and run again"
rm -rf "$out" && mv "$out.partial" "$out"
log "source-controller, registry and CRDs ready in $out after $(( $(date +%s) - t0 ))s"
echo "$out"
