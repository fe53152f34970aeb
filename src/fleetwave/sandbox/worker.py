"""The sandbox worker: a child process that judges clusters for the controller, one job at a time.

It caps its own address space and core dumps before reading any job, then answers frames on
stdin/stdout until stdin closes. Whatever a job does — a script spinning in a C string function,
CEL expanding a huge literal, a read returning gigabytes — it can only exhaust this process, which
the controller kills and replaces; the controller's threads, Lease and probes are untouched.

Before each job the worker lowers its own CPU-time limit (RLIMIT_CPU) to the CPU it has used so far
plus the job's budget: C code that no interpreter hook reaches (Lua's pattern matcher, celpy's
builtins over large values) is ended by the kernel's SIGXCPU within that budget, and the controller
names the limit from the exit signal (ADR 0041, 0097).
"""

from __future__ import annotations

import argparse
import base64
import math
import resource
import signal
import sys
from typing import Any

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health import analysis, cel, cluster_check, webhook_condition
from fleetwave.health.model import Limits
from fleetwave.kube import ops
from fleetwave.sandbox import framing


def _cap_memory(limit_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limit_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def limit_cpu(seconds: int) -> None:
    """SIGXCPU once this process has used `seconds` more CPU than now (at most a second more: the
    limit is whole seconds). Its default action ends the process, and nothing here catches it."""
    if seconds <= 0:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _warm() -> None:
    """Build celpy's parser now (0.3 s of CPU): a job's CPU budget is for the job's own work."""
    cel.compile_rule("true")


# Member clients kept between jobs: this process runs one job at a time.
_CLIENTS = cluster_check.Clients()


def _job(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("kind") == "webhookCondition":  # ADR 0080
        ok, why = webhook_condition.judge(str(message["rule"]), int(message["status"]), message.get("body"))
        return {"ok": ok, "message": why}
    if message.get("kind") == "analysisMeasurement":  # ADR 0081
        ok, why = analysis.measure(
            str(message["url"]),
            str(message["path"]),
            str(message["query"]),
            str(message["rule"]),
            Limits(**message["limits"]),
        )
        return {"ok": ok, "message": why}
    checks = [ValidateHealth.model_validate(c) for c in message.get("checks") or []]
    objects = [(str(a), str(k), n if n is None else str(n), str(m)) for a, k, n, m in message["objects"]]
    kubeconfig, insecure = base64.b64decode(message["kubeconfig"]), message.get("allowInsecure") is True
    try:
        verdict = cluster_check.judge(
            kubeconfig,
            checks,
            objects,
            limits=Limits(**message["limits"]),
            allow_insecure=insecure,
            clients=_CLIENTS,
            request_seconds=float(message.get("requestSeconds") or 0) or None,
        )
    except BaseException:
        _CLIENTS.drop(kubeconfig, insecure)  # a broken connection must not poison the next job
        raise
    return {"ok": verdict.ok, "message": verdict.message}


def answer(message: Any) -> dict[str, Any]:
    """One job's reply; every failure is a reply, so the worker survives whatever it can."""
    if not isinstance(message, dict):
        return {"ok": False, "message": "sandbox: malformed job"}
    try:
        return _job(message)
    except MemoryError:
        return {"ok": False, "message": "memory limit of the health-check sandbox exceeded"}
    except (OSError, ops.TransportError, cluster_check.NoAnswer) as e:
        return {"ok": False, "message": f"cluster unreachable: {type(e).__name__}: {e}"}
    except Exception as e:  # reported to the controller as a failed check
        return {"ok": False, "message": f"health check could not run: {type(e).__name__}: {e}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--cpu-seconds", type=int, default=0)
    args = parser.parse_args()
    _cap_memory(args.memory_bytes)
    # An inherited "ignore" would turn the CPU limit into a warning: the default action ends us.
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    _warm()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    framing.write(stdout, {"ready": True})
    while True:
        try:
            message = framing.read(stdin)
        except framing.FrameError:
            return  # the controller closed the pipe: exit quietly
        limit_cpu(args.cpu_seconds)
        framing.write(stdout, answer(message))


if __name__ == "__main__":
    main()
