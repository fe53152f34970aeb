"""`fleetwave controller run --event-loop`: uvloop by default, asyncio on request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.cli import controller as cli_controller


def _module_of_loop(run: Callable[[Coroutine[Any, Any, None]], None]) -> str:
    seen: list[str] = []

    async def record() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    run(record())
    return seen[0]


def test_the_default_loop_is_uvloops_and_asyncio_stays_available() -> None:
    assert cli_controller._runner(cli_controller.EventLoop.UVLOOP) is uvloop.run
    assert cli_controller._runner(cli_controller.EventLoop.ASYNCIO) is asyncio.run
    assert _module_of_loop(cli_controller._runner(cli_controller.EventLoop.UVLOOP)).startswith("uvloop")
    assert _module_of_loop(cli_controller._runner(cli_controller.EventLoop.ASYNCIO)).startswith("asyncio")


def test_an_unknown_loop_is_refused_before_anything_connects() -> None:
    result = CliRunner().invoke(app, ["controller", "run", "--event-loop", "trio"])
    assert result.exit_code == 2
    assert "trio" in result.output
