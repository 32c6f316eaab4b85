"""Posterior-predictive synthesizers: posterior draws -> synthetic pandas DataFrames.

Every method is a :class:`Synthesizer` (``fit``, ``from_posterior``, ``sample``, ``save``,
``load``): :class:`CopulaSynthesizer`, :class:`PseudoPosteriorSynthesizer`,
:class:`SaturatedCountSynthesizer`, :class:`LatentClassSynthesizer`, and the baselines
:class:`RankLikelihoodSynthesizer`, :class:`CartSynthesizer` and
:class:`PerturbedHistogramSynthesizer`. ``Synthesizer.load(path)`` reads any of them back.

Internals (the protocol's argument checks, the copula's latent draws, the BART forest, the
marginal distributions) stay importable from their modules. Combining estimates over the
synthetic datasets is evaluation (:func:`bayesynth.evaluation.combine_marginal_estimates`).
"""

from bayesynth.synthesis.base import Synthesizer, select_draws
from bayesynth.synthesis.baselines import CartSynthesizer, RankLikelihoodSynthesizer
from bayesynth.synthesis.copula import CATEGORICAL_MODES, CopulaSynthesizer
from bayesynth.synthesis.latent_class import (
    LatentClassSynthesizer,
    full_table_probabilities,
    marginal_probabilities,
    probability_summary,
    synthesize_latent_class,
)
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
    "select_draws",
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
    "CATEGORICAL_MODES",
    "synthesize_table",
    "synthesize_dense",
]
