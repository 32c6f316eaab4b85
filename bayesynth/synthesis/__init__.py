"""Posterior-predictive synthesizers: posterior draws -> synthetic pandas DataFrames.

Every method is a :class:`Synthesizer` (``fit``, ``from_posterior``, ``sample``, ``save``,
``load``): :class:`CopulaSynthesizer`, :class:`PseudoPosteriorSynthesizer`,
:class:`SaturatedCountSynthesizer`, :class:`LatentClassSynthesizer`, and the baselines
:class:`RankLikelihoodSynthesizer`, :class:`CartSynthesizer` and
:class:`PerturbedHistogramSynthesizer`. ``Synthesizer.load(path)`` reads any of them back.
"""

from bayesynth.synthesis.bart_forest import BartForest
from bayesynth.synthesis.base import Synthesizer, check_sample_args, draw_positions, select_draws
from bayesynth.synthesis.baselines import CartSynthesizer, RankLikelihoodSynthesizer
from bayesynth.synthesis.copula import CATEGORICAL_MODES, CopulaSynthesizer, draw_latent
from bayesynth.synthesis.latent_class import (
    LatentClassSynthesizer,
    combine_marginal_estimates,
    full_table_probabilities,
    marginal_probabilities,
    probability_summary,
    synthesize_latent_class,
)
from bayesynth.synthesis.marginals import DiscreteMarginal, SmoothMarginal
from bayesynth.synthesis.pseudo_posterior import (
    MECHANISMS,
    PerturbedHistogramSynthesizer,
    PseudoPosteriorDiagnostics,
    PseudoPosteriorSynthesizer,
    WeightCalibration,
    calibrate_weights,
    fit_mechanisms,
    lipschitz_bound,
    local_epsilon,
    privacy_weights,
)
from bayesynth.synthesis.saturated import (
    SaturatedCountSynthesizer,
    synthesize_dense,
    synthesize_table,
)

__all__ = [
    "Synthesizer",
    "check_sample_args",
    "select_draws",
    "draw_positions",
    "combine_marginal_estimates",
    "full_table_probabilities",
    "marginal_probabilities",
    "probability_summary",
    "synthesize_latent_class",
    "CopulaSynthesizer",
    "SaturatedCountSynthesizer",
    "LatentClassSynthesizer",
    "RankLikelihoodSynthesizer",
    "CartSynthesizer",
    "PseudoPosteriorSynthesizer",
    "PerturbedHistogramSynthesizer",
    "PseudoPosteriorDiagnostics",
    "local_epsilon",
    "WeightCalibration",
    "calibrate_weights",
    "fit_mechanisms",
    "lipschitz_bound",
    "privacy_weights",
    "MECHANISMS",
    "BartForest",
    "draw_latent",
    "CATEGORICAL_MODES",
    "DiscreteMarginal",
    "SmoothMarginal",
    "synthesize_table",
    "synthesize_dense",
]
