"""Prometheus' HTTP API as metric health checks use it: one instant query at a time, under guards
(ADR 0079). Every input (the URL, the query, the server's answer) comes from users or from a server
they point at, so it is treated as hostile.

- `guards`: what a metric source URL may be and which addresses it may reach (after DNS);
- `results`: an answer's bytes to one number, or the reason there is none (pure);
- `client`: the guarded HTTP exchange (no redirects, no proxies from the environment, capped size
  and time, the connection pinned to the address that was checked).
"""
