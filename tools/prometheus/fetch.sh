#!/usr/bin/env bash
# Fetch Debian's prometheus and prometheus-pushgateway binaries (for metric health checks and their
# tests) without installing the packages: no service is started, nothing outside the cache changes.
#
#   tools/prometheus/fetch.sh      fetch (or reuse) and print the directory holding both binaries
#
# The packages are downloaded with `apt-get download` and unpacked with `dpkg-deb -x` into a cache
# outside the repository keyed by both package versions, so a second run only asks apt for the
# candidate versions and checks `--version`. Package lists are refreshed (`apt-get update`) only
# when the packages are not known or the download fails, and only as root. Without apt, the newest
# cached copy is used. FLEETWAVE_PROMETHEUS_DIR skips all of this (any directory holding working
# `prometheus` and `prometheus-pushgateway` binaries).
set -euo pipefail

die() { echo "fleetwave prometheus: $*" >&2; exit 1; }
log() { echo "fleetwave prometheus: $*" >&2; }

cache_root="${FLEETWAVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwave}/prometheus"
packages=(prometheus prometheus-pushgateway)

has() { [[ "$1" == *"$2"* ]]; } # no pipes, so pipefail/SIGPIPE cannot bite

verify() { # verify DIR [PROMETHEUS_VERSION PUSHGATEWAY_VERSION]: both binaries run (and are those versions)
  local dir="$1" p pg
  [[ -x "$dir/prometheus" && -x "$dir/prometheus-pushgateway" ]] || return 1
  p="$("$dir/prometheus" --version 2>&1)" || return 1
  pg="$("$dir/prometheus-pushgateway" --version 2>&1)" || return 1
  has "$p" "prometheus, version" && has "$pg" "pushgateway, version" || return 1
  # Debian's builds report the package version as their revision.
  [[ $# -lt 3 ]] || { has "$p" "revision: $2)" && has "$pg" "revision: $3)"; }
}

if [[ -n "${FLEETWAVE_PROMETHEUS_DIR:-}" ]]; then
  verify "$FLEETWAVE_PROMETHEUS_DIR" ||
    die "FLEETWAVE_PROMETHEUS_DIR=$FLEETWAVE_PROMETHEUS_DIR does not hold working prometheus and prometheus-pushgateway binaries"
  echo "$FLEETWAVE_PROMETHEUS_DIR"; exit 0
fi

candidate() { # the version apt would install, or nothing
  local line
  while read -r line; do
    if [[ "$line" == Candidate:* ]]; then
      line="${line#Candidate: }"
      [[ "$line" != "(none)" ]] && echo "$line"
      return 0
    fi
  done < <(apt-cache policy "$1" 2>/dev/null)
}

as_root() { [[ $(id -u) == 0 ]]; }

newest_cached() {
  local dir
  for dir in $(ls -1dt "$cache_root"/*/ 2>/dev/null); do
    dir="${dir%/}"
    [[ "$dir" == *.partial ]] && continue
    if verify "$dir"; then echo "$dir"; return 0; fi
  done
  return 1
}

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  if cached="$(newest_cached)"; then echo "$cached"; exit 0; fi
  die "apt-get and dpkg-deb are not available and nothing is cached in $cache_root. On Debian or Ubuntu
  this script fetches the prometheus and prometheus-pushgateway packages itself; elsewhere set
  FLEETWAVE_PROMETHEUS_DIR to a directory holding both binaries."
fi

pv="$(candidate prometheus)"; gv="$(candidate prometheus-pushgateway)"
if [[ -z "$pv" || -z "$gv" ]] && as_root; then
  log "the package lists do not know prometheus/prometheus-pushgateway: apt-get update"
  apt-get update -qq >&2 || true
  pv="$(candidate prometheus)"; gv="$(candidate prometheus-pushgateway)"
fi
if [[ -z "$pv" || -z "$gv" ]]; then
  if cached="$(newest_cached)"; then log "apt knows no candidate; using the cached $cached"; echo "$cached"; exit 0; fi
  hint="run 'apt-get update' as root first"
  as_root && hint="check the sources in /etc/apt (the packages are in Debian main since bookworm)"
  die "apt has no candidate for prometheus and prometheus-pushgateway and nothing is cached in $cache_root: $hint, or set FLEETWAVE_PROMETHEUS_DIR to a directory holding both binaries."
fi

key() { echo "prometheus-${1//[:\/]/_}-pushgateway-${2//[:\/]/_}"; }
dir="$cache_root/$(key "$pv" "$gv")"
if verify "$dir" "$pv" "$gv"; then echo "$dir"; exit 0; fi

# One fetch at a time per cache: parallel test sessions wait here.
mkdir -p "$cache_root"
exec 9>"$cache_root/.fetch.lock"
flock 9
if verify "$dir" "$pv" "$gv"; then echo "$dir"; exit 0; fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
download() {
  # As root apt would fall back from its _apt sandbox user (who cannot write to $work) with a warning.
  local sandbox=()
  as_root && sandbox=(-o APT::Sandbox::User=root)
  (cd "$work" && apt-get download -qq "${sandbox[@]}" "prometheus=$pv" "prometheus-pushgateway=$gv" >&2)
}
if ! download; then
  as_root || die "apt-get download of prometheus=$pv and prometheus-pushgateway=$gv failed (see above); run 'apt-get update' as root, or set FLEETWAVE_PROMETHEUS_DIR."
  log "download failed: apt-get update and one more try"
  apt-get update -qq >&2 || true
  pv="$(candidate prometheus)"; gv="$(candidate prometheus-pushgateway)"
  [[ -n "$pv" && -n "$gv" ]] || die "apt lost its candidates for prometheus/prometheus-pushgateway after apt-get update"
  dir="$cache_root/$(key "$pv" "$gv")"
  if verify "$dir" "$pv" "$gv"; then echo "$dir"; exit 0; fi
  download || die "apt-get download of prometheus=$pv and prometheus-pushgateway=$gv failed (see above); check network access to the Debian mirror, or set FLEETWAVE_PROMETHEUS_DIR."
fi

mkdir -p "$work/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
rm -rf "$dir.partial" && mkdir -p "$dir.partial"
cp "$work/root/usr/bin/prometheus" "$work/root/usr/bin/prometheus-pushgateway" "$dir.partial/"
verify "$dir.partial" "$pv" "$gv" || die "the unpacked binaries do not run or do not report $pv / $gv; remove $dir.partial and run again"
rm -rf "$dir" && mv "$dir.partial" "$dir"
log "prometheus $pv and prometheus-pushgateway $gv ready in $dir"
echo "$dir"
