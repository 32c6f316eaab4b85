"""Direct samplers of saturated count synthesis: the sparse sampler against the dense one.

Statistical checks use fixed seeds; tolerances come from the Monte Carlo error of the quantity
checked (binomial or replicate standard errors) or from a test's p-value (>= 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesynth.errors import InvalidParameterError
from bayesynth.models.count_families import count_pmf
from bayesynth.synthesis import synthesize_dense, synthesize_table
from bayesynth.tables import SparseTable
from tests.conftest import COUNT_SETTINGS, random_table


def test_structural_zeros_stay_zero_and_random_zeros_fill_at_the_analytic_rate(small_table):
    alpha, R = 0.3, 400
    Z = small_table.n_random_zeros()
    assert small_table.n_structural() == 1 * 2 * 3
    mask = small_table.structural_mask().reshape(-1)
    random_zero = np.ones(small_table.n_cells, dtype=bool)
    random_zero[small_table.index] = False
    random_zero &= ~mask
    filled = 0
    for s in range(R):
        syn = synthesize_table(small_table, family="poisson", alpha=alpha, random_seed=s)
        assert not mask[syn.index].any()
        filled += random_zero[syn.index].sum()
    p = 1 - np.exp(-alpha)
    assert stats.binomtest(int(filled), R * Z, p).pvalue > 1e-3


def test_poisson_total_is_poisson_of_n_plus_alpha_zeros(small_table):
    alpha, R = 0.5, 600
    lam = small_table.n_records + alpha * small_table.n_random_zeros()
    totals = np.array([synthesize_table(small_table, alpha=alpha, random_seed=s).n_records
                       for s in range(R)])
    assert abs(totals.mean() - lam) < 4 * np.sqrt(lam / R)
    dispersion = ((totals - totals.mean()) ** 2).sum() / lam  # ~ chi2(R - 1) under the model
    assert 1e-3 < stats.chi2.cdf(dispersion, R - 1) < 1 - 1e-3


@pytest.mark.parametrize("family,sigma", COUNT_SETTINGS)
def test_sparse_and_dense_samplers_agree(small_table, family, sigma):
    alpha, R = 0.4, 1500
    sparse = np.stack([synthesize_table(small_table, family=family, sigma=sigma, alpha=alpha,
                                        random_seed=s).to_dense().reshape(-1)
                       for s in range(R)])
    dense = np.stack([synthesize_dense(small_table, family=family, sigma=sigma, alpha=alpha,
                                       random_seed=10_000 + s).reshape(-1) for s in range(R)])
    mask = small_table.structural_mask().reshape(-1)
    assert not sparse[:, mask].any() and not dense[:, mask].any()
    orig = small_table.to_dense().reshape(-1)
    zeros = np.flatnonzero((orig == 0) & ~mask)
    # where the new records land: non-zero frequency of each random zero, sparse vs dense
    hits = np.stack([(sparse[:, zeros] > 0).sum(0), (dense[:, zeros] > 0).sum(0)])
    assert stats.chi2_contingency(np.c_[hits.T, R - hits.T].reshape(-1, 2, 2).sum(0)
                                  ).pvalue > 1e-3
    assert stats.chi2_contingency(hits + 0.0).pvalue > 1e-3
    # their values (pooled over random zeros), capped
    cap = 3
    hist = np.stack([np.bincount(np.minimum(x[:, zeros].ravel(), cap), minlength=cap + 1)
                     for x in (sparse, dense)])
    hist = hist[:, hist.sum(0) > 0]
    assert stats.chi2_contingency(hist).pvalue > 1e-3
    # every non-zero cell's mean: sum of squared z-scores ~ chi2(cells)
    nz = np.flatnonzero(orig > 0)
    z = (sparse[:, nz].mean(0) - dense[:, nz].mean(0)) / np.sqrt(
        (sparse[:, nz].var(0, ddof=1) + dense[:, nz].var(0, ddof=1)) / R)
    assert stats.chi2.sf((z**2).sum(), len(nz)) > 1e-3


def test_synthesis_is_reproducible_and_keeps_the_table_description(small_table):
    a = synthesize_table(small_table, family="nbi", sigma=0.5, alpha=0.1, random_seed=7)
    b = synthesize_table(small_table, family="nbi", sigma=0.5, alpha=0.1, random_seed=7)
    np.testing.assert_array_equal(a.index, b.index)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.names == small_table.names and a.levels == small_table.levels
    assert np.all(np.diff(a.index) > 0) and np.all(a.counts > 0)


def test_sparse_sampler_handles_a_billion_cell_table_without_densifying():
    rng = np.random.default_rng(5)
    shape = (1000, 1000, 1000)
    levels = {f"v{j}": list(range(s)) for j, s in enumerate(shape)}
    idx = np.unique(rng.integers(0, 10**9, size=5000))
    table = SparseTable(list(levels), levels, idx, rng.geometric(0.4, size=len(idx)))
    syn = synthesize_table(table, family="pig", sigma=1.0, alpha=1e-6, random_seed=1)
    Z = table.n_random_zeros()
    p = 1 - count_pmf("pig", 1e-6, 1.0)[0]
    new = np.setdiff1d(syn.index, table.index).size
    assert abs(new - Z * p) < 5 * np.sqrt(Z * p)


def test_bad_parameters_are_named():
    t = random_table((3, 3), 0.5, seed=0)
    with pytest.raises(InvalidParameterError, match="family"):
        synthesize_table(t, family="binomial")
    with pytest.raises(InvalidParameterError, match="theta"):
        synthesize_table(t, family="dpo", sigma=0.0)
    with pytest.raises(InvalidParameterError, match="alpha"):
        synthesize_table(t, alpha=-1.0)
