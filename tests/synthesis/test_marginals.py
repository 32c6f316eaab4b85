"""Estimated marginals: empirical quantiles and the kernel-smoothed CDF."""

from __future__ import annotations

import numpy as np

from bayesynth.synthesis.marginals import (
    DiscreteMarginal,
    SmoothMarginal,
    marginal_from_dict,
    silverman_bandwidth,
)


def test_discrete_quantiles():
    m = DiscreteMarginal.fit(np.array([3, 1, 1, 2, 3, 3]))
    np.testing.assert_array_equal(m.values, [1, 2, 3])
    np.testing.assert_allclose(m.cdf, [2 / 6, 3 / 6, 1.0])
    u = np.array([0.0, 0.2, 2 / 6, 0.34, 0.5, 0.51, 1.0])
    np.testing.assert_array_equal(m.ppf(u), [1, 1, 1, 2, 2, 3, 3])
    # uniform input reproduces the empirical frequencies
    draws = m.ppf(np.random.default_rng(0).random(60_000))
    np.testing.assert_allclose(np.bincount(draws)[1:] / 60_000, [1 / 3, 1 / 6, 1 / 2], atol=0.01)


def test_smooth_cdf_close_to_ecdf_and_inside_range(rng):
    x = rng.gamma(2.0, 3.0, size=3000)
    m = SmoothMarginal.fit(x)
    assert m.grid[0] == x.min() and m.grid[-1] == x.max()
    assert np.all(np.diff(m.cdf) > 0) and m.cdf[0] == 0 and m.cdf[-1] == 1
    xs = np.sort(x)
    ecdf = np.arange(1, len(xs) + 1) / len(xs)
    # smoothing shifts the CDF by about one bandwidth of density at most
    assert np.max(np.abs(m.cdf_at(xs) - ecdf)) < 0.03
    u = np.random.default_rng(1).random(20_000)
    y = m.ppf(u)
    assert y.min() >= x.min() and y.max() <= x.max()
    np.testing.assert_allclose(m.cdf_at(m.ppf(np.array([0.1, 0.5, 0.9]))), [0.1, 0.5, 0.9],
                               atol=1e-3)


def test_smooth_integer_and_round_trip(rng):
    x = rng.integers(-20, 20, size=500).astype(float)
    m = SmoothMarginal.fit(x, integer=True)
    y = m.ppf(rng.random(100))
    assert np.all(y == np.round(y))
    m2 = marginal_from_dict(m.to_dict())
    np.testing.assert_array_equal(m2.ppf(np.linspace(0, 1, 11)), m.ppf(np.linspace(0, 1, 11)))
    d = DiscreteMarginal.fit(np.array([0, 1, 1]))
    np.testing.assert_array_equal(marginal_from_dict(d.to_dict()).values, d.values)


def test_silverman():
    x = np.random.default_rng(0).normal(size=10_000)
    assert abs(silverman_bandwidth(x) - 0.9 * 10_000 ** -0.2) < 0.02
    assert silverman_bandwidth(np.array([1.0, 1.0, 2.0])) > 0
