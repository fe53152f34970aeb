"""Health checks: Sveltos validateHealths/postDelayHealthChecks in Lua and CEL, plus default readiness.

Entry points: `checks.evaluate`/`evaluate_all` (one ValidateHealth against a `reader.ResourceReader`),
`readiness.is_ready` (is one object applied and available). Everything here is synchronous so the
controller can run it in a worker thread.
"""
