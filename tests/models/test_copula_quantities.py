"""Implied synthesis quantities of the copula against closed forms."""

import numpy as np
from scipy.stats import norm

from bayesynth.models.copula_quantities import CopulaBlocks, implied_quantities


def _one_binary_one_ordered():
    # Latent column 0: the binary variable's single MNP utility (level "b" when u > 0,
    # reference "a"); column 1: an ordered variable. Non-unit variances on purpose.
    blocks = CopulaBlocks(
        ({"name": "y", "latent": [0], "levels": ["a", "b"], "likelihood": "mnp",
          "reference": 0},),
        ({"name": "t", "latent": 1},),
    )
    alpha = np.array([[0.3, 0.0]])
    Lam = np.array([[[0.9], [1.6]]])
    sigma = np.array([[0.7, 1.1]])
    return blocks, alpha, Lam, sigma


def test_binary_probability_and_conditional_mean_match_the_truncated_normal():
    blocks, alpha, Lam, sigma = _one_binary_one_ordered()
    n_mc = 400_000
    out = implied_quantities(alpha, Lam, sigma, blocks, n_mc=n_mc, random_seed=3)
    s_c = np.sqrt(Lam[0, 0, 0] ** 2 + sigma[0, 0] ** 2)
    sd_t = np.sqrt(Lam[0, 1, 0] ** 2 + sigma[0, 1] ** 2)
    rho = Lam[0, 0, 0] * Lam[0, 1, 0] / (s_c * sd_t)
    a = alpha[0, 0] / s_c
    p_b = norm.cdf(a)
    # E[t / sd_t | u > 0] = rho * phi(a) / Phi(a); E[t / sd_t | u < 0] = -rho phi(a) / Phi(-a).
    m_b = rho * norm.pdf(a) / norm.cdf(a)
    m_a = -rho * norm.pdf(a) / norm.cdf(-a)
    se_p = np.sqrt(p_b * (1 - p_b) / n_mc)
    np.testing.assert_allclose(out["category_prob"][0], [1 - p_b, p_b], atol=5 * se_p)
    # Monte Carlo error of a conditional mean of a standardised variable: below 1/sqrt(n_h).
    cm = out["conditional_mean"][0, :, 0]
    np.testing.assert_allclose(cm[1], m_b, atol=5 / np.sqrt(p_b * n_mc))
    np.testing.assert_allclose(cm[0], m_a, atol=5 / np.sqrt((1 - p_b) * n_mc))
    assert out["valid_share"][0, 0] == 1.0
