"""Marginal, cross-tab and propensity-score utility on hand-computed and simulated cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.evaluation import (
    crosstab_comparison,
    ecdf_distances,
    ks_distance,
    marginal_fidelity,
    marginal_utility,
    propensity_score_utility,
    tv_distance,
)


def test_ecdf_hand_computed():
    mx, avg = ecdf_distances([1, 2, 3, 4], [3, 4, 5, 6])
    assert mx == 0.5
    assert avg == pytest.approx(1.375 / 8)
    assert ecdf_distances([1, 2, 3], [1, 2, 3]) == (0.0, 0.0)
    assert ks_distance([0, 0, 0, 0], [1, 1, 1, 1]) == 1.0
    assert ks_distance([1.0, np.nan, 2.0], [1.0, 2.0]) == 0.0  # missing values ignored


def test_tv_hand_computed():
    assert tv_distance(["a", "a", "b", "b"], ["a", "b", "b", "b"]) == 0.25
    assert tv_distance(pd.Series(["a", None]), pd.Series(["a", "a"])) == 0.5


def test_marginal_utility_table(mixed_df):
    mu = marginal_utility(mixed_df, mixed_df)
    num = mu[mu["kind"] == "numeric"]
    assert set(num.index) == {"visits", "income"}
    assert (num["max_ecdf"] == 0).all() and (num["avg_ecdf"] == 0).all()
    np.testing.assert_allclose(num["q50_real"], num["q50_synthetic"])
    np.testing.assert_allclose(num.loc["income", ["q15_real", "q50_real", "q90_real"]],
                               mixed_df["income"].quantile([0.15, 0.5, 0.9]).to_numpy())
    assert (mu.loc[mu["kind"] == "categorical", "tv"] == 0).all()
    rep = marginal_fidelity(mixed_df, mixed_df)
    assert (rep["distance"] == 0).all()


def test_crosstab(mixed_df):
    table, diff = crosstab_comparison(mixed_df, mixed_df.sample(frac=1, random_state=0),
                                      ["group", "level"])
    assert diff == 0.0
    np.testing.assert_allclose(table["real"].sum(), 1.0)
    a = pd.DataFrame({"x": ["a", "a", "b", "b"], "y": ["u", "v", "u", "v"]})
    b = pd.DataFrame({"x": ["a", "a", "a", "b"], "y": ["u", "u", "v", "v"]})
    table, diff = crosstab_comparison(a, b, ["x", "y"])
    assert diff == 0.25
    assert table.loc[("a", "u"), "synthetic"] == 0.5


def _sample(rng, n):
    return pd.DataFrame({"x": rng.normal(size=n), "z": rng.gamma(2.0, size=n),
                         "g": rng.choice(list("abc"), size=n)})


def test_pmse_is_at_the_maximum_likelihood_fit():
    """The logit pMSE is the MLE's: statsmodels' Newton fit agrees to 1e-6 (relative).

    With scikit-learn's default tolerance the fit stopped early and the pMSE was 0.06-0.25%
    off on these tables (six-level and binary columns, skewed numbers, n = 3,000 each).
    """
    import statsmodels.api as sm

    from bayesynth.evaluation.utility import _design

    for seed in range(3):
        rng = np.random.default_rng(seed)
        tables = []
        for shift in (0.0, 0.05):
            n = 3000
            tables.append(pd.DataFrame({
                "x": rng.normal(shift, 1, n), "y": rng.gamma(2.0, 1 + shift, n),
                "w": rng.lognormal(0, 1, n),
                "g": rng.choice(list("abcdef"), n, p=[.4, .2, .15, .1, .1, .05]),
                "h": rng.choice(list("uv"), n, p=[0.5 + shift, 0.5 - shift])}))
        real, syn = tables
        res = propensity_score_utility(real, syn)
        X = sm.add_constant(_design(real, syn, list(real.columns), None))
        y = np.r_[np.zeros(len(real)), np.ones(len(syn))]
        p = sm.Logit(y, X).fit(disp=0, method="newton", tol=1e-12).predict()
        assert res.pmse == pytest.approx(np.mean((p - 0.5) ** 2), rel=1e-6)


def test_pmse_identical_is_zero_and_same_distribution_is_near_null(rng):
    df = _sample(rng, 400)
    same = propensity_score_utility(df, df)
    assert same.pmse < 1e-10 and same.c == 0.5
    # two samples of one distribution: S_pMSE ~ chi2_(k-1)/(k-1), mean 1, sd sqrt(2/(k-1))
    s = [propensity_score_utility(_sample(rng, 400), _sample(rng, 400)).s_pmse
         for _ in range(40)]
    k1 = 4  # x, z, and two dummies of g
    assert abs(np.mean(s) - 1.0) < 4 * np.sqrt(2 / k1) / np.sqrt(40)
    # a shifted synthetic sample is detected
    shifted = _sample(rng, 400).assign(x=lambda d: d["x"] + 0.5)
    assert propensity_score_utility(_sample(rng, 400), shifted).s_pmse > 5


def test_pmse_null_matches_simulation_at_unequal_sizes(rng):
    """The closed-form null mean against simulation with c = 1/4 (where the c(1 - c) and the
    (1 - c)^2 c forms differ by a third)."""
    res = [propensity_score_utility(_sample(rng, 600), _sample(rng, 200)) for _ in range(60)]
    pm = np.array([r.pmse for r in res])
    null = res[0].null_pmse
    assert abs(pm.mean() - null) < 4 * pm.std() / np.sqrt(len(pm)) + 0.1 * null


def test_pmse_null_closed_form(rng):
    res = propensity_score_utility(_sample(rng, 300), _sample(rng, 100))
    N, c = 400, 0.25
    assert res.n_params == 5
    assert res.null_pmse == pytest.approx((5 - 1) * c * (1 - c) / N)


def test_pmse_cart_and_interactions(rng):
    a, b = _sample(rng, 300), _sample(rng, 300)
    cart = propensity_score_utility(a, b, method="cart", n_permutations=10, random_seed=1)
    assert 0.5 < cart.s_pmse < 2.0
    inter = propensity_score_utility(a, b, method="logit_interactions")
    assert inter.n_params > 5
    with pytest.raises(ValueError, match="method"):
        propensity_score_utility(a, b, method="forest")


def test_propensity_auc_near_half_for_one_law_and_near_one_when_shifted(rng):
    from bayesynth.evaluation import propensity_auc

    def draw(n, shift=0.0):
        return pd.DataFrame({"x": rng.normal(shift, 1, n), "g": rng.choice(list("abc"), n)})

    real = draw(1000)
    # same law: the AUC of an uninformative score over 1000 + 1000 records has sd about 0.013
    same = propensity_auc(real, draw(1000), random_seed=0)
    assert abs(same - 0.5) < 4 * 0.013 + 0.02  # plus the classifier's small overfit bias
    assert propensity_auc(real, draw(1000, shift=3.0), random_seed=0) > 0.95
    other = draw(1000)
    assert propensity_auc(real, other, random_seed=1) == propensity_auc(real, other,
                                                                        random_seed=1)


def test_a_level_column_stored_as_float_is_the_same_level(rng):
    """A level column of integers held as objects (as a column with a text code leaves it)
    against the same levels as floats (0.0/1.0): the propensity models must not separate the
    tables on the spelling "1" against "1.0" (before: S_pMSE 300 and AUC 1.0 for one law).
    Two numeric dtypes were already unified by the stacking."""
    from bayesynth.evaluation import propensity_auc

    def draw(n):
        return pd.DataFrame({"x": rng.normal(0, 1, n), "b": rng.integers(0, 2, n)})

    real = draw(600).astype({"b": object})
    syn = draw(600).astype({"b": float})
    assert propensity_score_utility(real, syn).s_pmse < 6
    assert propensity_auc(real, syn, random_seed=0) < 0.6


def test_marginal_plot_puts_an_integer_level_and_its_float_copy_in_one_bar():
    from bayesynth.evaluation.plots import plot_marginals

    real = pd.DataFrame({"b": [0, 1, 1, 1]})
    fig = plot_marginals(real, [real.astype(float)], columns=["b"], ncols=1)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["1", "0"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [0.75, 0.25, 0.75, 0.25]
