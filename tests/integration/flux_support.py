"""Support for tests that read Flux sources: create a GitRepository or OCIRepository on the
management cluster (`source_object`), wait for its artifact at a revision (`artifact`), and check
what the artifact URL serves (`served`, `files`). The session fixtures `flux`, `flux_dir` and
`oci_registry` (conftest.py) start the parts; see ADR 0104."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client

from fleetwave.kube import kinds
from fleetwave.local import flux as local_flux

V1 = f"{local_flux.GROUP}/v1"
GIT = kinds.KindInfo(kinds.GVK(V1, "GitRepository"), "gitrepositories", True)
OCI = kinds.KindInfo(kinds.GVK(V1, "OCIRepository"), "ocirepositories", True)
INTERVAL = "1s"  # honoured as given: a push shows up within about a second (ADR 0104)


def write_tree(tree: Path, contents: dict[str, str]) -> None:
    """Write each file (relative name -> text) under `tree`, directories as needed."""
    for name, text in contents.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)


@contextmanager
def source_object(
    management: Client, info: kinds.KindInfo, name: str, namespace: str, spec: dict[str, Any]
) -> Iterator[None]:
    """The source object while the block runs; deleted afterwards and waited for (source-controller
    removes its finalizer), so the test's namespace is not left terminating."""
    resource = kinds.resource_class(info)
    body = {
        "apiVersion": V1,
        "kind": info.gvk.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    management.create(resource.from_dict(body))
    try:
        yield
    finally:
        management.delete(resource, name, namespace=namespace)
        deadline = time.monotonic() + 30
        while get_object(management, info, name, namespace) is not None:
            assert time.monotonic() < deadline, f"{info.gvk.kind} {name} was not deleted within 30s"
            time.sleep(0.1)


def get_object(management: Client, info: kinds.KindInfo, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return dict(management.get(kinds.resource_class(info), name, namespace=namespace))
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def artifact(
    management: Client, info: kinds.KindInfo, name: str, namespace: str, revision: str, *, timeout: float = 60
) -> dict[str, Any]:
    """The artifact once the source is Ready with `revision`."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = (get_object(management, info, name, namespace) or {}).get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        found = status.get("artifact") or {}
        if ready and found.get("revision") == revision:
            return dict(found)
        time.sleep(0.1)
    raise AssertionError(f"{info.gvk.kind} {name} not Ready with {revision} after {timeout}s: {status}")


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def files(archive: bytes) -> dict[str, str]:
    """The regular files of a tar.gz artifact: name -> text."""
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            content = tar.extractfile(member) if member.isfile() else None
            if content is not None:
                out[member.name] = content.read().decode()
    return out


def served(stored: dict[str, Any]) -> bytes:
    """The bytes at a `status.artifact`'s URL, checked against its digest and size."""
    data = download(stored["url"])
    assert stored["digest"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
    assert stored["size"] == len(data)
    return data
