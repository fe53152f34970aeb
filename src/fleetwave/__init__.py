"""fleetwave: progressive, staged rollouts across a fleet of Kubernetes clusters."""

__version__ = "0.1.0"
