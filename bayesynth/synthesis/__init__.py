"""Posterior-predictive synthesizers: posterior draws -> synthetic pandas DataFrames."""

from bayesynth.synthesis.copula import CATEGORICAL_MODES, CopulaSynthesizer, draw_latent
from bayesynth.synthesis.marginals import DiscreteMarginal, SmoothMarginal

__all__ = [
    "CopulaSynthesizer",
    "draw_latent",
    "CATEGORICAL_MODES",
    "DiscreteMarginal",
    "SmoothMarginal",
]
