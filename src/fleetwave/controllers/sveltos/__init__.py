"""Sveltos-style rollouts: ClusterPromotion (stage by stage behind triggers), ClusterProfile (a
rolling update over its matching clusters) and ClusterSummary (one profile's pinned content on one
member), with the content they resolve, pin, render and collect.

Its floor: beside controllers.kubefleet and independent of it, above gates, fleet and shared
(pyproject's controllers-floor contract)."""
