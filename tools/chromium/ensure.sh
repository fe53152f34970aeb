#!/usr/bin/env bash
# Find (or install) a headless-capable Chromium for the web UI's browser tests and print its path.
#
#   tools/chromium/ensure.sh      print the path of a working chromium, installing Debian's if needed
#
# Chromium needs dozens of shared libraries, so unlike Prometheus it cannot be unpacked into a cache:
# as root with apt, Debian's `chromium` package is installed (without recommends); otherwise an
# installed chromium is required. FLEETWAVE_CHROMIUM names another executable and skips all of this.
set -euo pipefail

die() { echo "fleetwave chromium: $*" >&2; exit 1; }

works() { "$1" --headless=new --no-sandbox --version >/dev/null 2>&1 || "$1" --version >/dev/null 2>&1; }

if [[ -n "${FLEETWAVE_CHROMIUM:-}" ]]; then
  [[ -x "$FLEETWAVE_CHROMIUM" ]] && works "$FLEETWAVE_CHROMIUM" ||
    die "FLEETWAVE_CHROMIUM=$FLEETWAVE_CHROMIUM is not a working chromium executable"
  echo "$FLEETWAVE_CHROMIUM"; exit 0
fi

for candidate in chromium chromium-browser; do
  found="$(command -v "$candidate" 2>/dev/null || true)"
  if [[ -n "$found" ]] && works "$found"; then echo "$found"; exit 0; fi
done

command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]] ||
  die "no chromium found: install Debian's chromium package (apt-get install chromium) or set FLEETWAVE_CHROMIUM"

echo "fleetwave chromium: installing Debian's chromium package (once)" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >"$log" 2>&1; }
if ! install; then
  apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; die "apt-get update failed"; }
  install || { tail -n 20 "$log" >&2; die "apt-get install chromium failed (see above)"; }
fi
found="$(command -v chromium 2>/dev/null || true)"
[[ -n "$found" ]] && works "$found" || die "chromium was installed but does not run"
echo "$found"
