"""Combining rules for m synthetic datasets: Raghunathan, Reiter & Rubin (2003) for fully
synthetic data, Reiter (2003) for partially synthetic data, Raab et al. (2016)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.errors import SchemaError
from bayesynth.evaluation import combine_estimates, combine_marginal_estimates


def test_combining_rules_worked_example():
    q, v = [1.0, 1.2, 0.8], [0.04, 0.05, 0.03]
    # qbar = 1, b = 0.04, vbar = 0.04
    r = combine_estimates(q, v, rule="fully")
    assert r.estimate == pytest.approx(1.0)
    assert r.variance == pytest.approx((1 + 1 / 3) * 0.04 - 0.04)
    assert r.df == pytest.approx(2 * (1 - 0.04 / ((1 + 1 / 3) * 0.04)) ** 2)
    s = combine_estimates(q, v, rule="raab2016")
    assert s.variance == pytest.approx(0.04 * (1 / 3 + 1))
    one = combine_estimates([2.0], [0.09], rule="raab2016")
    assert one.variance == pytest.approx(2 * 0.09)
    assert one.upper - one.estimate == pytest.approx(1.959964 * np.sqrt(0.18), rel=1e-5)
    half = combine_estimates([2.0], [0.09], rule="raab2016", n=1000, n_syn=500)
    assert half.variance == pytest.approx(0.09 * 1.5)
    # Reiter's T_f <= 0 falls back to (n_syn/n) vbar
    neg = combine_estimates([1.0, 1.01], [0.04, 0.04], rule="fully")
    assert neg.variance == pytest.approx(0.04) and np.isinf(neg.df)
    with pytest.raises(ValueError, match="two"):
        combine_estimates([1.0], [0.1], rule="fully")
    # Reiter (2003), partially synthetic: T_p = b/m + vbar, nu = (m-1)(1 + m vbar / b)^2
    p = combine_estimates(q, v, rule="partially")
    assert p.variance == pytest.approx(0.04 / 3 + 0.04)
    assert p.df == pytest.approx(2 * (1 + 3 * 0.04 / 0.04) ** 2)
    assert np.isinf(combine_estimates([1.0, 1.0], [0.1, 0.1], rule="partially").df)
    with pytest.raises(ValueError, match="rule='fully'"):
        combine_estimates(q, v, rule="reiter2003")


def test_partially_synthetic_rule_covers():
    """Partially synthetic data: the real x kept, every y replaced by a posterior predictive draw
    of a normal model (flat prior, known sd 1), a fresh draw of the mean per dataset; the
    estimand is E[y] (n = 200, m = 5). The interval b/m + vbar must cover at 95% (4,000
    replicates: Monte Carlo sd 0.0034); vbar alone covers about 91%."""
    rng = np.random.default_rng(11)
    n, m, reps = 200, 5, 4000
    y = rng.normal(1.0, 1.0, (reps, n))
    mu_star = y.mean(1)[:, None] + rng.normal(0, 1 / np.sqrt(n), (reps, m))
    syn = mu_star[:, :, None] + rng.normal(0, 1, (reps, m, n))
    q, v = syn.mean(2), syn.var(2, ddof=1) / n
    hits = 0
    for r in range(reps):
        c = combine_estimates(q[r], v[r], rule="partially")
        hits += c.lower <= 1.0 <= c.upper
    assert abs(hits / reps - 0.95) < 4 * 0.0034


def test_marginal_estimates_apply_reiters_rule_cell_by_cell():
    rng = np.random.default_rng(0)
    levels = {"a": ["x", "y"], "b": [0, 1, 2]}
    syn = [pd.DataFrame({v: pd.Categorical(rng.choice(lv, size=400), categories=lv)
                         for v, lv in levels.items()}) for _ in range(4)]
    comb = combine_marginal_estimates(syn, ["a", "b"], n=1000)
    assert comb.index.names == ["a", "b"] and len(comb) == 6
    assert list(comb.columns) == ["estimate", "se", "lower", "upper"]
    q = [((s["a"] == "x") & (s["b"] == 1)).mean() for s in syn]  # the cell's proportion
    ref = combine_estimates(q, [x * (1 - x) / 400 for x in q], rule="fully", n=1000,
                            n_syn=400)
    assert comb.loc[("x", 1), "estimate"] == pytest.approx(ref.estimate)
    assert comb.loc[("x", 1), "se"] == pytest.approx(ref.se)
    assert comb["estimate"].sum() == pytest.approx(1.0)
    with pytest.raises(SchemaError, match="two"):
        combine_marginal_estimates(syn[:1], ["a"])


@pytest.mark.parametrize("m", [1, 5])
def test_raab_rule_covers_for_proper_and_fixed_parameter_synthesis(m):
    """A normal mean, n = k = 200: synthesis from fixed parameters (mu = ybar) has variance
    v (1 + 1/m) and synthesis with a posterior draw of mu per dataset v (1 + 2/m); each rule's
    95% interval must cover mu at 95% (4,000 replicates: Monte Carlo sd 0.0034)."""
    rng = np.random.default_rng(7)
    n = k = 200
    reps = 4000
    hits = {False: 0, True: 0}
    for _ in range(reps):
        y = rng.normal(0.0, 1.0, n)
        for proper in (False, True):
            mus = (y.mean() + rng.normal(0.0, y.std(ddof=1) / np.sqrt(n), m) if proper
                   else np.full(m, y.mean()))
            syn = mus[:, None] + y.std(ddof=1) * rng.standard_normal((m, k))
            c = combine_estimates(syn.mean(1), syn.var(1, ddof=1) / k, n=n, n_syn=k,
                                  proper=proper)
            hits[proper] += c.lower < 0.0 < c.upper
    for proper in (False, True):
        assert abs(hits[proper] / reps - 0.95) < 4 * 0.0034, (proper, hits[proper] / reps)
    one = combine_estimates([0.0], [0.09], proper=True)
    assert one.variance == pytest.approx(3 * 0.09)


def test_marginal_estimates_take_a_level_absent_from_one_dataset_as_zero():
    one = pd.DataFrame({"g": ["a", "b", "a", "b"]})
    two = pd.DataFrame({"g": ["a", "a", "a", "a"]})
    for order in ([one, two], [two, one]):  # it raised KeyError, or dropped the cell
        comb = combine_marginal_estimates(order, ["g"], n=4)
        assert sorted(comb.index) == ["a", "b"]
        assert comb.loc["b", "estimate"] == pytest.approx(0.25)
    # each dataset's shares and variances over the records that show the variable
    with_missing = [pd.DataFrame({"g": ["a", "b", None, None]}),
                    pd.DataFrame({"g": ["a", "b", "b", None]})]
    comb = combine_marginal_estimates(with_missing, ["g"], n=4)
    assert comb.loc["a", "estimate"] == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_share_of_rhat_above_the_threshold_counts_judged_quantities_only():
    from bayesynth.evaluation.diagnostics import ConvergenceSummary

    table = pd.DataFrame({"r_hat": [1.05, np.nan], "ess_bulk": [500.0, 500.0]})
    assert ConvergenceSummary.from_table(table).share_rhat_above_1_01 == 1.0
