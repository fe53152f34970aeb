"""Run the controller with each reconcile logged (its queue wait and duration), each write of a
promotion's stage profile marked, each informer's relists and each ClusterProfile and
ClusterPromotion event its informers received (with its resourceVersion), for
`bench/gate_timeline.py` and `bench/watch_lag.py`.

    FLEETWAVE_BENCH_ENTRY=bench/passes_logged.py PYTHONPATH=src .venv/bin/python bench/bench_scale.py \
        --sizes 100 --servers 20 --promotions 90 --staged-runs 10 --ratio-trials 0 --keep-logs DIR

Only those lines are raised to DEBUG (the rest stays at the controller's level), so a
loaded batch writes ~100,000 lines; that costs the controller a little CPU, which the figures of
such a run include.
"""

from __future__ import annotations

import logging
import runpy
import sys
from collections.abc import Mapping
from typing import Any

from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import promotion
from fleetwave.runtime import watching

log = logging.getLogger("fleetwave.bench.passes")


def _marked(apply: Any) -> Any:
    async def apply_profile(ctx: Context, body: Mapping[str, Any]) -> Any:
        name = str(body["metadata"]["name"])
        log.debug("stage profile write started %s", name)
        try:
            return await apply(ctx, body)
        finally:
            log.debug("stage profile write ended %s", name)

    return apply_profile


# The informers whose events are logged with their resourceVersion: how far the controller's own
# stream of stage profiles ran behind its promotions' (`bench/watch_lag.py`).
_FOLLOWED = ("ClusterProfile", "ClusterPromotion")


def _logged_dispatch(dispatch: Any) -> Any:
    def logged(self: watching.Informer, event_type: Any, obj: Any) -> None:
        kind = self.resource.__name__
        if kind in _FOLLOWED:
            meta: Any = obj.metadata
            log.debug("informer event %s %s %s", kind, meta.name, meta.resourceVersion)
        dispatch(self, event_type, obj)

    return logged


def main() -> None:
    # The informers' lines too: a watch the API server closed shows as a relist.
    for name in ("fleetwave.runtime.controller", "fleetwave.runtime.watching", log.name):
        logging.getLogger(name).setLevel(logging.DEBUG)
    promotion._apply_profile = _marked(promotion._apply_profile)
    watching.Informer._dispatch = _logged_dispatch(watching.Informer._dispatch)  # type: ignore[method-assign]
    sys.argv = ["fleetwave", *sys.argv[1:]]
    runpy.run_module("fleetwave", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
