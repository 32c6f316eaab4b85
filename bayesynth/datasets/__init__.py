"""Embedded example data (simulated) and loaders for the shared public datasets."""

from bayesynth.datasets.child_health import CHILD_HEALTH_TYPES, simulate_child_health

__all__ = ["simulate_child_health", "CHILD_HEALTH_TYPES"]
