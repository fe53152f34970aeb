"""What every reconcile gets: the management client, read-only caches, the event recorder, the
ports to member clusters (helm, health), the controller's namespace and the clock.

Reads come from informer caches (never from the API server inside a reconcile), writes go through
the client. The clock is passed in so that tests and the decision core agree on `now`.

What one controller alone remembers between its passes is built with that controller and handed to
its reconcile, not kept here; one controller tells another through the typed ports of `wakeups`
(ADR 0102).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from fleetwave.api import families
from fleetwave.api.families import Family
from fleetwave.api.sveltos import HelmChart, ValidateHealth
from fleetwave.controllers.shared.echoes import Echoes
from fleetwave.controllers.shared.reports import Reports
from fleetwave.controllers.shared.status_writer import StatusWriter, Whose
from fleetwave.controllers.shared.wakeups import Queues, Wakeups
from fleetwave.core import rollout_metrics
from fleetwave.core import status as st
from fleetwave.delivery.artifact_store import ArtifactStore
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.helm_preview import ResourceChange
from fleetwave.delivery.helmplan import Ownership
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.delivery.registry import Access
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds
from fleetwave.kube.client import AsyncClient
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime import analysis, events, notify, webhook
from fleetwave.runtime.metrics import RolloutMetrics
from fleetwave.runtime.watching import Informer, object_key

Objects = list[dict[str, Any]]
T = TypeVar("T")


class Cache:
    """Informer stores by native kind name ("ClusterProfile", "ConfigMap", ...), read as plain dicts
    in native form: the informers may watch the kinds of an upstream API family (`family`)."""

    def __init__(self, informers: Mapping[str, Informer], family: Family = families.NATIVE) -> None:
        self.informers = dict(informers)
        self.family = family
        # The caches of the other API families this process serves (set by the composition root):
        # a kubeconfig named by any family's member is a credential to every family.
        self.peers: list[Cache] = []
        self._memo: dict[str, tuple[tuple[int, ...], Any]] = {}
        self._indexes: dict[tuple[str, str], ValueIndex] = {}

    def has(self, kind: str) -> bool:
        """Whether an informer of `kind` feeds this cache (Cluster API clusters may not: ADR 0109)."""
        return kind in self.informers

    def obj(self, kind: str, namespace: str | None, name: str) -> Any | None:
        if kind in self.family.kinds and not self.family.served(kind).namespaced:
            namespace = None  # a kind the family serves cluster-scoped (a KubeFleet MemberCluster)
        key = f"{namespace}/{name}" if namespace else name
        return self.informers[kind].get(key)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        obj = self.obj(kind, namespace, name)
        return None if obj is None else self._view(kind, as_dict(obj))

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [self._view(kind, as_dict(o)) for o in self.informers[kind].store.values()]

    def members_everywhere(self) -> Objects:
        """Every member cluster of every API family served here, in native form."""
        out: Objects = []
        for cache in (self, *self.peers):
            if "MemberCluster" in cache.informers:
                out += cache.list("MemberCluster")
        return out

    def labelled(self, kind: str, label: str, value: str) -> Objects:
        """The objects of `kind` whose `label` is `value`, through an index kept from informer events
        (made on first use), in native form: no scan of the whole kind."""
        index = self._index_of(kind, "label " + label, _label_reader(label))
        informer = self.informers[kind]
        found = (informer.get(key) for key in sorted(index.keys_of(value)))
        return [self._view(kind, as_dict(o)) for o in found if o is not None]

    def index(self, kind: str, name: str, values_of: Callable[[dict[str, Any]], Iterable[str]]) -> ValueIndex:
        """The index `name` of `kind` (made on first use): its objects' keys by the values
        `values_of` reads from each, in native form, kept up to date from informer events."""
        return self._index_of(kind, name, lambda obj: values_of(self._view(kind, as_dict(obj))))

    def _index_of(self, kind: str, name: str, values_of: Callable[[Any], Iterable[str]]) -> ValueIndex:
        found = self._indexes.get((kind, name))
        if found is None:
            found = self._indexes[(kind, name)] = ValueIndex(self.informers[kind], values_of)
        return found

    def memo(
        self, name: str, kind: str | tuple[str, ...], build: Callable[[], T], *, everywhere: bool = False
    ) -> T:
        """`build()` once per state of the `kind` informer, or of each of several kinds (of every
        family's cache when `everywhere`): what is derived from a whole kind is not rebuilt on every
        reconcile."""
        caches = (self, *self.peers) if everywhere else (self,)
        kinds_read = (kind,) if isinstance(kind, str) else kind
        stamps = [
            getattr(c.informers[k], "revision", None) for c in caches for k in kinds_read if k in c.informers
        ]
        if None in stamps:  # an informer that does not count its changes: nothing can be kept
            return build()
        stamp = tuple(int(s) for s in stamps if s is not None)
        found = self._memo.get(name)
        if found is not None and found[0] == stamp:
            return found[1]  # type: ignore[no-any-return]
        value = build()
        self._memo[name] = (stamp, value)
        return value

    def _view(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.family.view(kind, obj) if kind in self.family.kinds else obj

    def objects(self, kind: str) -> Iterable[Any]:
        return list(self.informers[kind].store.values())


class ValueIndex:
    """Keys of an informer's objects by the values `values_of` reads from each, kept up to date by
    its events: what would otherwise be a scan of the whole kind is a lookup."""

    def __init__(self, informer: Informer, values_of: Callable[[Any], Iterable[str]]) -> None:
        self._values_of = values_of
        self._held: dict[str, frozenset[str]] = {}
        self._keys: dict[str, set[str]] = {}
        for key, obj in informer.store.items():
            self._put(key, obj)
        informer.on_change(self._on_change)

    def keys_of(self, value: str) -> set[str]:
        return self._keys.get(value, set())

    def _on_change(self, event: str, obj: Any) -> None:
        key = object_key(obj)
        self._drop(key)
        if event != "DELETED":
            self._put(key, obj)

    def _put(self, key: str, obj: Any) -> None:
        values = frozenset(v for v in self._values_of(obj) if v)
        if values:
            self._held[key] = values
            for value in values:
                self._keys.setdefault(value, set()).add(key)

    def _drop(self, key: str) -> None:
        for value in self._held.pop(key, frozenset()):
            keys = self._keys[value]
            keys.discard(key)
            if not keys:
                del self._keys[value]


def _label_reader(label: str) -> Callable[[Any], Iterable[str]]:
    def values_of(obj: Any) -> Iterable[str]:
        value = (obj.metadata.labels or {}).get(label)
        return () if value is None else (str(value),)

    return values_of


def as_dict(obj: Any) -> dict[str, Any]:
    result: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return result


@dataclass(frozen=True, slots=True)
class HelmOutcome:
    ok: bool
    status: str  # Managing | Failed | Uninstalled
    chart_version: str = ""
    values_hash: str = ""
    message: str = ""
    changed: bool = False
    # What helm did (or, in a dry run, would do): installed | upgraded | unchanged | failed |
    # uninstalled | absent; and the chart version the release ran before ("" when not installed).
    action: str = ""
    installed_version: str = ""
    resources: tuple[ResourceChange, ...] = ()  # a dry run's would-be change per object (ADR 0113)


class HelmPort(Protocol):
    async def install_or_upgrade(
        self,
        target: MemberTarget,
        chart: HelmChart,
        *,
        values: Mapping[str, Any],
        dry_run: bool,
        ownership: Ownership | None = None,
        access: Access | None = None,
        patches: Sequence[Mapping[str, Any]] = (),
    ) -> HelmOutcome: ...

    async def uninstall(
        self,
        target: MemberTarget,
        *,
        release: str,
        namespace: str,
        owner: str | tuple[str, ...] | None = None,
        owned_only: bool = False,
    ) -> HelmOutcome: ...


@dataclass(frozen=True, slots=True)
class Wake:
    """How a judgement that is not yet healthy is re-run when what it reads changes: `call()`
    enqueues `key` (ADR 0065)."""

    key: Hashable
    call: Callable[[], None]


@dataclass(frozen=True, slots=True)
class HealthOutcome:
    ok: bool
    message: str


class HealthPort(Protocol):
    async def check(
        self,
        target: MemberTarget,
        checks: Iterable[ValidateHealth],
        *,
        objects: Iterable[tuple[str, str, str | None, str]],
        wake: Wake | None = None,
        seen: Mapping[tuple[str, str, str | None, str], Mapping[str, Any]] | None = None,
        delivered: bool = False,
        owner: str = "",
    ) -> HealthOutcome:
        """Readiness of the delivered objects (apiVersion, kind, namespace, name) plus user checks;
        while not ok, `wake` is called when something they read changes on the member. `seen`:
        objects as the delivery's applies just returned them, judged without reading them again
        (built-in readiness only: a user's check reads the member itself). `delivered`: the objects
        were applied since the last judgement, so nothing seen of them before counts. `owner`:
        whose check it is, "<kind>/<namespace>/<name>": each owner has its share of the sandbox
        (ADR 0097)."""
        ...

    async def webhook_condition(
        self, rule: str, status: int, body: object, *, owner: str = ""
    ) -> tuple[bool, str]:
        """A webhook gate's successCondition over one answer, in the sandbox (ADR 0080)."""
        ...

    async def analysis_measurement(
        self, url: str, path: str, query: str, rule: str, *, owner: str = ""
    ) -> tuple[bool, str]:
        """One measurement of an analysis gate: its query and successCondition, in the sandbox (ADR 0081)."""
        ...


class DriftWatchPort(Protocol):
    """Member watches on the kinds of a summary's deployed objects, for drift detection (ADR 0114)."""

    def now(self) -> float:
        """The watches' clock: pass it as `since` to `follow` when a delivery starts reading."""
        ...

    def follow(
        self,
        target: MemberTarget,
        key: Hashable,
        objects: Iterable[tuple[str, str, str | None, str]],
        wake: Callable[[], None],
        *,
        since: float | None = None,
    ) -> bool:
        """Call `wake` when one of `objects` changes on `target` (status aside), until `forget(key)`
        or a later `follow` names others; False when they are not all watched (bounds)."""
        ...

    def watched(self, key: Hashable) -> bool:
        """Whether every object `key` last followed is watched."""
        ...

    def forget(self, key: Hashable) -> None: ...


@dataclass(frozen=True)
class Context:
    client: AsyncClient
    cache: Cache
    recorder: events.EventRecorder
    helm: HelmPort
    health: HealthPort
    namespace: str
    clock: Callable[[], datetime]
    # How often a judgement waiting on a member is re-run when no watch wakes it (ADR 0065).
    judge_poll: float = 2.0
    # The namespaces whose objects this controller reads (`--watch-namespace`), None for all.
    watched: frozenset[str] | None = None
    # The kinds Local content may hold (`--local-content-kind`), None: any the deny-list passes.
    local_content_kinds: frozenset[str] | None = None
    # Where rollout notifications go (`--notify-secret`), None: nowhere.
    notifier: notify.Notifier | None = None
    # Webhook gates' calls: each verdict remembered for its interval, concurrency bounded (ADR 0080).
    webhooks: webhook.WebhookCalls = field(default_factory=webhook.WebhookCalls)
    # Analysis gates' measurement series, in memory: a restart starts them again (ADR 0081).
    analyses: analysis.Series = field(default_factory=analysis.Series)
    # The one writer of rollout statuses, with this process's writes remembered (ADR 0101).
    statuses: StatusWriter = field(default_factory=StatusWriter)
    echoes: Echoes = field(default_factory=Echoes)
    # The versions this process's applies to members returned: applied over without a read (one
    # instance shared by every family's context, app.build).
    known_versions: KnownVersions = field(default_factory=KnownVersions)
    # The work queues of this family's controllers, by kind, wired by the composition root once
    # the controllers exist (`wake`).
    queues: Queues = field(default_factory=Queues)
    # Wake-ups the Sveltos-style controllers leave for a ClusterProfile's next event (ADR 0102).
    wakeups: Wakeups = field(default_factory=Wakeups)
    # The rollout metrics of the manager's registry (ADR 0082); None: not recorded (unit tests).
    metrics: RolloutMetrics | None = None
    # Kinds placements may select besides the built-in ones (`--placement-kind`, ADR 0091).
    placement_kinds: tuple[kinds.KindInfo, ...] = ()
    # The pinned content tools: Go templates and kustomize (ADR 0089).
    renderer: Renderer = field(default_factory=Renderer)
    kustomizer: Kustomizer = field(default_factory=Kustomizer)
    # Flux source artifacts fetched (`--flux-sources`, ADR 0103); None: Flux sources are refused.
    artifacts: ArtifactStore | None = None
    # Reconciles waiting for a pull member's agent to report (ADR 0106): woken by MemberWork events.
    reports: Reports = field(default_factory=Reports)
    # Drift noticed through member watches (ADR 0114); None: drift is polled for.
    drift_watches: DriftWatchPort | None = None

    def record_rollout(
        self, kind: str, key: str, previous: st.RolloutStatus | None, new: st.RolloutStatus
    ) -> None:
        """After a status write: the rollout's gauges now, and what the step did (ADR 0082)."""
        if self.metrics is not None:
            self.metrics.record(kind, key, rollout_metrics.observe(previous, new, self.clock()))

    async def write_status(
        self, kind: str, current: Versioned, body: Mapping[str, Any]
    ) -> tuple[StatusWrite, Versioned]:
        """Write the status of the `kind` object `current` is a version of, through the one status
        writer (ADR 0101)."""
        whose = Whose.of(kind, current.namespace, current.name)
        return await self.statuses.write(self.client, self.resource(kind), whose, current, body)

    def progress_due_in(self, kind: str, key: str) -> float | None:
        """Seconds until a progress-only status change of `kind` `key` is due; None: due now."""
        return self.statuses.progress_due_in(Whose(kind, key))

    def forget_rollout(self, kind: str, key: str) -> None:
        self.statuses.forget(Whose(kind, key))
        if self.metrics is not None:
            self.metrics.forget(kind, key)

    @property
    def family(self) -> Family:
        return self.cache.family

    def resource(self, kind: str) -> Any:
        """The resource class a native kind is read and written through in this context's family."""
        if self.family.native:
            return kinds.resource(kind)
        served = self.family.served(kind)
        return kinds.served_resource(served.api_version, served.kind, served.plural, served.namespaced)

    def api_version(self, kind: str) -> str:
        """The apiVersion of a native kind in this context's family (objects it creates, owner refs)."""
        return self.family.api_version(kind)

    def wake(self, kind: str, key: str) -> Wake | None:
        """A wake-up that re-runs the reconcile of `kind` `key` (None before controllers exist)."""
        enqueue = self.queues.of(kind)
        return (
            None if enqueue is None else Wake((self.family.controller_name(kind), key), lambda: enqueue(key))
        )

    async def event(self, obj: Any, warning: bool, reason: str, message: str) -> None:
        kind = events.EventType.WARNING if warning else events.EventType.NORMAL
        ref = events.ObjectRef.of(obj)
        await self.recorder.record(ref, kind, reason, message)
        if self.notifier is not None and not self.notifier.seen(
            ref.kind, ref.namespace, ref.name, reason, message
        ):
            hint = notify.hint_for(ref.kind, ref.name, ref.namespace, reason, message)
            self.notifier.notify(
                notify.Notification(
                    notify.KINDS[reason],
                    ref.kind,
                    ref.name,
                    ref.namespace,
                    reason,
                    message,
                    self.clock(),
                    hint,
                )
            )
