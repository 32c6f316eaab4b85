"""Utility, risk and diagnostics: pure functions over DataFrames, arrays and InferenceData.

Plots (:mod:`bayesynth.evaluation.plots`) draw computed results; :func:`report` writes an HTML
page and a JSON file of every number.
"""

from bayesynth.evaluation.calibration import (
    SBCProblem,
    SBCResult,
    copula_sbc_problem,
    simulation_based_calibration,
)
from bayesynth.evaluation.combining import combine_marginal_estimates
from bayesynth.evaluation.counts import (
    SaturatedTuning,
    loglinear_utility,
    paired_counts,
    tau_metrics,
    tune_saturated,
    within_p_shares,
)
from bayesynth.evaluation.diagnostics import (
    ConvergenceSummary,
    Diagnosis,
    convergence_summary,
    copula_diagnostics,
    diagnose,
    synthesis_diagnostics,
)
from bayesynth.evaluation.regression import (
    CombinedEstimate,
    RegressionComparison,
    combine_estimates,
    fit_regression,
    interval_overlap,
    regression_inference,
    standardized_squared_error,
)
from bayesynth.evaluation.report import report
from bayesynth.evaluation.risk import (
    AttributeInference,
    DistanceToClosestRecord,
    IdentificationRisk,
    SinglingOut,
    SinglingOutNullTest,
    attribute_inference_risk,
    distance_to_closest_record,
    identification_risk,
    identification_risk_sweep,
    kept_columns,
    outlier_attribute_disclosure,
    singling_out_risk,
    synthetic_kind,
)
from bayesynth.evaluation.tau_risk import expected_tau, expected_within
from bayesynth.evaluation.utility import (
    PropensityResult,
    crosstab_comparison,
    ecdf_distances,
    ks_distance,
    marginal_fidelity,
    marginal_utility,
    propensity_auc,
    propensity_score_utility,
    tv_distance,
)

__all__ = [
    "diagnose",
    "Diagnosis",
    "copula_diagnostics",
    "synthesis_diagnostics",
    "convergence_summary",
    "ConvergenceSummary",
    "ecdf_distances",
    "ks_distance",
    "tv_distance",
    "marginal_utility",
    "marginal_fidelity",
    "crosstab_comparison",
    "propensity_score_utility",
    "PropensityResult",
    "interval_overlap",
    "standardized_squared_error",
    "fit_regression",
    "regression_inference",
    "RegressionComparison",
    "combine_estimates",
    "CombinedEstimate",
    "identification_risk",
    "identification_risk_sweep",
    "IdentificationRisk",
    "outlier_attribute_disclosure",
    "distance_to_closest_record",
    "DistanceToClosestRecord",
    "attribute_inference_risk",
    "AttributeInference",
    "singling_out_risk",
    "SinglingOut",
    "SinglingOutNullTest",
    "synthetic_kind",
    "kept_columns",
    "propensity_auc",
    "report",
    "tau_metrics",
    "within_p_shares",
    "loglinear_utility",
    "paired_counts",
    "tune_saturated",
    "SaturatedTuning",
    "simulation_based_calibration",
    "SBCResult",
    "SBCProblem",
    "copula_sbc_problem",
    "expected_tau",
    "expected_within",
    "combine_marginal_estimates",
]
