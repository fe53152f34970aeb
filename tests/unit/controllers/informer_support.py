"""A stand-in for an Informer, with the parts the controllers' cache reads: a store, a revision,
change handlers. Objects go in as raw dicts and are stored as `resource` objects, as watched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FakeInformer:
    def __init__(self, resource: Any) -> None:
        self.resource = resource
        self.store: dict[str, Any] = {}
        self.revision = 0
        self.handlers: list[Callable[[str, Any], None]] = []

    def get(self, key: str) -> Any:
        return self.store.get(key)

    def on_change(self, handler: Callable[[str, Any], None]) -> None:
        self.handlers.append(handler)

    def put(self, raw: dict[str, Any], event: str = "ADDED") -> None:
        obj = self.resource.from_dict(raw)
        self.store[raw["metadata"]["name"]] = obj
        self._changed(event, obj)

    def delete(self, name: str) -> None:
        self._changed("DELETED", self.store.pop(name))

    def _changed(self, event: str, obj: Any) -> None:
        self.revision += 1
        for handler in self.handlers:
            handler(event, obj)
