"""Sveltos' Helm `options` that fleetwave honours, as helm flags; every other option is refused by
name (a user who sets `options.upgradeOptions.recreate` must not believe it is in force).

fleetwave always runs `helm upgrade --install --reset-values`, so install-only and value-reuse
options have no place to go; they are refused like any other option not in these tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# option path -> helm flag, for options that are on/off.
BOOLEAN: dict[tuple[str, ...], str] = {
    ("wait",): "--wait",
    ("waitForJobs",): "--wait-for-jobs",
    ("skipCRDs",): "--skip-crds",
    ("disableHooks",): "--no-hooks",
    ("skipSchemaValidation",): "--skip-schema-validation",
    ("atomic",): "--atomic",
    ("dependencyUpdate",): "--dependency-update",
    ("upgradeOptions", "force"): "--force",
    ("upgradeOptions", "cleanupOnFail"): "--cleanup-on-fail",
}
# option path -> helm flag, for options that carry a value (checked by VALUE_RULES).
VALUED: dict[tuple[str, ...], str] = {
    ("timeout",): "--timeout",
    ("description",): "--description",
    ("upgradeOptions", "maxHistory"): "--history-max",
}
# `--create-namespace` is fleetwave's default; `installOptions.createNamespace: false` turns it off.
CREATE_NAMESPACE = ("installOptions", "createNamespace")
# Written out with their default they ask for what fleetwave does anyway.
DEFAULTS: dict[tuple[str, ...], Any] = {
    ("upgradeOptions", "resetValues"): True,
    ("upgradeOptions", "reuseValues"): False,
    ("upgradeOptions", "resetThenReuseValues"): False,
    # helm 3 post-renders the chart's objects without its hooks (ADR 0105).
    ("postRenderStrategy",): "nohooks",
}

_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_TEXT = re.compile(r"^[^\x00-\x1f\x7f]{0,512}$")


class OptionError(ValueError):
    pass


_GROUPS = ("installOptions", "upgradeOptions", "uninstallOptions")


def _leaves(node: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) of every option; the three option groups are opened one level."""
    for key, value in sorted(node.items()):
        if key in _GROUPS and isinstance(value, Mapping):
            yield from (((str(key), str(k)), v) for k, v in sorted(value.items()))
        else:
            yield (str(key),), value


def _valid(path: tuple[str, ...], value: Any) -> bool:
    if path == ("timeout",):
        return isinstance(value, str) and _DURATION.fullmatch(value) is not None
    if path == ("description",):
        return isinstance(value, str) and _TEXT.fullmatch(value) is not None
    if path == ("upgradeOptions", "maxHistory"):
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000
    return False


def check(options: Mapping[str, Any] | None, where: str) -> None:
    """Refuse, naming it, the first option fleetwave would not honour or whose value helm would not take."""
    for path, value in _leaves(options or {}):
        name = f"{where}.options.{'.'.join(path)}"
        if path in BOOLEAN or path == CREATE_NAMESPACE:
            if not isinstance(value, bool):
                raise OptionError(f"{name}: must be true or false")
        elif path in VALUED:
            if not _valid(path, value):
                raise OptionError(f"{name}: {str(value)[:80]!r} is not a valid value")
        elif path in DEFAULTS:
            if value != DEFAULTS[path]:
                raise OptionError(f"{name}: only {DEFAULTS[path]!r} is supported by fleetwave yet")
        else:
            raise OptionError(f"{name}: not supported by fleetwave yet")


def flags(options: Mapping[str, Any] | None) -> list[str]:
    """The helm flags of (already checked) options, in a stable order."""
    opts = dict(options or {})

    def get(path: tuple[str, ...]) -> Any:
        node: Any = opts
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    out = [] if get(CREATE_NAMESPACE) is False else ["--create-namespace"]
    out += [flag for path, flag in BOOLEAN.items() if get(path) is True]
    for path, flag in VALUED.items():
        value = get(path)
        if value is not None:
            out += [flag, str(value)]
    return out
