"""`fleetwave agent`: a pull-mode member's own delivery (ADR 0106). It runs in the member, reads the
MemberWork the hub wrote into the member's namespace on the hub, delivers it with the same code the
controller uses for push members (server-side apply, helm, prune, drift, health in the sandbox), and
reports in the work's status. It sits on the controllers' top floor, beside the composition root."""
