"""Where a ratio trial's CPU goes, process by process, read from `bench_scale.py`'s output (issue 47).

    .venv/bin/python bench/cpu_budget.py docs/adr/measurements/ratio100-2026-12-03-8244eb5.txt

`bench_scale.py --ratio-trials N` prints, for every timed step of a trial, the CPU seconds each
process of the fleet spent in it ("CPU of the fleet in the promotion trial: management 1.57 s, ...").
On this machine every step uses both cores fully, so a step's wall time follows its CPU seconds, and
the ratio of two steps' CPU says how far apart they can be at best. This prints, per step, the
medians over the trials after the first (which creates the objects) of each process's CPU and of
their sum, and the ratios of those sums that issue 47 sets goals for.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

# Step names as `bench_scale.py` prints them; a direct apply follows the rollout it is compared with.
PROMOTION, STAGED = "the promotion trial", "the staged-run trial"
DIRECT, FLOOR, DELIVERED = "the direct apply", "the ClusterSummary floor", "the delivered floor"
_STEP = re.compile(r"CPU of the fleet in (?P<step>the [\w -]+?)(?: \([\d.]+ s\))?: (?P<parts>.*)$")
_PART = re.compile(r"(?P<who>[a-z][\w ]*?) (?P<seconds>\d+(?:\.\d+)?) s")

Spent = dict[str, float]  # process -> CPU seconds in one step


def steps(lines: Iterable[str]) -> dict[str, list[Spent]]:
    """Every step's CPU per process, trial by trial. A direct apply is filed under the rollout it
    follows ("the direct apply of the promotion trial")."""
    out: dict[str, list[Spent]] = {}
    rollout = ""
    for line in lines:
        found = _STEP.search(line)
        if found is None:
            continue
        step = found["step"]
        if step in (PROMOTION, STAGED):
            rollout = step
        elif step == DIRECT:
            step = f"{DIRECT} of {rollout}" if rollout else DIRECT
        spent = {m["who"].strip(): float(m["seconds"]) for m in _PART.finditer(found["parts"])}
        out.setdefault(step, []).append(spent)
    return out


def medians(trials: list[Spent]) -> Spent:
    """Each process's median over the trials after the first, and `total`, the median of the sums."""
    kept = trials[1:] or trials
    who = sorted({name for spent in kept for name in spent})
    out = {name: statistics.median(spent.get(name, 0.0) for spent in kept) for name in who}
    out["total"] = statistics.median(sum(spent.values()) for spent in kept)
    return out


# The ratios issue 47 sets goals for, as (rollout step, the step it is measured against).
RATIOS = (
    (PROMOTION, FLOOR),
    (PROMOTION, f"{DIRECT} of {PROMOTION}"),
    (STAGED, f"{DIRECT} of {STAGED}"),
    (STAGED, DELIVERED),
    (DELIVERED, f"{DIRECT} of {STAGED}"),
)


def report(found: Mapping[str, list[Spent]]) -> list[str]:
    table = {step: medians(trials) for step, trials in found.items() if trials}
    lines = []
    for step, spent in table.items():
        parts = ", ".join(f"{who} {seconds:.2f}" for who, seconds in spent.items() if who != "total")
        lines.append(f"{step}: {spent['total']:.2f} CPU s ({parts}; {len(found[step])} trials)")
    for rollout, against in RATIOS:
        if rollout in table and against in table and table[against]["total"] > 0:
            ratio = table[rollout]["total"] / table[against]["total"]
            lines.append(f"CPU of {rollout} / {against}: {ratio:.2f}x")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("outputs", nargs="+", type=Path, help="bench_scale.py --ratio-trials outputs")
    for path in parser.parse_args().outputs:
        print(path)
        for line in report(steps(path.read_text().splitlines())):
            print(f"  {line}")


if __name__ == "__main__":
    main()
