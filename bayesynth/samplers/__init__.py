"""Custom PyMC step methods and their compiled kernels."""

from bayesynth.samplers import kernels
from bayesynth.samplers.sampling import assign_copula_steps, sample
from bayesynth.samplers.steps import (
    COPULA_STEPS,
    CopulaGibbsStep,
    FactorScoresGibbs,
    InterceptGibbs,
    LatentGibbs,
    LoadingsGibbs,
    PrecisionGibbs,
    ShrinkageGibbs,
)
from bayesynth.samplers.truncnorm import truncnorm

__all__ = [
    "sample",
    "assign_copula_steps",
    "kernels",
    "truncnorm",
    "COPULA_STEPS",
    "CopulaGibbsStep",
    "LatentGibbs",
    "FactorScoresGibbs",
    "LoadingsGibbs",
    "ShrinkageGibbs",
    "PrecisionGibbs",
    "InterceptGibbs",
]
