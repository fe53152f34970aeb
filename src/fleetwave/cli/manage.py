"""`fleetwave install`, `fleetwave apply` and `fleetwave cluster ...`: set up the management cluster."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from fleetwave.api import yamlsafe
from fleetwave.api.codec import ManifestError
from fleetwave.cli import capi_rows, inputs
from fleetwave.cli.common import (
    KubeconfigOption,
    ListOutput,
    ListOutputOption,
    PlacementKindOption,
    WatchNamespaceOption,
    emit,
    fail,
    fail_api,
    management_client,
    management_config,
    watch_namespaces,
)
from fleetwave.cli.exit_codes import EXIT_API
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops
from fleetwave.mgmt import agent_install, manifests, placement_kinds, pull_registration, registration
from fleetwave.mgmt import install as installing

console = Console()
FluxSourcesRightsOption = Annotated[
    bool,
    typer.Option(
        "--flux-sources",
        help="Also grant the controller read rights on Flux's GitRepository, OCIRepository and "
        "Bucket, for a controller run with --flux-sources.",
    ),
]
cluster_app = typer.Typer(help="Register, list and unregister member clusters.", no_args_is_help=True)


def install(
    kubeconfig: KubeconfigOption = None,
    upstream_apis: Annotated[
        bool,
        typer.Option(
            "--upstream-apis",
            help="Also serve the Sveltos and KubeFleet API groups (config/lib.projectsveltos.io, "
            "placement/cluster.kubernetes-fleet.io), so their manifests and kubectl commands work "
            "unchanged; the KubeFleet kinds are then served only there. Refused if another controller "
            "owns those CRDs.",
        ),
    ] = False,
    watch_namespace: WatchNamespaceOption = None,
    placement_kind: PlacementKindOption = None,
    flux_sources: FluxSourcesRightsOption = False,
) -> None:
    """Install fleetwave's CRDs and least-privilege RBAC into the management cluster."""
    watch = watch_namespaces(watch_namespace)
    with management_client(kubeconfig) as client:
        try:
            extra = placement_kinds.resolve(client, placement_kind or [])
            names = installing.install(
                client,
                upstream_apis=upstream_apis,
                watch=watch,
                placement_kinds=extra,
                flux_sources=flux_sources,
            )
        except placement_kinds.PlacementKindError as e:
            fail(str(e), code=2)
        except installing.ForeignCRD as e:
            fail(f"install refused: {e}", code=2)
        except ops.ApiError as e:
            fail_api(e, "install failed")
        except TimeoutError as e:
            fail(f"install failed: {e}")
    scope = f"; namespaced rights only in {', '.join(watch)}" if watch else ""
    console.print(f"installed {len(names)} CRDs and RBAC (namespace {installing.NAMESPACE}{scope})")


def apply(
    file: Annotated[
        Path,
        typer.Option(
            "--filename",
            "-f",
            help="A YAML or JSON file with one or more manifests, a directory of them, or - for stdin.",
        ),
    ],
    recursive: Annotated[
        bool, typer.Option("--recursive", "-R", help="With a directory: its subdirectories too.")
    ] = False,
    kubeconfig: KubeconfigOption = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Default namespace.")] = None,
) -> None:
    """Apply manifests; Sveltos and KubeFleet apiVersions are mapped to fleetwave's own."""
    try:
        docs = _documents(file, recursive=recursive)
        with management_client(kubeconfig) as client:
            applied = manifests.apply(client, docs, default_namespace=namespace)
    except inputs.InputError as e:
        fail(str(e), code=2)
    except ops.ApiError as e:
        fail_api(e, "the API server rejected a manifest")
    for a in applied:
        where = f" -n {a.namespace}" if a.namespace else ""
        mapped = f" (from {a.converted_from})" if a.converted_from else ""
        console.print(f"{a.kind.lower()}/{a.name}{where} applied{mapped}")


def _documents(file: Path, *, recursive: bool) -> list[Any]:
    """Every manifest of the file, or of the directory's files; all read before anything is applied."""
    docs: list[Any] = []
    for path in inputs.manifest_files(file, "-f", recursive=recursive):
        source = "stdin" if str(path) == inputs.STDIN else str(path)
        try:
            docs += manifests.documents(inputs.read_text(path, "-f"), source=source)
        except yamlsafe.YamlError as e:
            fail(f"{e} (nothing was applied)", code=2)
        except ManifestError as e:
            fail(f"{path}: {e} (nothing was applied)", code=2)
    if not docs:  # kubectl's words and habit: nothing to apply is an error, not a silent success
        fail(f"no objects passed to apply ({file} holds no manifest)", code=2)
    return docs


PullOption = Annotated[
    bool,
    typer.Option(
        "--pull",
        help="Pull mode: the cluster joins through `fleetwave agent`; the hub keeps no kubeconfig of it.",
    ),
]
AgentKubeconfigOption = Annotated[
    Path | None,
    typer.Option("--agent-kubeconfig", help="With --pull: write the agent's hub kubeconfig here (0600)."),
]
AgentValuesOption = Annotated[
    Path | None,
    typer.Option(
        "--agent-values", help="With --pull: write values for the fleetwave-agent chart here (0600)."
    ),
]
AgentManifestsOption = Annotated[
    Path | None,
    typer.Option(
        "--agent-manifests",
        help="With --pull: write the agent's manifests for the member here (0600; needs --agent-image).",
    ),
]
AgentImageOption = Annotated[
    str | None, typer.Option("--agent-image", help="With --agent-manifests: the fleetwave image to run.")
]
HubServerOption = Annotated[
    str | None,
    typer.Option("--hub-server", help="With --pull: the hub API server URL as the agent reaches it."),
]
RotateOption = Annotated[
    bool,
    typer.Option("--rotate", help="With --pull: revoke the agent's earlier tokens (new ServiceAccount)."),
]


@cluster_app.command("register")
def register(
    name: Annotated[str, typer.Argument(help="Name of the member cluster.")],
    member_kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--cluster-kubeconfig",
            "--member-kubeconfig",
            help="Kubeconfig of the member cluster (push mode; not with --pull).",
        ),
    ] = None,
    labels: Annotated[
        str, typer.Option("--labels", "-l", help="Selection labels, e.g. env=prod,region=eu")
    ] = "",
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = installing.NAMESPACE,
    allow_insecure: Annotated[
        bool,
        typer.Option(
            "--allow-insecure",
            help="Accept an http:// server or insecure-skip-tls-verify (recorded on the MemberCluster).",
        ),
    ] = False,
    pull: PullOption = False,
    agent_kubeconfig: AgentKubeconfigOption = None,
    agent_values: AgentValuesOption = None,
    agent_manifests: AgentManifestsOption = None,
    agent_image: AgentImageOption = None,
    hub_server: HubServerOption = None,
    rotate: RotateOption = False,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Register a member cluster: kubeconfig into a Secret, a MemberCluster with labels, a probe.

    Where the cluster serves the upstream groups (`install --upstream-apis`), the member is
    registered there too: a SveltosCluster next to the Secret, and a KubeFleet MemberCluster when
    the namespace is fleetwave-system (where KubeFleet-form members' kubeconfigs are read).

    The member kubeconfig must carry its credentials inline (token or client certificate data) and
    must not run programs (exec, auth-provider), read local files or use a proxy.

    With --pull the cluster runs `fleetwave agent` instead: no kubeconfig is given or kept; the
    agent's hub credential (able to read only this cluster's work) is written where --agent-kubeconfig,
    --agent-values or --agent-manifests say."""
    parsed = _labels(labels)
    if pull:
        outputs = AgentOutputs(agent_kubeconfig, agent_values, agent_manifests, agent_image)
        _register_pull(name, namespace, parsed, outputs, hub_server, rotate, kubeconfig)
        return
    if member_kubeconfig is None:
        fail(
            "--cluster-kubeconfig is required (or --pull, for a cluster that joins through its agent)", code=2
        )
    _register_push(name, namespace, parsed, member_kubeconfig, allow_insecure, kubeconfig)


def _register_push(
    name: str,
    namespace: str,
    labels: dict[str, str],
    member_kubeconfig: Path,
    allow_insecure: bool,
    kubeconfig: Path | None,
) -> None:
    """`register` of a push member: its kubeconfig into a Secret, the MemberCluster, a probe."""
    try:
        data = inputs.read_bytes(member_kubeconfig, "--cluster-kubeconfig", limit=256 * 1024)
    except inputs.InputError as e:
        fail(str(e), code=2)
    with management_client(kubeconfig) as client:
        try:
            registered = registration.register(
                client,
                name=name,
                namespace=namespace,
                kubeconfig=data,
                labels=labels,
                allow_insecure=allow_insecure,
            )
        except registration.KubeconfigRefused as e:
            fail(f"{member_kubeconfig}: {e} (nothing was registered)", code=2)
        except ops.ApiError as e:
            fail_api(e, "registration failed")
    probe = registered.probe
    state = f"ready, Kubernetes {probe.version}" if probe.ready else f"NOT ready: {probe.message}"
    console.print(f"membercluster/{name} -n {namespace} registered ({state})")
    for kind, api_version in registered.written[1:]:  # the upstream families' views of the member
        console.print(f"{kind.lower()}.{api_version.partition('/')[0]}/{name} registered too")


def _register_pull(
    name: str,
    namespace: str,
    labels: dict[str, str],
    outputs: AgentOutputs,
    hub_server: str | None,
    rotate: bool,
    kubeconfig: Path | None,
) -> None:
    """`register --pull`: the member, its hub namespace and agent account; the agent's credential
    written only to the files asked for (never printed)."""
    outputs.check()
    config = management_config(kubeconfig)
    server, ca = kubeclient.server_and_ca(config)
    with kubeclient.client(config, trust_env=True) as client:
        try:
            made = pull_registration.register_pull(
                client,
                name=name,
                namespace=namespace,
                labels=labels,
                hub_server=hub_server or server,
                hub_ca=ca,
                rotate=rotate,
            )
        except pull_registration.PullRegistrationError as e:
            fail(f"{e} (nothing was registered)", code=2)
        except ops.ApiError as e:
            fail_api(e, "registration failed")
    try:
        outputs.write(name, namespace, made.hub_kubeconfig)
    except (inputs.InputError, ValueError) as e:
        fail(f"{e}: the member is registered; run the command again to issue the credential anew", code=2)
    console.print(
        f"membercluster/{name} -n {namespace} registered in pull mode (hub namespace {made.hub_namespace})"
    )
    for kind, api_version in made.written[1:]:
        console.print(f"{kind.lower()}.{api_version.partition('/')[0]}/{name} registered too")
    where = outputs.values or outputs.manifests or outputs.kubeconfig
    console.print(f"the agent's hub credential is in {where}: install the agent in the cluster with it")


@dataclass(frozen=True, slots=True)
class AgentOutputs:
    """Where `register --pull` writes the agent's credential: a hub kubeconfig, chart values, or the
    member's manifests (each 0600; never printed)."""

    kubeconfig: Path | None
    values: Path | None
    manifests: Path | None
    image: str | None

    def check(self) -> None:
        if self.kubeconfig is None and self.values is None and self.manifests is None:
            fail(
                "--pull needs --agent-kubeconfig, --agent-values or --agent-manifests FILE "
                "(where to write the agent's hub credential)",
                code=2,
            )
        if self.manifests is not None and not self.image:
            fail("--agent-manifests needs --agent-image (the fleetwave image the agent runs)", code=2)

    def write(self, name: str, namespace: str, hub_kubeconfig: bytes) -> None:
        if self.kubeconfig is not None:
            inputs.write_private(self.kubeconfig, hub_kubeconfig)
        if self.values is not None:
            inputs.write_private(self.values, agent_chart_values(name, namespace, hub_kubeconfig))
        if self.manifests is not None:
            docs = agent_install.member_manifests(
                cluster=name,
                cluster_namespace=namespace,
                hub_kubeconfig=hub_kubeconfig,
                image=str(self.image),
            )
            inputs.write_private(self.manifests, yaml.safe_dump_all(docs, sort_keys=False).encode())


def agent_chart_values(name: str, namespace: str, hub_kubeconfig: bytes) -> bytes:
    """Values for the fleetwave-agent chart: the member as registered, the hub credential inline."""
    values = {
        "cluster": {"name": name, "namespace": namespace},
        "hub": {"kubeconfig": base64.b64encode(hub_kubeconfig).decode()},
    }
    return yaml.safe_dump(values, sort_keys=False).encode()


@cluster_app.command("unregister")
def unregister(
    name: Annotated[str, typer.Argument(help="Name of the member cluster.")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = installing.NAMESPACE,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Remove a member cluster from the fleet; what it runs is left in place.

    Deletes its MemberCluster (and upstream views) and kubeconfig Secret; for a pull member, its
    namespace on the hub with the agent's account, which revokes the agent's credential."""
    with management_client(kubeconfig) as client:
        try:
            removed = pull_registration.unregister(client, name=name, namespace=namespace)
        except ops.ApiError as e:
            fail_api(e, "unregistering failed")
    if not removed:
        fail(f"no member cluster {name} in namespace {namespace}: nothing was removed", code=EXIT_API)
    console.print(f"membercluster/{name} -n {namespace} unregistered ({', '.join(removed)} deleted)")


@cluster_app.command("list")
def list_clusters(
    namespace: Annotated[str | None, typer.Option("--namespace", "-n")] = None,
    output: ListOutputOption = ListOutput.TABLE,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """List registered member clusters with labels, readiness and version, and the Cluster API
    clusters the Sveltos family delivers to (mode `capi`)."""
    where = namespace or ops.ALL_NAMESPACES
    with management_client(kubeconfig) as client:
        found = client.list(kinds.resource("MemberCluster"), namespace=where)
        rows = [_cluster_row(mc.to_dict()) for mc in found] + capi_rows.rows(client, where)
    if output in (ListOutput.JSON, ListOutput.YAML):
        emit({"clusters": rows}, output.value)
    elif output is ListOutput.NAME:
        for row in rows:
            kind = "cluster.cluster.x-k8s.io" if row["mode"] == "capi" else "membercluster"
            typer.echo(f"{kind}/{row['name']}")
    else:
        wide = output is ListOutput.WIDE or any(row["mode"] == "capi" for row in rows)
        console.print(_clusters_table(rows, wide=wide))


def _cluster_row(obj: dict[str, Any]) -> dict[str, Any]:
    meta, status, spec = obj.get("metadata") or {}, obj.get("status") or {}, obj.get("spec") or {}
    secret = spec.get("kubeconfigSecretRef") or {}
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "labels": dict(meta.get("labels") or {}),
        "ready": bool(status.get("ready")),
        "version": status.get("version") or "",
        "message": status.get("failureMessage") or "",
        # A pull member's agent reads its work from the hub: the hub holds no kubeconfig of it.
        "mode": "pull" if spec.get("pullMode") is True else "push",
        "kubeconfigSecret": None
        if spec.get("pullMode") is True
        else secret.get("name") or f"{meta.get('name')}-kubeconfig",
    }


def _clusters_table(rows: list[dict[str, Any]], *, wide: bool) -> Table:
    table = Table(
        "namespace",
        "name",
        "labels",
        "ready",
        "version",
        *(["mode", "kubeconfig secret"] if wide else []),
        "message",
    )
    for row in rows:
        labels = ",".join(f"{k}={v}" for k, v in row["labels"].items())
        ready = "[green]yes[/green]" if row["ready"] else "[red]no[/red]"
        extra = [row["mode"], row["kubeconfigSecret"] or "-"] if wide else []
        table.add_row(
            row["namespace"], row["name"], labels, ready, row["version"] or "-", *extra, row["message"]
        )
    return table


def _labels(text: str) -> dict[str, str]:
    result = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--labels")
        result[key] = value
    return result
