"""Empirical risk and utility of synthetic tables: tau metrics, within-p% shares, the tuner and
the log-linear utility."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.datasets import simulate_school_census
from bayesynth.errors import SchemaError
from bayesynth.evaluation import (
    expected_tau,
    loglinear_utility,
    tau_metrics,
    tune_saturated,
    within_p_shares,
)
from bayesynth.synthesis import synthesize_table
from bayesynth.tables import microdata_to_table


def test_within_share_over_either_table_counts_fake_cells_as_misses(small_table):
    syn = synthesize_table(small_table, alpha=0.5, random_seed=3)
    o = small_table.to_dense().reshape(-1)
    s_ = syn.to_dense().reshape(-1)
    either = (o > 0) | (s_ > 0)
    hit = (np.abs(s_ - o) <= 0.1 * o) & (o > 0)
    w = within_p_shares(small_table, syn, ps=(10,))
    assert w.loc[10, "either"] == pytest.approx(hit.sum() / either.sum())
    assert w.loc[10, "nonzero"] == pytest.approx(hit.sum() / (o > 0).sum())


def test_identical_tables_give_perfect_tau_and_shares(medium_table):
    tau = tau_metrics(medium_table, medium_table)
    assert np.allclose(tau.loc[[1, 2], ["tau3", "tau4"]], 1.0)
    assert np.allclose(within_p_shares(medium_table, medium_table).to_numpy(), 1.0)


def test_tuner_meets_the_risk_requirement_and_maximises_utility(medium_table):
    res = tune_saturated(medium_table, max_risk=0.35, sigmas=(0.01, 0.1, 1.0, 10.0),
                         alphas=(0.0, 0.02))
    assert res.risk <= 0.35
    assert (res.family, res.sigma, res.alpha) == ("pig", 1.0, 0.02)
    feasible = res.grid[res.grid["risk"] <= 0.35]
    assert res.utility == pytest.approx(feasible["utility"].max())
    check = expected_tau(medium_table, **res.as_kwargs(), ks=(1,))
    assert check.loc[1, "tau4"] == pytest.approx(res.risk)
    res2 = tune_saturated(medium_table, min_utility=0.5, sigmas=(0.01, 0.1, 1.0),
                          alphas=(0.0, 0.02))
    assert res2.utility >= 0.5
    assert res2.risk == pytest.approx(res2.grid.query("utility >= 0.5")["risk"].min())
    with pytest.raises(ValueError, match="lowest in the grid") as caught:
        tune_saturated(medium_table, max_risk=1e-6, sigmas=(0.1,), alphas=(0.0,))
    assert "sigmas=" in str(caught.value)
    lowest = min(float(expected_tau(medium_table, family=f, sigma=s, ks=(1,)).loc[1, "tau4"])
                 for f, s in (("poisson", 0.0), ("nbi", 0.1), ("pig", 0.1)))
    assert caught.value.reachable == pytest.approx(lowest)
    with pytest.raises(SchemaError, match="exactly one"):
        tune_saturated(medium_table)


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
