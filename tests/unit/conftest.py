"""Fixtures of the unit tests: modules of `bench/`, which is a folder of scripts, not a package."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="session")
def bench_module() -> Callable[[str], ModuleType]:
    """Loads `bench/<name>.py` as module `name` (registered first: dataclasses look their module up
    while it loads), with `bench/` importable while it loads, as it is when the script runs."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        sys.path.insert(0, str(BENCH))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(BENCH))
        return module

    return load
