"""Utility, risk and diagnostics: pure functions over DataFrames, arrays and InferenceData."""

from bayesynth.evaluation.diagnostics import (
    ConvergenceSummary,
    convergence_summary,
    copula_diagnostics,
)
from bayesynth.evaluation.fidelity import (
    crosstab_comparison,
    ks_distance,
    marginal_fidelity,
    tv_distance,
)

__all__ = [
    "copula_diagnostics",
    "convergence_summary",
    "ConvergenceSummary",
    "ks_distance",
    "tv_distance",
    "marginal_fidelity",
    "crosstab_comparison",
]
