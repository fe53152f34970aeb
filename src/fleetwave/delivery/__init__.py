"""Delivering content (raw manifests, Helm releases) to one member cluster at a time.

`content` is pure; `target`, `kinds`, `manifests` and `helm` are the imperative shell the controller
calls per member. ADR 0045 records the decisions (SSA, inventory label, helm recovery).
"""
