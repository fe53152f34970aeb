"""Sveltos Helm options: the honoured ones become helm flags, every other one is refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.delivery import helmoptions


def test_honoured_options_become_their_helm_flags_with_values_as_separate_arguments() -> None:
    options = {
        "wait": True,
        "waitForJobs": True,
        "atomic": True,
        "skipCRDs": True,
        "disableHooks": False,
        "timeout": "5m",
        "description": "--not-a-flag",
        "dependencyUpdate": True,
        "upgradeOptions": {"force": True, "cleanupOnFail": True, "maxHistory": 3, "resetValues": True},
        "installOptions": {"createNamespace": True},
    }
    helmoptions.check(options, "spec.helmCharts[0]")
    flags = helmoptions.flags(options)
    assert flags[0] == "--create-namespace"
    assert {"--wait", "--wait-for-jobs", "--atomic", "--skip-crds", "--dependency-update", "--force"} <= set(
        flags
    )
    assert "--cleanup-on-fail" in flags
    assert "--no-hooks" not in flags
    assert flags[flags.index("--timeout") + 1] == "5m"
    assert flags[flags.index("--history-max") + 1] == "3"
    assert flags[flags.index("--description") + 1] == "--not-a-flag"  # a value, never a flag of its own


def test_create_namespace_is_the_default_and_can_be_turned_off() -> None:
    assert helmoptions.flags(None) == ["--create-namespace"]
    assert helmoptions.flags({"installOptions": {"createNamespace": False}}) == []


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ({"upgradeOptions": {"recreate": True}}, r"options\.upgradeOptions\.recreate: not supported"),
        ({"installOptions": {"replace": True}}, r"options\.installOptions\.replace: not supported"),
        (
            {"uninstallOptions": {"keepHistory": True}},
            r"options\.uninstallOptions\.keepHistory: not supported",
        ),
        ({"labels": {"a": "b"}}, r"options\.labels: not supported"),
        ({"enableClientCache": True}, r"options\.enableClientCache: not supported"),
        ({"upgradeOptions": {"reuseValues": True}}, r"options\.upgradeOptions\.reuseValues: only False"),
        ({"wait": "yes"}, r"options\.wait: must be true or false"),
        ({"timeout": "5 minutes"}, r"options\.timeout: '5 minutes' is not a valid value"),
        ({"upgradeOptions": {"maxHistory": -1}}, r"options\.upgradeOptions\.maxHistory: '-1' is not a valid"),
        ({"description": "two\nlines"}, r"options\.description: .* is not a valid value"),
    ],
)
def test_options_fleetwave_would_ignore_or_helm_would_reject_are_refused_by_name(
    options: dict[str, Any], refused: str
) -> None:
    with pytest.raises(helmoptions.OptionError, match=rf"spec\.helmCharts\[0\]\.{refused}"):
        helmoptions.check(options, "spec.helmCharts[0]")
