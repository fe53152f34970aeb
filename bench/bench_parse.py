"""CPU the bounded loader spends on large content, on the same content read again, and how long the
event loop waits while large content is parsed ahead in a worker thread.

Run: .venv/bin/python bench/bench_parse.py
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from fleetwave.delivery import content


def _cpu(text: str, source: str) -> float:
    start = time.process_time()
    with contextlib.suppress(content.ContentError):
        content._documents(text, source)
    return time.process_time() - start


def _configmaps(count: int) -> str:
    return "\n---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: default}}\ndata: {{k: v{i}}}"
        for i in range(count)
    )


def _list(count: int) -> str:
    return "\n".join(f"- {i}" for i in range(count))


async def _loop_gaps(text: str, source: str) -> tuple[float, float, float]:
    """(seconds the parse took in a thread, the loop's longest gap, its p99), a 5 ms ticker."""
    gaps: list[float] = []
    parsing = True

    async def tick() -> None:
        last = time.monotonic()
        while parsing:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    start = time.monotonic()
    await asyncio.to_thread(content.parse_ahead, [(text, source, False, "documents")])
    took = time.monotonic() - start
    parsing = False
    await ticker
    gaps.sort()
    return took, gaps[-1], gaps[int(len(gaps) * 0.99)]


def main() -> None:
    for label, text in (("non-object list", _list(150_000)), ("ConfigMaps", _configmaps(9_000))):
        first, again = _cpu(text, f"ConfigMap ns/{label}"), _cpu(text, f"ConfigMap ns/{label}")
        print(f"{label:>16}: {len(text) / 1e6:.2f} MB  first read {first:.2f} s CPU  again {again:.3f} s CPU")
    for label, text in (("ConfigMaps", _configmaps(9_500)), ("non-object list", _list(600_000))):
        took, longest, p99 = asyncio.run(_loop_gaps(text, f"ahead/{label}"))
        print(
            f"{label:>16}: {len(text) / 1e6:.2f} MB parsed ahead in {took:.2f} s; "
            f"event loop's longest gap {longest * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
