"""User-facing pieces behind `fleetwave status`, `fleetwave approve promotion` and `fleetwave demo`."""
