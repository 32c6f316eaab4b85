"""Lipschitz bounds of pseudo-posterior mechanisms and the epsilon they imply.

Pure functions over per-draw, per-record log-likelihood arrays (Savitsky, Williams & Hu 2022):
record weights decreasing in each record's bound ``s_i = max_draws |f(x_i)|``, the empirical
bound ``Delta = max |alpha_i f(x_i)|`` and the epsilon a bound would give if it held for every
dataset (``4 Delta`` under change-one neighbours, ``2 Delta`` under add/remove). Used by
:mod:`bayesynth.synthesis.pseudo_posterior`.
"""

from __future__ import annotations

import numpy as np

from bayesynth.privacy.neighbours import check_neighbours

__all__ = ["privacy_weights", "lipschitz_bound", "local_epsilon", "weights_from_bounds",
           "record_bounds", "censored_share"]



def weights_from_bounds(s: np.ndarray, lo: float, hi: float, c1: float, c2: float
                         ) -> np.ndarray:
    """Compute alpha = clip(c1 (hi - s) / (hi - lo) + c2, 0, 1), 0 where s is not finite.

    Parameters
    ----------
    s : numpy.ndarray
        Record bounds (:func:`record_bounds`).
    lo, hi : float
        The range the bounds are scaled by.
    c1, c2 : float
        Scale and shift.

    Returns
    -------
    numpy.ndarray
        Weights in [0, 1].
    """
    s = np.asarray(s, dtype=float)
    finite = np.isfinite(s)
    alpha = np.zeros_like(s)
    if hi > lo:
        alpha[finite] = np.clip((hi - s[finite]) / (hi - lo), 0.0, 1.0)
    else:
        alpha[finite] = 1.0
    alpha = np.clip(c1 * alpha + c2, 0.0, 1.0)
    alpha[~finite] = 0.0
    return alpha


def record_bounds(loglik: np.ndarray) -> np.ndarray:
    """Return each record's bound ``s_i = max_s |f_s(x_i)|`` from log-likelihoods (S, n).

    Parameters
    ----------
    loglik : numpy.ndarray, shape (S, n)

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    with np.errstate(invalid="ignore", over="ignore"):
        return np.max(np.abs(loglik), axis=0)


def censored_share(loglik: np.ndarray, weights: np.ndarray, censor: float) -> float:
    """Return the share of records whose term sits at the censoring bound, over the draws.

    The censored likelihood's term of record i is ``clip(alpha_i f(x_i), -c, c)`` (an undefined
    ``f``, NaN, counts as ``-c``; :func:`~bayesynth.models.pseudo_posterior.weighted_observed`).
    Where ``|alpha_i f(x_i)| > c`` the term is constant near that parameter value: the record
    then tells the fit nothing there, and the censored posterior follows the bound instead. This
    is the mean over draws and records of that event (a record of weight 0 never counts).

    Parameters
    ----------
    loglik : numpy.ndarray, shape (S, n)
        Raw per-draw log-likelihoods f_s(x_i) of the censored fit's posterior draws.
    weights : numpy.ndarray, shape (n,)
    censor : float
        The bound c.

    Returns
    -------
    float
        In [0, 1].
    """
    loglik = np.asarray(loglik, dtype=float)
    w = np.asarray(weights, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        term = w[None, :] * loglik
    at_bound = np.abs(term) > censor
    at_bound |= np.isnan(term) & (w[None, :] > 0)
    return float(at_bound.mean())


def privacy_weights(loglik: np.ndarray, c1: float = 1.0, c2: float = 0.0) -> np.ndarray:
    """Record weights from per-draw log-likelihoods (S, n) of an unweighted fit.

    With the record-level bound ``s_i = max_s |f_s(x_i)|``, the weight decreases linearly in it
    and is scaled into [0, 1]: ``alpha_i = (max s - s_i) / (max s - min s)`` (all 1 when every
    s_i is equal), then ``alpha_i = clip(c1 alpha_i + c2, 0, 1)``, and ``alpha_i = 0`` where
    s_i is not finite. This is the form Savitsky, Williams & Hu use for "alpha_i inversely
    related to sup |f|". A literal ``1/s_i`` min-max scaling was tried first: one record with
    s_i near 0 then dominates and almost every weight collapses to 0 (on Beta(0.5, 3) data,
    max-ECDF 0.32 against 0.03 unweighted).

    Weights computed this way depend on every record (through the fit and through min and max
    of s): they give only a local / asymptotic guarantee. :class:`WeightCalibration` gives
    weights that depend on each record alone.

    Parameters
    ----------
    loglik : numpy.ndarray, shape (S, n)
    c1, c2 : float
        Scale and shift.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    s = record_bounds(loglik)
    finite = np.isfinite(s)
    lo, hi = (s[finite].min(), s[finite].max()) if finite.any() else (0.0, 0.0)
    return weights_from_bounds(s, lo, hi, c1, c2)


def lipschitz_bound(loglik: np.ndarray, weights: np.ndarray,
                    censor: float | None = None) -> float:
    """Empirical per-record bound: max over draws s and records i of |alpha_i f_s(x_i)|.

    Censored at ``censor`` (the bound c) where censoring applies; records with weight 0
    contribute 0. Computed from the confidential data: a diagnostic, not a guarantee.

    Parameters
    ----------
    loglik : numpy.ndarray, shape (S, n)
    weights : numpy.ndarray, shape (n,)
    censor : float, optional

    Returns
    -------
    float
    """
    with np.errstate(invalid="ignore"):
        prod = np.where(weights[None, :] > 0, np.abs(loglik) * weights[None, :], 0.0)
    if censor is not None:
        prod = np.minimum(prod, censor)
    return float(np.nanmax(prod)) if prod.size else 0.0


def local_epsilon(delta: float, neighbours: str = "change_one") -> float:
    """Return the epsilon a per-record bound ``delta`` would give if it held for every dataset.

    The inverse of :func:`bayesynth.privacy.censor_bound`: 4 delta under change-one neighbours,
    2 delta under add/remove (the paper's ``epsilon_x = 2 Delta`` is the add/remove figure).

    Parameters
    ----------
    delta : float
    neighbours : {"change_one", "add_remove"}

    Returns
    -------
    float
    """
    return float(delta) * (4.0 if check_neighbours(neighbours) == "change_one" else 2.0)
