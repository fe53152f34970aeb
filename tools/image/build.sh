#!/usr/bin/env bash
# Build the fleetwave controller image with buildah (no daemon, chroot isolation, vfs storage).
#
#   tools/image/build.sh            build; print the image reference (last line of stdout)
#
# BASE_IMAGE=<ref> builds on that image (a registry's python:3.11-slim-bookworm, say). Without it a
# Debian bookworm base with python3 is made once with mmdebstrap (no registry needed) and cached.
# The image lands in the containers storage under $FLEETWAVE_CACHE_DIR/image (default
# ~/.cache/fleetwave/image); `tools/image/build.sh --storage` prints the skopeo/buildah storage
# options. Push it with:  buildah $(tools/image/build.sh --storage) push <ref> docker://registry/...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
die() { echo "fleetwave image: $*" >&2; exit 1; }
log() { echo "fleetwave image: $*" >&2; }

cache="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}/image"
storage=(--root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
if [[ "${1:-}" == "--storage" ]]; then
  echo "${storage[*]}"
  exit 0
fi
export BUILDAH_ISOLATION=chroot
bash "$here/deps.sh"
mkdir -p "$cache"

python="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || die "no Python at $python (run scripts/bootstrap, or set PYTHON)"
version="$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import fleetwave; print(fleetwave.__version__)' "$root/src")"

# One build at a time per cache (the storage is not safe to share between concurrent builds).
exec 9>"$cache/.lock"
flock 9

base="${BASE_IMAGE:-}"
if [[ -z "$base" ]]; then
  # The base depends only on what it installs: its tag says so.
  packages="python3,python3-venv,ca-certificates"
  base="localhost/fleetwave-base:bookworm-$(echo "$packages" | sha256sum | cut -c1-12)"
  if ! buildah "${storage[@]}" inspect --type image "$base" >/dev/null 2>&1; then
    log "making a Debian bookworm base with mmdebstrap (once)"
    tarball="$cache/base.tar"
    mmdebstrap --quiet --variant=apt --include="$packages" --mode=root --format=tar \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      bookworm "$tarball" >/dev/null 2>"$cache/mmdebstrap.log" ||
      die "mmdebstrap failed (see $cache/mmdebstrap.log)"
    ctr="$(buildah "${storage[@]}" from scratch)"
    mnt="$(buildah "${storage[@]}" mount "$ctr")"
    tar -C "$mnt" -xf "$tarball"
    buildah "${storage[@]}" umount "$ctr" >/dev/null
    buildah "${storage[@]}" commit -q "$ctr" "$base" >/dev/null
    buildah "${storage[@]}" rm "$ctr" >/dev/null
    rm -f "$tarball"
  fi
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
log "building the wheels (fleetwave $version and its dependencies)"
"$python" -m pip wheel -q --disable-pip-version-check -w "$context/wheels" "$root" ||
  die "pip wheel failed (see above)"
bins="$(bash "$root/tools/binaries/build.sh")" || die "the pinned helm is not available (see above)"
cp "$bins/helm" "$bins/kustomize" "$bins/fleetwave-render" "$context/"

image="localhost/fleetwave:$version"
log "building $image on $base"
buildah "${storage[@]}" build --quiet --isolation chroot --layers=false \
  --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version" \
  -f "$root/Containerfile" -t "$image" "$context" >/dev/null ||
  die "buildah build failed (see above)"
# The previous build of this tag is now untagged: drop it (vfs keeps a full copy per image).
buildah "${storage[@]}" rmi --prune >/dev/null 2>&1 || true
echo "$image"
