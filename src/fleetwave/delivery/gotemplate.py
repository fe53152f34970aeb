"""Render Go templates with Go's own engine: the pinned `fleetwave-render` helper (ADR 0089).

Sveltos users write templates for Go's text/template with Sprig; an imitation in Python would render
some of them differently, so fleetwave hands them to a small Go program built with the other pinned
binaries (tools/binaries/render). One call renders many templates against one context; each template
gets its own result, so one cluster's broken template is that template's error and nothing else's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwave.delivery import bounded

MAX_TEMPLATE_OUTPUT = 1024 * 1024  # per template: a ConfigMap cannot hold more anyway


class RenderError(RuntimeError):
    """The renderer itself could not run (missing binary, budget spent); not a template's fault."""


@dataclass(frozen=True, slots=True)
class Rendered:
    output: str | None  # None when the template failed
    error: str = ""


@dataclass(frozen=True, slots=True)
class Renderer:
    binary: str = "fleetwave-render"
    limits: bounded.Limits = field(default_factory=bounded.Limits)

    async def render(
        self,
        templates: Sequence[tuple[str, str]],
        *,
        data: Mapping[str, Any],
        resources: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[Rendered]:
        """Each (name, text) rendered with `data` as the dot and `resources` as .MgmtResources."""
        if not templates:
            return []
        request = {
            "data": dict(data),
            "mgmtResources": {k: dict(v) for k, v in (resources or {}).items()},
            "templates": [{"name": n, "text": t} for n, t in templates],
            "maxOutputBytes": MAX_TEMPLATE_OUTPUT,
        }
        try:
            done = await bounded.run([self.binary], stdin=json.dumps(request).encode(), limits=self.limits)
        except bounded.ToolError as e:
            raise RenderError(f"rendering templates failed: {e}") from None
        if done.code != 0:
            raise RenderError(f"rendering templates failed: {_why(done.stderr, self.limits)}")
        try:
            results = json.loads(done.stdout)["results"]
        except (ValueError, KeyError, TypeError):
            raise RenderError("rendering templates failed: the renderer's answer is damaged") from None
        if len(results) != len(templates):
            raise RenderError("rendering templates failed: the renderer answered for the wrong templates")
        return [
            Rendered(r["output"]) if isinstance(r.get("output"), str) else Rendered(None, str(r.get("error")))
            for r in results
        ]


def is_template(text: str) -> bool:
    """Text without an action renders to itself, so only text with `{{` needs the renderer."""
    return "{{" in text


def _why(stderr: str, limits: bounded.Limits) -> str:
    if "out of memory" in stderr or "failed to reserve" in stderr:
        return f"the templates ran out of the renderer's memory budget ({limits.memory_bytes // 2**20} MiB)"
    first = stderr.strip().splitlines()[0] if stderr.strip() else "no message"
    return first[:300]
