#!/usr/bin/env bash
# Build the real control-plane binaries fleetwave's local fleet runs on (and the kubectl its tests drive),
# plus the content tools the controller runs (kustomize, fleetwave-render for Go templates), from the Go module proxy.
#
#   tools/binaries/build.sh            build (or reuse) and print the binary directory
#   tools/binaries/build.sh --init     regenerate the wrapper go.mod/go.sum files (maintainers only)
#
# Binaries land in a cache outside the repository keyed by every pinned version, so a second run
# only checks `--version` and returns. FLEETWAVE_BIN_DIR skips all of this and uses a directory of
# pre-built binaries instead (see README).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

die() { echo "fleetwave binaries: $*" >&2; exit 1; }
log() { echo "fleetwave binaries: $*" >&2; }

# fleetwave-render is built from source in this repository: its key is a hash of that source.
render_src="$(cat "$here/render/main.go" "$here/render/go.sum" | sha256sum | cut -c1-12)"
core="k8s${KUBERNETES_VERSION}-etcd${ETCD_VERSION}-helm${HELM_VERSION}-kwok${KWOK_VERSION}"
key="${core}-kustomize${KUSTOMIZE_VERSION}-render${render_src}"
cache_root="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}"
bin="$cache_root/bin/$key"

has() { # has "<output of a command>" "<text it must contain>": no pipes, so pipefail/SIGPIPE cannot bite
  [[ "$1" == *"$2"* ]]
}

verify() {
  local dir="$1"
  [[ -x "$dir/kube-apiserver" && -x "$dir/kubectl" && -x "$dir/etcd" && -x "$dir/helm" && -x "$dir/kwok" ]] || return 1
  [[ -x "$dir/kustomize" && -x "$dir/fleetwave-render" ]] || return 1
  has "$("$dir/kube-apiserver" --version 2>/dev/null)" "Kubernetes ${KUBERNETES_VERSION}" &&
    has "$("$dir/kube-controller-manager" --version 2>/dev/null)" "${KUBERNETES_VERSION}" &&
    has "$("$dir/kube-scheduler" --version 2>/dev/null)" "${KUBERNETES_VERSION}" &&
    has "$("$dir/kubectl" version --client 2>/dev/null)" "${KUBERNETES_VERSION}" &&
    has "$("$dir/etcd" --version 2>/dev/null)" "etcd Version: ${ETCD_VERSION#v}" &&
    has "$("$dir/helm" version --template '{{.Version}}' 2>/dev/null)" "${HELM_VERSION}" &&
    has "$("$dir/kwok" --version 2>/dev/null)" "${KWOK_VERSION}" &&
    has "$("$dir/kustomize" version 2>/dev/null)" "${KUSTOMIZE_VERSION}" &&
    has "$("$dir/fleetwave-render" --version 2>/dev/null)" "fleetwave-render"
}

if [[ -n "${FLEETWAVE_BIN_DIR:-}" ]]; then
  verify "$FLEETWAVE_BIN_DIR" || die "FLEETWAVE_BIN_DIR=$FLEETWAVE_BIN_DIR does not hold working binaries of the pinned versions ($key)"
  echo "$FLEETWAVE_BIN_DIR"; exit 0
fi

if [[ "${1:-}" != "--init" ]] && verify "$bin"; then echo "$bin"; exit 0; fi

# One build at a time per cache: parallel test sessions or a demo started during a build wait here.
mkdir -p "$cache_root/bin"
exec 9>"$cache_root/bin/.build.lock"
flock 9
if [[ "${1:-}" != "--init" ]] && verify "$bin"; then echo "$bin"; exit 0; fi

command -v go >/dev/null 2>&1 || die "Go is not installed. Install Go >= 1.25 (e.g. 'apt-get install golang-go' or from go.dev) or set FLEETWAVE_BIN_DIR to pre-built binaries."
free_kb=$(df -Pk "$cache_root" 2>/dev/null | awk 'NR==2{print $4}' || true)
[[ -z "$free_kb" ]] && { mkdir -p "$cache_root"; free_kb=$(df -Pk "$cache_root" | awk 'NR==2{print $4}'); }
gocache_free_kb=$(df -Pk "$(go env GOCACHE | xargs dirname)" 2>/dev/null | awk 'NR==2{print $4}' || echo "$free_kb")
for f in "$free_kb" "$gocache_free_kb"; do
  (( f > 8 * 1024 * 1024 )) || die "less than 8 GiB free for the Go build cache / binaries ($cache_root, $(go env GOCACHE)). Free some disk, or point FLEETWAVE_CACHE_DIR / GOCACHE elsewhere."
done

mkdir -p "$bin.partial"
# A cache made before a binary was added to the set keeps the binaries it has: only the new one is built
# (every binary is checked against its pinned version below before the set is used).
[[ -d "$bin" ]] && cp -an "$bin"/. "$bin.partial"/
# The control-plane binaries (13 minutes of build) are shared with any set of the same core versions:
# a new kustomize or a change to fleetwave-render's source rebuilds only those two.
for other in "$cache_root/bin/$core" "$cache_root/bin/$core"-*; do
  [[ -d "$other" && "$other" != "$bin" && "$other" != *.partial ]] || continue
  for name in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm kwok; do
    [[ -x "$other/$name" ]] && cp -n "$other/$name" "$bin.partial/$name"
  done
done
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath"

stamp() { # Kubernetes ldflags, as upstream hack/lib/version.sh sets them: /version must not be v0.0.0
  local minor; minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
  local l="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    l="$l -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$l"
}

init_kubernetes() {
  local d="$here/kubernetes" staging godebug gomod
  rm -f "$d/go.mod" "$d/go.sum"
  gomod=$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  staging=$(go mod edit -json "$gomod" | python3 -c 'import json,sys;d=json.load(sys.stdin);print(" ".join(r["Path"] for r in d["Require"] if r["Path"].startswith("k8s.io/") and r["Version"]=="v0.0.0"))')
  godebug=$(grep '^godebug' "$gomod" | awk '{print $2}' || true)
  (cd "$d" && go mod init fleetwave.local/binaries/kubernetes >/dev/null 2>&1
   [[ -n "$godebug" ]] && go mod edit -godebug="$godebug"
   for m in $staging; do go mod edit -replace="$m=$m@v0.${KUBERNETES_VERSION#v1.}"; done
   go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION" \
     "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBERNETES_VERSION" \
     "k8s.io/kubernetes/cmd/kube-scheduler@$KUBERNETES_VERSION" \
     "k8s.io/kubernetes/cmd/kubectl@$KUBERNETES_VERSION" && go mod tidy)
}

init_simple() { # name module-path tool-package version
  local d="$here/$1"
  rm -f "$d/go.mod" "$d/go.sum"
  (cd "$d" && go mod init "fleetwave.local/binaries/$1" >/dev/null 2>&1 && go get -tool "$3@$4" && go mod tidy)
}

if [[ "${1:-}" == "--init" ]]; then
  init_kubernetes
  init_simple etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  init_simple helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
  init_simple kwok sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
  init_simple kustomize sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION"
fi

build() { # dir output-name package ldflags
  log "building $2 (a cold build takes minutes; later runs reuse $bin)"
  (cd "$here/$1" && go build -ldflags "$4" -o "$bin.partial/$2" "$3") || die "go build of $2 failed (see output above). Check disk space and network access to the Go module proxy, then run again."
}

t0=$(date +%s)
[[ -x "$bin.partial/kube-apiserver" ]] || build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$(stamp)"
[[ -x "$bin.partial/kube-controller-manager" ]] || build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$(stamp)"
[[ -x "$bin.partial/kube-scheduler" ]] || build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$(stamp)"
[[ -x "$bin.partial/kubectl" ]] || build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl "$(stamp)"
[[ -x "$bin.partial/etcd" ]] || build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
kminor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
[[ -x "$bin.partial/helm" ]] || build helm helm helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kminor"
[[ -x "$bin.partial/kustomize" ]] || build kustomize kustomize sigs.k8s.io/kustomize/kustomize/v5 "-s -w"
[[ -x "$bin.partial/fleetwave-render" ]] || build render fleetwave-render . "-s -w"
[[ -x "$bin.partial/kwok" ]] || build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"

verify "$bin.partial" || die "built binaries do not report the pinned versions ($key); remove $bin.partial and run again"
rm -rf "$bin" && mv "$bin.partial" "$bin"
log "binaries ready in $bin after $(( $(date +%s) - t0 ))s"
echo "$bin"
