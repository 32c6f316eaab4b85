"""Every factory's model survives PyMC's model transforms, metadata included."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from pymc.model.fgraph import clone_model

import bayesynth as bs
from bayesynth.errors import PrivacyWarning
from bayesynth.models import (
    bart_rank_regression,
    get_layout,
    latent_class_dp_model,
    saturated_count_model,
)
from bayesynth.models.bart_rank import training_matrix
from bayesynth.models.latent_class_dp import latent_class_spec
from bayesynth.models.pseudo_posterior import negative_binomial, observed_info, record_loglik
from bayesynth.privacy import privatize_marginals


def _copula():
    df = bs.datasets.simulate_child_health(n=60, random_seed=2)[["m_race", "male", "read",
                                                                 "mage"]]
    return bs.models.rank_probit_copula(df, n_factors=2), "alpha", get_layout


def _bart():
    r = np.random.default_rng(0)
    df = pd.DataFrame({"x": r.normal(size=50), "y": r.normal(size=50)})
    return bart_rank_regression(df, "y", ["x"], m=5), "prec", training_matrix


def _latent_class():
    r = np.random.default_rng(1)
    df = pd.DataFrame({"a": r.integers(0, 2, 80), "b": r.integers(0, 2, 80)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        rel = privatize_marginals(df, "all2", 5.0, domain={"a": [0, 1], "b": [0, 1]},
                                  random_seed=0)
    return latent_class_dp_model(rel, k=2), "v", latent_class_spec


def _pseudo_posterior():
    r = np.random.default_rng(2)
    counts = pd.DataFrame({"y": r.negative_binomial(3, 0.3, 60)})
    return negative_binomial(counts), "log_mu", observed_info


def _saturated():
    table = np.array([[5, 0, 2], [1, 7, 0]])
    return saturated_count_model(table, family="nbi", sigma=0.5, alpha=0.1), "counts", None


FACTORIES = {"copula": _copula, "bart": _bart, "latent_class": _latent_class,
             "pseudo_posterior": _pseudo_posterior, "saturated": _saturated}


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_clone_observe_do_draw_keep_the_model_and_its_metadata(kind):
    model, free_name, meta = FACTORIES[kind]()
    # no baked-in initial values: they move to sampling time
    assert all(v is None for v in model.rvs_to_initial_values.values())
    assert model.coords  # named coords and dims
    clone = clone_model(model)
    assert set(clone.named_vars) == set(model.named_vars)
    if meta is not None:
        assert meta(clone) is not None
    point = model.initial_point()
    np.testing.assert_equal(clone.initial_point(), point)
    if free_name is not None:
        value = np.asarray(pm.draw(model[free_name], random_seed=1))
        observed = pm.observe(model, {free_name: value})
        assert model[free_name] in model.free_RVs
        assert observed[free_name] in observed.observed_RVs
        done = pm.do(model, {free_name: value})
        assert free_name not in [rv.name for rv in done.free_RVs]
        if meta is not None:
            assert meta(observed) is not None and meta(done) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyMC's note on potentials
        prior = pm.sample_prior_predictive(draws=3, model=clone, random_seed=3)
    assert prior.prior.sizes["draw"] == 3


def test_copula_default_start_is_inside_the_rank_constraints():
    model, _, _ = _copula()
    layout = get_layout(model)
    z = model.initial_point()["z"]
    assert layout.bounds_satisfied(z)
    np.testing.assert_allclose(z, layout.initial_z())
    # finite joint density at the default start: PyMC can start there without help
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_a_cloned_copula_samples_like_the_original():
    model, _, _ = _copula()
    kw = dict(draws=20, tune=20, chains=1, random_seed=4, progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a = bs.sample(model, **kw)
        b = bs.sample(clone_model(model), **kw)
    np.testing.assert_allclose(a.posterior["C"].values, b.posterior["C"].values)


def test_pseudo_posterior_records_follow_a_clone():
    model, _, _ = _pseudo_posterior()
    clone = clone_model(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=20, tune=20, chains=1, model=clone, random_seed=5,
                          progressbar=False, compute_convergence_checks=False)
    ll_clone = record_loglik(clone, idata)
    ll_orig = record_loglik(model, idata)
    np.testing.assert_allclose(ll_clone, ll_orig)
    assert np.all(np.isfinite(ll_clone)) and ll_clone.shape == (20, 60)


# ------------------------------------------------------------------ priors swappable by name


def test_priors_by_name_one_mechanism_for_every_factory():
    from bayesynth.errors import InvalidParameterError
    from bayesynth.models.pseudo_posterior import beta_mixture, linear_regression

    r = np.random.default_rng(4)
    counts = pd.DataFrame({"y": r.negative_binomial(3, 0.3, 40)})
    m = negative_binomial(counts, priors={"alpha": lambda name, dims: pm.Exponential(name, 0.1)})
    assert type(m["alpha"].owner.op).__name__.startswith("Exponential")
    reg = pd.DataFrame({"x": r.normal(size=40), "y": r.normal(size=40)})
    m = linear_regression(reg, response="y", predictors=["x"], priors={
        "beta": lambda name, dims: pm.StudentT(name, nu=3, mu=0, sigma=2, dims=dims)})
    assert m.named_vars_to_dims["beta"] == ("predictor",)
    m = beta_mixture(r.beta(2, 3, 40), priors={
        "log_a": lambda name, dims: pm.Normal(name, 1.0, 0.5, dims=dims)})
    assert m.named_vars_to_dims["log_a"] == ("component",)
    # an unknown name is an error listing the valid ones, in every factory
    builders = {
        "rank_probit_copula": lambda p: _copula_with(p),
        "negative_binomial": lambda p: negative_binomial(counts, priors=p),
        "bart_rank_regression": lambda p: bart_rank_regression(reg, "y", ["x"], m=5, priors=p),
        "saturated_count_model": lambda p: saturated_count_model(np.array([[1, 2], [3, 0]]),
                                                                 priors=p),
    }
    for name, build in builders.items():
        with pytest.raises(InvalidParameterError, match=f"{name}: priors= names \\['nope'\\]"):
            build({"nope": lambda n, d: None})
    with pytest.raises(InvalidParameterError, match="log_mu.*alpha"):
        negative_binomial(counts, priors={"mu": lambda n, d: None})
    with pytest.raises(InvalidParameterError, match="must create a model variable named"):
        negative_binomial(counts, priors={"alpha": lambda name, dims: pm.Exponential("a", 1)})


def _copula_with(priors):
    df = bs.datasets.simulate_child_health(n=40, random_seed=2)[["m_race", "read"]]
    return bs.models.rank_probit_copula(df, n_factors=1, priors=priors)
