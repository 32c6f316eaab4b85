"""Direct samplers for saturated count synthesis, dense and sparse.

:func:`synthesize_table` never materialises the full table: it redraws the non-zero cells from their
count distributions, then decides how many random zeros become non-zero (one binomial draw),
which ones (uniformly, by rejection from random cell indices, never listing the zeros), and
their counts (zero-truncated draws with mean alpha). It handles tables of 10^9 cells.
"""

from __future__ import annotations

import numpy as np

from bayesynth.models.saturated_counts import (
    SparseTable,
    cell_means,
    count_pmf,
    draw_counts,
    unique_sorted,
    validate_parameters,
)

__all__ = ["synthesize_table", "synthesize_dense"]


def _truncated_draws(rng: np.random.Generator, family: str, sigma: float, alpha: float,
                     size: int) -> np.ndarray:
    """Draw counts from the synthesis distribution with mean alpha, conditioned to be positive."""
    p = count_pmf(family, alpha, sigma)
    cdf = np.cumsum(p[1:])
    u = rng.random(size) * cdf[-1]
    return np.searchsorted(cdf, u, side="right").astype(np.int64) + 1


def _random_zero_cells(rng: np.random.Generator, table: SparseTable, need: int) -> np.ndarray:
    """``need`` distinct cells drawn uniformly among the random zeros (sorted)."""
    if need == 0:
        return np.zeros(0, dtype=np.int64)
    K = table.n_cells
    Z = table.n_random_zeros()
    if need > Z:
        raise ValueError("more cells requested than there are random zeros")
    got = np.zeros(0, dtype=np.int64)
    while len(got) < need:
        # a uniform cell is a random zero not yet taken with probability (Z - got) / K
        m = min(int((need - len(got)) * K / (Z - len(got)) * 1.1) + 64, 20_000_000)
        cand = unique_sorted(rng.integers(0, K, size=m, dtype=np.int64))
        pos = np.searchsorted(table.index, cand)
        pos = np.minimum(pos, max(len(table.index) - 1, 0))
        is_nonzero = (table.index[pos] == cand) if len(table.index) else np.zeros(len(cand),
                                                                                   bool)
        cand = cand[~is_nonzero]
        if table.structural.blocks:
            cand = cand[~table.structural.mask_codes(table.names, table.codes(cand))]
        got = unique_sorted(np.concatenate([got, cand]))
    if len(got) > need:
        got = np.sort(rng.choice(got, size=need, replace=False))
    return got


def synthesize_table(
    table: SparseTable,
    *,
    family: str = "poisson",
    sigma: float = 0.0,
    alpha: float = 0.0,
    random_seed: int | np.random.Generator | None = None,
) -> SparseTable:
    """One synthetic table from a saturated count model, sparse in and sparse out.

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}
    sigma : float
        Dispersion (variance f + sigma f^2 for nbi and pig) or, for ``dpo``, the precision
        theta (variance about f / theta).
    alpha : float
        Pseudocount: the mean of each random zero's synthetic count. Structural zeros stay 0.
    random_seed : int or Generator, optional

    Returns
    -------
    SparseTable
        Same variables, levels and structural zeros.
    """
    validate_parameters(family, sigma, alpha)
    rng = np.random.default_rng(random_seed)
    table.check()
    y = draw_counts(rng, family, sigma, table.counts)
    keep = y > 0
    idx, cnt = table.index[keep], y[keep]
    if alpha > 0:
        Z = table.n_random_zeros()
        p_nonzero = 1.0 - count_pmf(family, alpha, sigma)[0]
        n_new = int(rng.binomial(Z, p_nonzero))
        new = _random_zero_cells(rng, table, n_new)
        idx = np.concatenate([idx, new])
        cnt = np.concatenate([cnt, _truncated_draws(rng, family, sigma, alpha, len(new))])
        order = np.argsort(idx, kind="stable")
        idx, cnt = idx[order], cnt[order]
    return SparseTable(table.names, table.levels, idx, cnt, table.structural)


def synthesize_dense(
    table: SparseTable,
    *,
    family: str = "poisson",
    sigma: float = 0.0,
    alpha: float = 0.0,
    random_seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Draw a synthetic table cell by cell over the full table (a reference for small tables).

    The same model as :func:`synthesize_table`, on a dense array.

    Parameters
    ----------
    table : SparseTable
        The original table (it must fit in memory densely).
    family : {"poisson", "nbi", "pig", "dpo"}
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    alpha : float
        Pseudocount of random zeros; structural zeros stay 0.
    random_seed : int or Generator, optional

    Returns
    -------
    numpy.ndarray of int64
        The synthetic counts, shape ``table.shape``.
    """
    rng = np.random.default_rng(random_seed)
    f = cell_means(table.to_dense(), table.structural_mask(), alpha).reshape(-1)
    return draw_counts(rng, family, sigma, f).reshape(table.shape)
