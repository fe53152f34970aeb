"""The exit codes of every command (one table, documented in `--help` and docs/troubleshooting.md).

| Exit code | Meaning |
|---|---|
| 0 | success |
| 1 | the API server or a cluster failed or refused: unreachable, timed out, 404, 409, 422, 429, 5xx |
| 2 | bad input or usage: a flag, a file, a kubeconfig that cannot be read |
| 3 | refused by authentication or authorization (401, 403) |
"""

EXIT_API, EXIT_USAGE, EXIT_FORBIDDEN = 1, 2, 3
EXIT_CODES = """Exit codes: 0 success; 1 the API server or a cluster failed or refused the request;
2 bad input or usage; 3 refused by authentication or authorization (401, 403).
--debug or FLEETWAVE_DEBUG=1 shows a traceback for a bug report."""
