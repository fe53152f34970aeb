"""Helm releases on a member, driven through the real `helm` binary (path passed in).

Each call gets a private kubeconfig file and private helm cache/config homes. `upgrade --install` is
skipped when the deployed revision already has the desired chart version and values. A failed
attempt is rolled back to the last good revision, or uninstalled if there is none, so it never
blocks the next one (ADR 0045). Expected failures come back in the report; only an unreachable
member raises (`MemberUnreachable`).

helm runs in a process group of its own. When the awaiting reconcile is cancelled (the lease was
lost, the controller is stopping) or a command outlives its timeout, the whole group is killed with
SIGKILL and reaped before the cancellation goes on: no helm keeps acting on a member after its
reconcile is gone, so two replicas never drive one release at once. Names reach helm validated and
positional arguments after `--` (`helmplan`).

A chart repository's host is resolved and every address checked before helm runs (link-local,
cloud-metadata and unspecified addresses never, loopback only with the operator's opt-in:
`promapi.guards`), for a clear refusal up front. What helm then fetches goes through the process's
egress proxy (`delivery.egress`, ADR 0125), which checks every destination again and connects to a
checked address itself: index-listed chart URLs, redirects and a name that changed its answer.

A private registry's credentials and CA, and the patches helm's post-renderer applies (ADR 0105),
reach helm only as files: written 0600 into a fresh 0700 directory just before the one helm process
that fetches the chart (or renders it) starts, and removed as soon as it has exited and been reaped
— killed or not. Never an argument, never the environment; anything helm prints is scrubbed of the
credential before it becomes a report.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import bounded, egress, helm_preview, postrender, registry
from fleetwave.delivery import helmplan as hp
from fleetwave.delivery.content import ContentError, values_hash
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import fence, kinds
from fleetwave.promapi import guards

HelmAction = Literal["installed", "upgraded", "unchanged", "failed", "uninstalled", "absent"]
Fetch = Literal["", "chart", "index"]
# The helm commands that change a member: each asks the write fence first (ADR 0115); a dry run does not.
HELM_WRITES = frozenset({"install", "upgrade", "uninstall", "rollback"})
_COMMAND_TIMEOUT = 600.0  # seconds; helm's own --timeout (default 5m) bounds each wait inside
_RESOLVE_SECONDS = 10.0  # a chart repository's name, resolved to be checked before helm runs


@dataclass(frozen=True, slots=True)
class HelmReleaseReport:
    """Outcome of one call. With `dry_run`, installed/upgraded mean "would be"."""

    release_name: str
    release_namespace: str
    action: HelmAction
    dry_run: bool = False
    chart_name: str = ""
    chart_version: str = ""
    values_hash: str = ""
    revision: int | None = None  # latest revision after the call
    status: str | None = None  # helm's status of that revision
    error: str | None = None
    recovery: str | None = None  # what was done to undo a failed attempt
    installed_version: str = ""  # the chart version the release ran before the call ("" if none)
    # A dry run's would-be change of each object of the release (ADR 0113).
    resources: tuple[helm_preview.ResourceChange, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def changed(self) -> bool:
        return self.action in ("installed", "upgraded", "uninstalled")


class HelmError(RuntimeError):
    """helm failed where it should not have (reading a release); reported, never raised to callers."""


@dataclass(frozen=True, slots=True)
class _Result:
    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class Private:
    """What one release's helm gets only through private files (ADR 0105): the registry's
    credentials, CA and transport, and the patches its post-renderer applies with `kustomize`."""

    access: registry.Access | None = None
    patches: Sequence[Mapping[str, Any]] = field(default=(), repr=False)
    kustomize: str = "kustomize"


class _Helm:
    """One helm session against one member: binary, kubeconfig file and private helm homes."""

    def __init__(
        self,
        binary: str,
        target: MemberTarget,
        kubeconfig: Path,
        private: Private = Private(),
        member_host: str = "",
    ) -> None:
        self.binary, self.target, self.kubeconfig, self.private = binary, target, kubeconfig, private
        home = kubeconfig.parent
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        # Every fetch goes through the process's egress proxy, which checks where it connects (ADR 0125).
        self.env |= egress.helm_environment(member_host)
        if bounded.ALLOW_UNCONFINED_ENV in os.environ:  # the post-renderer honours the operator's opt-out
            self.env[bounded.ALLOW_UNCONFINED_ENV] = os.environ[bounded.ALLOW_UNCONFINED_ENV]

    async def run(self, *args: str, fetch: Fetch = "", render: bool = False) -> _Result:
        """helm with `args` (flags, then `--` and the positional arguments), in its own process group;
        `fetch`: it fetches a "chart" or a repository's "index" (the registry's files and flags),
        `render`: it renders the chart (the post-renderer's)."""
        cut = args.index("--") if "--" in args else len(args)
        with self._files(fetch=fetch, render=render) as extra:
            argv = [*args[:cut], "--kubeconfig", str(self.kubeconfig), *extra, *args[cut:]]
            result = await self._spawn(argv, args[0])
        if result.code != 0 and hp.is_unreachable(result.stderr):
            raise MemberUnreachable(self.target.name, hp.error_text(result.stderr))
        return result

    @contextmanager
    def _files(self, *, fetch: Fetch, render: bool) -> Iterator[list[str]]:
        """The private files of one helm process and the flags naming them; removed on the way out."""
        access, patches = self.private.access if fetch else None, self.private.patches if render else ()
        if access is None and not patches:
            yield []
            return
        directory = Path(tempfile.mkdtemp(prefix="run-", dir=self.kubeconfig.parent))  # 0700
        try:
            wanted = registry.files(access, str(directory)) if access is not None else {}
            flags = registry.flags(access, str(directory), index=fetch == "index") if access else []
            if patches:
                wanted[postrender.PATCHES_FILE] = postrender.patches_file(patches)
                patches_path = str(directory / postrender.PATCHES_FILE)
                flags += postrender.helm_flags(patches_path, self.private.kustomize)
            for name, data in wanted.items():
                _write_private(directory / name, data)
            yield flags
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    async def _spawn(self, argv: list[str], command: str) -> _Result:
        if command in HELM_WRITES and not any(a.startswith("--dry-run") for a in argv):
            fence.check(f"helm {command}")  # the last moment before it could change the member
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            *argv,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: killed whole, children included
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), _COMMAND_TIMEOUT)
        except TimeoutError:
            await _kill(proc)
            return _Result(-1, "", f"helm {command} timed out after {_COMMAND_TIMEOUT:.0f}s")
        except BaseException:  # CancelledError above all: the reconcile is abandoned
            await _kill(proc)
            raise
        access = self.private.access
        return _Result(
            proc.returncode or 0,
            registry.scrub(out.decode(errors="replace"), access),
            registry.scrub(err.decode(errors="replace"), access),
        )

    def values_file(self, values: Mapping[str, Any]) -> str:
        path = self.kubeconfig.parent / "values.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # values may hold secrets
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(dict(values), out)
        return str(path)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL helm's process group, then reap helm, even if cancelled again meanwhile."""
    if proc.returncode is None:  # not reaped yet, so its pid (= the group id) is still its own
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    reaped = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.shield(reaped)
    except asyncio.CancelledError:
        await asyncio.wait([reaped])  # a second cancellation: finish reaping, then give up
        raise


@contextmanager
def _session(binary: str, target: MemberTarget, private: Private = Private()) -> Iterator[_Helm]:
    with target.kubeconfig_file() as kubeconfig:  # checked here: its server's host can be read
        yield _Helm(binary, target, kubeconfig, private, target.server_host())


async def _status(h: _Helm, name: str, namespace: str) -> hp.Release | None:
    where = ("--namespace", namespace, "--output", "json", "--", name)
    result = await h.run("status", *where)
    if result.code != 0 and "not found" in result.stderr:
        return None
    metadata = await h.run("get", "metadata", *where) if result.code == 0 else result
    if metadata.code != 0:
        raise HelmError(f"helm status {namespace}/{name}: {hp.error_text(metadata.stderr)}")
    release = hp.parse_release(result.stdout, metadata.stdout)
    return dataclasses.replace(release, labels=await _release_labels(h.target, name, namespace))


_SECRET = kinds.builtin_resource("v1", "Secret")
# Labels helm's storage driver sets itself; the rest of a release Secret's labels are `--labels`.
_HELM_LABELS = frozenset({"owner", "name", "status", "version", "modifiedAt"})


def _revision(labels: Mapping[str, str]) -> int:
    text = labels.get("version", "")
    return int(text) if text.isdigit() else -1


async def _release_labels(target: MemberTarget, name: str, namespace: str) -> dict[str, str]:
    """The labels given to the latest revision of a release (`helm --labels`): helm prints them
    nowhere, so they are read from its storage (the release Secrets, helm's default driver)."""
    async with target.session() as client:
        found = [
            dict(s.metadata.labels or {})
            async for s in client.list(_SECRET, namespace=namespace, labels={"owner": "helm", "name": name})
            if s.metadata is not None
        ]
    latest = max(found, key=_revision, default={})
    return {k: v for k, v in latest.items() if k not in _HELM_LABELS}


async def status(
    target: MemberTarget, *, helm: str, release_name: str, release_namespace: str
) -> hp.Release | None:
    """The latest revision of a release, or None when it is not installed; `ContentError` for names
    helm must not be given."""
    hp.check_release(release_name, release_namespace)
    with _session(helm, target) as h:
        return await _status(h, release_name, release_namespace)


async def _check_repository(source: hp.ChartSource, where: str) -> None:
    """Every address the repository's name resolves to, checked before helm is given it."""
    remote = source.remote
    if remote is None:
        return
    try:
        await asyncio.to_thread(guards.resolve_host, *remote, timeout=_RESOLVE_SECONDS)
    except guards.Unresolved:
        return  # helm's own lookup fails too, and its message says so: nothing is reached
    except guards.Refused as e:
        raise ContentError(f"helm chart {where}: repositoryURL refused: {e}") from None


async def _source(h: _Helm, chart: HelmChart) -> hp.ChartSource:
    """Where helm fetches the chart, checked; a private http(s) repository's index is fetched first,
    through the private repositories file, and the chart is then named by that file's entry."""
    source = hp.chart_source(chart)
    await _check_repository(source, chart.release_name)
    access = h.private.access
    if access is None or not access.named_repository:
        return source
    name = registry.REPOSITORY_NAME
    result = await h.run("repo", "update", "--fail-on-repo-update-fail", "--", name, fetch="index")
    if result.code != 0:
        error = hp.error_text(result.stderr)
        raise ContentError(f"helm chart {chart.release_name}: the repository's index: {error}")
    return source.via_repository_file(name)


async def _chart_identity(h: _Helm, source: hp.ChartSource) -> tuple[str, str]:
    """(name, version) of the chart helm would install; asks helm only when the spec does not say."""
    if source.version and not source.local:
        return source.ref.rsplit("/", 1)[-1], source.version
    result = await h.run("show", "chart", *hp.source_flags(source), "--", source.ref, fetch="chart")
    if result.code != 0:
        raise ContentError(f"cannot read chart {source.ref}: {hp.error_text(result.stderr)}")
    return hp.chart_metadata(result.stdout)


async def _recover(h: _Helm, chart: HelmChart) -> tuple[str | None, hp.Release | None]:
    """Undo a failed attempt: back to the last good revision, else uninstall the failed release."""
    name, namespace = chart.release_name, chart.release_namespace
    latest = await _status(h, name, namespace)
    if latest is None or latest.status == "deployed":
        return None, latest  # helm failed before recording anything: nothing to undo
    history = await h.run("history", "--namespace", namespace, "--output", "json", "--", name)
    good = hp.last_good_revision(json.loads(history.stdout or "[]"), below=latest.revision)
    if good is None:
        undo, done = ["uninstall", "--", name], "uninstalled the failed first install"
    else:
        undo, done = ["rollback", "--", name, str(good)], f"rolled back to revision {good}"
    result = await h.run(undo[0], "--namespace", namespace, "--wait", *undo[1:])
    if result.code != 0:
        done = f"could not undo the failed attempt ({undo[0]}): {hp.error_text(result.stderr)}"
    return done, await _status(h, name, namespace)


async def _install(
    h: _Helm,
    chart: HelmChart,
    values: Mapping[str, Any] | None,
    dry_run: bool,
    ownership: hp.Ownership | None = None,
) -> HelmReleaseReport:
    source = await _source(h, chart)
    desired = hp.desired_values(chart, values)
    chart_name, chart_version = await _chart_identity(h, source)
    report = HelmReleaseReport(
        chart.release_name,
        chart.release_namespace,
        "unchanged",
        dry_run=dry_run,
        chart_name=chart_name,
        chart_version=chart_version,
        values_hash=values_hash(desired),
    )
    current = await _status(h, chart.release_name, chart.release_namespace)
    if current is not None:
        report = _replace(report, installed_version=current.chart_version)
    conflict = hp.owned_elsewhere(current, ownership)
    if conflict:
        return _replace(_with(report, "failed", current), error=conflict)
    post_render = hp.post_render_digest(h.private.patches)
    if current is not None and hp.is_up_to_date(
        current,
        chart_name=chart_name,
        chart_version=chart_version,
        values=desired,
        ownership=ownership,
        post_render=post_render,
    ):
        return _with(report, "unchanged", current)
    labels = hp.release_labels(ownership, post_render, current)
    argv = hp.upgrade_argv(chart, source, h.values_file(desired), dry_run=dry_run, labels=labels)
    return await _upgrade(h, chart, argv, report, current)


async def _upgrade(
    h: _Helm, chart: HelmChart, argv: list[str], report: HelmReleaseReport, current: hp.Release | None
) -> HelmReleaseReport:
    """`helm upgrade --install` (the same argv, flags and private files for a dry run as for the
    real one), and the recovery of a failed real attempt."""
    result = await h.run(*argv, fetch="chart", render=True)
    if result.code == 0:
        done = _with(report, "installed" if current is None else "upgraded", hp.parse_release(result.stdout))
        return await _previewed(h, chart, done, current, result.stdout) if report.dry_run else done
    recovery, after = (None, current) if report.dry_run else await _recover(h, chart)
    failed = _with(report, "failed", after)
    return _replace(failed, error=hp.error_text(result.stderr), recovery=recovery)


async def _previewed(
    h: _Helm, chart: HelmChart, report: HelmReleaseReport, current: hp.Release | None, stdout: str
) -> HelmReleaseReport:
    """A dry run's report with each object's would-be change: the rendered manifest against the
    installed one (`helm get manifest`; none when the release is not installed)."""
    installed = ""
    if current is not None:
        got = await h.run("get", "manifest", "--namespace", chart.release_namespace, "--", chart.release_name)
        installed = got.stdout if got.code == 0 else ""
    rendered = helm_preview.rendered_manifest(stdout)
    return _replace(report, resources=helm_preview.changes(installed, rendered, chart.release_namespace))


def _with(report: HelmReleaseReport, action: HelmAction, release: hp.Release | None) -> HelmReleaseReport:
    revision = release.revision if release else None
    return _replace(report, action=action, revision=revision, status=release.status if release else None)


def _replace(report: HelmReleaseReport, **changes: Any) -> HelmReleaseReport:
    return dataclasses.replace(report, **changes)


async def install_or_upgrade(
    target: MemberTarget,
    chart: HelmChart,
    *,
    helm: str,
    values: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    ownership: hp.Ownership | None = None,
    private: Private = Private(),
) -> HelmReleaseReport:
    """Make the release run `chart` with its inline values plus `values` (the caller-resolved
    valuesFrom, merged over them). `helmChartAction: Uninstall` uninstalls instead. With
    `ownership`, a release another owner installed is left to it unless our tier is lower.
    `private`: the registry's credentials and the post-render patches, given to helm as files."""
    if chart.helm_chart_action == "Uninstall":
        return await uninstall(
            target,
            helm=helm,
            release_name=chart.release_name,
            release_namespace=chart.release_namespace,
            owner=ownership.owners() if ownership else None,
        )
    with _session(helm, target, private) as h:
        try:
            return await _install(h, chart, values, dry_run, ownership)
        except ContentError as err:
            return HelmReleaseReport(
                chart.release_name, chart.release_namespace, "failed", dry_run, error=str(err)
            )


async def uninstall(
    target: MemberTarget,
    *,
    helm: str,
    release_name: str,
    release_namespace: str,
    owner: str | tuple[str, ...] | None = None,
    owned_only: bool = False,
) -> HelmReleaseReport:
    """Remove the release and wait for its objects to go; "absent" when it was not installed — or,
    with `owner`, when another owner's labels are on it (never remove what another profile keeps).
    `owned_only`: a release without an owner label is left too (its name came from a source that
    cannot prove it was ours, such as a status others can write)."""
    try:
        hp.check_release(release_name, release_namespace)
    except ContentError as err:
        return HelmReleaseReport(release_name, release_namespace, "failed", error=str(err))
    with _session(helm, target) as h:
        try:
            current = await _status(h, release_name, release_namespace)
        except HelmError as err:
            return HelmReleaseReport(release_name, release_namespace, "failed", error=str(err))
        if current is None or not hp.removable(current, owner, owned_only):
            return HelmReleaseReport(release_name, release_namespace, "absent")
        result = await h.run("uninstall", "--namespace", release_namespace, "--wait", "--", release_name)
        if result.code != 0:
            error = hp.error_text(result.stderr)
            return HelmReleaseReport(
                release_name, release_namespace, "failed", error=error, status=current.status
            )
        return HelmReleaseReport(
            release_name,
            release_namespace,
            "uninstalled",
            chart_name=current.chart_name,
            chart_version=current.chart_version,
            revision=current.revision,
        )
