"""Kustomize archives are unpacked in a child process, never on the controller's event loop (ADR 0098).

Issue 40, finding 2: a 2 KiB bzip2 archive whose GNU long-name header declared 2.86 GiB stalled the
loop for 13.9 s and grew the controller to 2.9 GiB. Each hostile archive here must be refused with a
one-line message while a ticker on the same loop keeps running (the old unpacker ran before the
build's first await, so the ticker could not tick once) and without the test process growing.

No kustomize binary is needed: every archive here is refused, or checked, before kustomize runs.
"""

from __future__ import annotations

import asyncio
import resource
import tarfile

import pytest
from tar_archives import file, long_name_bomb, member, pax_header, tar

from fleetwave.delivery import bounded
from fleetwave.delivery.kustomize import KustomizeError, Kustomizer

NO_KUSTOMIZE = Kustomizer("/nonexistent/kustomize")


async def build_with_ticker(kustomizer: Kustomizer, archive: bytes) -> tuple[str, int]:
    """The build's error and how often a task on the same loop ran meanwhile."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks
    try:
        await kustomizer.build(archive, path=".")
    except KustomizeError as e:
        return str(e), ticks - before
    finally:
        ticker.cancel()
    raise AssertionError("the archive was not refused")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_the_long_name_bomb_is_refused_in_a_child_while_the_loop_runs() -> None:
    bomb = long_name_bomb()
    before = peak_rss_mib()
    message, ticks = asyncio.run(build_with_ticker(NO_KUSTOMIZE, bomb))
    assert message == "kustomize.tar.gz has a GNU long-name header of 3221225472 bytes (at most 4096)"
    assert ticks > 0
    # The old unpacker read the 3 GiB name into this process; a peak is all ru_maxrss keeps.
    assert peak_rss_mib() - before < 256


SYMLINK = member("base/link", kind=tarfile.SYMTYPE)
SYMLINK.linkname = "/etc/passwd"


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (
            pax_header(b"1" * 65536) + tar(file("a.yaml", "a: 1\n")),
            "kustomize.tar.gz has a pax header of 65536 bytes (at most 4096)",
        ),
        (
            tar(*(file(f"f{i}.yaml", "") for i in range(2001))),
            "kustomize.tar.gz holds more than 2000 entries",
        ),
        (
            tar(file("ok.yaml", "a: 1\n"), file("../evil.yaml", "x")),
            "kustomize.tar.gz entry 2 must stay inside the archive",
        ),
        (
            tar(file("base/a.yaml", "a: 1\n"), (SYMLINK, b"")),
            "kustomize.tar.gz entry 2 is not a regular file or directory (a symbolic link)",
        ),
    ],
    ids=["pax-digits", "too-many-entries", "path-escape", "symlink"],
)
def test_a_hostile_archive_is_refused_by_the_child_with_one_line(archive: bytes, message: str) -> None:
    refused, ticks = asyncio.run(build_with_ticker(NO_KUSTOMIZE, archive))
    assert refused == message  # one line, and no entry's name quoted
    assert ticks > 0


def test_a_good_archive_is_unpacked_by_the_child_and_handed_to_kustomize() -> None:
    archive = tar(file("overlay/kustomization.yaml", "resources: []\n"))
    with pytest.raises(KustomizeError, match="kustomize is not installed"):  # reached: the tree is there
        asyncio.run(NO_KUSTOMIZE.build(archive, path="overlay"))
    with pytest.raises(KustomizeError, match="path 'elsewhere' is not a directory of the archive"):
        asyncio.run(NO_KUSTOMIZE.build(archive, path="elsewhere"))


def test_an_unpacker_out_of_its_budget_is_reported_without_its_output() -> None:
    starved = Kustomizer("/nonexistent/kustomize", unpack_limits=bounded.Limits(memory_bytes=8 * 1024 * 1024))
    with pytest.raises(KustomizeError) as info:
        asyncio.run(starved.build(tar(file("a.yaml", "a: 1\n")), path="."))
    assert str(info.value).startswith("kustomize.tar.gz could not be unpacked")
    assert "Traceback" not in str(info.value)
    assert "\n" not in str(info.value)
