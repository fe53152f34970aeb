"""Where each gate's reaction went, from a `bench_scale.py` run with `bench/passes_logged.py`.

    .venv/bin/python bench/gate_timeline.py BENCH_OUTPUT CONTROLLER_LOG [--slowest 10]

BENCH_OUTPUT is what `bench_scale.py` printed (its last JSON line holds each gate's `until` and when
its next stage's profile was seen, `gate_epochs`); CONTROLLER_LOG is `controller.log` from its
`--keep-logs` directory. Each gate's reaction is split into four hops, all in ms after `until`:
- the opening pass's start (a worker free, and the key's earlier pass done);
- its stage profile write started (the pass's decision);
- that write ended (the management API server's round trip);
- the profile seen by the benchmark's watch (the API server's watch delivery).
Log times are the controller's wall clock at millisecond resolution, on the benchmark's machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

_RECONCILED = re.compile(
    r"^(\S+ \S+) DEBUG fleetwave\.runtime\.controller: reconciled clusterpromotion (\S+): "
    r"waited (\S+) ms, took (\S+) ms"
)
_WRITE = re.compile(r"^(\S+ \S+) DEBUG fleetwave\.bench\.passes: stage profile write (started|ended) (\S+)")
NEXT_STAGE = "staging"  # the stage the bench's delay gate opens


@dataclass
class Promotion:
    passes: list[tuple[float, float]] = field(default_factory=list)  # (start, end) epoch seconds
    writes: list[tuple[str, float]] = field(default_factory=list)  # ("started" | "ended", epoch)


@dataclass(frozen=True)
class Gate:
    name: str
    reaction: float
    hops: tuple[float | None, float | None, float | None]  # pass start, write started, write ended


def _epoch(stamp: str) -> float:
    moment = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
    return moment.replace(tzinfo=dt.UTC).timestamp()


def read_log(path: Path) -> dict[str, Promotion]:
    out: dict[str, Promotion] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if m := _RECONCILED.match(line):
                end, took = _epoch(m.group(1)), float(m.group(4)) / 1000
                out.setdefault(m.group(2), Promotion()).passes.append((end - took, end))
            elif (m := _WRITE.match(line)) and m.group(3).endswith(f"-{NEXT_STAGE}"):
                name = m.group(3).removesuffix(f"-{NEXT_STAGE}")
                out.setdefault(name, Promotion()).writes.append((m.group(2), _epoch(m.group(1))))
    return out


def gate_of(name: str, until: float, seen: float, record: Promotion) -> Gate:
    """The first pass that started at or after `until` opened the gate (a pass decides from its
    start's clock); its first stage-profile write after `until` is the one the benchmark saw."""
    start = next((s for s, _ in sorted(record.passes) if s >= until - 0.002), None)
    began = next((t for kind, t in record.writes if kind == "started" and t >= until - 0.002), None)
    ended = next((t for kind, t in record.writes if kind == "ended" and began and t >= began), None)
    marks = [None if t is None else t - until for t in (start, began, ended)]
    return Gate(name, seen - until, (marks[0], marks[1], marks[2]))


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "n/a"
    at = [ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] for q in (0.5, 0.9, 0.99)]
    return "p50 {:.0f}, p90 {:.0f}, p99 {:.0f} ms".format(*(v * 1000 for v in at))


def hops(gate: Gate) -> list[float | None]:
    """The four hops' durations (None where the log lacks a mark)."""
    marks = [0.0, *gate.hops, gate.reaction]
    return [None if (a := marks[i]) is None or (b := marks[i + 1]) is None else b - a for i in range(4)]


def report(gates: list[Gate], slowest: int) -> None:
    labels = ("until -> pass start", "pass start -> write", "write round trip", "write -> seen")
    split = [hops(g) for g in gates]
    for i, label in enumerate(labels):
        values = [h for row in split if (h := row[i]) is not None]
        print(f"{label:>22}: {quantiles(values)} ({len(values)} gates)")
    print(f"{'reaction':>22}: {quantiles([g.reaction for g in gates])} ({len(gates)} gates)")
    for g in sorted(gates, key=lambda g: -g.reaction)[:slowest]:
        marks = ", ".join("-" if h is None else f"{h * 1000:.0f}" for h in g.hops)
        print(f"  {g.name}: reaction {g.reaction * 1000:.0f} ms (pass start, write, written: {marks})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_output", type=Path)
    parser.add_argument("controller_log", type=Path)
    parser.add_argument("--slowest", type=int, default=10)
    args = parser.parse_args()
    rows = json.loads([x for x in args.bench_output.read_text().splitlines() if x.startswith("[{")][-1])
    records = read_log(args.controller_log)
    for row in rows:
        epochs: dict[str, list[float]] = row.get("gate_epochs") or {}
        gates = [gate_of(n, u, s, records.get(n, Promotion())) for n, (u, s) in sorted(epochs.items())]
        print(f"{row['clusters']} clusters, gate p50/p99 {row['gate_p50_ms']}/{row['gate_p99_ms']} ms")
        report(gates, args.slowest)


if __name__ == "__main__":
    main()
