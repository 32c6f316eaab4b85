"""Embedded example data (simulated) and loaders for the shared public datasets."""

from bayesynth.datasets.child_health import CHILD_HEALTH_TYPES, simulate_child_health
from bayesynth.datasets.school_census import SCHOOL_CENSUS_LEVELS, simulate_school_census

__all__ = [
    "simulate_child_health",
    "CHILD_HEALTH_TYPES",
    "simulate_school_census",
    "SCHOOL_CENSUS_LEVELS",
]
