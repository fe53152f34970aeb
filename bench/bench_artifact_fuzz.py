"""Hostile Flux artifacts through the controller's path (ADR 0098, 0103): escapes, refusals and cost.

Each case is a hostile tarball (tests/unit/delivery/artifact_cases.py: links, absolute names, `../`,
devices, sparse files, long-name and pax digit bombs, entry-count, size and gzip bombs, duplicate
names, and seeded mutations of valid archives) served on loopback with its correct digest and
delivered as a rollout's pass delivers it: `ArtifactStore.ensure` (download, digest, the bounded
unpacking child, the files read in a worker thread), then `texts` and `archive`
(tests/unit/delivery/artifact_fuzz.py says what is watched). An escape is any file, link, device or
directory made outside the unpack root, a link or device inside it, or a text not read from a regular
file inside it. Then the cost: a benign artifact of 10, 100 and 1,000 manifests delivered `--runs`
times each (a fresh store every time), and, over the fuzz run, the controller's peak RSS growth and
the event loop's longest gap while the store worked.

Run: PYTHONPATH=src .venv/bin/python bench/bench_artifact_fuzz.py [--cases 400] [--seed 1] [--runs 20]
     [--max-gap-ms 100] [--json] [--reproducers /tmp]
Every other case is a mutation; the rest go to the other categories in turn; `--cases 0` measures
the cost alone. The archive of an escape, a suspect refusal (the unpacker crashing) or a refusal that
only a budget made is written under `--reproducers`. Exit code 1 if any escape was found, 2 if the
controller's path ended in anything but texts or Broken, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import datetime as dt
import json
import multiprocessing
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "delivery"))
import artifact_cases as cases
import artifact_fuzz as fuzz

from fleetwave.delivery import unpack
from fleetwave.promapi import guards

SIZES = (10, 100, 1000)


@dataclass
class Tally:
    tried: int = 0
    refused: int = 0
    accepted: int = 0
    escapes: int = 0
    suspect: int = 0
    seconds: list[float] = field(default_factory=list)
    classes: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, outcome: fuzz.Outcome) -> None:
        self.tried += 1
        self.refused += outcome.verdict == "refused"
        self.accepted += outcome.verdict == "accepted"
        self.escapes += bool(outcome.escapes)
        self.suspect += outcome.suspect
        self.seconds.append(outcome.seconds)
        if outcome.verdict != "accepted":
            self.classes[f"{outcome.verdict}: {outcome.message}"] += 1


@dataclass
class Report:
    seed: int
    cases: int
    started: str
    commit: str
    machine: str
    unpacker: str = ""  # where the child's code comes from (see `_unpacker_source`)
    wall_seconds: float = 0.0
    load: list[float] = field(default_factory=list)  # 1-minute load average before and after: others' work
    tallies: dict[str, Tally] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)  # escapes, suspect and budget outcomes
    left_behind: int = 0
    gap_ms: float = 0.0  # the event loop's longest gap while the store worked on a hostile case
    gap_samples: int = 0
    gap_during: str = ""
    gap_by_phase: dict[str, float] = field(default_factory=dict)
    rss_mib: tuple[float, float] = (0.0, 0.0)  # the controller's peak before and after the fuzz run
    children_rss_mib: float = 0.0
    cost: dict[int, dict[str, float]] = field(default_factory=dict)
    cost_gap_ms: float = 0.0
    cost_gap_by_phase: dict[str, float] = field(default_factory=dict)
    client_ms: tuple[float, float] = (0.0, 0.0)  # an HTTP client made on the loop, as each download does


def _unpacker_source() -> str:
    """Where the unpacking child's code comes from: `python -I` ignores PYTHONPATH, so in a worktree
    whose venv is shared it imports the installed checkout, which may not be the code measured."""
    probe = "import fleetwave.delivery.unpack as u; print(u.__file__)"
    found = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=False)
    child = found.stdout.strip()
    same = bool(child) and Path(child).read_bytes() == Path(unpack.__file__).read_bytes()
    return f"{child} ({'the same' if same else 'NOT the same'} unpack.py as this process's)"


def _peak_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def _commit() -> str:
    git = ["git", "-C", str(Path(__file__).resolve().parent)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "-uno"], capture_output=True, text=True, check=False
    )
    return head.stdout.strip() + (" with local changes" if dirty.stdout.strip() else "")


def _pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


async def fuzz_run(args: argparse.Namespace, report: Report) -> None:
    spawn = multiprocessing.get_context("spawn")
    with (
        fuzz.serving() as server,
        tempfile.TemporaryDirectory(prefix="fleetwave-fuzz-") as work,
        concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool,
    ):
        ticker = fuzz.Ticker()
        async with fuzz.ticking(ticker):
            # Imports, the first fork and the HTTP client's first set-up are paid here, not by a case.
            await fuzz.deliver(server, ticker, "warm-up", cases.benign(10))
            await _cases(args, report, fuzz.Fuzzer(server, ticker, Path(work)), _maker(pool, args))
            ticker.reset()
            report.cost = await cost(server, ticker, args.runs)
            report.cost_gap_ms, report.cost_gap_by_phase = ticker.worst * 1000, _ms(ticker.by_phase)
        report.client_ms = await _client_cost(args.runs)


def _maker(pool: concurrent.futures.Executor, args: argparse.Namespace) -> fuzz.Make:
    """Archives made in another process: a bomb's making must not count as the controller's memory."""

    async def make(case: cases.Case, aim: cases.Aim) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, cases.archive_at, args.seed, args.cases, case.index, aim)

    return make


async def _cases(args: argparse.Namespace, report: Report, fuzzer: fuzz.Fuzzer, make: fuzz.Make) -> None:
    ticker = fuzzer.ticker
    ticker.reset()
    before, start = _peak_mib(resource.RUSAGE_SELF), time.monotonic()
    with fuzzer.running():
        for case in cases.cases(args.seed, args.cases):
            outcome, body = await fuzzer.run(case, make)
            _count(report, outcome, body, args.reproducers)
    report.wall_seconds = time.monotonic() - start
    report.rss_mib = (before, _peak_mib(resource.RUSAGE_SELF))
    report.children_rss_mib = _peak_mib(resource.RUSAGE_CHILDREN)  # the unpackers: the pool still runs
    report.gap_ms, report.gap_samples = ticker.worst * 1000, ticker.samples
    report.gap_during, report.gap_by_phase = ticker.worst_during, _ms(ticker.by_phase)


def _ms(by_phase: dict[str, float]) -> dict[str, float]:
    return {phase or "other": round(gap * 1000, 1) for phase, gap in by_phase.items()}


def _count(report: Report, outcome: fuzz.Outcome, body: bytes, reproducers: str) -> None:
    report.tallies.setdefault(outcome.category, Tally()).add(outcome)
    report.left_behind += bool(outcome.left_behind)
    if not outcome.escapes and not outcome.suspect and not outcome.budget:
        return
    path = Path(reproducers) / f"fleetwave-fuzz-{report.seed}-{outcome.index}.artifact"
    path.write_bytes(body)
    flags = {"suspect": outcome.suspect, "budget": outcome.budget}
    report.findings.append(asdict(outcome) | flags | {"reproducer": str(path)})


async def cost(server: fuzz.FileServer, ticker: fuzz.Ticker, runs: int) -> dict[int, dict[str, float]]:
    """Download + verify + unpack + read of a benign artifact, `runs` times per size, fresh stores:
    the wall time, and the CPU time of this process and of the unpacking child (which a busy
    machine inflates far less than the wall time)."""
    out: dict[int, dict[str, float]] = {}
    for size in SIZES:
        body = cases.benign(size)
        seconds, own, child = [], [], []
        for run in range(runs):
            ticker.during = f"benign, {size} files, run {run}"
            before = (_cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN))
            outcome, texts = await fuzz.deliver(server, ticker, f"cost-{size}-{run}", body)
            if outcome.verdict != "accepted" or len(texts) != size:
                raise RuntimeError(
                    f"the benign artifact of {size} files was not delivered: {outcome.message}"
                )
            seconds.append(outcome.seconds)
            own.append(_cpu(resource.RUSAGE_SELF) - before[0])
            child.append(_cpu(resource.RUSAGE_CHILDREN) - before[1])
        out[size] = {
            "bytes": len(body),
            "p50_ms": _pct(seconds, 50) * 1000,
            "p99_ms": _pct(seconds, 99) * 1000,
        }
        out[size] |= {
            "max_ms": max(seconds) * 1000,
            "cpu_ms": _pct(own, 50) * 1000,
            "child_cpu_ms": _pct(child, 50) * 1000,
        }
    return out


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def _client_cost(runs: int) -> tuple[float, float]:
    """p50 and max of making the HTTP client `get_capped` makes for each download, on an idle loop:
    its TLS context loads the CA bundle, whatever the URL's scheme."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        async with httpx2.AsyncClient(follow_redirects=False, trust_env=False):
            seconds.append(time.perf_counter() - start)
    return _pct(seconds, 50) * 1000, max(seconds) * 1000


def _totals(report: Report) -> Tally:
    total = Tally()
    for tally in report.tallies.values():
        for name in ("tried", "refused", "accepted", "escapes", "suspect"):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
        total.seconds += tally.seconds
        total.classes.update(tally.classes)
    return total


def _tally_json(t: Tally) -> dict[str, Any]:
    counts = {k: getattr(t, k) for k in ("tried", "refused", "accepted", "escapes", "suspect")}
    timing = {"p50_s": round(_pct(t.seconds, 50), 3), "max_s": round(max(t.seconds), 3)} if t.seconds else {}
    return counts | timing | {"classes": dict(t.classes.most_common())}


def _as_json(report: Report) -> dict[str, Any]:
    # Not asdict: it rebuilds a Counter from its items, which counts them instead.
    plain = {k: v for k, v in vars(report).items() if k != "tallies"}
    tallies = {name: _tally_json(t) for name, t in sorted(report.tallies.items())}
    return plain | {"tallies": tallies | {"total": _tally_json(_totals(report))}}


def _print_tallies(report: Report) -> None:
    head = f"{'category':<20} {'tried':>6} {'refused':>8} {'accepted':>9} {'ESCAPES':>8} {'suspect':>8}"
    print(head + f" {'p50 s':>7} {'max s':>7}")
    for name, t in [*sorted(report.tallies.items()), ("total", _totals(report))] if report.tallies else []:
        print(
            f"{name:<20} {t.tried:>6} {t.refused:>8} {t.accepted:>9} {t.escapes:>8} {t.suspect:>8}"
            f" {_pct(t.seconds, 50):>7.2f} {max(t.seconds):>7.2f}"
        )
    print("\nOutcomes other than accepted, by category and class (numbers shown as N):")
    for name, t in sorted(report.tallies.items()):
        for label, count in t.classes.most_common():
            print(f"  {name:<20} {count:>5}  {label}")


def _print_findings(report: Report) -> None:
    escapes = [f for f in report.findings if f["escapes"]]
    print(f"\nESCAPES: {sum(len(f['escapes']) for f in escapes)} in {len(escapes)} cases")
    for f in escapes:
        print(f"  case {f['index']} ({f['category']} / {f['shape']}): {'; '.join(f['escapes'])}")
        print(f"    reproducer: {f['reproducer']}")
    for title, key in (
        ("Suspect outcomes (no escape, but a crash, nothing fetched, or the unpacker failing)", "suspect"),
        ("Refused only when the unpacker's budget stopped it", "budget"),
    ):
        chosen = [f for f in report.findings if f[key] and not f["escapes"]]
        print(f"{title}: {len(chosen)}")
        for f in chosen:
            print(
                f"  case {f['index']} ({f['category']} / {f['shape']}, {f['seconds']:.2f} s): {f['message']}"
            )
            print(f"    reproducer: {f['reproducer']} ({f['size']} bytes)")
    print(f"Cases whose temporary directory the store left behind: {report.left_behind}")


def _print_cost(report: Report, runs: int, limit_ms: float) -> None:
    verdict = "within" if max(report.gap_ms, report.cost_gap_ms) <= limit_ms else "OVER"
    print(f"\nEvent loop, longest gap while the store worked ({verdict} the {limit_ms:.0f} ms limit):")
    print(
        f"  hostile cases: {report.gap_ms:.1f} ms, {report.gap_during} ({report.gap_samples} ticks of 1 ms)"
    )
    print(f"    worst gap ending in each step: {report.gap_by_phase}")
    print(f"  benign artifacts: {report.cost_gap_ms:.1f} ms; by step: {report.cost_gap_by_phase}")
    print(
        f"  an HTTP client made on the loop, as each download makes one: p50 {report.client_ms[0]:.1f} ms,"
        f" max {report.client_ms[1]:.1f} ms ({runs} on an idle loop)"
    )
    before, after = report.rss_mib
    print(
        f"Controller peak RSS: {before:.1f} -> {after:.1f} MiB over the fuzz run (+{after - before:.1f} MiB);"
        f" the unpacking children's peak {report.children_rss_mib:.1f} MiB"
    )
    print(
        f"\nA benign artifact, download + verify + unpack + read, {runs} runs each, a fresh store each run:"
    )
    head = f"  {'files':>6} {'gzipped':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    print(f"{head} {'CPU p50 ms: controller':>23} {'child':>6}")
    for size, c in report.cost.items():
        wall = f"{c['p50_ms']:>8.1f} {c['p99_ms']:>8.1f} {c['max_ms']:>8.1f}"
        print(f"  {size:>6} {int(c['bytes']):>9} {wall} {c['cpu_ms']:>23.1f} {c['child_cpu_ms']:>6.1f}")


def main() -> int:
    guards.allow_loopback_targets()  # the artifacts are served on 127.0.0.1: the operator's opt-in
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", type=int, default=400, help="hostile archives (every other one a mutation)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20, help="deliveries of each benign artifact")
    parser.add_argument(
        "--max-gap-ms", type=float, default=100.0, help="the event loop's allowed longest gap"
    )
    parser.add_argument("--reproducers", default="/tmp", help="where flagged cases' archives go")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    report = Report(
        args.seed,
        args.cases,
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        _commit(),
        f"{os.cpu_count()} cores, {_memory_gib()} GiB, Python {platform.python_version()}",
    )
    report.unpacker = _unpacker_source()
    report.load.append(os.getloadavg()[0])
    asyncio.run(fuzz_run(args, report))
    report.load.append(os.getloadavg()[0])
    if args.json:
        print(json.dumps(_as_json(report), indent=2))
    else:
        print(f"{__doc__.splitlines()[0]}\n{report.started}, commit {report.commit}, {report.machine}")
        print(f"the unpacking child runs {report.unpacker}")
        load = " -> ".join(f"{x:.1f}" for x in report.load)
        print(
            f"seed {report.seed}, {report.cases} cases in {report.wall_seconds:.1f} s; load average {load}\n"
        )
        _print_tallies(report)
        _print_findings(report)
        _print_cost(report, args.runs, args.max_gap_ms)
    crashed = any(f["verdict"] in ("crash", "pending") for f in report.findings)
    return 1 if _totals(report).escapes else 2 if crashed else 0


def _memory_gib() -> int:
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30))


if __name__ == "__main__":
    sys.exit(main())
