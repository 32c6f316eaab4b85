"""Saturated count synthesis: distributions, sparse sampler, tau metrics, tuner and validation.

Statistical checks use fixed seeds; tolerances come from the Monte Carlo error of the quantity
checked (binomial or replicate standard errors) or from a test's p-value (>= 1e-3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from bayesynth.datasets import simulate_school_census
from bayesynth.errors import DataValidationError, InputTypeError, SchemaError
from bayesynth.evaluation import (
    loglinear_utility,
    paired_counts,
    tau_metrics,
    tune_saturated,
    within_p_shares,
)
from bayesynth.models.saturated_counts import (
    MAX_DENSE_CELLS,
    SparseTable,
    StructuralZeros,
    count_pmf,
    draw_counts,
    expected_tau,
    expected_within,
    microdata_to_table,
    saturated_count_model,
    table_to_microdata,
)
from bayesynth.synthesis import synthesize_dense, synthesize_table

SETTINGS = [("poisson", 0.0), ("nbi", 1.0), ("pig", 1.0), ("dpo", 3.0)]


def random_table(shape, share_nonzero, seed, structural=None) -> SparseTable:
    """Counts from a geometric(0.35) on a random share of cells (many ones and twos)."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random(shape) < share_nonzero, rng.geometric(0.35, size=shape), 0)
    names = [f"v{j}" for j in range(len(shape))]
    levels = {n: [f"{n}_{i}" for i in range(s)] for n, s in zip(names, shape)}
    table = SparseTable.from_dense(dense, names, levels, structural)
    if structural is not None:  # empty the structural cells
        keep = ~structural.mask_codes(names, table.codes())
        table = SparseTable(names, levels, table.index[keep], table.counts[keep], structural)
    return table


@pytest.fixture(scope="module")
def medium():
    return random_table((40, 30, 25), 0.25, seed=1)


@pytest.fixture(scope="module")
def small():
    structural = StructuralZeros([{"v0": np.array([0]), "v1": np.array([1, 2])}])
    return random_table((4, 5, 3), 0.5, seed=2, structural=structural)


# --------------------------------------------------------------------------- distributions


@pytest.mark.parametrize("mu,sigma", [(0.02, 1.0), (1.0, 0.1), (7.0, 1.0), (40.0, 10.0),
                                      (3.0, 100.0)])
def test_pig_pmf_matches_numerical_integration(mu, sigma):
    """P(k) = int Poisson(k | mu nu) IG(nu | mean 1, var sigma) d nu, by quadrature."""
    pmf = count_pmf("pig", mu, sigma)
    ig = stats.invgauss(mu=sigma, scale=1.0 / sigma)  # mean 1, variance sigma
    assert ig.mean() == pytest.approx(1.0) and ig.var() == pytest.approx(sigma)
    for k in [0, 1, 2, 5, int(mu)]:
        edges = [0, 1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, np.inf]
        ref = sum(integrate.quad(lambda v: stats.poisson.pmf(k, mu * v) * ig.pdf(v), a, b,
                                 limit=400, epsabs=1e-15, epsrel=1e-10)[0]
                  for a, b in zip(edges[:-1], edges[1:]))
        assert pmf[k] == pytest.approx(ref, rel=1e-6, abs=1e-13)
    k = np.arange(len(pmf))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    mean = (k * pmf).sum()
    assert mean == pytest.approx(mu, rel=1e-6)
    assert ((k - mean) ** 2 * pmf).sum() == pytest.approx(mu + sigma * mu**2, rel=1e-4)


def test_nbi_and_poisson_pmfs_have_the_stated_moments():
    for family, sigma in [("poisson", 0.0), ("nbi", 0.5), ("nbi", 10.0)]:
        pmf = count_pmf(family, 12.0, sigma)
        k = np.arange(len(pmf))
        assert (k * pmf).sum() == pytest.approx(12.0, rel=1e-8)
        assert ((k - 12.0) ** 2 * pmf).sum() == pytest.approx(12 + sigma * 144, rel=1e-6)


def test_double_poisson_is_underdispersed_for_theta_above_one():
    rng = np.random.default_rng(3)
    pmf = count_pmf("dpo", 20.0, 4.0)
    k = np.arange(len(pmf))
    mean = (k * pmf).sum()
    var = ((k - mean) ** 2 * pmf).sum()
    assert mean == pytest.approx(20.0, rel=0.01)
    assert var == pytest.approx(20.0 / 4.0, rel=0.05)  # Efron: variance about mu / theta
    y = draw_counts(rng, "dpo", 4.0, np.full(20_000, 20.0))
    se_mean = np.sqrt(var / len(y))
    assert abs(y.mean() - mean) < 5 * se_mean
    assert y.var() < 0.3 * y.mean()
    # theta < 1 gives over-dispersion
    pmf = count_pmf("dpo", 20.0, 0.5)
    k = np.arange(len(pmf))
    mean = (k * pmf).sum()
    assert ((k - mean) ** 2 * pmf).sum() > 1.5 * 20.0


@pytest.mark.parametrize("family,sigma", SETTINGS)
def test_draws_follow_the_pmf(family, sigma):
    rng = np.random.default_rng(4)
    y = draw_counts(rng, family, sigma, np.full(40_000, 2.5))
    pmf = count_pmf(family, 2.5, sigma)
    cap = 8
    expected = np.r_[pmf[:cap], pmf[cap:].sum()] * len(y)
    observed = np.bincount(np.minimum(y, cap), minlength=cap + 1)
    assert stats.chisquare(observed, expected).pvalue > 1e-3


# ------------------------------------------------------------------ expectations vs simulation


@pytest.mark.parametrize("family,sigma", SETTINGS)
def test_expected_tau_agrees_with_simulated_tables(medium, family, sigma):
    """Mean empirical tau over replicate syntheses is within 5 replicate standard errors of the
    analytic expectation (tau_4 is a ratio of expectations; its bias is O(1/cells), far
    below that)."""
    alpha, R = 0.02, 20
    ks = (0, 1, 2, 3)
    exp = expected_tau(medium, family=family, sigma=sigma, alpha=alpha, ks=ks)
    reps = np.stack([tau_metrics(medium, synthesize_table(medium, family=family, sigma=sigma,
                                                          alpha=alpha, random_seed=s), ks=ks)
                     .to_numpy() for s in range(R)])
    mean, se = reps.mean(0), reps.std(0, ddof=1) / np.sqrt(R)
    cols = list(exp.columns)
    for i, k in enumerate(ks):
        for j, col in enumerate(cols):
            if col == "tau2":  # a property of the original
                assert mean[i, j] == pytest.approx(exp.iloc[i, j])
                continue
            assert abs(mean[i, j] - exp.iloc[i, j]) < 5 * se[i, j] + 1e-12, (k, col)


def test_poisson_tau3_of_ones_is_exp_minus_one(medium):
    exp = expected_tau(medium, family="poisson", alpha=0.0)
    assert exp.loc[1, "tau3"] == pytest.approx(np.exp(-1))
    assert exp.loc[0, "tau3"] == 1.0  # random zeros stay 0 without a pseudocount


@pytest.mark.parametrize("family,sigma", [("poisson", 0.0), ("pig", 10.0)])
def test_expected_within_agrees_with_simulation(medium, family, sigma):
    R = 20
    exp = expected_within(medium, family=family, sigma=sigma, alpha=0.02)
    reps = np.stack([within_p_shares(medium, synthesize_table(
        medium, family=family, sigma=sigma, alpha=0.02, random_seed=10 + s)).to_numpy()
        for s in range(R)])
    mean, se = reps.mean(0), reps.std(0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(mean - exp.to_numpy()) < 5 * se + 1e-12)


def test_within_share_over_either_table_counts_fake_cells_as_misses(small):
    syn = synthesize_table(small, alpha=0.5, random_seed=3)
    o = small.to_dense().reshape(-1)
    s_ = syn.to_dense().reshape(-1)
    either = (o > 0) | (s_ > 0)
    hit = (np.abs(s_ - o) <= 0.1 * o) & (o > 0)
    w = within_p_shares(small, syn, ps=(10,))
    assert w.loc[10, "either"] == pytest.approx(hit.sum() / either.sum())
    assert w.loc[10, "nonzero"] == pytest.approx(hit.sum() / (o > 0).sum())


def test_identical_tables_give_perfect_tau_and_shares(medium):
    tau = tau_metrics(medium, medium)
    assert np.allclose(tau.loc[[1, 2], ["tau3", "tau4"]], 1.0)
    assert np.allclose(within_p_shares(medium, medium).to_numpy(), 1.0)


# ------------------------------------------------------------------------- the sparse sampler


def test_structural_zeros_stay_zero_and_random_zeros_fill_at_the_analytic_rate(small):
    alpha, R = 0.3, 400
    Z = small.n_random_zeros()
    assert small.n_structural() == 1 * 2 * 3
    mask = small.structural_mask().reshape(-1)
    random_zero = np.ones(small.n_cells, dtype=bool)
    random_zero[small.index] = False
    random_zero &= ~mask
    filled = 0
    for s in range(R):
        syn = synthesize_table(small, family="poisson", alpha=alpha, random_seed=s)
        assert not mask[syn.index].any()
        filled += random_zero[syn.index].sum()
    p = 1 - np.exp(-alpha)
    assert stats.binomtest(int(filled), R * Z, p).pvalue > 1e-3


def test_poisson_total_is_poisson_of_n_plus_alpha_zeros(small):
    alpha, R = 0.5, 600
    lam = small.n_records + alpha * small.n_random_zeros()
    totals = np.array([synthesize_table(small, alpha=alpha, random_seed=s).n_records
                       for s in range(R)])
    assert abs(totals.mean() - lam) < 4 * np.sqrt(lam / R)
    dispersion = ((totals - totals.mean()) ** 2).sum() / lam  # ~ chi2(R - 1) under the model
    assert 1e-3 < stats.chi2.cdf(dispersion, R - 1) < 1 - 1e-3


@pytest.mark.parametrize("family,sigma", SETTINGS)
def test_sparse_and_dense_samplers_agree(small, family, sigma):
    alpha, R = 0.4, 1500
    sparse = np.stack([synthesize_table(small, family=family, sigma=sigma, alpha=alpha,
                                        random_seed=s).to_dense().reshape(-1)
                       for s in range(R)])
    dense = np.stack([synthesize_dense(small, family=family, sigma=sigma, alpha=alpha,
                                       random_seed=10_000 + s).reshape(-1) for s in range(R)])
    mask = small.structural_mask().reshape(-1)
    assert not sparse[:, mask].any() and not dense[:, mask].any()
    orig = small.to_dense().reshape(-1)
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


def test_synthesis_is_reproducible_and_keeps_the_table_description(small):
    a = synthesize_table(small, family="nbi", sigma=0.5, alpha=0.1, random_seed=7)
    b = synthesize_table(small, family="nbi", sigma=0.5, alpha=0.1, random_seed=7)
    np.testing.assert_array_equal(a.index, b.index)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.names == small.names and a.levels == small.levels
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


# ---------------------------------------------------------------------- tables and microdata


def test_microdata_table_round_trip_keeps_labels():
    df = pd.DataFrame({
        "age": pd.Categorical(["0-4", "5-9", "5-9", "10-14"],
                              categories=["0-4", "5-9", "10-14", "15+"]),
        "sex": ["F", "M", "M", "F"],
    })
    table = microdata_to_table(df)
    assert table.levels == {"age": ["0-4", "5-9", "10-14", "15+"], "sex": ["F", "M"]}
    assert table.n_records == 4 and table.n_cells == 8 and len(table.index) == 3
    back = table_to_microdata(table, random_seed=0)
    assert list(back["age"].cat.categories) == ["0-4", "5-9", "10-14", "15+"]
    again = microdata_to_table(back)
    np.testing.assert_array_equal(again.index, table.index)
    np.testing.assert_array_equal(again.counts, table.counts)
    frame = table.to_frame()
    via_counts = microdata_to_table(frame, count="count")
    np.testing.assert_array_equal(via_counts.index, table.index)
    np.testing.assert_array_equal(via_counts.counts, table.counts)
    assert via_counts.levels["sex"] == ["F", "M"]
    pd.testing.assert_frame_equal(df, df.copy())  # input untouched


def test_structural_rule_by_labels():
    df = pd.DataFrame({"age": pd.Categorical([14, 20, 30], categories=[14, 20, 30]),
                       "degree": pd.Categorical(["no", "yes", "no"], categories=["no", "yes"])})
    table = microdata_to_table(df, structural=[{"age": [14], "degree": ["yes"]}])
    assert table.n_structural() == 1
    assert table.structural_mask()[0, 1]
    bad = pd.concat([df, pd.DataFrame({"age": pd.Categorical([14], categories=[14, 20, 30]),
                                       "degree": pd.Categorical(["yes"],
                                                                categories=["no", "yes"])})])
    with pytest.raises(DataValidationError, match="structural"):
        microdata_to_table(bad, structural=[{"age": [14], "degree": ["yes"]}])
    with pytest.raises(SchemaError, match="not levels of 'degree'"):
        microdata_to_table(df, structural=[{"degree": ["phd"]}])
    with pytest.raises(SchemaError, match="unknown variable"):
        microdata_to_table(df, structural=[{"income": [1]}])


def test_bad_input_is_named():
    df = pd.DataFrame({"a": ["x", None, "y"], "b": [1, 2, 3]})
    with pytest.raises(InputTypeError):
        microdata_to_table(df.to_numpy())
    with pytest.raises(DataValidationError, match=r"\['a'\]"):
        microdata_to_table(df)
    with pytest.raises(SchemaError, match="'n'"):
        microdata_to_table(df.fillna("z"), count="n")
    with pytest.raises(DataValidationError, match="'b'"):
        microdata_to_table(df.fillna("z").assign(b=[1, -2, 3]), ["a"], count="b")
    with pytest.raises(SchemaError, match=r"\['c'\]"):
        microdata_to_table(df.fillna("z"), ["a", "c"])
    t = random_table((3, 3), 0.5, seed=0)
    with pytest.raises(SchemaError, match="family"):
        synthesize_table(t, family="binomial")
    with pytest.raises(SchemaError, match="theta"):
        synthesize_table(t, family="dpo", sigma=0.0)
    with pytest.raises(SchemaError, match="alpha"):
        synthesize_table(t, alpha=-1.0)
    with pytest.raises(SchemaError, match="sigma"):
        expected_tau(t, family="nbi", sigma=np.inf)


# ------------------------------------------------------------------------------ PyMC factory


@pytest.mark.parametrize("family,sigma", SETTINGS)
def test_pymc_model_predictive_draws_are_synthetic_tables(small, family, sigma):
    import pymc as pm

    alpha, R = 0.2, 600
    model = saturated_count_model(small, family=family, sigma=sigma, alpha=alpha)
    assert tuple(model.named_vars_to_dims["counts"]) == tuple(small.names)
    assert model.coords["v1"] == tuple(small.levels["v1"])
    draws = pm.draw(model["counts"], draws=R, random_seed=1)
    assert draws.shape == (R, *small.shape)
    mask = small.structural_mask()
    assert not draws[:, mask].any()
    f = np.where(small.to_dense() == 0, alpha, small.to_dense())[~mask]
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


# --------------------------------------------------------------------------- tuner and utility


def test_tuner_meets_the_risk_requirement_and_maximises_utility(medium):
    res = tune_saturated(medium, max_risk=0.35, sigmas=(0.01, 0.1, 1.0, 10.0),
                         alphas=(0.0, 0.02))
    assert res.risk <= 0.35
    assert (res.family, res.sigma, res.alpha) == ("pig", 1.0, 0.02)
    feasible = res.grid[res.grid["risk"] <= 0.35]
    assert res.utility == pytest.approx(feasible["utility"].max())
    check = expected_tau(medium, **res.as_kwargs(), ks=(1,))
    assert check.loc[1, "tau4"] == pytest.approx(res.risk)
    res2 = tune_saturated(medium, min_utility=0.5, sigmas=(0.01, 0.1, 1.0), alphas=(0.0, 0.02))
    assert res2.utility >= 0.5
    assert res2.risk == pytest.approx(res2.grid.query("utility >= 0.5")["risk"].min())
    with pytest.raises(ValueError, match="lowest in the grid"):
        tune_saturated(medium, max_risk=1e-6, sigmas=(0.1,), alphas=(0.0,))
    with pytest.raises(SchemaError, match="exactly one"):
        tune_saturated(medium)


def test_loglinear_utility_overlap():
    table = simulate_school_census(200_000, n_areas=5, random_seed=3)
    t = microdata_to_table(table, count="count")
    same = loglinear_utility(t, t, ["sex", "age", "language"])
    # same estimate, synthetic interval sqrt(2) wider (Raab et al. variance for m = 1)
    assert np.allclose(same["cio"], 0.5 * (1 + 1 / np.sqrt(2)))
    syn = [synthesize_table(t, random_seed=s) for s in range(3)]
    res = loglinear_utility(t, syn, ["sex", "age", "language"])
    assert 0.0 <= res.attrs["mean_cio"] <= 1.0
    assert res.attrs["mean_cio"] > 0.6  # Poisson synthesis keeps the log-linear structure
    assert res.attrs["mean_cio_raw"] <= res.attrs["mean_cio"]
    noisy = loglinear_utility(t, synthesize_table(t, family="nbi", sigma=10.0, random_seed=0),
                              ["sex", "age", "language"])
    assert noisy.attrs["mean_cio"] < res.attrs["mean_cio"]
    reused = loglinear_utility(t, syn, ["sex", "age", "language"], reference=noisy)
    pd.testing.assert_frame_equal(reused, res)
    with pytest.raises(SchemaError, match="other parameters"):
        loglinear_utility(t, syn, ["sex", "age"], reference=noisy)


def test_simulated_school_census_has_the_escsub_shape():
    df = simulate_school_census(100_000, n_areas=4, random_seed=0)
    t = microdata_to_table(df, count="count")
    assert t.names == ["local_authority", "age", "sex", "ethnicity", "language"]
    assert t.shape == (4, 20, 4, 19, 7)
    assert t.n_records == 100_000


def test_count_plots_return_figures(medium):
    import matplotlib

    matplotlib.use("Agg")
    from bayesynth.evaluation.plots import (
        plot_count_comparison,
        plot_count_privacy_utility,
        plot_tau_by_sigma,
    )

    syn = synthesize_table(medium, family="nbi", sigma=0.1, random_seed=0)
    fig = plot_count_comparison(paired_counts(medium, syn))
    assert fig.axes
    grid = pd.DataFrame([{"family": f, "sigma": s, "alpha": 0.0,
                          "tau4": expected_tau(medium, family=f, sigma=s, ks=(1,)).loc[1, "tau4"]}
                         for f in ("nbi", "pig") for s in (0.01, 0.1, 1.0)])
    assert plot_tau_by_sigma(grid).axes
    results = grid.assign(mean_cio=0.8)
    assert plot_count_privacy_utility(results).axes


def test_cli_saturate_writes_tables_and_microdata(tmp_path, capsys):
    from bayesynth.cli import main

    cells = simulate_school_census(50_000, n_areas=3, random_seed=1)
    src = tmp_path / "cells.csv"
    cells.to_csv(src, index=False)
    out = tmp_path / "syn.csv"
    assert main(["saturate", str(src), "-o", str(out), "--count", "count", "--family", "pig",
                 "--sigma", "1", "--alpha", "0.01", "--seed", "3"]) == 0
    syn = pd.read_csv(out)
    assert list(syn.columns) == list(cells.columns) and (syn["count"] > 0).all()
    assert "expected tau_4(1)" in capsys.readouterr().out
    again = tmp_path / "again.csv"
    main(["saturate", str(src), "-o", str(again), "--count", "count", "--family", "pig",
          "--sigma", "1", "--alpha", "0.01", "--seed", "3", "--quiet"])
    pd.testing.assert_frame_equal(syn, pd.read_csv(again))
    micro = tmp_path / "micro.csv"
    assert main(["saturate", str(src), "-o", str(micro), "--count", "count", "--max-risk",
                 "0.5", "--microdata", "--m", "2", "--seed", "1", "--quiet"]) == 0
    for i in (1, 2):
        rec = pd.read_csv(tmp_path / f"micro_{i}.csv")
        assert list(rec.columns) == ["local_authority", "age", "sex", "ethnicity", "language"]
        assert abs(len(rec) - 50_000) < 5 * np.sqrt(50_000) + 0.02 * 50_000
    # nothing is overwritten, and an impossible requirement is a clear error
    assert main(["saturate", str(src), "-o", str(out), "--count", "count"]) == 2
    assert main(["saturate", str(src), "-o", str(tmp_path / "x.csv"), "--count", "count",
                 "--max-risk", "0.0001"]) == 2
    assert "tau_4(1)" in capsys.readouterr().err
