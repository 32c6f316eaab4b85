"""Custom PyMC step methods and their compiled kernels.

Importing this module adds the copula's Gibbs blocks to ``pymc.STEP_METHODS``: their
``competence`` is IDEAL only for the copula structure they were written for (and INCOMPATIBLE
for any other variable), so PyMC's automatic assignment picks them for copula models and nothing
changes for other models. :func:`steps` gives the full set, group moves included.
"""

import pymc as _pm

from bayesynth.samplers import kernels
from bayesynth.samplers.sampling import (
    LoglikConvergence,
    assign_copula_steps,
    check_copula_convergence,
    check_loglik_convergence,
    sample,
    steps,
)
from bayesynth.samplers.steps import (
    COPULA_STEPS,
    OPTIONAL_COPULA_STEPS,
    CopulaGibbsStep,
    FactorScoresGibbs,
    InterceptGibbs,
    LatentGibbs,
    LoadingsGibbs,
    PrecisionGibbs,
    ShrinkageGibbs,
)
from bayesynth.samplers.truncnorm import truncnorm

for _cls in (LatentGibbs, FactorScoresGibbs, LoadingsGibbs, ShrinkageGibbs, PrecisionGibbs,
             InterceptGibbs):
    if _cls not in _pm.STEP_METHODS:
        _pm.STEP_METHODS.append(_cls)

__all__ = [
    "steps",
    "sample",
    "assign_copula_steps",
    "check_copula_convergence",
    "check_loglik_convergence",
    "LoglikConvergence",
    "kernels",
    "truncnorm",
    "COPULA_STEPS",
    "OPTIONAL_COPULA_STEPS",
    "CopulaGibbsStep",
    "LatentGibbs",
    "FactorScoresGibbs",
    "LoadingsGibbs",
    "ShrinkageGibbs",
    "PrecisionGibbs",
    "InterceptGibbs",
]
