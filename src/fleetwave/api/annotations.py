"""Annotations a person sets on a rollout object to ask something of it (plain constants).

A person's request to roll a revision back (`fleetwave rollback|abort promotion`, `fleetwave
rollback run`): the number of the revision to undo (so it never applies to a later one), optionally
the revision to return to, and why."""

ROLLBACK = "fleetwave.io/rollback"
ROLLBACK_TO = "fleetwave.io/rollback-to"
ROLLBACK_REASON = "fleetwave.io/rollback-reason"
