"""Where the pinned control-plane build recipe is (`tools/binaries`: build.sh, versions.env, the
wrapper Go modules): the source checkout's, else the copy packaged in the wheel, so an installed
fleetwave can build the same binaries and say which versions it pins. The same holds for the script
that fetches Debian's Prometheus binaries (`tools/prometheus/fetch.sh`) and for the one that builds
Flux's source-controller and the OCI registry (`tools/flux/build.sh`)."""

from __future__ import annotations

from pathlib import Path

_PACKAGED = Path(__file__).resolve().parent.parent / "_recipe" / "binaries"


def _checkout() -> Path | None:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "tools" / "binaries"
        if (candidate / "build.sh").is_file():
            return candidate
    return None


def prometheus_fetcher() -> Path | None:
    """`tools/prometheus/fetch.sh` of the checkout, else the wheel's copy; None when neither exists."""
    for where in (_checkout(), _PACKAGED):
        if where is not None and (where.parent / "prometheus" / "fetch.sh").is_file():
            return where.parent / "prometheus" / "fetch.sh"
    return None


def flux_builder() -> Path | None:
    """`tools/flux/build.sh` of the checkout, else the wheel's copy; None when neither exists."""
    for where in (_checkout(), _PACKAGED):
        if where is not None and (where.parent / "flux" / "build.sh").is_file():
            return where.parent / "flux" / "build.sh"
    return None


def in_checkout() -> bool:
    """Whether fleetwave runs from a source checkout (not from an installed package)."""
    return _checkout() is not None


def directory() -> Path | None:
    """The recipe directory, or None when neither a checkout nor the wheel's copy holds one."""
    return _checkout() or (_PACKAGED if (_PACKAGED / "build.sh").is_file() else None)


def pinned() -> dict[str, str]:
    """The pinned versions (`versions.env`: KUBERNETES_VERSION=v1.35.4 ...) by component, e.g.
    {"kubernetes": "v1.35.4"}; empty when there is no recipe."""
    where = directory()
    if where is None:
        return {}
    out: dict[str, str] = {}
    for line in (where / "versions.env").read_text(encoding="utf-8").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#") and key.endswith("_VERSION"):
            out[key.removesuffix("_VERSION").lower()] = value.strip().strip('"')
    return out
