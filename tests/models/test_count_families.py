"""Count distributions of saturated count synthesis: probability functions and draws.

Statistical checks use fixed seeds; tolerances come from the Monte Carlo error of the quantity
checked (binomial or replicate standard errors) or from a test's p-value (>= 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bayesynth.models.count_families import count_pmf, draw_counts
from tests.conftest import COUNT_SETTINGS


@pytest.mark.parametrize("mu,sigma", [(0.02, 1.0), (1.0, 0.1), (7.0, 1.0), (40.0, 10.0),
                                      (3.0, 100.0)])
def test_pig_pmf_matches_numerical_integration(mu, sigma):
    """P(k) = int Poisson(k | mu nu) IG(nu | mean 1, var sigma) d nu, by quadrature."""
    pmf = count_pmf("pig", mu, sigma)
    ig = stats.invgauss(mu=sigma, scale=1.0 / sigma)  # mean 1, variance sigma
    assert ig.mean() == pytest.approx(1.0) and ig.var() == pytest.approx(sigma)
    for k in [0, 1, 2, 5, int(mu)]:
        edges = [0, 1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, np.inf]
        ref = sum(integrate.quad(lambda v: stats.poisson.pmf(k, mu * v) * ig.pdf(v), a, b,
                                 limit=400, epsabs=1e-15, epsrel=1e-10)[0]
                  for a, b in zip(edges[:-1], edges[1:]))
        assert pmf[k] == pytest.approx(ref, rel=1e-6, abs=1e-13)
    k = np.arange(len(pmf))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    mean = (k * pmf).sum()
    assert mean == pytest.approx(mu, rel=1e-6)
    assert ((k - mean) ** 2 * pmf).sum() == pytest.approx(mu + sigma * mu**2, rel=1e-4)


def test_nbi_and_poisson_pmfs_have_the_stated_moments():
    for family, sigma in [("poisson", 0.0), ("nbi", 0.5), ("nbi", 10.0)]:
        pmf = count_pmf(family, 12.0, sigma)
        k = np.arange(len(pmf))
        assert (k * pmf).sum() == pytest.approx(12.0, rel=1e-8)
        assert ((k - 12.0) ** 2 * pmf).sum() == pytest.approx(12 + sigma * 144, rel=1e-6)


def test_double_poisson_is_underdispersed_for_theta_above_one():
    rng = np.random.default_rng(3)
    pmf = count_pmf("dpo", 20.0, 4.0)
    k = np.arange(len(pmf))
    mean = (k * pmf).sum()
    var = ((k - mean) ** 2 * pmf).sum()
    assert mean == pytest.approx(20.0, rel=0.01)
    assert var == pytest.approx(20.0 / 4.0, rel=0.05)  # Efron: variance about mu / theta
    y = draw_counts(rng, "dpo", 4.0, np.full(20_000, 20.0))
    se_mean = np.sqrt(var / len(y))
    assert abs(y.mean() - mean) < 5 * se_mean
    assert y.var() < 0.3 * y.mean()
    # theta < 1 gives over-dispersion
    pmf = count_pmf("dpo", 20.0, 0.5)
    k = np.arange(len(pmf))
    mean = (k * pmf).sum()
    assert ((k - mean) ** 2 * pmf).sum() > 1.5 * 20.0


@pytest.mark.parametrize("family,sigma", COUNT_SETTINGS)
def test_draws_follow_the_pmf(family, sigma):
    rng = np.random.default_rng(4)
    y = draw_counts(rng, family, sigma, np.full(40_000, 2.5))
    pmf = count_pmf(family, 2.5, sigma)
    cap = 8
    expected = np.r_[pmf[:cap], pmf[cap:].sum()] * len(y)
    observed = np.bincount(np.minimum(y, cap), minlength=cap + 1)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
