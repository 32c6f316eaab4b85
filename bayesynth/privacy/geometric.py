"""The geometric mechanism, sampled exactly with integer arithmetic.

Two-sided geometric (discrete Laplace) noise ``P(k) = (1 - q) / (1 + q) q^|k|`` with
``q = exp(-epsilon / sensitivity)`` makes a count vector of L1 sensitivity ``sensitivity``
epsilon-DP (Ghosh, Roughgarden & Sundararajan 2012). The noise is drawn with the algorithm of
Canonne, Kamath & Steinke (2020, Algorithms 1-2): only uniform integers and rational Bernoulli
trials, no floating point, so the output law is exactly the two-sided geometric for the rational
``epsilon / sensitivity`` that the float ``epsilon`` represents. (Floating-point Laplace or
inversion samplers have gaps and truncated tails that can leak the true value: Mironov 2012.)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from bayesynth.errors import DataValidationError, InvalidParameterError
from bayesynth.privacy.neighbours import (
    _as_fraction,
    check_epsilon,
    check_neighbours,
    histogram_sensitivity,
    release_rng,
)

__all__ = [
    "geometric_mechanism",
    "geometric_noise",
    "geometric_logpmf",
    "privacy_loss",
]


def _uniform_below(rng: np.random.Generator, m: int) -> int:
    """Draw a uniform integer in {0, ..., m - 1}, exact for any positive Python int m."""
    if m <= 1:
        return 0
    if m < 2**63:
        return int(rng.integers(0, m))
    bits = (m - 1).bit_length()
    nbytes = (bits + 7) // 8
    while True:  # rejection from uniform bits
        x = int.from_bytes(rng.bytes(nbytes), "little") >> (8 * nbytes - bits)
        if x < m:
            return x


def _bernoulli_exp_unit(rng: np.random.Generator, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num/den <= 1 (Canonne et al. 2020, Algorithm 1)."""
    k = 1
    while _uniform_below(rng, den * k) < num:  # Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def _bernoulli_exp(rng: np.random.Generator, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for any num/den >= 0."""
    while num > den:
        if not _bernoulli_exp_unit(rng, 1, 1):
            return False
        num -= den
    return _bernoulli_exp_unit(rng, num, den)


def _discrete_laplace(rng: np.random.Generator, s: int, t: int) -> int:
    """One draw with P(y) proportional to exp(-|y| s / t), y in Z (Canonne et al., Algorithm 2)."""
    while True:
        u = _uniform_below(rng, t)
        if not _bernoulli_exp(rng, u, t):
            continue
        v = 0
        while _bernoulli_exp_unit(rng, 1, 1):
            v += 1
        y = (u + t * v) // s  # geometric with parameter exp(-s/t)
        negative = bool(rng.integers(2))
        if negative and y == 0:
            continue
        return -y if negative else y


def geometric_noise(shape, rate: Fraction, rng: np.random.Generator) -> np.ndarray:
    """Exact two-sided geometric noise with ``q = exp(-rate)`` for a rational ``rate > 0``.

    Parameters
    ----------
    shape : int or tuple
    rate : fractions.Fraction
        epsilon / sensitivity, exactly.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of int64
    """
    rate = Fraction(rate)
    if rate <= 0:
        raise InvalidParameterError(f"The noise rate must be positive; got {rate}.")
    s, t = rate.numerator, rate.denominator
    size = int(np.prod(shape, dtype=np.int64))
    out = np.fromiter((_discrete_laplace(rng, s, t) for _ in range(size)), dtype=np.int64,
                      count=size)
    return out.reshape(shape)


def _rate(epsilon: float, neighbours: str, sensitivity: float | None) -> Fraction:
    epsilon = check_epsilon(epsilon)
    if sensitivity is None:
        sensitivity = histogram_sensitivity(neighbours)
    else:
        check_neighbours(neighbours)
        if not np.isfinite(sensitivity) or sensitivity <= 0:
            raise InvalidParameterError(
                f"sensitivity must be a positive finite number; got {sensitivity!r}.",
                column="sensitivity")
    return _as_fraction(epsilon) / _as_fraction(sensitivity)


def geometric_mechanism(counts: np.ndarray, epsilon: float, neighbours: str = "change_one", *,
                        sensitivity: float | None = None, random_seed=None) -> np.ndarray:
    """Add exact two-sided geometric noise to integer counts: epsilon-DP under ``neighbours``.

    Parameters
    ----------
    counts : array of int
        True counts (any shape).
    epsilon : float
        Privacy loss of this release (positive, finite).
    neighbours : {"change_one", "add_remove"}, default "change_one"
        The neighbour relation of the guarantee.
    sensitivity : float, optional
        L1 sensitivity of ``counts`` under ``neighbours``; default that of one histogram
        (2 under change-one, 1 under add/remove). Give it when ``counts`` holds several tables
        or per-record contributions larger than one.
    random_seed : int, Generator or None
        ``None`` (the default) draws the noise from fresh OS entropy. A fixed seed warns with a
        :class:`~bayesynth.errors.PrivacyWarning`: whoever knows it can remove the noise.

    Returns
    -------
    numpy.ndarray of int64
        ``counts + noise``; noisy counts can be negative: keep them so (post-processing them away
        loses information that a model of the noise uses).
    """
    rate = _rate(epsilon, neighbours, sensitivity)
    rng, _ = release_rng(random_seed, "geometric_mechanism")
    return _add_noise(counts, rate, rng)


def _add_noise(counts, rate: Fraction, rng: np.random.Generator) -> np.ndarray:
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        if counts.size and (not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts))):
            raise DataValidationError("The geometric mechanism needs integer counts.")
    return counts.astype(np.int64) + geometric_noise(counts.shape, rate, rng)


def geometric_logpmf(noise: np.ndarray, epsilon: float, neighbours: str = "change_one", *,
                     sensitivity: float | None = None) -> np.ndarray:
    """Log P(noise = k) of the two-sided geometric law with ``q = exp(-epsilon / sensitivity)``.

    Parameters
    ----------
    noise : array of int
    epsilon : float
    neighbours : {"change_one", "add_remove"}, default "change_one"
    sensitivity : float, optional
        Default: that of one histogram under ``neighbours``.

    Returns
    -------
    numpy.ndarray
    """
    rate = float(_rate(epsilon, neighbours, sensitivity))
    q = np.exp(-rate)
    return np.log1p(-q) - np.log1p(q) - np.abs(np.asarray(noise)) * rate


def privacy_loss(x: np.ndarray, x_prime: np.ndarray, epsilon: float,
                 neighbours: str = "change_one", *, sensitivity: float | None = None,
                 span: int = 60) -> float:
    """Exact worst-case privacy loss of one geometric release of ``x`` against ``x_prime``.

    ``max_y |log P(y | x) - log P(y | x')|`` over noisy outputs y, evaluated cell by cell (the
    cells are independent, so the worst case adds up) within ``span`` of both counts (the log
    ratio is constant beyond).

    Parameters
    ----------
    x, x_prime : array of int
        Two count tables of the same shape.
    epsilon : float
        The epsilon the noise was drawn with.
    neighbours : {"change_one", "add_remove"}, default "change_one"
    sensitivity : float, optional
        As in :func:`geometric_mechanism`.
    span : int, default 60

    Returns
    -------
    float
    """
    x, xp = np.asarray(x, np.int64).ravel(), np.asarray(x_prime, np.int64).ravel()
    worst = 0.0
    for a, b in zip(x, xp):
        if a == b:
            continue
        y = np.arange(min(a, b) - span, max(a, b) + span + 1)
        r = (geometric_logpmf(y - a, epsilon, neighbours, sensitivity=sensitivity)
             - geometric_logpmf(y - b, epsilon, neighbours, sensitivity=sensitivity))
        worst += float(np.max(np.abs(r)))
    return worst
