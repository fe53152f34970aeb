"""The controllers: what turns fleetwave's objects into rollouts, deliveries and statuses.

The floor plan (ADR 0101), top to bottom; a package imports only those below it, and the two
families never import each other:

- `agent/`: a pull member's agent (ADR 0106): the composition of the summary and placement
  controllers' delivery code run in the member, on the MemberWork the hub wrote for it.
- `app`, `watches`, `fanout`: the composition root — informers and controllers (`app`), the
  watches between the Sveltos-style kinds (`watches`) and the indexes they read (`fanout`).
- `sveltos/`, `kubefleet/`: one package per API family's rollout kinds, side by side.
- `gates/`: facts the engine's gates read that need I/O (webhook calls, analysis measurements).
- `fleet/`: the member clusters — the fleet as controllers see it, the MemberCluster controller,
  watches on members, the ports (helm, health) to them, and the boundary around their credentials.
- `shared/`: neutral machinery every controller uses — the reconcile context, engine state in
  status, own-writes and echoes, the requeue rule, memos and the watch scope.
"""
