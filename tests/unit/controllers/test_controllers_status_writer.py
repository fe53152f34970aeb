"""The one status writer (ADR 0101): guarded writes, own writes remembered, progress held back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fleetwave.controllers.shared.status_writer import PROGRESS_EVERY, StatusWriter, Whose
from fleetwave.kube.status import StatusWrite, Versioned

WHOSE = Whose("ClusterSummary", "ns/s")


class _Resource:
    Status = "status-subresource"


class _Client:
    """Answers a status patch with the next resourceVersion, or a conflict when told to."""

    def __init__(self) -> None:
        self.version = 10
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> Any:
        self.patches.append(body)
        self.version += 1
        meta = SimpleNamespace(name=name, namespace="ns", resourceVersion=str(self.version))
        return SimpleNamespace(metadata=meta, status=body["status"])


def _writer() -> tuple[StatusWriter, list[float]]:
    elapsed = [100.0]
    return StatusWriter(clock=lambda: elapsed[0]), elapsed


async def _write(
    writer: StatusWriter, client: _Client, body: dict[str, Any]
) -> tuple[StatusWrite, Versioned]:
    current = Versioned("s", "ns", "10", {"phase": "Old"})
    return await writer.write(client, _Resource, WHOSE, current, body)  # type: ignore[arg-type]


async def test_a_write_is_remembered_as_this_process_own_until_the_cache_shows_it() -> None:
    writer, _ = _writer()
    written, after = await _write(writer, _Client(), {"phase": "New"})
    assert written is StatusWrite.WRITTEN
    assert after.resource_version == "11"
    assert writer.behind(WHOSE, "10")  # the cache still holds the version before the write
    assert writer.caught_up(WHOSE, "11")
    assert not writer.behind(WHOSE, "11")


async def test_progress_is_due_progress_every_seconds_after_the_last_write() -> None:
    writer, elapsed = _writer()
    assert writer.progress_due_in(WHOSE) is None  # never written by this process: due now
    await _write(writer, _Client(), {"phase": "New"})
    elapsed[0] += 1.0
    assert writer.progress_due_in(WHOSE) == PROGRESS_EVERY - 1.0
    elapsed[0] += PROGRESS_EVERY
    assert writer.progress_due_in(WHOSE) is None


async def test_an_unchanged_status_is_not_written_nor_counted_as_a_write() -> None:
    writer, _ = _writer()
    client = _Client()
    written, _ = await _write(writer, client, {"phase": "Old"})
    assert written is StatusWrite.UNCHANGED
    assert client.patches == []
    assert writer.progress_due_in(WHOSE) is None
    assert not writer.behind(WHOSE, "10")


async def test_a_forgotten_object_has_no_write_time() -> None:
    writer, _ = _writer()
    await _write(writer, _Client(), {"phase": "New"})
    writer.forget(WHOSE)
    assert writer.progress_due_in(WHOSE) is None


def test_one_key_shape_for_namespaced_and_cluster_scoped_objects() -> None:
    assert Whose.of("ClusterSummary", "ns", "s") == WHOSE
    assert Whose.of("ClusterPromotion", None, "p") == ("ClusterPromotion", "p")
