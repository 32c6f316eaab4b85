"""Analytic tau metrics and within-p% shares against simulated syntheses.

Statistical checks use fixed seeds; tolerances come from the Monte Carlo error of the quantity
checked (binomial or replicate standard errors) or from a test's p-value (>= 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest

from bayesynth.errors import InvalidParameterError
from bayesynth.evaluation import tau_metrics, within_p_shares
from bayesynth.evaluation.tau_risk import expected_tau, expected_within
from bayesynth.synthesis import synthesize_table
from tests.conftest import COUNT_SETTINGS, random_table


@pytest.mark.parametrize("family,sigma", COUNT_SETTINGS)
def test_expected_tau_agrees_with_simulated_tables(medium_table, family, sigma):
    """Mean empirical tau over replicate syntheses is within 5 replicate standard errors of the
    analytic expectation (tau_4 is a ratio of expectations; its bias is O(1/cells), far
    below that)."""
    alpha, R = 0.02, 20
    ks = (0, 1, 2, 3)
    exp = expected_tau(medium_table, family=family, sigma=sigma, alpha=alpha, ks=ks)
    reps = np.stack([tau_metrics(medium_table, synthesize_table(
        medium_table, family=family, sigma=sigma, alpha=alpha, random_seed=s), ks=ks).to_numpy()
        for s in range(R)])
    mean, se = reps.mean(0), reps.std(0, ddof=1) / np.sqrt(R)
    cols = list(exp.columns)
    for i, k in enumerate(ks):
        for j, col in enumerate(cols):
            if col == "tau2":  # a property of the original
                assert mean[i, j] == pytest.approx(exp.iloc[i, j])
                continue
            assert abs(mean[i, j] - exp.iloc[i, j]) < 5 * se[i, j] + 1e-12, (k, col)


def test_poisson_tau3_of_ones_is_exp_minus_one(medium_table):
    exp = expected_tau(medium_table, family="poisson", alpha=0.0)
    assert exp.loc[1, "tau3"] == pytest.approx(np.exp(-1))
    assert exp.loc[0, "tau3"] == 1.0  # random zeros stay 0 without a pseudocount


@pytest.mark.parametrize("family,sigma", [("poisson", 0.0), ("pig", 10.0)])
def test_expected_within_agrees_with_simulation(medium_table, family, sigma):
    R = 20
    exp = expected_within(medium_table, family=family, sigma=sigma, alpha=0.02)
    reps = np.stack([within_p_shares(medium_table, synthesize_table(
        medium_table, family=family, sigma=sigma, alpha=0.02, random_seed=10 + s)).to_numpy()
        for s in range(R)])
    mean, se = reps.mean(0), reps.std(0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(mean - exp.to_numpy()) < 5 * se + 1e-12)


def test_bad_parameters_are_named():
    t = random_table((3, 3), 0.5, seed=0)
    with pytest.raises(InvalidParameterError, match="sigma"):
        expected_tau(t, family="nbi", sigma=np.inf)
