"""Pseudo-posterior mechanisms: exact censoring, weights, conjugate check, Delta, PH noise."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

import bayesynth as bs
from bayesynth.models.pseudo_posterior import (
    beta_mixture,
    linear_regression,
    negative_binomial,
    record_loglik,
    weighted_observed,
)
from bayesynth.synthesis import (
    PerturbedHistogramSynthesizer,
    PseudoPosteriorSynthesizer,
    WeightCalibration,
    calibrate_weights,
    fit_mechanisms,
    lipschitz_bound,
    privacy_weights,
)

KW = dict(draws=200, tune=200, chains=2, factory_kwargs={"n_components": 1})


@pytest.fixture(scope="module")
def beta_data():
    return pd.DataFrame({"x": np.random.default_rng(5).beta(0.5, 3, 500)})


def test_censoring_bounds_every_record_at_every_draw(beta_data):
    for mech in ("censor_uw", "censor_w"):
        syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism=mech, epsilon=3.0,
                                         random_seed=1, **KW).fit(beta_data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ll = pm.compute_log_likelihood(syn.result_.idata, model=syn.model_,
                                           progressbar=False).log_likelihood["x"].values
        assert np.all(np.abs(ll) <= 1.5)  # exact: |censored pseudo log-likelihood| <= eps/2
        assert syn.delta_ <= 1.5 and syn.epsilon_x_ <= 3.0
        assert syn.result_.n_censored > 0
        raw = record_loglik(syn.model_, syn.result_.idata)
        assert np.abs(raw).max() > 1.5  # without censoring the bound would be exceeded


def test_weights_in_unit_interval_and_zero_when_not_finite():
    L = np.array([[0.5, -2.0, 4.0, np.inf, 1.0], [0.3, -1.0, 3.0, 0.0, -1.5]])
    w = privacy_weights(L)
    assert np.all((w >= 0) & (w <= 1))
    assert w[3] == 0  # non-finite log-likelihood
    # s = (0.5, 2, 4, inf, 1.5): alpha = (4 - s) / (4 - 0.5)
    np.testing.assert_allclose(w[[0, 1, 2, 4]], [1.0, 2 / 3.5, 0.0, 2.5 / 3.5])
    np.testing.assert_allclose(privacy_weights(L, c1=0.5, c2=0.6)[[0, 2]], [1.0, 0.6])
    np.testing.assert_allclose(privacy_weights(np.ones((3, 4))), 1.0)


def test_delta_and_epsilon_by_hand():
    L = np.array([[1.0, -3.0, 0.5], [2.0, -1.0, 6.0]])
    w = np.array([1.0, 0.5, 0.0])
    assert lipschitz_bound(L, w) == 2.0  # max(|1|,|2|, 0.5*3, 0.5*1, 0, 0)
    assert lipschitz_bound(L, np.ones(3)) == 6.0
    assert lipschitz_bound(L, np.ones(3), censor=4.0) == 2.0


def test_weighted_conjugate_normal_matches_closed_form(rng):
    n, sigma, m0, s0 = 60, 1.5, 0.0, 2.0
    y = rng.normal(1.0, sigma, n)
    w = rng.uniform(0.1, 1.0, n)
    with pm.Model():
        mu = pm.Normal("mu", m0, s0)
        weighted_observed("y", lambda mu, size=None: pm.Normal.dist(mu, sigma, size=size),
                          [mu], y, weights=w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(3000, tune=1000, chains=2, random_seed=3, progressbar=False)
    prec = 1 / s0**2 + w.sum() / sigma**2
    mean = (m0 / s0**2 + (w * y).sum() / sigma**2) / prec
    draws = idata.posterior["mu"].values.ravel()
    import arviz as az

    ess = float(az.ess(idata.posterior["mu"].values))
    assert abs(draws.mean() - mean) < 4 * np.sqrt(1 / prec) / np.sqrt(ess)
    assert abs(draws.std() - np.sqrt(1 / prec)) < 0.05 * np.sqrt(1 / prec)


def test_mechanisms_report_their_bounds(beta_data):
    fits = fit_mechanisms(beta_data, beta_mixture, epsilons=(4.0,), random_seed=2, **KW)
    uw, wt = fits[("unweighted", None)], fits[("weighted", None)]
    assert wt.delta_ < uw.delta_  # weighting lowers the sensitivity
    assert fits[("censor_uw", 4.0)].delta_ <= 2.0 and fits[("censor_w", 4.0)].delta_ <= 2.0
    we = fits[("weighted_e", 4.0)]
    assert we.result_.n_truncated == int(np.sum(we.result_.weights == 0)
                                         - np.sum(wt.result_.weights == 0))
    assert fits[("censor_w", 4.0)].result_.n_censored <= fits[("censor_uw", 4.0)].result_.n_censored
    s = wt.sample(m=2, random_seed=1)
    assert len(s) == 2 and list(s[0].columns) == ["x"] and len(s[0]) == len(beta_data)
    assert ((s[0]["x"] > 0) & (s[0]["x"] < 1)).all()
    pd.testing.assert_frame_equal(s[0], wt.sample(m=2, random_seed=1)[0])


def test_calibration_is_reused_with_censoring(beta_data):
    cal = calibrate_weights(beta_data, beta_mixture, epsilon=4.0, c1_grid=(1.0, 0.6),
                            draws=150, tune=150, random_seed=3,
                            factory_kwargs={"n_components": 1})
    assert isinstance(cal, WeightCalibration) and cal.c1 in (1.0, 0.6)
    later = pd.DataFrame({"x": np.random.default_rng(9).beta(0.5, 3, 400)})
    syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w", calibration=cal,
                                     random_seed=4, **KW).fit(later)
    assert syn.epsilon_x_ <= 4.0


def test_count_and_regression_base_models(rng):
    counts = pd.DataFrame({"y": rng.negative_binomial(3, 0.3, 300)})
    nb = PseudoPosteriorSynthesizer(negative_binomial, mechanism="censor_w", epsilon=6.0,
                                    draws=150, tune=150, random_seed=1).fit(counts)
    s = nb.sample(m=1, random_seed=2)[0]
    assert (s["y"] >= 0).all() and np.all(s["y"] == np.round(s["y"]))
    x = rng.normal(size=200)
    df = pd.DataFrame({"y": 1 + 2 * x + rng.normal(size=200), "x": x})
    reg = PseudoPosteriorSynthesizer(linear_regression, mechanism="weighted", draws=150,
                                     tune=150, random_seed=1,
                                     factory_kwargs={"response": "y", "predictors": ["x"]})
    reg.fit(df)
    y_syn = reg.sample(m=1, random_seed=3)[0].iloc[:, 0].to_numpy()
    assert np.corrcoef(y_syn, x)[0, 1] > 0.7  # the regression structure survives


def test_perturbed_histogram_noise_has_the_laplace_scale():
    x = np.random.default_rng(0).beta(2, 2, 20_000)
    eps = 1.0
    counts, _ = np.histogram(x, bins=np.linspace(0, 1, 21))
    noise = np.concatenate([
        PerturbedHistogramSynthesizer(eps, random_seed=s).fit(x).noisy_counts_ - counts
        for s in range(300)])
    assert counts.min() > 50  # no clipping at 0, so this is the raw noise
    res = stats.kstest(noise, stats.laplace(scale=1 / eps).cdf)
    assert res.pvalue > 1e-3
    two = PerturbedHistogramSynthesizer(eps, sensitivity=2, random_seed=1).fit(x)
    assert np.std(two.noisy_counts_ - counts) > 1.5
    syn = PerturbedHistogramSynthesizer(4.0, random_seed=1).fit(pd.DataFrame({"v": x}))
    s = syn.sample(m=1, random_seed=2)[0]
    assert list(s.columns) == ["v"] and s["v"].between(0, 1).all()
    with pytest.raises(bs.errors.SchemaError, match="bounds"):
        PerturbedHistogramSynthesizer(1.0).fit(np.array([0.5, 2.0]))


def test_bad_mechanism_arguments(beta_data):
    with pytest.raises(bs.errors.SchemaError, match="epsilon"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w").fit(beta_data)
    with pytest.raises(bs.errors.SchemaError, match="mechanism"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="magic", epsilon=1).fit(beta_data)
    with pytest.raises(bs.errors.ColumnTypeError, match="inside"):
        beta_mixture(np.r_[np.full(20, 0.5), 1.0])


def my_poisson_model(data, weights=None, censor=None):
    """The recipe of the module docstring: a user's own model, weighted_observed inside."""
    with pm.Model() as model:
        b = pm.Normal("b", 0, 2, shape=2)
        mu = pm.math.exp(b[0] + b[1] * data["x"].to_numpy())
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size), [mu],
                          data["y"].to_numpy(), weights=weights, censor=censor)
    return model


def test_users_own_model_recipe(rng):
    x = rng.normal(size=150)
    df = pd.DataFrame({"y": rng.poisson(np.exp(0.5 + 0.4 * x)), "x": x})
    syn = PseudoPosteriorSynthesizer(my_poisson_model, mechanism="censor_w", epsilon=4.0,
                                     draws=150, tune=150, random_seed=1).fit(df)
    assert syn.epsilon_x_ <= 4.0
    assert (syn.sample(m=1, random_seed=2)[0].iloc[:, 0] >= 0).all()
