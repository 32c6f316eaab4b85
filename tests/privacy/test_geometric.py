"""The exact geometric mechanism, the neighbour vocabulary and the seed policy of releases."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from bayesynth.errors import InvalidParameterError, PrivacyWarning
from bayesynth.privacy import (
    censor_bound,
    check_epsilon,
    geometric_logpmf,
    geometric_mechanism,
    histogram_sensitivity,
    privacy_loss,
)
from bayesynth.privacy.geometric import _bernoulli_exp, _uniform_below, geometric_noise


def chisquare_against_pmf(noise: np.ndarray, q: float) -> float:
    """p-value of the draws against the two-sided geometric law, tails pooled."""
    cap = max(2, int(np.ceil(np.log(1e-3) / np.log(q))))
    ks = np.arange(-cap, cap + 1)
    p = (1 - q) / (1 + q) * q ** np.abs(ks)
    tail = (1 - p.sum()) / 2
    expected = np.r_[tail, p, tail] * len(noise)
    observed = np.r_[(noise < -cap).sum(), [(noise == k).sum() for k in ks],
                     (noise > cap).sum()]
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("epsilon,neighbours", [(0.5, "change_one"), (1.0, "add_remove"),
                                                (3.0, "add_remove"), (0.1, "change_one")])
def test_exact_sampler_has_the_two_sided_geometric_law(epsilon, neighbours):
    rng = np.random.default_rng(0)
    sens = histogram_sensitivity(neighbours)
    noise = geometric_noise(40_000, Fraction(epsilon) / sens, rng)
    q = math.exp(-epsilon / sens)
    assert noise.dtype == np.int64
    assert chisquare_against_pmf(noise, q) > 1e-3
    var = 2 * q / (1 - q) ** 2
    # the variance of the sample variance of a discrete Laplace: kurtosis below 6
    assert abs(np.var(noise) - var) < 4 * var * math.sqrt(5 / len(noise))


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.5])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    rng = np.random.default_rng(1)
    frac = Fraction(gamma)
    hits = sum(_bernoulli_exp(rng, frac.numerator, frac.denominator) for _ in range(20_000))
    assert stats.binomtest(hits, 20_000, math.exp(-gamma)).pvalue > 1e-3


def test_uniform_below_handles_numbers_beyond_64_bits():
    rng = np.random.default_rng(2)
    m = 3 * 2**70 + 5
    draws = [_uniform_below(rng, m) for _ in range(4000)]
    assert all(0 <= d < m for d in draws)
    # the top third of the range gets a third of the draws
    top = sum(d >= 2 * m // 3 for d in draws)
    assert stats.binomtest(top, 4000, 1 / 3).pvalue > 1e-3


def test_geometric_mechanism_adds_integer_noise_to_counts():
    counts = np.array([[3, 0], [10, 7]])
    out = geometric_mechanism(counts, 1.0)
    assert out.shape == counts.shape and out.dtype == np.int64
    with pytest.raises(Exception, match="integer counts"):
        geometric_mechanism(np.array([1.5, 2.0]), 1.0)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 2.0])
def test_privacy_loss_on_neighbouring_tables_equals_epsilon(epsilon):
    x = np.array([[30, 12], [7, 51]])
    change_one = x + np.array([[-1, 1], [0, 0]])  # one record changes cell
    assert privacy_loss(x, change_one, epsilon, "change_one") == pytest.approx(epsilon,
                                                                              rel=1e-12)
    add_one = x + np.array([[0, 0], [1, 0]])
    assert privacy_loss(x, add_one, epsilon, "add_remove") == pytest.approx(epsilon, rel=1e-12)
    # noise scaled for add/remove loses twice the budget on change-one neighbours
    assert privacy_loss(x, change_one, epsilon, "add_remove") == pytest.approx(2 * epsilon)


def test_logpmf_sums_to_one_and_matches_the_rate():
    k = np.arange(-400, 401)
    p = np.exp(geometric_logpmf(k, 1.0, "change_one"))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[401] / p[400] == pytest.approx(math.exp(-0.5))


def test_censor_bound_per_relation():
    assert censor_bound(4.0, "change_one") == 1.0
    assert censor_bound(4.0, "add_remove") == 2.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "one", None, True])
def test_bad_epsilon_is_named(bad):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        check_epsilon(bad)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        geometric_mechanism(np.array([1, 2]), bad)


def test_unknown_neighbour_relation_is_named():
    with pytest.raises(InvalidParameterError, match="'hamming'.*change_one"):
        geometric_mechanism(np.array([1, 2]), 1.0, "hamming")
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        geometric_mechanism(np.array([1, 2]), 1.0, sensitivity=-2)


def test_releases_use_fresh_entropy_unless_seeded():
    counts = np.full(50, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        a = geometric_mechanism(counts, 1.0)
        b = geometric_mechanism(counts, 1.0)
    assert not np.array_equal(a, b)
    with pytest.warns(PrivacyWarning, match="fixed random_seed"):
        c = geometric_mechanism(counts, 1.0, random_seed=7)
    with pytest.warns(PrivacyWarning):
        d = geometric_mechanism(counts, 1.0, random_seed=7)
    np.testing.assert_array_equal(c, d)
