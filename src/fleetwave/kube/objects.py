"""Built-in Kubernetes resource classes the controllers watch, re-exported from the access package.

Informers need a resource class per kind; fleetwave's own kinds come from `kinds.resource`, and the
built-in ones from here, so no controller imports lightkube for them.
"""

from __future__ import annotations

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Secret

__all__ = ["ConfigMap", "Lease", "ObjectMeta", "Secret"]
