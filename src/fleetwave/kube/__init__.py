"""fleetwave's one way to reach a Kubernetes API server (ADR 0013).

- `client`: clients and kubeconfigs (field manager, timeouts, no proxy from the environment);
- `kinds`: GVK -> plural/scope for our kinds, built-in kinds, CRDs in content and discovery, with one
  cache policy, sync and async;
- `ops`: typed helpers (apply, get, create-if-absent, delete-if-exists, JSON/merge patch, watch) and
  the errors callers may see; `sync_ops`: their sync twins for the CLI and `mgmt`;
- `placeable`: the built-in kinds a KubeFleet placement may select (selection, informers and RBAC
  all derive from it);
- `selectors`: label selectors in the form list and watch calls take;
- `kubeconfig_policy`: what a member kubeconfig may contain (a pure check);
- `status`: the status writer (one merge patch guarded by resourceVersion, only when changed);
- `internals`: the only code that reaches into lightkube's private parts, pinned by a test.

Timestamps (RFC 3339 in and out) come from `fleetwave.core.timestamps`, which the pure core shares.
"""
