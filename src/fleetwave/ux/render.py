"""Rich rendering of a promotion view (pure: data in, renderables or text out).

`render` draws the full view (stages, clusters, gates with countdowns, approvals, conditions);
`summary_line` is the one-line form printed on every change when the output is not a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fleetwave.ux import view as view_mod

PHASE_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Progressing": "yellow",
    "Waiting": "cyan",
    "WaitingBefore": "cyan",
    "WaitingAfter": "cyan",
}
CLUSTER_MARK = {
    "done": ("●", "green"),
    "delivering": ("◐", "yellow"),
    "pending": ("○", "dim"),
    "failed": ("✗", "red"),
}


def _phase(phase: str) -> Text:
    return Text(phase, style=PHASE_STYLE.get(phase, ""))


def short_names(view: Mapping[str, Any]) -> bool:
    """Drop the namespace from cluster names when every cluster shares one (they are long)."""
    spaces = {c["name"].partition("/")[0] for s in view["stages"] for c in s["clusters"]}
    return len(spaces) <= 1


def _clusters(stage: Mapping[str, Any], short: bool) -> Text:
    text = Text()
    for i, c in enumerate(stage["clusters"]):
        mark, style = CLUSTER_MARK.get(c["state"], ("?", ""))
        name = c["name"].partition("/")[2] if short else c["name"]
        text.append(("\n" if i else "") + f"{mark} {name} ", style=style)
        text.append(c["state"], style=style)
        if c["state"] == "failed" and c["message"]:
            text.append(f": {c['message']}", style="red")
    return text or Text("(no clusters yet)", style="dim")


def gate_text(gate: Mapping[str, Any], *, countdown: bool = True) -> str:
    line = f"{gate['kind']}: {gate['state'].lower()}"
    if gate["state"] == "Waiting":
        line += f" - {gate['message']}" if gate["message"] else ""
        if countdown and gate.get("secondsLeft") is not None:
            line += f" ({gate['secondsLeft']:.0f}s left)"
    return line


def approval_text(promotion: str, stage: Mapping[str, Any]) -> str | None:
    approval = stage.get("approval")
    if approval is None:
        return None
    if approval["approved"]:
        return f"approval: approved{' at ' + approval['approvedAt'] if approval.get('approvedAt') else ''}"
    if stage["phase"] == "Succeeded":
        return "approval: consumed" if approval.get("automaticReset", True) else "approval: not required now"
    return f"approval: not yet - fleetwave approve promotion {promotion} --stage {stage['name']}"


def _gates(promotion: str, stage: Mapping[str, Any]) -> Text:
    text = Text()
    lines = [gate_text(g) for g in stage["gates"]]
    approval = approval_text(promotion, stage)
    lines += [approval] if approval else []
    for i, line in enumerate(lines):
        style = "cyan" if "waiting" in line or "not yet" in line else ""
        text.append(("\n" if i else "") + line, style=style)
    waiting = {g["message"] for g in stage["gates"] if g["state"] == "Waiting"}
    if stage["description"] and stage["description"] not in waiting:  # no gate message twice
        text.append(("\n" if lines else "") + stage["description"], style="dim")
    return text


def _clock(stamp: str) -> str:
    """The time of day of an RFC 3339 stamp (the date is in the header and in -o json)."""
    return stamp.partition("T")[2][:8] + "Z" if "T" in stamp else stamp


def _times(stage: Mapping[str, Any]) -> str:
    parts = [f"started {_clock(stage['startedAt'])}" if stage.get("startedAt") else ""]
    parts.append(f"done {_clock(stage['succeededAt'])}" if stage.get("succeededAt") else "")
    return "\n".join(p for p in parts if p) or "-"


def stages_table(view: Mapping[str, Any]) -> Table:
    table = Table(expand=False, show_lines=True)
    for column in ("stage", "phase", "clusters", "gates / waiting for", "times"):
        table.add_column(column)
    short = short_names(view)
    for stage in view["stages"]:
        marker = "▶ " if stage["name"] == view.get("currentStage") and view["phase"] != "Succeeded" else ""
        table.add_row(
            marker + stage["name"],
            _phase(stage["phase"]),
            _clusters(stage, short),
            _gates(view["name"], stage),
            _times(stage),
        )
    return table


def conditions_table(view: Mapping[str, Any]) -> Table:
    table = Table(
        "condition", "status", "reason", "message", "since", title="conditions", title_justify="left"
    )
    for c in view["conditions"]:
        style = "green" if c.get("status") == "True" else ""
        table.add_row(
            str(c.get("type")),
            Text(str(c.get("status")), style=style),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
            str(c.get("lastTransitionTime") or ""),
        )
    return table


def header(view: Mapping[str, Any]) -> Text:
    text = Text.assemble(("ClusterPromotion ", "bold"), (view["name"], "bold"), "  ")
    text.append_text(_phase(view["phase"]))
    if view.get("currentStage"):
        text.append(f"  current stage: {view['currentStage']}")
    if view.get("startedAt"):
        text.append(f"  revision started {view['startedAt'][:19]}Z")
    if view.get("generation") != view.get("observedGeneration"):
        text.append(f"  (controller has not seen generation {view.get('generation')} yet)", style="dim")
    if view.get("message"):
        text.append(f"\n{view['message']}", style="dim")
    return text


def sources_text(view: Mapping[str, Any]) -> Text:
    """Which Flux source revision each stage runs (ADR 0103), a line each; below the table, where a
    long source name and commit are never cut."""
    text = Text()
    for stage in view["stages"]:
        for source in stage.get("sources") or []:
            text.append(f"{stage['name']} runs ", style="dim")
            text.append(f"{source}\n")
    text.rstrip()
    return text


def render(view: Mapping[str, Any]) -> RenderableType:
    parts: list[RenderableType] = [header(view), stages_table(view)]
    runs = sources_text(view)
    if runs.plain:
        parts.append(runs)
    if view["conditions"]:
        parts.append(conditions_table(view))
    if view.get("phase") == "Paused":
        parts.append(Text(f"to go on: fleetwave resume promotion {view['name']}", style="bold"))
    for stage in view_mod.waiting_for_approval(view):
        parts.append(
            Text(f"to approve: fleetwave approve promotion {view['name']} --stage {stage}", style="bold")
        )
    return Group(*parts)


def summary_line(view: Mapping[str, Any]) -> str:
    """One line: overall phase then each stage's phase, clusters done and what it waits for.

    No countdowns: the line is printed whenever it changes, so it must not change every second.
    """
    parts = []
    for s in view["stages"]:
        done = sum(c["state"] == "done" for c in s["clusters"])
        waiting = [gate_text(g, countdown=False) for g in s["gates"] if g["state"] == "Waiting"]
        entry = f"{s['name']}: {s['phase']} {done}/{len(s['clusters'])}"
        parts.append(entry + (f" [{'; '.join(waiting)}]" if waiting else ""))
    return f"{view['name']} {view['phase']} | " + " | ".join(parts)
