"""Where user code runs: health checks (Lua, CEL, the reads they make) in worker processes that the
controller can always stop (ADR 0041). `pool.CheckPool` is the controller's side, `worker` the child's."""
