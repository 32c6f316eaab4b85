"""Posterior-predictive synthesizers: posterior draws -> synthetic pandas DataFrames."""

from bayesynth.synthesis.bart_forest import BartForest
from bayesynth.synthesis.baselines import CartSynthesizer, RankLikelihoodSynthesizer
from bayesynth.synthesis.copula import CATEGORICAL_MODES, CopulaSynthesizer, draw_latent
from bayesynth.synthesis.marginals import DiscreteMarginal, SmoothMarginal

__all__ = [
    "CopulaSynthesizer",
    "RankLikelihoodSynthesizer",
    "CartSynthesizer",
    "BartForest",
    "draw_latent",
    "CATEGORICAL_MODES",
    "DiscreteMarginal",
    "SmoothMarginal",
]
