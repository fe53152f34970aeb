"""State the top-level command sets for the one it runs (no imports: the CLI starts with it)."""

from __future__ import annotations

from pathlib import Path


class Globals:
    """kubectl's global connection flags, given before the command (`fleetwave --context C status ...`,
    and what `kubectl fleetwave` passes on): a command's own --kubeconfig still wins."""

    kubeconfig: Path | None = None
    context: str | None = None
