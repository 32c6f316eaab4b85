"""Count distributions of saturated count synthesis: probability functions and draws.

Each cell's synthetic count is drawn from a count distribution centred on its observed count f:

* ``poisson``: mean f;
* ``nbi``: negative binomial, mean f, variance f + sigma f^2;
* ``pig``: Poisson-inverse-Gaussian, mean f, variance f + sigma f^2 (a Poisson whose rate is f times
  an inverse-Gaussian variable of mean 1 and variance sigma);
* ``dpo``: Efron's (1986) double Poisson, mean about f and variance about f / theta when f is
  not small; with ``theta > 1`` it is *under*-dispersed, which Jackson et al. name as future
  work.

Random zeros (empty cells that could hold records) get the pseudocount alpha > 0 as their
mean (for Poisson, NBI and PIG). The double Poisson's mean at a small f is not f: with
theta > 1 far below it (at f = 0.02 about 0.001 with theta = 2, so a random zero then almost
never gets a record), with theta < 1 far above it (0.094 with theta = 0.5, 6.7 with
theta = 0.01);
structural zeros (impossible cells) stay zero (:func:`cell_means`). The probability functions
(:func:`count_pmf`) serve the analytic tau metrics of :mod:`bayesynth.evaluation.tau_risk`; the
draws (:func:`draw_counts`) the samplers of :mod:`bayesynth.synthesis.saturated` and the PyMC
model of :mod:`bayesynth.models.saturated_counts`.

References
----------
Jackson, J., Mitra, R., Francis, B. and Dove, I. (2022). Using saturated count models for
user-friendly synthesis of large confidential administrative databases. *JRSS A*, 185(4).
Efron, B. (1986). Double exponential families and their use in generalized linear regression.
*JASA*, 81(395), 709-721.
Willmot, G. E. (1987). The Poisson-inverse Gaussian distribution as an alternative to the negative
binomial. *Scandinavian Actuarial Journal*, 1987(3-4), 113-127.
"""

from __future__ import annotations

import numba
import numpy as np
from scipy import stats
from scipy.special import gammaln

from bayesynth.errors import InvalidParameterError

__all__ = [
    "FAMILIES",
    "count_pmf",
    "draw_counts",
    "validate_parameters",
    "cell_means",
]

FAMILIES = ("poisson", "nbi", "pig", "dpo")
"""Synthesis distributions: Poisson, negative binomial (NBI), Poisson-inverse-Gaussian, double
Poisson."""


#: Below this dispersion the negative binomial is computed as the Poisson: its parameter
#: p = r / (r + mu) then rounds so close to 1 that the pmf's own error (8e-6 at 1e-12)
#: exceeds its difference from the Poisson (variance f + sigma f^2).
NBI_POISSON_BELOW = 1e-10


def _acts_as_poisson(family: str, sigma: float) -> bool:
    """Whether ``family`` at ``sigma`` is computed as the Poisson (see NBI_POISSON_BELOW)."""
    return family == "poisson" or (sigma == 0 and family != "dpo") or (
        family == "nbi" and sigma < NBI_POISSON_BELOW)


def _scipy_family(family: str, mu: np.ndarray, sigma: float):
    """Return the SciPy distribution (frozen over an array of means), or None if SciPy lacks it."""
    if _acts_as_poisson(family, sigma):
        return stats.poisson(mu)
    if family == "nbi":
        r = 1.0 / sigma
        return stats.nbinom(r, r / (r + mu))
    return None


@numba.njit(cache=True)
def _pig_recursion(mu: float, sigma: float, kmax: int) -> np.ndarray:
    """Return the PIG pmf by Willmot's recursion, carried out on a rescaled scale.

    p_0 underflows for large mu; rescaling keeps every p_k accurate however small.
    """
    t = 1.0 + 2.0 * sigma * mu
    # (1 - sqrt t) / sigma written without the cancellation that made it 0 at sigma 1e-16
    log_p0 = -2.0 * mu / (1.0 + np.sqrt(t))
    logp = np.full(kmax + 1, -np.inf)
    logp[0] = log_p0
    a = 2.0 * sigma * mu / t
    b = mu * mu / t
    prev2, prev1, offset = 1.0, mu / np.sqrt(t), 0.0  # p_{k-2}, p_{k-1} divided by p_0 e^offset
    if kmax >= 1:
        logp[1] = log_p0 + np.log(prev1)
    for k in range(2, kmax + 1):
        cur = a * (1.0 - 1.5 / k) * prev1 + b / (k * (k - 1.0)) * prev2
        if cur > 1e250 or (cur < 1e-250 and cur > 0.0):
            scale = np.log(cur)
            prev1 /= cur
            cur = 1.0
            prev2 = prev2 / np.exp(scale) if prev2 > 0.0 else 0.0
            offset += scale
        logp[k] = log_p0 + offset + np.log(cur) if cur > 0.0 else -np.inf
        prev2, prev1 = prev1, cur
    return np.exp(logp)


def _pig_pmf(mu: float, sigma: float, kmax: int | None) -> np.ndarray:
    """Return the PIG pmf by the recursion of Willmot (1987).

    With t = 1 + 2 sigma mu, p0 = exp((1 - sqrt t) / sigma), p1 = mu / sqrt(t) p0,
    p_k = (2 sigma mu / t)(1 - 3/(2k)) p_{k-1} + mu^2 / (t k (k - 1)) p_{k-2}.

    Without ``kmax`` the support is extended until the tail mass left out is below 1e-10 (the
    PIG's tail is heavy when sigma mu is large).
    """
    if kmax is not None:
        return _pig_recursion(float(mu), float(sigma), int(kmax))
    kmax = int(np.ceil(mu + 12 * np.sqrt(mu + sigma * mu**2) + 20))
    while True:
        p = _pig_recursion(float(mu), float(sigma), kmax)
        if 1.0 - p.sum() < 1e-10 or kmax > 50_000_000:
            return p
        kmax *= 2


def _dpo_kmax(mu: float, theta: float) -> int:
    """Return a kmax beyond which Efron's double Poisson keeps under 1e-13 of its mass.

    Starts at mu + 12 sqrt(mu / theta) + 20 (enough for theta >= 1) and doubles while the last
    term is not negligible against the sum or the terms still grow: mu / theta understates
    the spread when theta is small (theta = 0.01, mu = 0.02 puts 2% beyond that start).
    """
    kmax = int(np.ceil(mu + 12 * np.sqrt(mu / theta) + 20))
    if mu == 0:
        return kmax
    while kmax < 10**8:
        lp = _dpo_logterms(mu, theta, kmax)
        top = lp.max()
        total = top + np.log(np.exp(lp - top).sum())
        if lp[-1] < lp[-2] and lp[-1] - total < np.log(1e-15) - np.log(kmax + 1):
            return kmax
        kmax *= 2
    return kmax


def _dpo_logterms(mu: float, theta: float, kmax: int) -> np.ndarray:
    """Unnormalised log probabilities of Efron's double Poisson at 0..kmax."""
    y = np.arange(kmax + 1, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logy = np.where(y > 0, np.log(np.maximum(y, 1e-300)), 0.0)
        return (0.5 * np.log(theta) - theta * mu - y + y * logy - gammaln(y + 1)
                + theta * y * (1 + np.log(max(mu, 1e-300)) - logy))


def _dpo_pmf(mu: float, theta: float, kmax: int) -> np.ndarray:
    """Efron's double Poisson, normalised numerically over 0..kmax."""
    if mu == 0:
        return np.where(np.arange(kmax + 1) == 0, 1.0, 0.0)
    lp = _dpo_logterms(mu, theta, kmax)
    p = np.exp(lp - lp.max())
    return p / p.sum()


def count_pmf(family: str, mu: float, sigma: float = 0.0, kmax: int | None = None
              ) -> np.ndarray:
    """P(Y = k) for k = 0..kmax of a synthesis distribution with mean ``mu``.

    ``sigma`` is the dispersion (``nbi``, ``pig``: variance mu + sigma mu^2) or, for ``dpo``, the
    precision theta (variance about mu / theta). ``sigma = 0`` gives the Poisson. ``kmax``
    defaults to a value beyond which the tail is negligible.

    Efron's double Poisson has mean and variance close to mu and mu / theta only when mu is not
    small (for mu = 0.2 and theta = 3 the mean is well below 0.2; for mu = 0.02 and
    theta = 0.5 it is 0.094); its pmf is normalised numerically over 0..kmax, whose default
    grows until the tail beyond it is below 1e-13.

    Parameters
    ----------
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    mu : float
        Its mean.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    kmax : int, optional
        Largest k; by default one beyond which the tail is negligible.

    Returns
    -------
    numpy.ndarray
        ``P(Y = k)`` for k = 0..kmax.
    """
    validate_parameters(family, sigma)
    var = mu / sigma if family == "dpo" and sigma > 0 else mu + (
        sigma * mu**2 if family != "dpo" else 0.0)
    if family == "pig" and sigma > 0:
        return _pig_pmf(mu, sigma, kmax)
    dist = _scipy_family(family, mu, sigma)
    if kmax is None:
        # beyond the point whose upper tail is below 1e-12 (NBI tails are long when sigma is big)
        if dist is not None and mu > 0:
            kmax = int(dist.isf(1e-12)) + 1
        elif family == "dpo" and sigma > 0:
            kmax = _dpo_kmax(float(mu), float(sigma))
        else:
            kmax = int(np.ceil(mu + 12 * np.sqrt(var) + 20))
    k = np.arange(kmax + 1)
    if dist is not None:
        return dist.pmf(k)
    return _dpo_pmf(mu, sigma, kmax)


def _draw_by_pmf(rng: np.random.Generator, family: str, sigma: float,
                 f: np.ndarray) -> np.ndarray:
    """Draw counts by inverting each distinct mean's CDF.

    Used for the double Poisson, which has no native sampler.
    """
    f = np.asarray(f, dtype=float)
    out = np.zeros(len(f), dtype=np.int64)
    values, inverse = np.unique(f, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(inverse, minlength=len(values)))]
    u = rng.random(len(f))
    for j, mu in enumerate(values):
        if mu <= 0:
            continue
        sel = order[bounds[j]:bounds[j + 1]]
        cdf = np.cumsum(count_pmf(family, float(mu), sigma))
        out[sel] = np.minimum(np.searchsorted(cdf, u[sel] * cdf[-1], side="right"),
                              len(cdf) - 1)
    return out


def validate_parameters(family: str, sigma: float, alpha: float = 0.0) -> None:
    """Refuse an unknown family or a negative, infinite or (for ``dpo``) zero parameter.

    Parameters
    ----------
    family : str
        Must be one of :data:`FAMILIES`.
    sigma : float
        Dispersion (precision theta for ``dpo``); finite and non-negative (positive for
        ``dpo``).
    alpha : float, default 0.0
        Pseudocount; finite and non-negative.

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        If a parameter is invalid.
    """
    if family not in FAMILIES:
        raise InvalidParameterError(f"family must be one of {FAMILIES}; got {family!r}.",
                                    column="family")
    if not np.isfinite(sigma) or sigma < 0:
        raise InvalidParameterError(
            f"sigma must be a finite non-negative number; got {sigma!r}.", column="sigma")
    if family == "dpo" and sigma <= 0:
        raise InvalidParameterError(
            "For the double Poisson ('dpo') sigma is the precision theta and must be positive "
            "(theta > 1 gives less variance than Poisson).", column="sigma")
    if not np.isfinite(alpha) or alpha < 0:
        raise InvalidParameterError(
            f"alpha must be a finite non-negative pseudocount; got {alpha!r}.", column="alpha")


def draw_counts(rng: np.random.Generator, family: str, sigma: float, f: np.ndarray
                ) -> np.ndarray:
    """Draw counts independently from the synthesis distribution, one per mean in ``f``.

    NumPy's samplers are used; the PIG is drawn as a Poisson mixed over an inverse-Gaussian
    rate, the double Poisson by inversion of its pmf.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    f : numpy.ndarray
        The means.

    Returns
    -------
    numpy.ndarray of int64
        One count per mean.
    """
    validate_parameters(family, sigma)
    f = np.asarray(f, dtype=float)
    if _acts_as_poisson(family, sigma):
        return rng.poisson(f).astype(np.int64)
    if family == "nbi":
        r = 1.0 / sigma
        return rng.negative_binomial(r, r / (r + f)).astype(np.int64)
    if family == "pig":
        nu = rng.wald(1.0, 1.0 / sigma, size=len(f))  # inverse Gaussian, mean 1, variance sigma
        return rng.poisson(f * nu).astype(np.int64)
    return _draw_by_pmf(rng, "dpo", sigma, f)



def cell_means(dense: np.ndarray, structural: np.ndarray, alpha: float) -> np.ndarray:
    """Return the mean of each cell's synthetic count.

    That is its count, alpha for a random zero, and 0 for a structural zero.
    """
    return np.where(structural, 0.0, np.where(dense == 0, alpha, dense)).astype(float)
