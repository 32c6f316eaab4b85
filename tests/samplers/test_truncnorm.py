"""The truncated-normal sampler against the exact CDF, far tails and one-sided intervals too."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_ndtr, ndtr

from bayesynth.samplers.truncnorm import truncnorm, truncnorm_std

N = 20_000
P_MIN = 1e-3  # the draws are deterministic given the seed; this only guards a real mismatch


def exact_cdf(a: float, b: float):
    """CDF of N(0,1) truncated to (a, b), evaluated in log space so that tails are exact."""
    if a >= 0:  # right tail: survival functions
        la, lb = log_ndtr(-a), log_ndtr(-b)

        def cdf(x):
            lx = log_ndtr(-np.asarray(x))
            return -np.expm1(lx - la) / -np.expm1(lb - la)
    elif b <= 0:  # left tail
        la, lb = log_ndtr(a), log_ndtr(b)

        def cdf(x):
            lx = log_ndtr(np.asarray(x))
            return (np.exp(lx - lb) - np.exp(la - lb)) / -np.expm1(la - lb)
    else:
        pa, pb = ndtr(a), ndtr(b)

        def cdf(x):
            return (ndtr(np.asarray(x)) - pa) / (pb - pa)
    return cdf


INTERVALS = [
    (-np.inf, np.inf),
    (0.0, np.inf),
    (-np.inf, 0.0),
    (-0.3, np.inf),
    (1.5, np.inf),
    (-np.inf, -2.5),
    (8.0, np.inf),
    (40.0, np.inf),
    (-np.inf, -37.5),
    (-1.0, 1.0),
    (-0.01, 0.02),
    (0.2, 3.0),
    (0.3, 0.31),
    (2.0, 2.5),
    (5.0, 9.0),
    (30.0, 30.05),
    (-12.0, -11.0),
    (-4.0, 6.0),
]


@pytest.mark.parametrize("a,b", INTERVALS)
def test_against_exact_cdf(a, b, rng):
    x = truncnorm_std(rng, a, b, N)
    assert np.all(x > a) or a == -np.inf
    assert np.all(x >= a) and np.all(x <= b)
    res = stats.kstest(x, exact_cdf(a, b))
    assert res.pvalue > P_MIN, (a, b, res)


@pytest.mark.parametrize("a,b", [(40.0, np.inf), (8.0, 9.0), (-np.inf, -37.5)])
def test_far_tail_moments(a, b, rng):
    """In the far tail the mean of (X - a) is known in closed form to high accuracy."""
    x = truncnorm_std(rng, a, b, N)
    if b == np.inf:
        # E[X | X > a] = phi(a) / Q(a) (inverse Mills ratio), computed in log space.
        mills = np.exp(stats.norm.logpdf(a) - log_ndtr(-a))
        se = x.std() / np.sqrt(N)
        assert abs(x.mean() - mills) < 4 * se
    elif a == -np.inf:
        mills = -np.exp(stats.norm.logpdf(b) - log_ndtr(b))
        assert abs(x.mean() - mills) < 4 * x.std() / np.sqrt(N)
    else:
        ref = stats.truncnorm(a, b)
        assert abs(x.mean() - ref.mean()) < 4 * ref.std() / np.sqrt(N)


def test_location_scale_and_broadcast(rng):
    mu = np.array([[0.0], [10.0]])
    x = truncnorm(rng, mu, 2.0, mu + 1.0, np.inf * np.ones((2, 3)))
    assert x.shape == (2, 3)
    assert np.all(x > mu + 1.0)
    big = truncnorm(rng, 5.0, 2.0, 6.0, 8.0 * np.ones(N))
    res = stats.kstest((big - 5.0) / 2.0, exact_cdf(0.5, 1.5))
    assert res.pvalue > P_MIN


def test_reproducible_and_advances_generator(seed):
    a = truncnorm(np.random.default_rng(seed), np.zeros(5), 1.0, 0.0, np.inf)
    b = truncnorm(np.random.default_rng(seed), np.zeros(5), 1.0, 0.0, np.inf)
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(seed)
    first = truncnorm(g, np.zeros(5), 1.0, 0.0, np.inf)
    second = truncnorm(g, np.zeros(5), 1.0, 0.0, np.inf)
    assert not np.array_equal(first, second)


def test_bad_parameters(rng):
    with pytest.raises(ValueError, match="sigma"):
        truncnorm(rng, 0.0, -1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="lower"):
        truncnorm(rng, 0.0, 1.0, 2.0, 1.0)
