"""The saturated count model as a PyMC model: its predictive draws are synthetic tables.

Statistical checks use fixed seeds; tolerances come from the Monte Carlo error of the quantity
checked (binomial or replicate standard errors) or from a test's p-value (>= 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesynth.errors import SchemaError
from bayesynth.models.count_families import count_pmf
from bayesynth.models.saturated_counts import MAX_DENSE_CELLS, saturated_count_model
from bayesynth.tables import SparseTable
from tests.conftest import COUNT_SETTINGS


@pytest.mark.parametrize("family,sigma", COUNT_SETTINGS)
def test_pymc_model_predictive_draws_are_synthetic_tables(small_table, family, sigma):
    import pymc as pm

    alpha, R = 0.2, 600
    model = saturated_count_model(small_table, family=family, sigma=sigma, alpha=alpha)
    assert tuple(model.named_vars_to_dims["counts"]) == tuple(small_table.names)
    assert model.coords["v1"] == tuple(small_table.levels["v1"])
    draws = pm.draw(model["counts"], draws=R, random_seed=1)
    assert draws.shape == (R, *small_table.shape)
    mask = small_table.structural_mask()
    assert not draws[:, mask].any()
    f = np.where(small_table.to_dense() == 0, alpha, small_table.to_dense())[~mask]
    # the double Poisson's mean is only about f for small f: compare with the pmf's moments
    pmfs = [count_pmf(family, mu, sigma) for mu in f]
    mean = np.array([(np.arange(len(p)) * p).sum() for p in pmfs])
    var = np.array([((np.arange(len(p)) - m) ** 2 * p).sum() for p, m in zip(pmfs, mean)])
    if family != "dpo":
        np.testing.assert_allclose(mean, f, rtol=1e-6)
        np.testing.assert_allclose(var, f + sigma * f**2, rtol=1e-4)
    z = (draws[:, ~mask].mean(0) - mean) / np.sqrt(var / R)
    assert stats.chi2.sf((z**2).sum(), z.size) > 1e-3
    if family == "dpo":  # the logp is Efron's unnormalised density, finite at the draws
        logp = model.compile_logp()({"counts": draws[0]})
        assert np.isfinite(logp)


def test_pymc_model_refuses_a_table_too_big_to_hold():
    levels = {"a": list(range(5000)), "b": list(range(5000))}
    big = SparseTable(["a", "b"], levels, np.array([0, 7]), np.array([1, 2]))
    assert big.n_cells > MAX_DENSE_CELLS
    with pytest.raises(SchemaError, match="synthesize_table"):
        saturated_count_model(big)


def test_old_names_stay_importable_from_saturated_counts():
    """The table types and count distributions moved out; the old module re-exports them."""
    import bayesynth.models.count_families as families
    import bayesynth.models.saturated_counts as old
    import bayesynth.tables as tables

    for name in ("SparseTable", "StructuralZeros", "microdata_to_table", "table_to_microdata",
                 "unique_sorted"):
        assert getattr(old, name) is getattr(tables, name)
    for name in ("FAMILIES", "count_pmf", "draw_counts", "validate_parameters", "cell_means"):
        assert getattr(old, name) is getattr(families, name)


@pytest.mark.parametrize("mu,theta", [(0.02, 0.01), (1.0, 0.1), (0.02, 0.5), (5.0, 3.0)])
def test_double_poisson_default_support_holds_its_mass(mu, theta):
    """Against Efron's density summed term by term far out (k up to 20,000): the default
    support loses under 1e-12 of the mass, so P(0) and the mean agree (the old fixed support
    mu + 12 sqrt(mu / theta) + 20 dropped 2% at mu = 0.02, theta = 0.01: mean 5.85, not 6.67)."""
    from scipy.special import gammaln

    k = np.arange(20_001, dtype=float)
    logk = np.log(np.maximum(k, 1))
    lp = (0.5 * np.log(theta) - theta * mu - k + k * logk - gammaln(k + 1)
          + theta * k * (1 + np.log(mu) - logk))
    wide = np.exp(lp - lp.max())
    wide /= wide.sum()
    p = count_pmf("dpo", mu, theta)
    assert wide[len(p):].sum() < 1e-12
    assert np.allclose(p, wide[:len(p)], rtol=1e-9, atol=1e-15)
    assert abs((np.arange(len(p)) * p).sum() - (k * wide).sum()) < 1e-9 * max(1, mu)


def test_negative_binomial_with_a_tiny_dispersion_is_the_poisson_to_rounding():
    """At sigma = 1e-15 the NB's p rounds to 1 and its pmf erred by 2e-4 (mean 2.9976 for
    f = 3); below 1e-10 it is computed as the Poisson, from which it differs by far less."""
    from bayesynth.evaluation.tau_risk import transition

    p = count_pmf("nbi", 3.0, 1e-15)
    q = stats.poisson(3.0).pmf(np.arange(len(p)))
    assert np.abs(p - q).max() < 1e-12
    assert abs(transition("nbi", 1e-15, 0.0, 3, np.array([0]))[0] - np.exp(-3)) < 1e-12
    # just above the switch the NB itself is still accurate to 1e-5
    p = count_pmf("nbi", 3.0, 2e-10)
    assert np.abs(p - stats.poisson(3.0).pmf(np.arange(len(p)))).max() < 1e-5


def test_pymc_model_computes_a_tiny_dispersion_as_the_poisson_too():
    """The PyMC factory follows the same switch: its log-density at sigma = 1e-15 is the
    Poisson's, as the synthesizer's and the tau risk's are (PyMC's NB erred there by 2e-4)."""
    import pymc as pm

    table = np.array([[3, 0], [5, 1]])
    model = saturated_count_model(table, family="nbi", sigma=1e-15)
    f = model["f"].get_value()
    value = model.rvs_to_values[model["counts"]]
    lp = model.compile_fn(model.logp(sum=False)[0], inputs=[value])({value.name: table})
    ref = stats.poisson(f).logpmf(table)
    assert isinstance(model["counts"].owner.op, type(pm.Poisson.dist(1.0).owner.op))
    assert np.abs(lp - ref).max() < 1e-12


@pytest.mark.parametrize("sigma", [1e-9, 1e-12, 1e-16, 1e-20])
def test_pig_with_a_tiny_dispersion_is_the_poisson(sigma):
    """p_0 = exp((1 - sqrt(1 + 2 sigma mu)) / sigma) cancelled to exp(0) = 1 at sigma 1e-16
    (the pmf summed to e); the PIG tends to the Poisson as sigma -> 0."""
    p = count_pmf("pig", 1.0, sigma)
    q = stats.poisson(1.0).pmf(np.arange(len(p)))
    assert np.abs(p - q).max() < 1e-8
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
