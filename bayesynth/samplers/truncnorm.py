"""Exact sampling of the univariate truncated normal distribution (numba kernels).

The sampler draws X ~ N(0, 1) restricted to (a, b), for any -inf <= a < b <= inf, by rejection
from one of four proposals chosen from (a, b) so that the acceptance probability is bounded away
from zero everywhere, including the far tails:

* normal proposal, when the interval holds 0 and is wide (acceptance >= 0.49);
* uniform proposal on (a, b) with acceptance ``exp(-(x^2 - m^2)/2)`` (m the point of (a, b)
  nearest 0), when the interval is narrow, ``(b - a)(|a| + |b|) <= 2``, or holds 0 and is
  shorter than sqrt(2 pi) (acceptance >= exp(-1) in the worst case);
* half-normal proposal, when 0 <= a < 0.5 and the interval is wide;
* translated exponential proposal with Robert's optimal rate
  ``lambda = (a + sqrt(a^2 + 4)) / 2``, when a >= 0.5 (acceptance >= 0.5 after accounting for
  the upper bound).

Intervals with b <= 0 are mirrored. No normal CDF or its inverse is evaluated, so there is no
loss of accuracy when (a, b) lies 40 standard deviations out: every draw is exact up to
floating point. Acceptance tests use the squeeze ``1 - d/2 <= exp(-d/2)`` before the exponential.
Randomness comes from the inlined generator of :mod:`bayesynth.samplers.rng`, seeded from the
caller's :class:`numpy.random.Generator`.

References
----------
Robert, C. P. (1995). Simulation of truncated normal variables. *Statistics and Computing*, 5,
121-125.
Chopin, N. (2011). Fast simulation of truncated Gaussian distributions. *Statistics and
Computing*, 21, 275-288.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bayesynth.samplers.rng import exponential, new_state, normal, uniform

__all__ = ["truncnorm", "truncnorm_std"]

_SQRT_2PI = math.sqrt(2.0 * math.pi)


@numba.njit(inline="always")
def _accept(st, d):  # pragma: no cover - compiled
    """Accept with probability exp(-d / 2) (d >= 0), using the squeeze 1 - d/2 first."""
    u = uniform(st)
    if u <= 1.0 - 0.5 * d:
        return True
    return u <= math.exp(-0.5 * d)


@numba.njit(cache=True)
def _tn_right(st, sp, a, b):  # pragma: no cover - compiled
    """N(0,1) truncated to (a, b) with 0 <= a < b <= inf."""
    w = b - a
    if w * (a + b) <= 2.0:
        # Uniform proposal; density ratio exp(-(x^2 - a^2)/2) <= 1 on (a, b).
        while True:
            x = a + w * uniform(st)
            if _accept(st, (x - a) * (x + a)):
                return x
    elif a < 0.5:
        while True:
            x = abs(normal(st, sp))
            if a <= x <= b:
                return x
    else:
        lam = 0.5 * (a + math.sqrt(a * a + 4.0))
        while True:
            x = a + exponential(st) / lam
            if x > b:
                continue
            d = x - lam
            if _accept(st, d * d):
                return x


@numba.njit(cache=True)
def _tn_std(st, sp, a, b):  # pragma: no cover - compiled
    """One draw of N(0,1) truncated to (a, b); ``(st, sp)`` is the kernel RNG state."""
    if not a < b:
        # Degenerate interval (numerically empty): the only feasible point.
        return 0.5 * (a + b) if math.isfinite(a + b) else (a if math.isfinite(a) else b)
    w = b - a
    if w * (abs(a) + abs(b)) <= 2.0:
        # Narrow interval (the common case for ordered columns with many values): uniform
        # proposal, density ratio exp(-(x^2 - m^2)/2) with m the point nearest 0.
        m2 = 0.0 if a < 0.0 < b else min(a * a, b * b)
        while True:
            x = a + w * uniform(st)
            if _accept(st, x * x - m2):
                return x
    if a >= 0.0:
        return _tn_right(st, sp, a, b)
    if b <= 0.0:
        return -_tn_right(st, sp, -b, -a)
    if w < _SQRT_2PI:
        while True:
            x = a + w * uniform(st)
            if _accept(st, x * x):
                return x
    while True:
        x = normal(st, sp)
        if a < x < b:
            return x


@numba.njit(cache=True)
def _truncnorm_loop(st, sp, mu, sigma, lower, upper, out):  # pragma: no cover - compiled
    for i in range(out.shape[0]):
        s = sigma[i]
        out[i] = mu[i] + s * _tn_std(st, sp, (lower[i] - mu[i]) / s, (upper[i] - mu[i]) / s)


def truncnorm(
    rng: np.random.Generator,
    mu: np.ndarray | float,
    sigma: np.ndarray | float,
    lower: np.ndarray | float,
    upper: np.ndarray | float,
) -> np.ndarray:
    """Draw from N(mu, sigma^2) truncated to (lower, upper), elementwise.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (its state advances).
    mu, sigma, lower, upper : array_like
        Broadcastable parameters; ``lower`` may be ``-inf`` and ``upper`` ``inf``.

    Returns
    -------
    numpy.ndarray
        One draw per broadcast element.

    Examples
    --------
    >>> import numpy as np
    >>> x = truncnorm(np.random.default_rng(0), 0.0, 1.0, 40.0, np.inf)
    >>> bool(x >= 40.0)
    True
    """
    mu_, sigma_, lo_, hi_ = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (mu, sigma, lower, upper))
    )
    if np.any(sigma_ <= 0):
        raise ValueError("truncnorm: every sigma must be positive.")
    if np.any(lo_ > hi_):
        raise ValueError("truncnorm: every lower bound must not exceed its upper bound.")
    shape = mu_.shape
    out = np.empty(mu_.size)
    st, sp = new_state(rng)
    _truncnorm_loop(
        st,
        sp,
        np.ascontiguousarray(mu_).ravel(),
        np.ascontiguousarray(sigma_).ravel(),
        np.ascontiguousarray(lo_).ravel(),
        np.ascontiguousarray(hi_).ravel(),
        out,
    )
    return out.reshape(shape)


def truncnorm_std(rng: np.random.Generator, a: float, b: float, size: int) -> np.ndarray:
    """Draw ``size`` values of N(0, 1) truncated to (a, b) (for tests and notebooks).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (its state advances).
    a, b : float
        Truncation bounds; ``a`` may be ``-inf`` and ``b`` ``inf``.
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray
        Shape ``(size,)``.
    """
    return truncnorm(rng, np.zeros(size), 1.0, a, b)
