"""The watches between the Sveltos-style kinds: which rollout's key an event of a related object
wakes.

Every reconcile is keyed by the object it owns; changes to related objects are mapped to those keys
(a summary wakes its profile, a stage profile wakes its promotion, a ConfigMap or Secret wakes the
rollouts that name it, a member wakes every rollout only when what they read of it changed). The
mappers look keys up in indexes kept from informer events (`fanout`), never scan a whole kind, and a
controller's own writes (echoes) do not wake it again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import pullmode
from fleetwave.controllers import delivery_news, fanout
from fleetwave.controllers.fleet import capi, members, role_requests
from fleetwave.controllers.shared.context import Cache, as_dict
from fleetwave.controllers.shared.echoes import Echoes
from fleetwave.controllers.shared.own_writes import OwnWrites
from fleetwave.controllers.shared.wakeups import Wakeups
from fleetwave.controllers.sveltos import content, promotion
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery.artifacts import FLUX_KINDS
from fleetwave.runtime.controller import Controller, besides_status
from fleetwave.runtime.watching import EventType, Informer, object_key


def _labels(obj: Any) -> dict[str, str]:
    return dict(obj.metadata.labels or {})


def all_keys(cache: Cache, kind: str) -> list[str]:
    return [object_key(o) for o in cache.objects(kind)]


def role_requests_reading(cache: Cache, kind: str, obj: Any) -> list[str]:
    """The RoleRequests whose roleRefs name this ConfigMap or Secret (few: a scan)."""
    meta = obj.metadata
    return [
        str(raw["metadata"]["name"])
        for raw in cache.list("RoleRequest")
        if role_requests.references(raw, kind, str(meta.namespace), str(meta.name))
    ]


class Keys:
    """Maps a changed object to the keys of the objects whose reconcile depends on it, through
    indexes (`fanout`) kept by informer handlers: the work an event causes scales with what it
    concerns, not with the size of the fleet (issue 11)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.summaries = fanout.SummaryIndex()
        self.profiles = fanout.ReadIndex(fanout.profile_reads)
        self.promotions = fanout.ReadIndex(fanout.promotion_reads)
        self.members = fanout.MemberChanges(cache.family)
        self.capi_clusters = fanout.MemberChanges(cache.family, capi=True)  # Sveltos' (ADR 0109)

    def all_of(self, kind: str) -> Iterable[str]:
        return all_keys(self.cache, kind)

    # The rollout a key is part of decides its shard (ADR 0067): a promotion's stage profiles and
    # their summaries go where the promotion goes, a profile's summaries where the profile goes.
    def rollout_of_promotion(self, key: str) -> str:
        return f"ClusterPromotion/{key}"

    def rollout_of_profile(self, key: str) -> str:
        obj = self.cache.obj("ClusterProfile", None, key)
        owner = _labels(obj).get(promotion.PROMOTION_LABEL) if obj is not None else None
        return self.rollout_of_promotion(owner) if owner else f"ClusterProfile/{key}"

    def rollout_of_summary(self, key: str) -> str:
        namespace, _, name = key.partition("/")
        obj = self.cache.obj("ClusterSummary", namespace, name)
        profile_name = _labels(obj).get(ss.PROFILE_LABEL) if obj is not None else None
        return self.rollout_of_profile(profile_name) if profile_name else f"ClusterSummary/{key}"

    def promotion_of_profile(self, obj: Any) -> Iterable[str]:
        owner = _labels(obj).get(promotion.PROMOTION_LABEL)
        return [owner] if owner else []

    def profile_of_summary(self, obj: Any) -> Iterable[str]:
        """The summary's profile, and the profiles that depend on it (`dependsOn`): a summary turning
        Ready may let them deliver to its cluster."""
        name = _labels(obj).get(ss.PROFILE_LABEL)
        if not name:
            return []
        return [name, *self._dependents().get(name, ())]

    def _dependents(self) -> dict[str, list[str]]:
        def build() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for dependent in self.cache.list("ClusterProfile"):
                for dependency in (dependent.get("spec") or {}).get("dependsOn") or []:
                    out.setdefault(str(dependency), []).append(str(dependent["metadata"]["name"]))
            return out

        return self.cache.memo("profile-dependents", "ClusterProfile", build)

    def stage_profile_of_summary(self, obj: Any) -> Iterable[str]:
        """The summary's profile when it is a promotion's stage profile."""
        name = _labels(obj).get(ss.PROFILE_LABEL)
        return [name] if name and self._of_promotion(name) else []

    def pacing_profiles_of_summary(self, obj: Any) -> Iterable[str]:
        """`profile_of_summary` but a promotion's stage profile (`stage_profile_of_summary`)."""
        names = list(self.profile_of_summary(obj))
        return names[1:] if names and self._of_promotion(names[0]) else names

    def _of_promotion(self, profile_name: str) -> bool:
        owner = self.cache.obj("ClusterProfile", None, profile_name)
        return owner is not None and bool(self.promotion_of_profile(owner))

    def promotion_of_summary(self, obj: Any) -> Iterable[str]:
        keys: list[str] = []
        for name in self.profile_of_summary(obj):
            owner = self.cache.obj("ClusterProfile", None, name)
            keys += self.promotion_of_profile(owner) if owner is not None else []
        return keys

    def summaries_of_member(self, obj: Any) -> Iterable[str]:
        return self.summaries.of_member(object_key(obj))

    def summaries_of_capi_cluster(self, obj: Any) -> Iterable[str]:
        return self.summaries.of_member(self.capi_clusters.key_of(obj))

    def summaries_of_content(self, obj: Any) -> Iterable[str]:
        return self.summaries.of_content(obj.metadata.name)

    def summaries_of_member_secret(self, secret: Any) -> Iterable[str]:
        """A kubeconfig Secret concerns the summaries delivering with it: the member its label names,
        every member whose kubeconfigSecretRef names it (labelled or not), and the Cluster API
        cluster it is the kubeconfig of."""
        meta = secret.metadata
        member = (meta.labels or {}).get(members.SECRET_LABEL)
        keys = set(self.summaries.of_member(f"{meta.namespace}/{member}")) if member else set()
        where = (str(meta.namespace), str(meta.name))
        for named in self.members.names(*where) | self.capi_clusters.names(*where):
            keys.update(self.summaries.of_member(named))
        return sorted(keys)

    def promotions_of_source(self, kind: str) -> Callable[[Any], Iterable[str]]:
        """The promotions a ConfigMap/Secret event concerns: those whose profileSpec (or
        preHealthCheckDeployment) names it; for a member's kubeconfig, every promotion."""

        def mapper(obj: Any) -> Iterable[str]:
            if kind == "Secret" and (
                self.members.is_kubeconfig(obj) or self.capi_clusters.is_kubeconfig(obj)
            ):
                # postDelayHealthChecks reach members through it (promotion._verdict); which promotion
                # judges which member lives in its status, unindexed: kubeconfig events are rare.
                return self.all_of("ClusterPromotion")
            meta = obj.metadata
            return sorted(self.promotions.readers(kind, meta.namespace, str(meta.name)))

        return mapper

    def profiles_of_set(self, obj: Any) -> Iterable[str]:
        """The profiles whose setRefs name this ClusterSet (ADR 0108)."""
        return sorted(self.profiles.readers(fanout.SET_KIND, None, str(obj.metadata.name)))

    def profiles_of_source(self, kind: str) -> Callable[[Any], Iterable[str]]:
        """The profiles a ConfigMap/Secret event concerns: those that name it (a stage profile: the
        snapshot it is pinned to); for a content snapshot also the profiles delivering it, which make
        it again should it go."""

        def mapper(obj: Any) -> Iterable[str]:
            meta = obj.metadata
            name = str(meta.name)
            keys = self.profiles.readers(kind, meta.namespace, name)
            if content.is_snapshot_name(name):
                keys |= self.summaries.profiles_of_content(name)
            return sorted(keys)

        return mapper


@dataclass(frozen=True, slots=True)
class Writes:
    own: OwnWrites
    echoes: Echoes
    # What the controllers leave for a profile's next event (Context.wakeups).
    wakeups: Wakeups = field(default_factory=Wakeups)


def wire(
    keys: Keys,
    informers: Mapping[str, Informer],
    promotions: Controller[str],
    profiles: Controller[str],
    summaries: Controller[str],
    writes: Writes | None = None,
    sets: Mapping[str, Controller[str]] | None = None,
) -> None:
    """The watches between the kinds; the indexes first, so that a mapper never reads one that has
    not yet taken in the event the mapper is handling. `writes`: this process's writes, whose
    echoes do not wake their writer. `sets`: the ClusterSet and Set controllers, by kind."""
    writes = writes or Writes(OwnWrites(), Echoes())
    sets = sets or {}
    informers["ClusterSummary"].on_change(keys.summaries.on_change)
    informers["ClusterProfile"].on_change(keys.profiles.on_change)
    informers["ClusterPromotion"].on_change(keys.promotions.on_change)
    woken = [("ClusterPromotion", promotions), ("ClusterProfile", profiles), *sets.items()]
    _wire_members(informers["MemberCluster"], keys.members, keys, woken)
    if keys.cache.family.capi and members.CAPI_CACHE_KIND in informers:
        _wire_members(informers[members.CAPI_CACHE_KIND], keys.capi_clusters, keys, woken)
    _wire_promotions(promotions, informers, keys, writes)
    _wire_profiles(profiles, informers, keys, writes)
    _wire_summaries(summaries, informers, keys, writes)
    _wire_sets(sets, informers, keys, profiles)


def _wire_members(
    informer: Informer, changes: fanout.MemberChanges, keys: Keys, woken: list[tuple[str, Controller[str]]]
) -> None:
    """Any rollout may select or deliver to any member, and any cluster set choose it, so a member
    change wakes them all (`woken`: each controller with its kind): but only a change to what they
    read of it (labels, readiness, paused), not the status the membercluster controller (or Cluster
    API) keeps writing."""

    def on_member(event: EventType, obj: Any) -> None:
        if not changes.observe(event, obj):
            return
        for kind, controller in woken:
            for key in keys.all_of(kind):
                controller.enqueue(key)

    informer.on_change(on_member)


def _chosen(obj: Any) -> Hashable:
    """What a profile reads of a ClusterSet: the clusters it has chosen."""
    return str((as_dict(obj).get("status") or {}).get("selectedClusterRefs"))


def _wire_sets(
    sets: Mapping[str, Controller[str]],
    informers: Mapping[str, Informer],
    keys: Keys,
    profiles: Controller[str],
) -> None:
    """A set follows its own changes (its spec; its status, should anyone else write it); the
    profiles naming a ClusterSet follow what it has chosen (ADR 0108)."""
    for kind, controller in sets.items():
        controller.watch(informers[kind], _itself)
    if "ClusterSet" in informers:
        profiles.watch(informers["ClusterSet"], keys.profiles_of_set, signature=_chosen)


def _itself(obj: Any) -> list[str]:
    """A rollout's own key on its every change, its own status writes included: what its next pass
    observes depends on the status it just wrote (a stage's post-delay checks fall due)."""
    return [object_key(obj)]


def _summary_itself(controller: Controller[str], writes: Writes) -> Callable[[Any], list[str]]:
    """A summary's own key on its every change but the echo of its own status write (`Echoes`),
    unless a pass was put off until the cache shows that write (`OwnWrites.caught_up`)."""
    kind = "ClusterSummary"

    def keys(obj: Any) -> list[str]:
        key, version = object_key(obj), obj.metadata.resourceVersion
        if writes.own.caught_up((kind, key), version):
            return [key]
        if writes.echoes.arrived((kind, key), kind, version, lambda: controller.enqueue(key)):
            return []
        return [key]

    return keys


def _unless_echo(
    controller: Controller[str],
    writes: Writes,
    kind: str,
    writer: str,
    mapper: Callable[[Any], Iterable[str]],
    delay: float = 0.0,
) -> Callable[[Any], Iterable[str]]:
    """`mapper`, but nothing for the echo of a write the `writer` controller made of the object (a
    profile's own summary apply, a promotion's own stage profile apply). `delay`: the watch's."""

    def keys(obj: Any) -> Iterable[str]:
        wanted = list(mapper(obj))

        def wake() -> None:
            for key in wanted:
                controller.enqueue(key, delay)

        key, version = (kind, object_key(obj)), obj.metadata.resourceVersion
        if wanted and writes.echoes.arrived(key, writer, version, wake):
            return []
        return wanted

    return keys


STAGE_PROFILE_FOLLOWS = 0.5


def _wire_promotions(
    promotions: Controller[str], informers: Mapping[str, Informer], keys: Keys, writes: Writes
) -> None:
    promotions.watch(informers["ClusterPromotion"], _itself)
    # A promotion reads its stage profiles' spec and metadata, and its facts from their summaries:
    # a profile's status writes (it sums the same summaries up) would wake it for nothing, unless
    # the profile turns invalid or valid again (a pinned content snapshot gone makes it invalid:
    # the promotion cuts the snapshot again).
    promotions.watch(
        informers["ClusterProfile"],
        _unless_echo(promotions, writes, "ClusterProfile", "ClusterPromotion", keys.promotion_of_profile),
        signature=_profile_reads,
    )
    news = delivery_news.DeliveryNews(promotions, keys.promotion_of_summary, keys.cache)
    informers["ClusterSummary"].on_change(news.on_change)
    # A content snapshot is nobody's source: it wakes no promotion (a Secret one used to wake all),
    # only the stage profiles pinned to it, whose invalid status wakes the promotion should it go.
    promotions.watch(informers["ConfigMap"], keys.promotions_of_source("ConfigMap"))
    promotions.watch(informers["Secret"], keys.promotions_of_source("Secret"))
    for kind in FLUX_KINDS:  # with --flux-sources: a new artifact is a new revision (ADR 0103)
        if kind in informers:
            promotions.watch(informers[kind], keys.promotions_of_source(kind), signature=_artifact_reads)


def _profile_reads(obj: Any) -> Hashable:
    """What a promotion follows of a stage profile: all but its status, and whether it is invalid."""
    conditions = (as_dict(obj).get("status") or {}).get("conditions") or []
    invalid = any(c.get("reason") == common.INVALID_REASON for c in conditions)
    return besides_status(obj), invalid


def _artifact_reads(obj: Any) -> Hashable:
    """What a rollout reads of a Flux source: its artifact, whether it is a template, and why it has
    no artifact (its Ready condition) — not the timestamps source-controller rewrites at each poll."""
    raw = as_dict(obj)
    status = raw.get("status") or {}
    ready = [
        (c.get("status"), c.get("message"))
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") == "Ready"
    ]
    artifact = status.get("artifact") or {}
    template = content.TEMPLATE_ANNOTATION in ((raw.get("metadata") or {}).get("annotations") or {})
    return (
        str(artifact.get("digest")),
        str(artifact.get("revision")),
        str(artifact.get("url")),
        template,
        str(ready),
    )


STAGE_PROFILE_AHEAD = 0.2


def _wire_profiles(
    profiles: Controller[str], informers: Mapping[str, Informer], keys: Keys, writes: Writes
) -> None:
    # A promotion writes the summaries of the stage profile it has just changed itself
    # (`summary_writes.write_ahead`): the profile's own pass, which finds them written, follows
    # STAGE_PROFILE_AHEAD seconds later instead of taking the loop from the stage's first deliveries.
    # When the promotion did not write them, the event of its write wakes the pass at once.
    def on_profile(event: EventType, obj: Any) -> None:
        key = object_key(obj)
        if not list(keys.promotion_of_profile(obj)):
            profiles.enqueue(key)
            return
        if writes.wakeups.arrived(key, obj.metadata.resourceVersion):
            profiles.enqueue(key)
        else:
            profiles.enqueue(key, STAGE_PROFILE_AHEAD)

    informers["ClusterProfile"].on_change(on_profile)
    profiles.watch(
        informers["ClusterSummary"],
        _unless_echo(profiles, writes, "ClusterSummary", "ClusterProfile", keys.pacing_profiles_of_summary),
    )
    # A promotion's stage profile only sums its summaries up (the promotion reads them itself and
    # paces the stage): it follows their changes at most every STAGE_PROFILE_FOLLOWS seconds, off
    # the stage's critical path.
    stage = keys.stage_profile_of_summary
    profiles.watch(
        informers["ClusterSummary"],
        _unless_echo(profiles, writes, "ClusterSummary", "ClusterProfile", stage, STAGE_PROFILE_FOLLOWS),
        delay=STAGE_PROFILE_FOLLOWS,
    )
    profiles.watch(informers["ConfigMap"], keys.profiles_of_source("ConfigMap"))
    profiles.watch(informers["Secret"], keys.profiles_of_source("Secret"))
    for kind in FLUX_KINDS:
        if kind in informers:
            profiles.watch(informers[kind], keys.profiles_of_source(kind), signature=_artifact_reads)


def _wire_summaries(
    summaries: Controller[str], informers: Mapping[str, Informer], keys: Keys, writes: Writes
) -> None:
    summaries.watch(informers["ClusterSummary"], _summary_itself(summaries, writes))
    summaries.watch(
        informers["ClusterProfile"],
        lambda p: [s.key for s in writes.wakeups.profile_event(object_key(p), p.metadata.resourceVersion)],
    )
    summaries.watch(informers["MemberCluster"], keys.summaries_of_member)
    if keys.cache.family.capi and members.CAPI_CACHE_KIND in informers:
        # Cluster API rewrites a Cluster's status often: only its standing (ready, deleting) and what
        # else a summary reads (metadata, and the spec through `generation`) wake its summaries.
        summaries.watch(
            informers[members.CAPI_CACHE_KIND], keys.summaries_of_capi_cluster, signature=_capi_reads
        )
    summaries.watch(informers["Secret"], keys.summaries_of_member_secret)
    # A summary reads its snapshot, kept as a Secret when any content came from one.
    summaries.watch(informers["ConfigMap"], keys.summaries_of_content)
    summaries.watch(informers["Secret"], keys.summaries_of_content)


def _capi_reads(obj: Any) -> Hashable:
    return besides_status(obj), capi.standing(as_dict(obj))


def member_of_lease(lease: Any, *, namespaced: bool = True) -> Iterable[str]:
    """A pull member's agent lease: the member it keeps alive (its label names it)."""
    value = (lease.metadata.labels or {}).get(pullmode.MEMBER_LABEL)
    if not value:
        return []
    key = pullmode.member_of_label(value)
    return [key if namespaced else key.partition("/")[2]]


def member_of_secret(secret: Any, *, namespaced: bool = True) -> Iterable[str]:
    member = (secret.metadata.labels or {}).get(members.SECRET_LABEL)
    if not member:
        return []
    return [f"{secret.metadata.namespace}/{member}" if namespaced else member]
