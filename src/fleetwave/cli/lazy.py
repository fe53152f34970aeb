"""Commands loaded when they run, not when the CLI starts.

`fleetwave --help` and `fleetwave version` must start about as fast as Python does, but the command
modules import the API models, the Kubernetes client and the controllers. Each command is therefore
named here with its one-line help and the module that implements it; the module is imported only when
the command is resolved (run, or asked for its own `--help`). The top-level help lists the one-line
texts without importing anything (a unit test keeps them equal to the commands' own)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# typer's click types (Context, Command, HelpFormatter) are not public API (typer vendors click since
# 0.27), so the overrides below take and return them as Any.


@dataclass(frozen=True, slots=True)
class Entry:
    """One command: its name, where it lives (`module:attribute`), and its one-line help."""

    name: str
    target: str
    help: str

    def load(self) -> Any:
        module_name, _, attribute = self.target.partition(":")
        found: Any = getattr(importlib.import_module(module_name), attribute)
        holder = typer.Typer(rich_markup_mode=None)
        if isinstance(found, typer.Typer):  # a sub-app, built as `add_typer` builds it
            holder.add_typer(found, name=self.name)
            return typer.main.get_group(holder).commands[self.name]
        holder.command(name=self.name)(found)
        return typer.main.get_command(holder)


class LazyGroup(TyperGroup):
    """A typer group whose commands are `Entry`s, imported on first use."""

    entries: tuple[Entry, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [entry.name for entry in self.entries]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = next((e for e in self.entries if e.name == cmd_name), None)
        if entry is None:
            return None
        if self._listing:  # the top-level help needs only the name and the line
            return TyperCommand(entry.name, help=entry.help, short_help=entry.help)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = entry.load()
        return self._loaded[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def group(entries: tuple[Entry, ...]) -> type[LazyGroup]:
    """A LazyGroup class serving `entries` (typer builds the group from a class, not an instance)."""
    return type("FleetwaveCommands", (LazyGroup,), {"entries": entries})
