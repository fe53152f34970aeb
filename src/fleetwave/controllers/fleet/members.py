"""The fleet as the controllers see it: MemberCluster objects (and, in the Sveltos family, Cluster API
clusters) -> engine clusters and delivery targets.

A member is identified as `namespace/name` everywhere (engine plans, ClusterSummary specs, status
messages), so two clusters with one name in different namespaces never collide; a Cluster API
cluster as `capi:namespace/name` (ADR 0109), so it never collides with a registered member of the
same namespace and name.

A MemberCluster uses only a kubeconfig Secret in its own namespace: one naming another namespace is
never read (`secret_problem` says why), so a namespace tenant cannot deliver with another team's
credentials. `http://` or skip-TLS-verify kubeconfigs are accepted only when the MemberCluster
carries the visible opt-in annotation that `fleetwave cluster register --allow-insecure` writes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fleetwave.api import pullmode
from fleetwave.api.kubefleet import property_number
from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet import capi
from fleetwave.controllers.shared.context import Cache
from fleetwave.core import model as m
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kubeconfig_policy
from fleetwave.mgmt.registration import ALLOW_INSECURE_ANNOTATION, MEMBER_SECRET_LABEL
from fleetwave.translate import KEY_LABEL, KIND_LABEL, NAME_LABEL, NAMESPACE_LABEL
from fleetwave.translate.common import CAPI_KIND, cluster_key, split_key

PULL_ANNOTATION = pullmode.PULL_ANNOTATION
SECRET_LABEL = MEMBER_SECRET_LABEL  # on a kubeconfig Secret: the member it serves


@dataclass(frozen=True, slots=True)
class Member:
    key: str  # namespace/name
    namespace: str
    name: str
    labels: Mapping[str, str]
    ready: bool
    paused: bool
    secret: tuple[str, str, str | None]  # namespace, name, key of the kubeconfig Secret (as referenced)
    allow_insecure: bool = False  # opted in to http:// or skip-TLS-verify servers (annotation)
    secret_problem: str = ""  # non-empty: the reference is refused and the Secret is never read
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect): KubeFleet placements' tolerations
    # name -> value (a string, compared as a number): what KubeFleet property selectors and sorters read
    properties: Mapping[str, str] = field(default_factory=dict)
    # Joined by its agent (ADR 0106): the hub holds no kubeconfig of it and never connects to it.
    pull: bool = False
    failure_message: str = ""  # status.failureMessage: why it is not ready
    capi: bool = False  # a Cluster API cluster (ADR 0109), keyed `capi:namespace/name`
    deleting: bool = False  # a Cluster API cluster being deleted: out of the fleet, withdrawn from


class Lookup(Protocol):
    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


# The cache's name for the informer of Cluster API clusters (not a kind any family serves).
CAPI_CACHE_KIND = "CapiCluster"


def member_key(namespace: str, name: str, *, capi: bool = False) -> str:
    return cluster_key(namespace, name, capi=capi)


def from_object(obj: Obj) -> Member:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
    ref = spec.get("kubeconfigSecretRef") or {}
    secret = (str(ref.get("namespace") or ns), str(ref.get("name") or f"{name}-kubeconfig"), ref.get("key"))
    problem = ""
    if secret[0] != ns:
        problem = (
            "spec.kubeconfigSecretRef.namespace: a MemberCluster may only use a kubeconfig Secret "
            f"in its own namespace ({ns})"
        )
    return Member(
        key=member_key(ns, name),
        namespace=ns,
        name=name,
        labels=dict(meta.get("labels") or {}),
        ready=bool(status.get("ready", False)),
        paused=bool(spec.get("paused", False)),
        secret=secret,
        allow_insecure=(meta.get("annotations") or {}).get(ALLOW_INSECURE_ANNOTATION) == "true",
        secret_problem=problem,
        taints=_taints(spec.get("taints")),
        properties=_properties(meta.get("labels"), status),
        pull=_pull(spec, meta),
        failure_message=str(status.get("failureMessage") or "")[:256],
    )


def from_capi(obj: Obj) -> Member:
    """A Cluster API Cluster as a member: its labels, `spec.paused`, readiness from its status as
    Sveltos reads it, and its kubeconfig in `<name>-kubeconfig` (key `value`) of its own namespace,
    under the same kubeconfig policy (and insecure opt-in annotation) as every member."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
    standing = capi.standing(obj)
    return Member(
        key=member_key(ns, name, capi=True),
        namespace=ns,
        name=name,
        labels=dict(meta.get("labels") or {}),
        ready=standing.ready,
        paused=isinstance(spec, Mapping) and spec.get("paused") is True,
        secret=(ns, capi.kubeconfig_secret(name), capi.KUBECONFIG_KEY),
        allow_insecure=(meta.get("annotations") or {}).get(ALLOW_INSECURE_ANNOTATION) == "true",
        failure_message=standing.why,
        capi=True,
        deleting=standing.deleting,
    )


def _pull(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> bool:
    """Sveltos' `spec.pullMode`, or the annotation a KubeFleet-group member carries (its schema has
    no such field): the same test as `pull.is_pull`, kept here so members import nothing above."""
    annotations = meta.get("annotations") or {}
    return spec.get("pullMode") is True or annotations.get(PULL_ANNOTATION) == "true"


# Member fields fleetwave does not act on yet: a member that sets one is not used (Ready=False, reason
# UnsupportedField) rather than used as if it were in force. KubeFleet's `identity` and
# `heartbeatPeriodSeconds` configure KubeFleet's member agent; fleetwave's agent needs neither (ADR 0062).
# `pullMode` is honoured (ADR 0106).
_UNHONOURED = (
    "workloadIdentity",
    "tokenRequestRenewalOption",
    "readinessChecks",
    "livenessChecks",
    "consecutiveFailureThreshold",
)


def unhonoured(obj: Obj) -> str:
    """The first member field fleetwave would otherwise ignore ("" when there is none)."""
    spec = obj.get("spec") or {}
    for key in _UNHONOURED:
        value = spec.get(key) if isinstance(spec, Mapping) else None
        if value not in (None, False, [], {}):
            return f"spec.{key}: not supported by fleetwave yet"
    return ""


# KubeFleet's names: its member agent writes the node count into `status.properties`; the version
# (`/version`'s gitVersion, e.g. v1.30.2) is upstream's too, and fleetwave's probe keeps it in
# `status.version`.
NODE_COUNT = "kubernetes-fleet.io/node-count"
K8S_VERSION = "k8s.io/k8s-version"


def _properties(labels: Any, status: Mapping[str, Any]) -> dict[str, str]:
    """A member's properties, later sources winning: labels whose value is a number (under their key),
    `status.version` as K8S_VERSION, then `status.properties` (upstream's `{name: {value: "3",
    observationTime}}`, written by whoever observes the member)."""
    found = {
        str(k): v
        for k, v in (labels.items() if isinstance(labels, Mapping) else ())
        if isinstance(v, str) and property_number(v) is not None
    }
    if isinstance(status.get("version"), str) and status["version"]:
        found[K8S_VERSION] = status["version"]
    observed = status.get("properties")
    for name, prop in observed.items() if isinstance(observed, Mapping) else ():
        value = prop.get("value") if isinstance(prop, Mapping) else None
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            found[str(name)] = str(value)
    return found


def _taints(raw: Any) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in raw
        if isinstance(t, Mapping)
    )


def kubeconfig_secrets(
    member_clusters: Iterable[Obj], capi_clusters: Iterable[Obj] = ()
) -> frozenset[tuple[str, str]]:
    """(namespace, name) of every Secret a MemberCluster names as its kubeconfig, as written
    (whether or not it may use it), and of every Cluster API cluster's kubeconfig: credentials,
    never content."""
    named = {from_object(mc).secret[:2] for mc in member_clusters}
    for cluster in capi_clusters:
        meta = cluster.get("metadata") or {}
        if meta.get("name"):
            named.add((str(meta.get("namespace") or "default"), capi.kubeconfig_secret(str(meta["name"]))))
    return frozenset(named)


def is_kubeconfig_secret(secret: Obj, referenced: frozenset[tuple[str, str]]) -> bool:
    """Labelled by `cluster register`, named by a member (`kubeconfig_secrets`), or one of the
    Secrets Cluster API writes for its clusters (their type)."""
    meta = secret.get("metadata") or {}
    if SECRET_LABEL in (meta.get("labels") or {}) or secret.get("type") == capi.SECRET_TYPE:
        return True
    return (str(meta.get("namespace") or ""), str(meta.get("name") or "")) in referenced


def fleet(members: Iterable[Member], registered_kind: str = "MemberCluster") -> m.Fleet:
    """Paused members stay in the fleet (their place in the plan is kept) but count as not ready; a
    Cluster API cluster being deleted leaves it. `registered_kind`: what the family calls its
    registered members (KIND_LABEL)."""
    return m.Fleet.of(
        m.Cluster(
            mb.key,
            {
                **mb.labels,
                NAME_LABEL: mb.name,
                KEY_LABEL: mb.key,
                NAMESPACE_LABEL: mb.namespace,
                KIND_LABEL: CAPI_KIND if mb.capi else registered_kind,
            },
            ready=mb.ready and not mb.paused,
            why="paused" if mb.paused else ("" if mb.ready else mb.failure_message),
        )
        for mb in members
        if not mb.deleting
    )


def kubeconfig_from_secret(secret: Obj, key: str | None) -> bytes | None:
    """Sveltos convention: the named key, else `kubeconfig`, else the Secret's only key. None when
    there is no such key or its value is not base64 (the API server always sends valid base64)."""
    data = secret.get("data") or {}
    if not isinstance(data, Mapping):
        return None
    chosen = key if key else ("kubeconfig" if "kubeconfig" in data else next(iter(sorted(data)), None))
    if chosen is None or chosen not in data or not isinstance(data[chosen], str):
        return None
    try:
        return base64.b64decode(data[chosen], validate=True)
    except (binascii.Error, ValueError):
        return None


def secret_of(cache: Lookup, member: Member) -> Obj | None:
    """The member's kubeconfig Secret; never read when the reference is refused (another namespace)."""
    if member.secret_problem:
        return None
    return cache.get("Secret", member.secret[0], member.secret[1])


SECRET_REFUSED = "KubeconfigSecretRefused"
KUBECONFIG_MISSING = "KubeconfigMissing"
KUBECONFIG_REFUSED = "KubeconfigRefused"
_QUOTED = re.compile(r"['\"]|invalid YAML")
_WHERE = re.compile(r"line \d+, column \d+")


@dataclass(frozen=True, slots=True)
class Credentials:
    """A member's kubeconfig once it passed the policy, or why it cannot be used (`reason`)."""

    kubeconfig: bytes | None
    reason: str = ""  # one of the constants above; "" when usable
    message: str = ""  # names fields, never values


def credentials(cache: Lookup, member: Member) -> Credentials:
    """Check the member's kubeconfig without running or reading anything it names (pure)."""
    where = f"kubeconfig Secret {member.secret[0]}/{member.secret[1]}"
    if member.secret_problem:
        return Credentials(None, SECRET_REFUSED, member.secret_problem)
    secret = secret_of(cache, member)
    if secret is None:
        return Credentials(None, KUBECONFIG_MISSING, f"{where} is missing")
    raw = kubeconfig_from_secret(secret, member.secret[2])
    if raw is None:
        return Credentials(
            None, KUBECONFIG_MISSING, f"{where} has no readable key {member.secret[2] or 'kubeconfig'}"
        )
    refused = _refusal(raw, member.allow_insecure)
    if refused:
        return Credentials(None, KUBECONFIG_REFUSED, f"{where}: {_unquoted(refused)}")
    return Credentials(raw)


@functools.lru_cache(maxsize=4096)
def _refusal(raw: bytes, allow_insecure: bool) -> str:
    """Why the policy refuses this kubeconfig ("" when it accepts it): judged once per content, as
    every delivery to a member asks again (a kubeconfig is a few KiB: the cache stays small)."""
    try:
        kubeconfig_policy.load(raw, allow_insecure=allow_insecure)
    except kubeconfig_policy.KubeconfigRefused as e:
        return str(e)
    return ""


def _unquoted(message: str) -> str:
    """A refusal as the policy words it (fields, no values); a YAML problem by line and column only,
    since a parser's message may quote the input (an alias name, a tag)."""
    if message.startswith("kubeconfig refused:") or not _QUOTED.search(message):
        return message
    where = _WHERE.search(message)
    return f"kubeconfig: not valid YAML at {where.group(0)}" if where else "kubeconfig: not valid YAML"


def target(member: Member, secret: Obj | None) -> MemberTarget | None:
    """The delivery target; its `config()` applies the kubeconfig policy before anything is used."""
    if secret is None or member.secret_problem:
        return None
    raw = kubeconfig_from_secret(secret, member.secret[2])
    if raw is None:
        return None
    return MemberTarget(name=member.key, kubeconfig=raw, allow_insecure=member.allow_insecure)


def with_capi(cache: Cache) -> bool:
    """Whether Cluster API clusters are members where `cache` reads: its family has them (Sveltos',
    ADR 0109) and the controller watches them."""
    return cache.family.capi and cache.has(CAPI_CACHE_KIND)


def registered(cache: Cache) -> tuple[Member, ...]:
    """Every MemberCluster of the cache's family as a Member, built once per state of them: a
    placement's pass reads all of them, and at 100 members building them at every pass was a tenth
    of its CPU (`Member` is frozen, so one tuple serves every reader)."""
    return cache.memo("registered members", "MemberCluster", lambda: _registered(cache))


def _registered(cache: Cache) -> tuple[Member, ...]:
    return tuple(from_object(o) for o in cache.list("MemberCluster"))


def of_family(cache: Cache) -> list[Member]:
    """The members of the cache's family: its registered ones, and its Cluster API clusters."""
    found = list(registered(cache))
    if with_capi(cache):
        found += [from_capi(o) for o in cache.list(CAPI_CACHE_KIND)]
    return found


def credential_secrets(cache: Cache) -> frozenset[tuple[str, str]]:
    """Every Secret any family's member names as its kubeconfig, and every Cluster API cluster's
    (whichever family has them): `kubeconfig_secrets` over all of them, once per state of theirs."""
    capi_too = cache.has(CAPI_CACHE_KIND)
    return cache.memo(
        "kubeconfig secrets",
        ("MemberCluster", CAPI_CACHE_KIND) if capi_too else ("MemberCluster",),
        lambda: kubeconfig_secrets(
            cache.members_everywhere(), cache.list(CAPI_CACHE_KIND) if capi_too else ()
        ),
        everywhere=True,
    )


def member_object(cache: Lookup, cluster: str, *, with_capi: bool) -> Obj | None:
    """The object a member key names: its MemberCluster (in native form), or its Cluster API
    Cluster where the family has them (`with_capi`); None when there is none."""
    is_capi, namespace, name = split_key(cluster)
    if is_capi:
        return cache.get(CAPI_CACHE_KIND, namespace, name) if with_capi else None
    return cache.get("MemberCluster", namespace, name)


def lookup(cache: Lookup, cluster: str, *, with_capi: bool) -> Member | None:
    """The member a key names (`member_object`), None when there is none."""
    found = member_object(cache, cluster, with_capi=with_capi)
    if found is None:
        return None
    return from_capi(found) if split_key(cluster)[0] else from_object(found)


def target_for(cache: Lookup, cluster: str, *, with_capi: bool = False) -> MemberTarget | None:
    """The delivery target of a member (`namespace/name`, or `capi:namespace/name` where the family
    has Cluster API clusters); None if it or its Secret is gone, its Secret reference is refused, or
    its kubeconfig fails the policy."""
    member = lookup(cache, cluster, with_capi=with_capi)
    if member is None:
        return None
    found = credentials(cache, member)
    if found.kubeconfig is None:
        return None
    return MemberTarget(name=member.key, kubeconfig=found.kubeconfig, allow_insecure=member.allow_insecure)
