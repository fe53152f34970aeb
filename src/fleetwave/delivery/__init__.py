"""Delivering content (raw manifests, Helm releases) to one member cluster at a time.

`content` and `helmplan` are pure; `target`, `manifests` and `helm` are the imperative shell the
controller calls per member, reaching it through `fleetwave.kube` (client, kinds, typed ops).
ADR 0045 records the decisions (SSA, inventory label, helm recovery).
"""
