"""Shared CLI plumbing: which management cluster a command talks to, and how errors are shown."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from fleetwave.api import validation
from fleetwave.cli import errors
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.local import fleet

err = Console(stderr=True)

KubeconfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Management cluster kubeconfig (default: $KUBECONFIG, else the running local fleet, "
        "else ~/.kube/config).",
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


class Globals:
    """kubectl's global connection flags, given before the command (`fleetwave --context C status ...`,
    and what `kubectl fleetwave` passes on): a command's own --kubeconfig still wins."""

    kubeconfig: Path | None = None
    context: str | None = None


def resolve_kubeconfig(explicit: Path | None) -> Path:
    if explicit:
        return explicit
    if Globals.kubeconfig:
        return Globals.kubeconfig
    if os.environ.get("KUBECONFIG"):
        return Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    state = fleet.load(fleet.default_state_dir())
    if state is not None:
        return Path(state.cluster(fleet.MANAGEMENT).kubeconfig)
    return Path.home() / ".kube" / "config"


def management_config(
    explicit: Path | None, *, otherwise: str = "start a local fleet"
) -> kubeclient.KubeConfig:
    """The management cluster's kubeconfig, in the --context given (else its current-context);
    `otherwise` is the last way out the error names."""
    path = resolve_kubeconfig(explicit)
    if not path.is_file():
        fail(f"no kubeconfig at {path}: pass --kubeconfig, set KUBECONFIG, or {otherwise}")
    try:
        return kubeclient.config_from_file(path, context=Globals.context)
    except kubeclient.ConfigError as e:
        fail(str(e))


def management_client(explicit: Path | None) -> kubeclient.Client:
    return kubeclient.client(management_config(explicit))


STRUCTURED = ("json", "yaml")


def emit(data: Any, output: str) -> None:
    """`-o json` or `-o yaml`: the same data, keys sorted."""
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=True, default_flow_style=False), nl=False)


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
