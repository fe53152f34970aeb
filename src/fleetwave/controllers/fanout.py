"""Indexes that keep an event's fan-out proportional to what it concerns (issue 11).

The composition root maps each informer event to the keys whose reconcile reads the changed object.
Scanning every ClusterSummary, or waking every rollout, on each event costs O(fleet x rollouts); these
indexes are kept in step by informer handlers instead, so a lookup costs what it returns:

- `SummaryIndex`: ClusterSummaries by the member they deliver to and the content snapshot they use;
- `ReadIndex`: ClusterProfiles or ClusterPromotions by the ConfigMaps and Secrets their reconcile
  reads (worked out from their specs the way the reconcile parses them), and profiles by the
  ClusterSets they name;
- `MemberChanges`: per MemberCluster, the fields rollout selection and delivery read, so an event that
  changed none of them (the status the membercluster controller writes) wakes no rollout; and the
  Secrets members name as their kubeconfigs.

An index is read by mappers of other informers, or after its own handler on the same informer: register
index handlers before the mappers that read them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fleetwave.api import codec
from fleetwave.api.families import Family
from fleetwave.api.sveltos import ClusterProfile, ClusterPromotion, PolicyRef, ProfileSpec, ValueFrom
from fleetwave.controllers.fleet import capi, members
from fleetwave.controllers.shared.context import as_dict
from fleetwave.controllers.sveltos import content
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.runtime.watching import EventType, object_key

log = logging.getLogger(__name__)

# (kind, namespace, name) of a ConfigMap or Secret (or of a ClusterSet a profile names); namespace
# None: the reader's default namespace, matched against every namespace (the default is the
# reconcile's business, never a reason to miss).
Source = tuple[str, str | None, str]
SET_KIND = "ClusterSet"
Reads = Callable[[Mapping[str, Any]], frozenset[Source]]
T = TypeVar("T")
H = TypeVar("H")


def _add(index: dict[H, set[str]], at: H, key: str) -> None:
    index.setdefault(at, set()).add(key)


def _drop(index: dict[H, set[str]], at: H, key: str) -> None:
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]


# ---- what a rollout reads ----


def _policy_sources(refs: Iterable[PolicyRef]) -> set[Source]:
    out: set[Source] = set()
    for ref in refs:
        if ref.name:  # no name: refused before anything is read
            out.add((ref.kind or "ConfigMap", ref.namespace, ref.name))
        secret = ref.remote_url.secret_ref if ref.remote_url else None
        if secret is not None:
            out.add(("Secret", secret.namespace, secret.name))
    return out


def _value_sources(values: Iterable[ValueFrom] | None) -> set[Source]:
    return {(v.kind, v.namespace, v.name) for v in values or ()}


def spec_sources(spec: ProfileSpec) -> frozenset[Source]:
    """Every ConfigMap/Secret a profile spec names: policyRefs and helm valuesFrom are read by
    `content.resolve`; the rest is refused today before anything is read, and indexed all the same
    (an extra wake-up costs one reconcile, a missing one a stale rollout)."""
    out = _policy_sources(spec.policy_refs or ())
    for chart in spec.helm_charts or ():
        out |= _value_sources(chart.values_from)
    for kustomization in spec.kustomization_refs or ():
        if kustomization.name:
            out.add((kustomization.kind or "ConfigMap", kustomization.namespace, kustomization.name))
        out |= _value_sources(kustomization.values_from)
    out |= _value_sources(spec.patches_from)
    for template in spec.template_resource_refs or ():
        if template.resource.kind and template.resource.name:
            out.add((template.resource.kind, template.resource.namespace, template.resource.name))
    return frozenset(out)


def _parsed(raw: Mapping[str, Any], kind: str, model: type[T]) -> T | None:
    """The object as its reconcile parses it; None when the reconcile refuses it before reading."""
    try:
        return common.parse_as(raw, kind, model)
    except codec.ManifestError:
        return None


def profile_reads(raw: Mapping[str, Any]) -> frozenset[Source]:
    """What a ClusterProfile's reconcile reads. A stage profile (pinned) reads only the snapshot its
    promotion pinned, never its policyRefs (`profile._content`); any other profile its references,
    and the ClusterSets its setRefs name (what they chose selects its clusters, ADR 0108)."""
    pinned = ((raw.get("metadata") or {}).get("annotations") or {}).get(common.PINNED_ANNOTATION)
    if pinned:
        return frozenset({(content.snapshot_kind(str(pinned)), None, str(pinned))})
    profile = _parsed(raw, "ClusterProfile", ClusterProfile)
    if profile is None:
        return frozenset()
    sets = {(SET_KIND, None, name) for name in profile.spec.set_refs or ()}
    return spec_sources(profile.spec) | sets


def promotion_reads(raw: Mapping[str, Any]) -> frozenset[Source]:
    """What a ClusterPromotion's reconcile reads: its profileSpec's references. preHealthCheckDeployment
    refs are read by the generated pre-verification profile (the promotion only checks them), and
    indexed here too, for the price of a spare reconcile."""
    promotion = _parsed(raw, "ClusterPromotion", ClusterPromotion)
    if promotion is None:
        return frozenset()
    out = set(spec_sources(promotion.spec.profile_spec))
    for stage in promotion.spec.stages:
        triggers = (stage.trigger.auto, stage.trigger.manual) if stage.trigger else ()
        for trigger in triggers:
            if trigger is not None:
                out |= _policy_sources(trigger.pre_health_check_deployment or ())
    return frozenset(out)


class ReadIndex:
    """Which objects of one rollout kind read which ConfigMaps and Secrets, from their own events."""

    def __init__(self, reads: Reads) -> None:
        self._reads = reads
        self._by_source: dict[Source, set[str]] = {}
        self._of: dict[str, tuple[Any, frozenset[Source]]] = {}  # key -> (what it was read from, reads)
        self._unknown: set[str] = set()  # reads that could not be worked out: woken by every source

    def on_change(self, event: EventType, obj: Any) -> None:
        key = object_key(obj)
        if event == "DELETED":
            self._forget(key)
            return
        try:
            raw = as_dict(obj)
            basis = _basis(raw)
            known = self._of.get(key)
            if known is not None and known[0] == basis:
                return  # a status write: spec and pin as before, so are the reads (no re-parse)
            reads = self._reads(raw)
        except Exception:  # never miss a wake-up for want of understanding a spec
            log.warning(
                "fan-out: cannot tell what %s reads; every ConfigMap/Secret wakes it", key, exc_info=True
            )
            self._forget(key)
            self._unknown.add(key)
            return
        self._forget(key)
        self._of[key] = (basis, reads)
        for source in reads:
            _add(self._by_source, source, key)

    def readers(self, kind: str, namespace: str | None, name: str) -> set[str]:
        """The keys whose reconcile may read this ConfigMap/Secret."""
        out = set(self._unknown)
        for at in ((kind, namespace, name), (kind, None, name)):
            out |= self._by_source.get(at, set())
        return out

    def _forget(self, key: str) -> None:
        self._unknown.discard(key)
        _, reads = self._of.pop(key, (None, frozenset()))
        for source in reads:
            _drop(self._by_source, source, key)


def _basis(raw: Mapping[str, Any]) -> tuple[Any, Any]:
    """What the reads are worked out from: the spec and the pin annotation."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    return raw.get("spec"), annotations.get(common.PINNED_ANNOTATION)


# ---- summaries ----


@dataclass(frozen=True, slots=True)
class _Summary:
    member: str  # the member key of spec.clusterType, clusterNamespace and clusterName, as written
    content: str | None  # the snapshot it delivers
    profile: str | None  # the profile that made it (its label)


class SummaryIndex:
    """ClusterSummaries by the member they deliver to and by the content snapshot they deliver."""

    def __init__(self) -> None:
        self._entries: dict[str, _Summary] = {}
        self._by_member: dict[str, set[str]] = {}
        self._by_content: dict[str, set[str]] = {}

    def on_change(self, event: EventType, obj: Any) -> None:
        key = object_key(obj)
        self._forget(key)
        if event == "DELETED":
            return
        entry = _summary_of(obj)
        self._entries[key] = entry
        _add(self._by_member, entry.member, key)
        if entry.content is not None:
            _add(self._by_content, entry.content, key)

    def of_member(self, member: str) -> list[str]:
        """The summaries delivering to the member `member` (its key: `capi:` for Cluster API's)."""
        return sorted(self._by_member.get(member, ()))

    def of_content(self, snapshot: str | None) -> list[str]:
        return sorted(self._by_content.get(snapshot, ())) if snapshot else []

    def profiles_of_content(self, snapshot: str | None) -> set[str]:
        """The profiles whose summaries deliver this snapshot (they made it, and remake it if it goes)."""
        return {p for k in self.of_content(snapshot) if (p := self._entries[k].profile)}

    def _forget(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        _drop(self._by_member, entry.member, key)
        if entry.content is not None:
            _drop(self._by_content, entry.content, key)


def _summary_of(obj: Any) -> _Summary:
    spec = getattr(obj, "spec", None)
    spec = spec if isinstance(spec, Mapping) else {}  # malformed: indexed under no member
    meta = obj.metadata
    snapshot = (meta.annotations or {}).get(ss.CONTENT_ANNOTATION)
    return _Summary(
        member=ss.cluster_of(spec),
        content=str(snapshot) if snapshot is not None else None,
        profile=(meta.labels or {}).get(ss.PROFILE_LABEL),
    )


# ---- members ----

_UNSEEN = object()


class MemberChanges:
    """Per MemberCluster, what a rollout reads of it (selection: labels, readiness, paused; delivery:
    the kubeconfig reference, the insecure opt-in; the content boundary: every kubeconfig reference),
    to tell events that change it from those that do not; and which Secrets members name. With
    `capi`, the same of Cluster API clusters (ADR 0109), keyed `capi:namespace/name`, whose status is
    read only for what makes them ready or not."""

    def __init__(self, family: Family, *, capi: bool = False) -> None:
        self._family = family
        self._capi = capi
        self._facts: dict[str, Any] = {}
        self._secret_of: dict[str, tuple[str, str]] = {}  # member key -> the kubeconfig Secret it names
        self._named: dict[tuple[str, str], set[str]] = {}  # Secret (namespace, name) -> member keys

    def observe(self, event: EventType, obj: Any) -> bool:
        """Take in one event; whether a rollout's reconcile may now read the member differently."""
        key = self.key_of(obj)
        self._forget_secret(key)
        if event == "DELETED":
            self._facts.pop(key, None)
            return True
        view, facts = self._read(obj)
        before = self._facts.get(key, _UNSEEN)
        self._facts[key] = facts
        if view is not None:
            self._name_secret(key, view)
        # Unreadable (facts None): assume the worst, as the rollouts would read whatever it became.
        return event == "ADDED" or facts is None or before != facts

    def key_of(self, obj: Any) -> str:
        """The member key of a member object of this index's kind."""
        if self._capi:
            return members.member_key(str(obj.metadata.namespace), str(obj.metadata.name), capi=True)
        return object_key(obj)

    def names(self, namespace: str, name: str) -> set[str]:
        """The members (keys) that name this Secret as their kubeconfig."""
        return set(self._named.get((namespace, name), ()))

    def is_kubeconfig(self, secret: Any) -> bool:
        """Labelled by `fleetwave cluster register`, or named by a member (`members.is_kubeconfig_secret`)."""
        meta = secret.metadata
        labelled = members.SECRET_LABEL in (meta.labels or {})
        return labelled or bool(self.names(str(meta.namespace), str(meta.name)))

    def _read(self, obj: Any) -> tuple[Mapping[str, Any] | None, tuple[Any, ...] | None]:
        """The member in native form and what rollouts read of it; (None, None) when it cannot be
        read (the family cannot convert it): then it counts as changed."""
        try:
            if self._capi:
                raw = as_dict(obj)
                return raw, _capi_facts(raw)
            view = self._family.view("MemberCluster", as_dict(obj))
            return view, _rollout_facts(view)
        except Exception:
            log.debug("fan-out: cannot read member %s", object_key(obj), exc_info=True)
            return None, None

    def _name_secret(self, key: str, view: Mapping[str, Any]) -> None:
        try:
            secret = (members.from_capi(view) if self._capi else members.from_object(view)).secret[:2]
        except Exception:  # no name to index: nothing names a Secret
            return
        self._secret_of[key] = (secret[0], secret[1])
        _add(self._named, self._secret_of[key], key)

    def _forget_secret(self, key: str) -> None:
        secret = self._secret_of.pop(key, None)
        if secret is not None:
            _drop(self._named, secret, key)


def _rollout_facts(view: Mapping[str, Any]) -> tuple[Any, ...]:
    """The fields `members.from_object` and the content boundary read (all of spec, all labels and
    annotations: when in doubt a field counts); of status only `ready`, the only status read."""
    meta = view.get("metadata") or {}
    return (
        meta.get("labels") or {},
        meta.get("annotations") or {},
        bool(meta.get("deletionTimestamp")),
        view.get("spec"),
        (view.get("status") or {}).get("ready"),
    )


def _capi_facts(raw: Mapping[str, Any]) -> tuple[Any, ...]:
    """What `members.from_capi` reads of a Cluster API cluster: labels, annotations, whether it is
    paused, and its standing (ready, deleting, why not) rather than its status as a whole, which
    Cluster API rewrites far more often than it changes any of that."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    return (
        meta.get("labels") or {},
        meta.get("annotations") or {},
        isinstance(spec, Mapping) and spec.get("paused") is True,
        capi.standing(raw),
    )
