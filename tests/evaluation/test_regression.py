"""Regression inference and interval overlap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.evaluation import (
    fit_regression,
    interval_overlap,
    regression_inference,
    standardized_squared_error,
)


def test_cio_hand_computed():
    assert interval_overlap(0, 1, 0, 1) == 1.0
    assert interval_overlap(0, 1, 2, 3) == -1.0  # disjoint: negative
    assert interval_overlap(0, 1, 1, 2) == 0.0  # touching
    assert interval_overlap(0, 2, 1, 3) == 0.5
    assert interval_overlap(0, 4, 1, 2) == pytest.approx(0.5 * (1 / 4 + 1))
    assert standardized_squared_error(1.0, 0.5, 2.0) == 4.0


def _data(rng, n, b2=0.5):
    x1, x2 = rng.normal(size=n), rng.normal(size=n) * 3 + 1
    g = rng.choice(["u", "v", "w"], size=n)
    y = 1.0 + 2.0 * x1 + b2 * x2 + 0.8 * (g == "v") + 0.5 * x1 * x2 + rng.normal(size=n)
    return pd.DataFrame({"y": y, "x1": x1, "x2": x2, "g": g})


def test_ols_recovers_and_same_data_overlaps_fully(rng):
    df = _data(rng, 2000)
    tab, _ = fit_regression(df, "y ~ x1 + x2 + g + x1:x2")
    # x2 is standardised (sd 3): its coefficient is b2 * sd(x2)
    assert tab.loc["x2", "estimate"] == pytest.approx(0.5 * df["x2"].std(), abs=0.1)
    comp = regression_inference(df, [df, df], "y ~ x1 + x2 + g + x1:x2")
    np.testing.assert_allclose(comp.per_coefficient["cio"], 1.0)
    np.testing.assert_allclose(comp.per_coefficient["std_sq_error"], 0.0, atol=1e-20)
    assert comp.mean_cio == pytest.approx(1.0)


def test_different_data_lower_overlap(rng):
    real = _data(rng, 1500)
    fake = _data(rng, 1500, b2=-0.5)
    comp = regression_inference(real, fake, "y ~ x1 + x2 + g")
    row = comp.per_coefficient.set_index("term").loc["x2"]
    assert row["cio"] < 0 and row["std_sq_error"] > 100
    # a synthetic dataset lacking a level still gets the real design
    comp2 = regression_inference(real, real[real["g"] != "w"], "y ~ x1 + g")
    assert list(comp2.synthetic[0].index) == list(comp2.real.index)


@pytest.mark.slow
def test_bayes_horseshoe_close_to_ols(rng):
    df = _data(rng, 400)
    ols, _ = fit_regression(df, "y ~ x1 + x2 + g")
    bay, _ = fit_regression(df, "y ~ x1 + x2 + g", method="bayes", draws=500, tune=500,
                            random_seed=1)
    assert list(bay.index) == list(ols.index)
    # strong signals are barely shrunk by the horseshoe
    assert bay.loc["x1", "estimate"] == pytest.approx(ols.loc["x1", "estimate"], abs=0.15)
    assert (bay["upper"] > bay["lower"]).all()


def test_missing_responses_in_synthetic_data_are_dropped(rng):
    n = 400
    x = rng.normal(size=n)
    real = pd.DataFrame({"x": x, "y": 1 + 2 * x + rng.normal(size=n)})
    real.loc[:30, "y"] = np.nan
    shuffled = real.sample(frac=1, random_state=1)  # the same records, another order
    comp = regression_inference(real, [shuffled], "y ~ x")
    assert comp.summary["mean_cio"].iloc[0] == pytest.approx(1.0)
    assert comp.summary["mean_std_sq_error"].iloc[0] == pytest.approx(0.0, abs=1e-12)


def test_a_coefficient_the_synthetic_data_cannot_estimate_is_skipped():
    """A level absent from a synthetic dataset: its coefficient is NaN (not 0 with sd 0), so the
    mean CIO and error skip it (they were -inf and 23 instead of about 0.94 and 0.07)."""
    import warnings

    rng = np.random.default_rng(0)
    n = 400
    real = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(list("abc"), n)})
    real["y"] = real.x + (real.g == "c") * 1.0 + rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = regression_inference(real, real[real.g != "c"].reset_index(drop=True), "y ~ x + g")
    assert np.isfinite(r.mean_cio) and r.mean_cio > 0.8
    assert r.mean_std_sq_error < 1.0
    assert np.isnan(interval_overlap([0.0], [1.0], [5.0], [5.0])[0])


def test_synthetic_coefficients_are_in_the_real_data_units():
    """A synthetic table whose predictor has the real law's slope but twice the real sd: in
    the real table's units its coefficient equals the real one (overlap near 1). Each table
    standardised by its own sd doubled the synthetic coefficient (overlap -31 here)."""
    rng = np.random.default_rng(0)
    n = 4000
    x = rng.normal(0, 1, n)
    real = pd.DataFrame({"x": x, "y": 2.0 * x + rng.normal(0, 1, n)})
    x2 = rng.normal(0, 2, n)  # the same slope, a wider predictor
    syn = pd.DataFrame({"x": x2, "y": 2.0 * x2 + rng.normal(0, 1, n)})
    comp = regression_inference(real, syn, "y ~ x")
    cio = float(comp.summary["mean_cio"].iloc[0])
    assert cio > 0.5, cio
