"""Pseudo-posterior mechanisms: exact censoring, weights, conjugate check, diagnostics,
guarantees and their refusals, the ledger, the perturbed histogram."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest

import bayesynth as bs
from bayesynth.errors import InvalidParameterError, PrivacyGuaranteeError, PrivacyWarning
from bayesynth.models.pseudo_posterior import (
    beta_mixture,
    data_dependent_priors,
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
    local_epsilon,
    privacy_weights,
)

# short fits (they warn that convergence is not shown; see pytestmark): not continued
KW = dict(draws=200, tune=200, chains=2, max_extensions=0, factory_kwargs={"n_components": 1})

# The fits here are kept short: they test censoring, weights and guarantees, which hold at every
# draw, not the posterior's convergence (tests/synthesis/test_pseudo_posterior_convergence.py).
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*convergence is not shown.*:RuntimeWarning")


@pytest.fixture(autouse=True)
def _seeded_fits_are_intended():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


@pytest.fixture(scope="module")
def beta_data():
    return pd.DataFrame({"x": np.random.default_rng(5).beta(0.5, 3, 500)})


@pytest.mark.parametrize("neighbours,bound", [("change_one", 0.75), ("add_remove", 1.5)])
def test_censoring_bounds_every_record_at_every_draw(beta_data, neighbours, bound):
    for mech in ("censor_uw", "censor_w"):
        syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism=mech, epsilon=3.0,
                                         neighbours=neighbours, random_seed=1,
                                         **KW).fit(beta_data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ll = pm.compute_log_likelihood(syn.idata_, model=syn.model_,
                                           progressbar=False).log_likelihood["x"].values
        # exact: |censored pseudo log-likelihood| <= c = epsilon/4 (change-one), /2 (add/remove)
        assert np.all(np.abs(ll) <= bound)
        assert syn.diagnostics_.empirical_delta <= bound
        assert syn.diagnostics_.n_censored > 0
        raw = record_loglik(syn.model_, syn.idata_)
        assert np.abs(raw).max() > bound  # without censoring the bound would be exceeded


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
    assert lipschitz_bound(L, np.ones(3), censor=2.0) == 2.0
    assert local_epsilon(2.0, "add_remove") == 4.0  # the paper's epsilon_x = 2 Delta
    assert local_epsilon(2.0, "change_one") == 8.0


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


def test_mechanisms_report_their_bounds_and_guarantees(beta_data):
    fits = fit_mechanisms(beta_data, beta_mixture, epsilons=(4.0,), random_seed=2, **KW)
    uw, wt = fits[("unweighted", None)], fits[("weighted", None)]
    d = {k: f.diagnostics_ for k, f in fits.items()}
    assert d[("weighted", None)].empirical_delta < d[("unweighted", None)].empirical_delta
    assert d[("censor_uw", 4.0)].empirical_delta <= 1.0  # c = 4 / 4
    assert d[("censor_w", 4.0)].empirical_delta <= 1.0
    we = d[("weighted_e", 4.0)]
    assert we.n_truncated == int(np.sum(we.weights == 0) - np.sum(d[("weighted", None)].weights
                                                                 == 0))
    assert d[("censor_w", 4.0)].n_censored <= d[("censor_uw", 4.0)].n_censored
    g = {k: f.guarantee_.guarantee for k, f in fits.items()}
    # weighted_e is local only if the refit keeps its truncation: here it does not
    assert "above c = 1," in fits[("weighted_e", 4.0)].guarantee_.why
    assert g == {("unweighted", None): "none", ("weighted", None): "none",
                 ("weighted_e", 4.0): "none", ("censor_uw", 4.0): "strict",
                 ("censor_w", 4.0): "local"}  # censor_w with data-fitted weights is local
    s = wt.sample(m=2, random_seed=1)
    assert len(s) == 2 and list(s[0].columns) == ["x"] and len(s[0]) == len(beta_data)
    assert ((s[0]["x"] > 0) & (s[0]["x"] < 1)).all()
    pd.testing.assert_frame_equal(s[0], wt.sample(m=2, random_seed=1)[0])
    assert np.isinf(wt.ledger_.total_epsilon) and uw.ledger_.entries == []


def test_m_datasets_cost_m_epsilon_and_add_remove_needs_n_rows(beta_data):
    syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=2.0,
                                     random_seed=3, **KW).fit(beta_data)
    assert syn.ledger_.entries == []  # fitting releases nothing
    out = syn.sample(m=3)
    assert len(out) == 3 and syn.ledger_.total_epsilon == pytest.approx(6.0)
    assert syn.ledger_.guarantee == "strict" and syn.ledger_.seeded
    syn.sample()  # the default m is 1
    assert syn.ledger_.total_epsilon == pytest.approx(8.0)
    ar = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=2.0,
                                    neighbours="add_remove", random_seed=3, **KW).fit(beta_data)
    with pytest.raises(PrivacyGuaranteeError, match="n_rows"):
        ar.sample()
    assert len(ar.sample(n_rows=100)[0]) == 100
    with pytest.raises(InvalidParameterError, match="distinct posterior draws"):
        syn.sample(m=10_000)


def test_seeded_privacy_fits_warn(beta_data):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        with pytest.raises(PrivacyWarning, match="fixed random_seed"):
            PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=2.0,
                                       random_seed=3, **KW).fit(beta_data)
        # the non-private mechanisms may be seeded freely
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="unweighted", random_seed=3,
                                   **KW).fit(beta_data)


def data_prior_model(data, weights=None, censor=None):
    """A prior centred at the sample mean: the loss is unbounded whatever the censoring."""
    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as model:
        log_mu = pm.Normal("log_mu", np.log(y.mean() + 0.5), 1.0)
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size),
                          [pm.math.exp(log_mu)], y, weights=weights, censor=censor)
    return model


def test_guarantees_that_cannot_hold_are_refused(rng):
    counts = pd.DataFrame({"y": rng.poisson(3.0, 100)})
    assert data_dependent_priors(data_prior_model, counts) == ["log_mu"]
    assert data_dependent_priors(negative_binomial, counts) == []
    with pytest.raises(PrivacyGuaranteeError, match="log_mu.*fixed, public"):
        PseudoPosteriorSynthesizer(data_prior_model, mechanism="censor_uw",
                                   epsilon=2.0).fit(counts)
    x = rng.normal(size=100)
    df = pd.DataFrame({"y": 1 + x + rng.normal(size=100), "x": x})
    with pytest.raises(PrivacyGuaranteeError, match="real predictors"):
        PseudoPosteriorSynthesizer(linear_regression, mechanism="censor_uw", epsilon=2.0,
                                   factory_kwargs={"response": "y", "predictors": ["x"]}
                                   ).fit(df)
    df["y"] = rng.poisson(np.exp(0.5 + 0.4 * x))
    with pytest.raises(PrivacyGuaranteeError, match="covariates"):
        PseudoPosteriorSynthesizer(covariate_poisson_model, mechanism="censor_w",
                                   epsilon=4.0).fit(df)


def _poisson_dropping_censor(data, weights=None, censor=None):
    """Accepts censor but never passes it on: its likelihood is unbounded."""
    with pm.Model() as model:
        log_mu = pm.Normal("log_mu", 1.0, 2.0)
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size),
                          [pm.math.exp(log_mu)], data["y"].to_numpy(), weights=weights)
    return model


def _poisson_with_potential(data, weights=None, censor=None):
    """Censored likelihood plus a Potential that reads the data outside it."""
    model = my_poisson_model(data, weights, censor)
    with model:
        pm.Potential("extra", pm.logp(pm.Normal.dist(model["log_mu"], 1.0),
                                      float(data["y"].mean())))
    return model


def _poisson_row_covariate(data, weights=None, censor=None):
    """A covariate laid out as a row (1, n): the old screen read only the first axis."""
    x = data["x"].to_numpy()
    with pm.Model() as model:
        b = pm.Normal("b", 0, 2, shape=2)
        mu = pm.math.exp(b[0] + b[1] * pm.math.dot(b[1:2], x[None, :])[0])
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size), [mu],
                          data["y"].to_numpy(), weights=weights, censor=censor)
    return model


def _poisson_closure_covariate(data, weights=None, censor=None):
    """A covariate held inside ``base``, not passed among the parameters."""
    x = data["x"].to_numpy()
    with pm.Model() as model:
        b = pm.Normal("b", 0, 2)
        weighted_observed("y", lambda b, size=None: pm.Poisson.dist(pm.math.exp(b * x),
                                                                     size=size),
                          [b], data["y"].to_numpy(), weights=weights, censor=censor)
    return model


def test_a_model_that_drops_the_bound_is_refused_before_release(rng):
    """A factory that ignored censor was fitted and released as strict epsilon = 1 (its
    record contributions reached -139 against the claimed c = 0.25); a Potential and
    covariates outside the first axis or inside ``base`` escaped the checks too."""
    counts = pd.DataFrame({"y": rng.poisson(4.0, 60)})
    with pytest.raises(PrivacyGuaranteeError, match="censoring at c = 0.25 but built a model "
                                                    "with no censoring"):
        PseudoPosteriorSynthesizer(_poisson_dropping_censor, mechanism="censor_uw",
                                   epsilon=1.0, draws=20, tune=20, max_extensions=0).fit(counts)
    with pytest.raises(PrivacyGuaranteeError, match="pm.Potential 'extra'"):
        PseudoPosteriorSynthesizer(_poisson_with_potential, mechanism="censor_uw",
                                   epsilon=1.0, draws=20, tune=20, max_extensions=0).fit(counts)
    x = rng.normal(size=60)
    df = pd.DataFrame({"y": rng.poisson(np.exp(0.5 + 0.4 * x)), "x": x})
    for factory in (_poisson_row_covariate, _poisson_closure_covariate):
        with pytest.raises(PrivacyGuaranteeError, match="covariates"):
            PseudoPosteriorSynthesizer(factory, mechanism="censor_uw", epsilon=1.0,
                                       draws=20, tune=20, max_extensions=0).fit(df)
    # the honest recipe still fits
    PseudoPosteriorSynthesizer(my_poisson_model, mechanism="censor_uw", epsilon=1.0,
                               draws=20, tune=20, max_extensions=0, random_seed=1).fit(counts)


def test_calibration_on_reference_data_is_reused_with_censoring(beta_data, tmp_path):
    cal = calibrate_weights(beta_data, beta_mixture, epsilon=4.0, c1_grid=(1.0, 0.6),
                            draws=150, tune=150, max_extensions=0, random_seed=3,
                            factory_kwargs={"n_components": 1})
    assert isinstance(cal, WeightCalibration) and cal.c1 in (1.0, 0.6)
    cal.save(tmp_path / "cal.nc")
    again = WeightCalibration.load(tmp_path / "cal.nc")
    confidential = pd.DataFrame({"x": np.random.default_rng(9).beta(0.5, 3, 400)})
    syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w", calibration=again,
                                     random_seed=4, **KW).fit(confidential)
    assert syn.diagnostics_.empirical_delta <= 1.0
    assert syn.guarantee_.guarantee == "strict" and "reference data" in syn.guarantee_.why
    assert syn.unweighted_diagnostics_ is None  # no fit of the confidential data for weights
    np.testing.assert_allclose(syn.diagnostics_.weights,
                               cal.weights(beta_mixture(confidential, n_components=1)))
    with pytest.raises(InvalidParameterError, match="recalibrate"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w", calibration=cal,
                                   neighbours="add_remove").fit(confidential)
    fixed = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w", epsilon=4.0,
                                       weights=np.full(400, 0.7), random_seed=4,
                                       **KW).fit(confidential)
    assert fixed.guarantee_.guarantee == "strict"
    assert "supplied by the user" in fixed.guarantee_.why


def test_count_and_regression_base_models(rng):
    counts = pd.DataFrame({"y": rng.negative_binomial(3, 0.3, 300)})
    nb = PseudoPosteriorSynthesizer(negative_binomial, mechanism="censor_uw", epsilon=6.0,
                                    draws=150, tune=150, max_extensions=0,
                                    random_seed=1).fit(counts)
    s = nb.sample(m=1, random_seed=2)[0]
    assert (s["y"] >= 0).all() and np.all(s["y"] == np.round(s["y"]))
    x = rng.normal(size=200)
    df = pd.DataFrame({"y": 1 + 2 * x + rng.normal(size=200), "x": x})
    reg = PseudoPosteriorSynthesizer(linear_regression, mechanism="weighted", draws=150,
                                     tune=150, max_extensions=0, random_seed=1,
                                     factory_kwargs={"response": "y", "predictors": ["x"]})
    reg.fit(df)
    y_syn = reg.sample(m=1, random_seed=3)[0].iloc[:, 0].to_numpy()
    assert np.corrcoef(y_syn, x)[0, 1] > 0.7  # the regression structure survives


def test_perturbed_histogram_noise_has_the_geometric_law():
    x = np.random.default_rng(0).beta(2, 2, 20_000)
    eps = 1.0
    counts, _ = np.histogram(x, bins=np.linspace(0, 1, 21))
    assert counts.min() > 50  # no clipping at 0, so this is the raw noise
    for neighbours, sens in (("change_one", 2), ("add_remove", 1)):
        noise = np.concatenate([
            PerturbedHistogramSynthesizer(eps, neighbours=neighbours, random_seed=s).fit(x)
            .noisy_counts_ - counts for s in range(150)])
        assert noise.dtype == np.int64
        q = np.exp(-eps / sens)
        var = 2 * q / (1 - q) ** 2
        assert abs(np.var(noise) - var) < 4 * var * np.sqrt(5 / len(noise))
    syn = PerturbedHistogramSynthesizer(4.0, random_seed=1).fit(pd.DataFrame({"v": x}))
    s = syn.sample(m=1, random_seed=2)[0]
    assert list(s.columns) == ["v"] and s["v"].between(0, 1).all() and len(s) == len(x)
    assert syn.ledger_.total_epsilon == 4.0 and syn.ledger_.seeded
    with pytest.raises(InvalidParameterError, match="bounds"):
        PerturbedHistogramSynthesizer(1.0).fit(np.array([0.5, 2.0]))


def test_perturbed_histogram_hides_n_under_add_remove():
    x = np.random.default_rng(1).beta(2, 2, 500)
    with pytest.raises(PrivacyGuaranteeError, match="bins"):
        PerturbedHistogramSynthesizer(1.0, bins=None, neighbours="add_remove").fit(x)
    sizes = {len(PerturbedHistogramSynthesizer(1.0, neighbours="add_remove").fit(x).sample()[0])
             for _ in range(10)}
    assert len(sizes) > 1  # the noisy total, not the exact n
    assert len(PerturbedHistogramSynthesizer(1.0, bins=None).fit(x).edges_) == 9  # 500^(1/3)
    # a noisy total below one record gives empty datasets, and says so
    tiny = np.array([0.2, 0.7])
    for s in range(50):
        syn = PerturbedHistogramSynthesizer(0.05, neighbours="add_remove", random_seed=s).fit(tiny)
        if syn.noisy_counts_.sum() < 1:
            break
    else:
        pytest.fail("no noisy total below 1 in 50 seeds")
    with pytest.warns(RuntimeWarning, match="no records"):
        assert len(syn.sample()[0]) == 0


def test_bad_mechanism_arguments(beta_data):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_w").fit(beta_data)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw",
                                   epsilon=-1).fit(beta_data)
    with pytest.raises(InvalidParameterError, match="neighbours"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=1,
                                   neighbours="swap").fit(beta_data)
    with pytest.raises(InvalidParameterError, match="mechanism"):
        PseudoPosteriorSynthesizer(beta_mixture, mechanism="magic", epsilon=1).fit(beta_data)
    with pytest.raises(bs.errors.ColumnTypeError, match="inside"):
        beta_mixture(np.r_[np.full(20, 0.5), 1.0])


def my_poisson_model(data, weights=None, censor=None):
    """The recipe of the module docstring: a user's own model, weighted_observed inside."""
    with pm.Model() as model:
        log_mu = pm.Normal("log_mu", 1.0, 2.0)
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size),
                          [pm.math.exp(log_mu)], data["y"].to_numpy(), weights=weights,
                          censor=censor)
    return model


def covariate_poisson_model(data, weights=None, censor=None):
    """A Poisson regression: its synthetic records are drawn at the real covariates."""
    with pm.Model() as model:
        b = pm.Normal("b", 0, 2, shape=2)
        mu = pm.math.exp(b[0] + b[1] * data["x"].to_numpy())
        weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size), [mu],
                          data["y"].to_numpy(), weights=weights, censor=censor)
    return model


def test_users_own_model_recipe(rng):
    df = pd.DataFrame({"y": rng.poisson(4.0, 150)})
    syn = PseudoPosteriorSynthesizer(my_poisson_model, mechanism="censor_uw", epsilon=4.0,
                                     draws=150, tune=150, max_extensions=0,
                                     random_seed=1).fit(df)
    assert syn.diagnostics_.empirical_delta <= 1.0
    assert (syn.sample(m=1, random_seed=2)[0].iloc[:, 0] >= 0).all()


def test_n_rows_draws_fresh_records_at_the_draw(beta_data):
    """Under add/remove neighbours n is private, so a dataset of n_rows records must not be a
    resample of the n records of one posterior-predictive draw (at most n distinct values,
    which would tell n): with a continuous model every one of 3n + 7 records is distinct."""
    n = 40
    small = beta_data.iloc[:n]
    ar = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=2.0,
                                    neighbours="add_remove", random_seed=3, **KW).fit(small)
    a, b = ar.sample(m=2, n_rows=3 * n + 7, random_seed=11)
    for out in (a, b):
        assert len(out) == 3 * n + 7
        assert out["x"].nunique() == 3 * n + 7
        assert out["x"].between(0.0, 1.0).all()
    assert ar.sample(m=2, n_rows=10, random_seed=11)[0]["x"].nunique() == 10
    again = ar.sample(m=2, n_rows=3 * n + 7, random_seed=11)  # reproducible from its seed
    pd.testing.assert_frame_equal(again[0], a)


def test_n_rows_is_refused_for_records_with_their_own_parameters():
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    df = pd.DataFrame({"y": 1.0 + 2.0 * x + rng.normal(size=60), "x": x})
    syn = PseudoPosteriorSynthesizer(linear_regression, mechanism="weighted", random_seed=1,
                                     draws=100, tune=100, chains=1,
                                     factory_kwargs={"response": "y", "predictors": ["x"]})
    syn.fit(df)
    assert len(syn.sample(random_seed=2)[0]) == 60
    with pytest.raises(InvalidParameterError, match="n_rows"):
        syn.sample(n_rows=30, random_seed=2)


def test_from_posterior_checks_the_truncation_of_weighted_e_on_its_draws():
    """A weighted model given as "weighted_e": the guarantee says how many records of
    positive weight exceed the epsilon's bound c on the posterior's own draws (none for a
    generous epsilon; some, and that the truncation does not hold, for a tiny one)."""
    from bayesynth.models.pseudo_posterior import beta_mixture, record_loglik
    from bayesynth.privacy.lipschitz import record_bounds

    x = np.random.default_rng(3).beta(2, 5, 60)
    w = np.linspace(0.2, 1.0, 60)
    model = beta_mixture(x, w, None, n_components=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=100, tune=200, chains=1, random_seed=2,
                          progressbar=False)
    s = record_bounds(record_loglik(model, idata, random_seed=0)) * w
    for eps, expected in ((8 * s.max() + 1.0, 0), (2 * float(np.median(s)), None)):
        syn = PseudoPosteriorSynthesizer.from_posterior(
            model, idata, factory=beta_mixture, factory_kwargs={"n_components": 1},
            mechanism="weighted_e", epsilon=eps)
        why = syn.guarantee_.why
        if expected == 0:
            assert "0 record(s) of positive weight" in why and "does not hold" not in why
        else:
            above = int(np.sum(s > eps / 4))  # change-one neighbours: c = epsilon / 4
            assert above > 0 and f"{above} record(s) of positive weight" in why
            assert "does not hold" in why


def test_a_weight_of_zero_removes_the_record_even_where_it_is_impossible():
    """Uniform(0, theta) records: a zero-weight record above theta has log-likelihood -inf;
    0 * -inf must not be NaN (which cut theta's support, so the record still counted), and a
    censored model keeps every term in [-c, c]."""
    x = np.array([0.2, 0.4, 0.5, 0.9, 3.0])
    w = np.array([1.0, 1.0, 1.0, 1.0, 0.0])

    def unif(data, weights=None, censor=None):
        with pm.Model() as m:
            th = pm.Uniform("th", 0, 10)
            weighted_observed("x", lambda t, size=None: pm.Uniform.dist(0, t, size=size), [th],
                              np.asarray(data, float), weights=weights, censor=censor)
        return m

    for censor in (None, 0.5):
        full, kept = unif(x, w, censor), unif(x[:4], None, censor)
        pt_full = {"th_interval__": np.array(np.log(1.0 / 9.0))}  # theta = 1 < 3.0
        lp_full = full.compile_logp()(pt_full)
        lp_kept = kept.compile_logp()(pt_full)
        assert np.isfinite(lp_full) and lp_full == pytest.approx(lp_kept)
        terms = full.compile_fn(full.logp(vars=[full["x"]], sum=False)[0])(
            {"th_interval__": pt_full["th_interval__"]})
        assert terms[-1] == 0.0
        if censor is not None:
            assert np.all(np.abs(terms) <= censor)


def test_from_posterior_refuses_weights_that_are_not_the_models():
    """Naming weights (or a calibration) earns a strict label only when they are the model's
    own: other weights are refused, the model's own accepted."""
    x = np.random.default_rng(3).beta(2, 5, 50)
    w = np.linspace(0.2, 1.0, 50)
    model = beta_mixture(x, w, 1.0, n_components=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=50, tune=100, chains=1, random_seed=2,
                          progressbar=False)
    kw = dict(factory=beta_mixture, factory_kwargs={"n_components": 1})
    assert PseudoPosteriorSynthesizer.from_posterior(model, idata, **kw).guarantee_.guarantee \
        == "local"
    with pytest.raises(InvalidParameterError, match="weights the model uses"):
        PseudoPosteriorSynthesizer.from_posterior(model, idata, weights=np.ones(50), **kw)
    own = PseudoPosteriorSynthesizer.from_posterior(model, idata, weights=w.copy(), **kw)
    assert own.guarantee_.guarantee == "strict"


def test_weighted_e_states_no_epsilon_when_the_refit_breaks_its_truncation():
    """The truncation is done on the previous fit's draws; the entry must match what the
    final fit's own draws show (records of positive weight above c: no epsilon stated)."""
    from bayesynth.privacy import censor_bound
    from bayesynth.privacy.lipschitz import record_bounds

    x = pd.DataFrame({"x": np.random.default_rng(3).beta(0.5, 3, 150).clip(1e-9, 1 - 1e-9)})
    syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="weighted_e", epsilon=3.0,
                                     draws=100, tune=100, chains=1, random_seed=5,
                                     factory_kwargs={"n_components": 1},
                                     max_loglik_draws=100).fit(x)
    w = syn.diagnostics_.weights
    L = record_loglik(syn.model_, syn.idata_, max_draws=100, random_seed=0)
    above = int(np.sum((w > 0) & (record_bounds(L) * w > censor_bound(3.0, "change_one"))))
    assert above > 0  # this seed shows the case
    g = syn.guarantee_
    assert g.guarantee == "none" and np.isinf(g.epsilon) and "does not hold" in g.why
