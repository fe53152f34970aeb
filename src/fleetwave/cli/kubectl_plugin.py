"""`kubectl fleetwave ...`: the fleetwave CLI as a kubectl plugin (an executable named
`kubectl-fleetwave` on PATH). kubectl hands a plugin every argument after its name, untouched, so
kubectl's connection flags may come anywhere: `--kubeconfig` and `--context` are moved in front of
the command (fleetwave's own global options), `-n/--namespace` stays where the command takes it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from fleetwave.cli import run

_GLOBAL = ("--kubeconfig", "--context")


def arguments(argv: Sequence[str]) -> list[str]:
    """`argv` with kubectl's connection flags (`--flag value` or `--flag=value`) first."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, _ = arg.partition("=")
        if flag in _GLOBAL and eq:
            front.append(arg)
        elif arg in _GLOBAL and i + 1 < len(argv):
            front += [arg, argv[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main() -> None:
    run(arguments(sys.argv[1:]), prog_name="kubectl fleetwave")
