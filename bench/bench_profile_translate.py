"""What translating and matching one ClusterProfile costs a pass, by how many clusters its
clusterRefs name: the steps every pass of a promotion's stage profile (and of each of its summaries)
runs in the controller's event loop, with no API server.

Run: PYTHONPATH=src .venv/bin/python bench/bench_profile_translate.py [--clusters 100,1000]
        [--rounds 200] [--src DIR ...]

Each `--src` is a fleetwave source tree (its `src/`) to time in a process of its own; the default is
this checkout's. Give an older checkout (a `git worktree`) as a second `--src` to compare before
and after side by side, in one run. Per size, microseconds per call (median of five batches of
`--rounds` calls):
- `match`: the profile's selector tested against every cluster of a fleet of that size;
- `revision`: the revision hash of its spec;
- `translate`: the profile translated to a rollout spec (selector, stages hash, revision hash);
- `record`: the engine's side of a pass once the plan is frozen: the record read from the status,
  one engine step over the fleet (nothing delivered yet), the record written back as JSON;
- `record KB`: that record's JSON, as the profile's `status.rollout` carries it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# Runs inside each source tree's process: only the public functions every version has.
_PROBE = """
import json, statistics, sys, time
from datetime import datetime, timezone
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers.shared import engine_state
from fleetwave.core import engine, selectors
from fleetwave.core import model as fm
from fleetwave.translate import common
from fleetwave.translate import sveltos as tr

T0 = datetime(2026, 12, 2, tzinfo=timezone.utc)

def per_call(fn, rounds):
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        batches.append((time.perf_counter() - start) / rounds * 1e6)
    return round(statistics.median(batches), 1)

out = {}
for size in json.loads(sys.argv[1]):
    keys = [f"fleet/c-{i:05d}" for i in range(size)]
    refs = [{"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
             "namespace": "fleet", "name": f"c-{i:05d}"} for i in range(size)]
    profile = ClusterProfile.model_validate({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": "stage"}, "spec": {"clusterRefs": refs[: size * 6 // 10], "maxUpdate": "10%"}})
    selector = common.union(None, keys[: size * 6 // 10])
    labels = [{common.KEY_LABEL: k} for k in keys]
    rounds = max(1, int(sys.argv[2]) * 100 // size)
    spec = tr.from_profile(profile, content_hash="c0ffee")
    fleet = fm.Fleet.of(fm.Cluster(k, {common.KEY_LABEL: k}) for k in keys)
    frozen = engine.step(spec, fleet, fm.Observed(delivery={}), T0).status
    frozen = engine.step(spec, fleet, fm.Observed(delivery={}, previous=frozen), T0).status
    raw = {"status": {"rollout": engine_state.dump(frozen)}}

    def record_pass():
        previous = engine_state.previous_of(raw)
        status = engine.step(spec, fleet, fm.Observed(delivery={}, previous=previous), T0).status
        return json.dumps(engine_state.dump(status))

    out[size] = {
        "record": per_call(record_pass, rounds),
        "record_kb": round(len(record_pass()) / 1024, 1),
        "match": per_call(lambda: [selectors.matches(selector, l) for l in labels], rounds),
        "revision": per_call(lambda: tr.revision_hash(profile.spec, "c0ffee"), rounds),
        "translate": per_call(lambda: tr.from_profile(profile, content_hash="c0ffee"), rounds),
    }
print(json.dumps(out))
"""


def _measure(src: Path, sizes: list[int], rounds: int) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(sizes), str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", default="100,1000")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--src", action="append", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.clusters.split(",")]
    sources = args.src or [HERE / "src"]
    print("| source | clusters | match µs | revision µs | translate µs | record µs | record KB |")
    print("|---|---|---|---|---|---|---|")
    for src in sources:
        for size, row in _measure(src, sizes, args.rounds).items():
            cells = [row["match"], row["revision"], row["translate"], row["record"], row["record_kb"]]
            print(f"| {src} | {size} | {' | '.join(str(c) for c in cells)} |")


if __name__ == "__main__":
    main()
