#!/usr/bin/env bash
# Build the real KubeFleet hub agent and member agent from a pinned source commit, and copy its CRDs,
# for the side-by-side benchmark (bench/peers/kubefleet_side_by_side.py, docs/adr/0116).
#
#   tools/kubefleet/build.sh [SOURCE]   build (or reuse) and print the directory holding
#                                       bin/hubagent, bin/memberagent and crds/*.yaml
#
# SOURCE (or KUBEFLEET_SOURCE) is where the pinned commit (versions.env) comes from:
#   - a git directory or clone holding that commit (e.g. a mirror of kubefleet-dev/kubefleet),
#   - a directory that already is the source tree at that commit (nothing is checked: your word),
#   - nothing: the commit's source archive is downloaded from GitHub.
# Everything lands in a cache outside the repository keyed by the commit, so a second run only checks
# the binaries and returns. The build uses -p 1 by default (KUBEFLEET_BUILD_PROCS to change it):
# expect several minutes on two cores the first time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

die() { echo "fleetwave kubefleet: $*" >&2; exit 1; }
log() { echo "fleetwave kubefleet: $*" >&2; }

cache_root="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}"
out="$cache_root/kubefleet/$KUBEFLEET_COMMIT"
source_arg="${1:-${KUBEFLEET_SOURCE:-}}"

verify() { # verify DIR: both agents built from the pinned commit's module, and the CRDs copied
  local dir="$1"
  [[ -x "$dir/bin/hubagent" && -x "$dir/bin/memberagent" ]] || return 1
  [[ -s "$dir/crds/placement.kubernetes-fleet.io_clusterstagedupdateruns.yaml" ]] || return 1
  [[ "$(cat "$dir/COMMIT" 2>/dev/null)" == "$KUBEFLEET_COMMIT" ]] || return 1
  if command -v go >/dev/null 2>&1; then
    # No pipe into `grep -q`: with pipefail an early exit of grep could fail a good binary.
    [[ "$(go version -m "$dir/bin/hubagent" 2>/dev/null)" == *"github.com/kubefleet-dev/kubefleet"* ]] || return 1
  fi
}

if verify "$out"; then echo "$out"; exit 0; fi

mkdir -p "$cache_root/kubefleet"
exec 9>"$cache_root/kubefleet/.build.lock"
flock 9
if verify "$out"; then echo "$out"; exit 0; fi

command -v go >/dev/null 2>&1 || die "Go is not installed. Install the Go version KubeFleet's go.mod asks for (go.dev/dl)."

src="$out/src"
rm -rf "$src" && mkdir -p "$src"
if [[ -z "$source_arg" ]]; then
  url="$KUBEFLEET_REPO_URL/archive/$KUBEFLEET_COMMIT.tar.gz"
  log "downloading $url"
  curl -fsSL --retry 3 "$url" | tar -xz -C "$src" --strip-components=1 \
    || die "could not download $url; pass a clone of $KUBEFLEET_REPO_URL as SOURCE instead."
elif git --git-dir="$source_arg" rev-parse --verify -q "$KUBEFLEET_COMMIT^{commit}" >/dev/null 2>&1; then
  log "exporting $KUBEFLEET_COMMIT from $source_arg"
  git --git-dir="$source_arg" archive "$KUBEFLEET_COMMIT" | tar -x -C "$src"
elif git -C "$source_arg" rev-parse --verify -q "$KUBEFLEET_COMMIT^{commit}" >/dev/null 2>&1; then
  log "exporting $KUBEFLEET_COMMIT from $source_arg"
  git -C "$source_arg" archive "$KUBEFLEET_COMMIT" | tar -x -C "$src"
elif [[ -f "$source_arg/go.mod" ]]; then
  log "copying the source tree $source_arg (taken to be commit $KUBEFLEET_COMMIT)"
  cp -a "$source_arg/." "$src/"
else
  die "$source_arg is neither a git repository holding $KUBEFLEET_COMMIT nor a KubeFleet source tree."
fi
grep -q '^module github.com/kubefleet-dev/kubefleet$' "$src/go.mod" || die "$src/go.mod is not KubeFleet's."

procs="${KUBEFLEET_BUILD_PROCS:-1}"
mkdir -p "$out/bin" "$out/crds"
for agent in hubagent memberagent; do
  log "building $agent (go build -p $procs; several minutes the first time)"
  (cd "$src" && CGO_ENABLED=0 go build -p "$procs" -trimpath -o "$out/bin/$agent" "./cmd/$agent") \
    || die "go build ./cmd/$agent failed (see above)."
done
cp "$src"/config/crd/bases/*.yaml "$out/crds/"
echo "$KUBEFLEET_COMMIT" > "$out/COMMIT"
rm -rf "$src"
verify "$out" || die "the build finished but $out does not verify."
echo "$out"
