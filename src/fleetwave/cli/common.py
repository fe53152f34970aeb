"""Shared CLI plumbing: which management cluster a command talks to, and how errors are shown."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from fleetwave.api import validation
from fleetwave.cli import errors
from fleetwave.cli.output import STRUCTURED, ListOutput, ListOutputOption, emit
from fleetwave.cli.session import Globals
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.local import fleet

# The output helpers are re-exported: the command modules take them from here with the rest.
__all__ = ["STRUCTURED", "Globals", "ListOutput", "ListOutputOption", "emit"]

err = Console(stderr=True)

KubeconfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Management cluster kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else the "
        "running local fleet).",
    ),
]

WatchNamespaceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--watch-namespace",
        help="Read namespaced objects (MemberClusters, content ConfigMaps and Secrets, namespaced "
        "placements and runs) only in this namespace; repeat for several. Default: every namespace. "
        "The controller's own namespace is always watched. Install and controller must agree.",
    ),
]


PlacementKindOption = Annotated[
    list[str] | None,
    typer.Option(
        "--placement-kind",
        help="A kind placements may select besides the built-in ones, as group/version/Kind "
        "(v1/Kind for core), e.g. networking.k8s.io/v1/Ingress or apiextensions.k8s.io/v1/"
        "CustomResourceDefinition; repeat for several. The controller reads it (install grants that).",
    ),
]


def watch_namespaces(given: list[str] | None) -> tuple[str, ...]:
    """--watch-namespace values, checked as namespace names, sorted and without repeats."""
    chosen = sorted(set(given or []))
    for name in chosen:
        try:
            validation.check_dns1123_label(name)
        except ValueError:
            fail(f"--watch-namespace {escape(name[:80])!r}: not a namespace name", code=2)
    return tuple(chosen)


HOME_KUBECONFIG = Path.home() / ".kube" / "config"


def kubeconfig_files(explicit: Path | None) -> tuple[list[Path], str]:
    """Which kubeconfig files a command reads, as kubectl chooses them, and where that came from:
    --kubeconfig, else every file of $KUBECONFIG (merged), else ~/.kube/config, else a running local
    fleet's management cluster — never ahead of a kubeconfig of the user's own."""
    if explicit or Globals.kubeconfig:
        return [explicit or Globals.kubeconfig], "--kubeconfig"  # type: ignore[list-item]
    listed = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        present = [p for p in listed if p.is_file()]
        return (present or listed[:1]), "$KUBECONFIG"
    if HOME_KUBECONFIG.is_file():
        return [HOME_KUBECONFIG], "~/.kube/config"
    state = fleet.load(fleet.default_state_dir())
    if state is not None:
        return [Path(state.cluster(fleet.MANAGEMENT).kubeconfig)], "the local fleet"
    return [HOME_KUBECONFIG], "~/.kube/config"


def management_config(
    explicit: Path | None, *, otherwise: str = "start a local fleet"
) -> kubeclient.KubeConfig:
    """The management cluster's kubeconfig, in the --context given (else its current-context);
    `otherwise` is the last way out the error names."""
    paths, source = kubeconfig_files(explicit)
    if not all(p.is_file() for p in paths):
        missing = next(p for p in paths if not p.is_file())
        fail(f"no kubeconfig at {missing}: pass --kubeconfig, set KUBECONFIG, or {otherwise}", code=2)
    if source == "the local fleet":  # never silent: the user may have meant another cluster
        err.print(f"[dim]using the local fleet's management cluster ({paths[0]})[/dim]", highlight=False)
    try:
        return kubeclient.config_from_files(paths, context=Globals.context)
    except kubeclient.ConfigError as e:
        fail(str(e), code=2)


def management_client(explicit: Path | None) -> kubeclient.Client:
    return kubeclient.client(management_config(explicit), trust_env=True)


def fail(message: str, *, code: int = 1) -> NoReturn:
    """One line on stderr and a non-zero exit (2: the input was refused, nothing was done)."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


FORBIDDEN = 403


def fail_api(error: ops.StatusError, doing: str) -> NoReturn:
    """An error answer in one line: the server's own words after what was being done, or, for an
    answer that means the same to every command (401, 403, 429, 5xx, CRDs missing), `cli.errors`'
    sentence and exit code."""
    if errors.generic(error):
        explained = errors.explain(error)
        if explained is not None:
            fail(explained.message, code=explained.code)
    fail(f"{doing}: {ops.message_of(error)}", code=errors.EXIT_API)


def fail_promotion_patch(e: ops.ApiError, name: str, verb: str) -> NoReturn:
    """What a refused read-and-patch of a ClusterPromotion means for the user, in one line."""
    if errors.generic(e) and ops.code_of(e) != FORBIDDEN:
        fail_api(e, f"cannot {verb} ClusterPromotion {name}")
    if ops.is_not_found(e):
        fail(f"ClusterPromotion {name} not found")
    if ops.code_of(e) == FORBIDDEN:
        fail(
            f"you are not allowed to {verb} ClusterPromotion {name}: "
            "it needs get and patch on clusterpromotions",
            code=3,
        )
    fail(f"cannot {verb} ClusterPromotion {name}: {ops.message_of(e)}")
