"""Local fleet start-up time and resident memory per cluster (1 management + N members).

    .venv/bin/python bench/bench_fleet.py [--members 3] [--full-members K] [--rounds 2]

Needs the control-plane binaries (scripts/bootstrap builds them). Each round starts a fresh fleet
in a temporary directory, times `up` until every apiserver is ready and every controller started,
lets it settle, then reads VmRSS of every process from /proc. Ratios are printed against the
management cluster measured in the same run, since absolute figures move with machine load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from fleetwave.local import binaries, fleet, processes

MIB = 1024 * 1024


def one_round(
    bins: binaries.Binaries, members: int, settle: float, full_members: int | None = None
) -> tuple[float, dict[str, dict[str, int]], dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-") as tmp:
        state_dir = Path(tmp) / "fleet"
        t0 = time.perf_counter()
        state = fleet.up(
            state_dir,
            members=fleet.default_member_labels(members),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
            full_members=full_members,
        )
        startup = time.perf_counter() - t0
        profiles = {c.name: c.profile for c in state.members}
        time.sleep(settle)
        rss: dict[str, dict[str, int]] = defaultdict(dict)
        for p in state.processes:
            cluster, _, component = p.name.partition("/")
            rss[cluster if component else "shared"][component or cluster] = processes.rss_bytes(p.pid)
        fleet.down(state_dir)
    return startup, rss, profiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--full-members", type=int, default=None, help="the rest are light (default: all full)"
    )
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to idle before reading RSS")
    args = parser.parse_args()
    bins = binaries.ensure()
    startups: list[float] = []
    last: dict[str, dict[str, int]] = {}
    profiles: dict[str, str] = {}
    for i in range(args.rounds):
        startup, last, profiles = one_round(bins, args.members, args.settle, args.full_members)
        startups.append(startup)
        print(f"round {i + 1}: 1 management + {args.members} members ready in {startup:.1f} s")
    print(f"\nstart-up: median {statistics.median(startups):.1f} s over {args.rounds} rounds")
    print(f"\nresident memory after {args.settle:.0f} s idle (last round):")
    totals = {}
    for cluster, parts in sorted(last.items()):
        totals[cluster] = sum(parts.values())
        detail = ", ".join(f"{k} {v / MIB:.0f}" for k, v in sorted(parts.items()))
        print(f"  {cluster:12s} {totals[cluster] / MIB:7.0f} MiB  ({detail})")
    member_totals = [v for k, v in totals.items() if k not in ("shared", fleet.MANAGEMENT)]
    print(f"  {'all':12s} {sum(totals.values()) / MIB:7.0f} MiB")
    for profile in (fleet.FULL, fleet.LIGHT):
        of = [totals[name] for name, p in profiles.items() if p == profile and name in totals]
        if of:
            print(
                f"  {profile} member: mean {statistics.mean(of) / MIB:.0f} MiB over {len(of)} "
                f"(ratio to management {statistics.mean(of) / totals[fleet.MANAGEMENT]:.2f})"
            )
    if member_totals and totals.get(fleet.MANAGEMENT):
        ratio = statistics.mean(member_totals) / totals[fleet.MANAGEMENT]
        print(f"\nmean member / management RSS ratio: {ratio:.2f} (members add KCM+scheduler+kwok)")


if __name__ == "__main__":
    main()
