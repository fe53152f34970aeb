"""How fleetwave names an API object it holds as decoded JSON, in one place.

Most code reads objects from the informer cache or from a status and never changes them: `Obj`, a
read-only mapping, so a mutation is a type error rather than a silent edit of what the cache holds.
Health checks read objects from a member and hand them to Lua and CEL scripts, which want plain
dicts (and the reader fills in a LIST item's apiVersion/kind): `ObjDict` says that difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]
ObjDict = dict[str, Any]

__all__ = ["Obj", "ObjDict"]
