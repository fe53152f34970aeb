"""/metrics carries the process's own series and the build, as every Kubernetes controller does."""

from __future__ import annotations

import platform

from prometheus_client import generate_latest

import fleetwave
from fleetwave.runtime.metrics import Metrics


def test_the_controllers_registry_has_process_python_and_build_series() -> None:
    text = generate_latest(Metrics().registry).decode()
    assert "process_resident_memory_bytes" in text
    assert "process_cpu_seconds_total" in text
    assert "python_info" in text
    assert "python_gc_collections_total" in text
    build = (
        f'fleetwave_build_info{{python="{platform.python_version()}",version="{fleetwave.__version__}"}} 1.0'
    )
    assert build in text


def test_two_controllers_in_one_process_each_have_their_own_registry() -> None:
    first, second = Metrics(), Metrics()
    assert first.registry is not second.registry
    assert "process_cpu_seconds_total" in generate_latest(second.registry).decode()
