"""How long `fleetwave --help` and `fleetwave version` take to start, next to Python's own start-up
and a one-command typer program (the floor a typer CLI can reach), median of N runs each, in one run.

Run: .venv/bin/python bench/bench_cli_start.py [--runs 10] [--src DIR ...]

Each `--src` is a fleetwave source tree to time (its `src/`); the default is this checkout's. Give an
older checkout (a `git worktree`) as a second `--src` to compare before and after side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TYPER_FLOOR = """import typer
app = typer.Typer()
@app.command()
def hello(name: str = "x") -> None:
    "Say hello."
app()
"""


def _median(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--src", action="append", type=Path)
    args = parser.parse_args()
    sources = args.src or [HERE / "src"]
    env = dict(os.environ)
    python = sys.executable
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as floor:
        floor.write(TYPER_FLOOR)
    base = _median([python, "-c", "pass"], args.runs, env)
    typer_help = _median([python, floor.name, "--help"], args.runs, env)
    print(f"{'what':44} {'median s':>9} {'over python':>12}")
    print(f"{'python -c pass':44} {base:9.3f} {0:12.3f}")
    print(f"{'one-command typer program --help':44} {typer_help:9.3f} {typer_help - base:12.3f}")
    for src in sources:
        run_env = {**env, "PYTHONPATH": str(src)}
        for argv in (["--help"], ["version"]):
            took = _median([python, "-m", "fleetwave", *argv], args.runs, run_env)
            label = f"fleetwave {' '.join(argv)} ({src})"
            print(f"{label[:44]:44} {took:9.3f} {took - base:12.3f}")
    os.unlink(floor.name)


if __name__ == "__main__":
    main()
