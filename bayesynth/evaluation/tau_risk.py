"""Analytic disclosure risk and utility of saturated count synthesis, known before synthesising.

With N_j original cells of size j and P(k | j) the synthesis distribution
(:mod:`bayesynth.models.count_families`), the expected tau metrics of Jackson et al.
(:func:`expected_tau`) and the expected shares of cells kept within p% of their count
(:func:`expected_within`) follow from the table's distribution of cell sizes alone; no synthetic
table is drawn. :func:`bayesynth.evaluation.tau_metrics` computes the empirical counterparts
from a synthesis, and :func:`bayesynth.evaluation.tune_saturated` searches the settings with
these expectations.

References
----------
Jackson, J., Mitra, R., Francis, B. and Dove, I. (2022). Using saturated count models for
user-friendly synthesis of large confidential administrative databases. *JRSS A*, 185(4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bayesynth.models.count_families import _scipy_family, count_pmf, validate_parameters
from bayesynth.tables import SparseTable

__all__ = [
    "transition",
    "expected_tau",
    "expected_within",
]


def _size_distribution(table: SparseTable) -> tuple[np.ndarray, np.ndarray]:
    """Distinct original cell sizes j (0 = random zeros) and how many cells have each."""
    table.check()
    sizes, n_j = np.unique(table.counts, return_counts=True)
    z = table.n_random_zeros()
    return np.r_[0, sizes], np.r_[z, n_j].astype(float)


def transition(family: str, sigma: float, alpha: float, j: int, k: np.ndarray) -> np.ndarray:
    """Compute P(synthetic = k | original = j); a random zero (j = 0) has mean alpha.

    Parameters
    ----------
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    alpha : float
        Pseudocount of random zeros.
    j : int
        Original count.
    k : numpy.ndarray
        Synthetic counts.

    Returns
    -------
    numpy.ndarray
        One probability per entry of ``k``.
    """
    return _transition_matrix(family, sigma, alpha, np.array([j]), np.asarray(k))[0]


def _means(sizes: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(np.asarray(sizes) == 0, alpha, np.asarray(sizes, dtype=float))


def _transition_matrix(family: str, sigma: float, alpha: float, sizes: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    """P(synthetic = k | original = j) for every original size j (rows) and k (columns)."""
    mu = _means(sizes, alpha)
    k = np.asarray(k)
    out = np.zeros((len(mu), k.size))
    live = mu > 0
    out[~live] = (k.ravel() == 0)
    dist = _scipy_family(family, mu[live][:, None], sigma)
    if dist is not None:
        out[live] = dist.pmf(k.ravel()[None, :])
        return out
    kk = k.ravel()
    for row in np.flatnonzero(live):
        pmf = count_pmf(family, float(mu[row]), sigma,
                        kmax=int(max(kk.max(), 0)) + 1 if family == "pig" else None)
        inside = (kk < len(pmf)) & (kk >= 0)
        out[row, inside] = pmf[kk[inside]]
    return out


def _interval_probabilities(family: str, sigma: float, alpha: float, sizes: np.ndarray,
                            lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(lo_j <= synthetic <= hi_j | original = j) for each size j."""
    mu = _means(sizes, alpha)
    out = ((lo <= 0) & (hi >= 0)).astype(float)
    live = mu > 0
    dist = _scipy_family(family, mu[live], sigma)
    if dist is not None:
        out[live] = dist.cdf(hi[live]) - dist.cdf(lo[live] - 1)
        return out
    for row in np.flatnonzero(live):
        ks = np.arange(max(lo[row], 0), hi[row] + 1)
        out[row] = _transition_matrix(family, sigma, alpha, sizes[row:row + 1], ks).sum()
    return out


def expected_tau(table: SparseTable, *, family: str = "poisson", sigma: float = 0.0,
                 alpha: float = 0.0, ks: Sequence[int] = (0, 1, 2, 3, 4, 5)) -> pd.DataFrame:
    """Compute the expected tau metrics of a synthesis before synthesising (Jackson et al.).

    With N_j original cells of size j (j = 0: random zeros; structural zeros excluded) and
    P(k | j) the synthesis distribution:

    * E tau_1(k) = sum_j N_j P(k | j) / K (K: non-structural cells);
    * tau_2(k) = N_k / K;
    * E tau_3(k) = P(k | k) (for k = 0, the probability that a random zero stays 0);
    * E tau_4(k) = N_k P(k | k) / sum_j N_j P(k | j) (a ratio of expectations).

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}, default "poisson"
        The synthesis distribution.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    alpha : float, default 0.0
        Pseudocount of random zeros.
    ks : sequence of int, default (0, 1, 2, 3, 4, 5)
        Cell sizes k to report.

    Returns
    -------
    pandas.DataFrame
        Indexed by k with columns ``tau1`` .. ``tau4``.
    """
    validate_parameters(family, sigma, alpha)
    sizes, n_j = _size_distribution(table)
    K = n_j.sum()
    ks = np.asarray(ks)
    P = _transition_matrix(family, sigma, alpha, sizes, ks)  # (J, len(ks))
    expected_k = (n_j[:, None] * P).sum(0)
    lookup = dict(zip(sizes.tolist(), n_j.tolist()))
    n_k = np.array([lookup.get(int(k), 0.0) for k in ks])
    stay = np.array([_transition_matrix(family, sigma, alpha, np.array([k]), np.array([k]))[0, 0]
                     for k in ks])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau4 = np.where(expected_k > 0, n_k * stay / expected_k, np.nan)
    return pd.DataFrame({"tau1": expected_k / K, "tau2": n_k / K, "tau3": stay, "tau4": tau4},
                        index=pd.Index(ks, name="k"))


def expected_within(table: SparseTable, *, family: str = "poisson", sigma: float = 0.0,
                    alpha: float = 0.0, ps: Sequence[float] = (0.5, 1, 5, 10, 50)
                    ) -> pd.DataFrame:
    """Compute the expected share of cells whose synthetic count is within p% of the original.

    Over all non-structural cells (``all``; a zero is "within" only if it stays 0), over the
    original non-zero cells (``nonzero``) and over the cells non-zero in either table
    (``either``, a ratio of expectations: random zeros made non-zero count as misses).

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}, default "poisson"
        The synthesis distribution.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    alpha : float, default 0.0
        Pseudocount of random zeros.
    ps : sequence of float, default (0.5, 1, 5, 10, 50)
        Tolerances p, in percent of the original count.

    Returns
    -------
    pandas.DataFrame
        Indexed by p, columns ``all``, ``nonzero`` and ``either``.
    """
    validate_parameters(family, sigma, alpha)
    sizes, n_j = _size_distribution(table)
    rows = []
    for p in ps:
        lo = np.ceil(sizes * (1 - p / 100) - 1e-9).astype(np.int64)
        hi = np.floor(sizes * (1 + p / 100) + 1e-9).astype(np.int64)
        hit = _interval_probabilities(family, sigma, alpha, sizes, lo, hi)
        kept = (n_j[1:] * hit[1:]).sum()
        fake = n_j[0] * (1.0 - hit[0])  # random zeros that become non-zero
        rows.append({"p": p, "all": float((n_j * hit).sum() / n_j.sum()),
                     "nonzero": float(kept / n_j[1:].sum()),
                     "either": float(kept / (n_j[1:].sum() + fake))})
    return pd.DataFrame(rows).set_index("p")
