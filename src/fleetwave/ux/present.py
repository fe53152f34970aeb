"""Showing a changing promotion view on a console: live redraws on a terminal, lines otherwise.

On a terminal a rich Live region is redrawn in place; without one (CI, pipes) rich cannot redraw,
so a one-line summary is printed each time it changes and the full view once at the end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live

from fleetwave.ux import render


class Presenter:
    """Context manager: `show(view)` on every change; the last view is drawn in full on exit."""

    def __init__(self, console: Console, *, as_json: bool = False) -> None:
        self.console = console
        self.as_json = as_json
        self.last: Mapping[str, Any] | None = None
        self._line = ""
        self._live: Live | None = None

    def __enter__(self) -> Presenter:
        if self.console.is_terminal and not self.as_json:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def show(self, view: Mapping[str, Any]) -> None:
        self.last = view
        if self._live is not None:
            self._live.update(render.render(view))
            return
        line = json.dumps(view, sort_keys=True) if self.as_json else render.summary_line(view)
        key = render.summary_line(view) if self.as_json else line
        if key != self._line:  # JSON holds countdowns: print it only when the summary changes
            self._line = key
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def note(self, message: str) -> None:
        """A line above the live region (or in the log), e.g. 'approving stage staging'."""
        if self._live is not None:
            self._live.console.print(message)
        else:
            self.console.print(message, highlight=False)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)
        elif self.last is not None and not self.as_json:
            self.console.print(render.render(self.last))
