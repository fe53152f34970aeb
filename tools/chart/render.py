"""Regenerate the Helm chart's generated files (CRDs, RBAC rules, admission policy) from the code
that `fleetwave install` uses: `.venv/bin/python tools/chart/render.py [CHART_DIR]`."""

from __future__ import annotations

import sys
from pathlib import Path

from fleetwave.mgmt import chart

if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "deploy/chart/fleetwave")
    print(f"wrote {len(chart.write(target))} files under {target}", file=sys.stderr)
