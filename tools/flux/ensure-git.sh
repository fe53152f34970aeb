#!/usr/bin/env bash
# Find (or install) git with its smart-HTTP backend, which the local Git server runs per request
# (src/fleetwave/local/gitserver.py), and print git's path.
#
#   tools/flux/ensure-git.sh      print the path of git, installing Debian's git package if needed
#
# Debian's `git` package ships git-http-backend in git's exec path; as root with apt it is installed
# (without recommends) when git or the backend is missing; otherwise an installed git is required.
set -euo pipefail

die() { echo "fleetwave git: $*" >&2; exit 1; }

works() { command -v git >/dev/null 2>&1 && [[ -x "$(git --exec-path 2>/dev/null)/git-http-backend" ]]; }

if works; then command -v git; exit 0; fi

command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]] ||
  die "git with git-http-backend is required: install Debian's git package (apt-get install git)"

echo "fleetwave git: installing Debian's git package (once)" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >"$log" 2>&1; }
if ! install; then
  apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; die "apt-get update failed"; }
  install || { tail -n 20 "$log" >&2; die "apt-get install git failed (see above)"; }
fi
works || die "git was installed but git-http-backend is not in $(git --exec-path)"
command -v git
