"""Priors swappable by name in the BART rank regression and the latent class model.

Each factory lists its names in the error for an unknown one; a replacement changes the model;
where it turns off a conjugate step, ``bs.steps`` warns naming the step and what samples the
variable instead; sampling still works, and a strong replacement moves the posterior its way.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import pytest

import bayesynth as bs
from bayesynth.errors import InvalidParameterError, PrivacyWarning
from bayesynth.models import bart_rank_regression, latent_class_dp_model
from bayesynth.privacy import privatize_marginals
from bayesynth.samplers.bart_steps import RankRegressionGibbs
from bayesynth.samplers.latent_class import LatentClassGibbs, TrueCountsMetropolis

# ------------------------------------------------------------------------------------- BART


def _regression_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    y = np.round(10 * (np.sin(2 * x) + 0.3 * rng.normal(size=n)))
    return pd.DataFrame({"y": y, "x": x})


def _tight_sigma(name, dims):
    return pm.Gamma(name, alpha=400.0, beta=200.0, dims=dims)  # sigma = 2 +- 0.1


def test_bart_sigma_is_swappable_by_name():
    df = _regression_data()
    with pytest.raises(InvalidParameterError, match=r"\['nope'\].*sigma: sigma = prec\^-1/2"):
        bart_rank_regression(df, "y", ["x"], m=5, priors={"nope": lambda n, d: None})
    default = bart_rank_regression(df, "y", ["x"], m=5)
    dims = []
    swapped = bart_rank_regression(df, "y", ["x"], m=5, priors={
        "sigma": lambda name, dims_: dims.append(dims_) or _tight_sigma(name, dims_)})
    assert dims == [()]
    assert "prec" in default.named_vars and "prec" not in swapped.named_vars
    assert type(swapped["sigma"].owner.op).__name__ == "GammaRV"
    assert swapped["sigma"] in swapped.free_RVs
    # the prior of sigma differs: median 1 / sqrt(ln 2 / 0.3) = 0.66 against 2
    s0 = pm.draw(default["sigma"], draws=2000, random_seed=1)
    s1 = pm.draw(swapped["sigma"], draws=2000, random_seed=1)
    assert np.median(s0) < 1.0 < 1.8 < np.median(s1)
    assert RankRegressionGibbs(model=default).conjugate_scale
    step = RankRegressionGibbs(model=swapped)
    assert not step.conjugate_scale and step.vars == [] and "sigma" in step.reason


def test_bart_swapped_sigma_warns_samples_and_pulls_the_scale():
    df = _regression_data()
    swapped = bart_rank_regression(df, "y", ["x"], m=5, priors={"sigma": _tight_sigma})
    with pytest.warns(UserWarning, match=r"RankRegressionGibbs updates only the latent data z"
                      r".*PyMC's own step \(NUTS.*samples \['sigma'\] instead"):
        found = bs.steps(swapped)
    assert [type(s).__name__ for s in found] == ["SeededPGBART", "RankRegressionGibbs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        post = bs.sample(swapped, draws=30, tune=30, chains=1, random_seed=3,
                         progressbar=False).posterior
    z_swapped = swapped["z"].get_value().std()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the default prior: no warning
        bs.steps(bart_rank_regression(df, "y", ["x"], m=5))
    default = bart_rank_regression(df, "y", ["x"], m=5)
    post0 = bs.sample(default, draws=30, tune=30, chains=1, random_seed=3,
                      progressbar=False).posterior
    sigma = post["sigma"].values
    assert np.all(np.isfinite(sigma)) and np.all(sigma > 0)
    # the tight prior at 2 holds the scale there; the default posterior sits well below 1.5
    assert 1.7 < sigma.mean() < 2.3
    assert post0["sigma"].values.mean() < 1.5
    # the latent-data step draws z with the swapped sigma: z spreads with it
    assert z_swapped > 1.8 * default["z"].get_value().std()


# ------------------------------------------------------------------------------ latent class


@pytest.fixture(scope="module")
def release():
    rng = np.random.default_rng(0)
    n = 200
    a = rng.random(n) < 0.4
    b = np.where(a, rng.random(n) < 0.8, rng.random(n) < 0.3)
    df = pd.DataFrame({"a": a.astype(int), "b": b.astype(int)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return privatize_marginals(df, "all2", 5.0, domain={"a": [0, 1], "b": [0, 1]},
                                   random_seed=1)


def _kumaraswamy_v(name, dims):
    # Kumaraswamy(1, b) is Beta(1, b) in law, but not a Beta op: the Gibbs step cannot use it
    return pm.Kumaraswamy(name, 1.0, 100.0, dims=dims)


def _hierarchical_psi(name, dims):
    conc = pm.Gamma(f"{name}_conc", 2.0, 2.0)
    d = len(pm.modelcontext(None).coords[dims[1]])
    return pm.Dirichlet(name, a=pt.ones((3, d)) * conc, dims=dims)


def _pi_last(model, **kw):
    post = bs.sample(model, chains=1, random_seed=2, progressbar=False, **kw).posterior
    pi = post["pi"].values
    assert np.all(np.isfinite(pi))
    return float(pi[..., -1].mean())


def test_latent_class_priors_are_swappable_by_name(release):
    with pytest.raises(InvalidParameterError,
                       match=r"\['nope'\].*v: Beta\(1, alpha\).*psi: Dirichlet\(psi_prior\)"):
        latent_class_dp_model(release, k=3, priors={"nope": lambda n, d: None})
    calls = []

    def psi(name, dims):
        calls.append((name, dims))
        return pm.Dirichlet(name, a=np.full((3, 2), 50.0), dims=dims)

    model = latent_class_dp_model(release, k=3, priors={"v": _kumaraswamy_v, "psi": psi})
    assert calls == [("psi_a", ("class", "a")), ("psi_b", ("class", "b"))]
    assert type(model["v"].owner.op).__name__ == "KumaraswamyRV"
    # prior predictive: Beta(1, 100) sticks leave almost everything to the last class
    default = latent_class_dp_model(release, k=3)
    assert pm.draw(default["pi"], draws=500, random_seed=0)[:, -1].mean() < 0.6
    assert pm.draw(model["pi"], draws=500, random_seed=0)[:, -1].mean() > 0.9
    # every prior replaced by a non-conjugate one: the Gibbs step is not used at all
    model = latent_class_dp_model(release, k=3, priors={"v": _kumaraswamy_v,
                                                        "psi": _hierarchical_psi})
    with pytest.warns(UserWarning, match=r"LatentClassGibbs is not used .*PyMC's own step"
                      r".*\['v', 'psi_a_conc', 'psi_a', 'psi_b_conc', 'psi_b'\] instead.*"
                      r"count moves \(TrueCountsMetropolis\) still apply"):
        found = bs.steps(model)
    assert [type(s) for s in found] == [TrueCountsMetropolis]


def test_latent_class_non_conjugate_v_goes_to_pymc_and_pulls_the_weights(release):
    model = latent_class_dp_model(release, k=3, priors={"v": _kumaraswamy_v})
    with pytest.warns(UserWarning, match=r"LatentClassGibbs does not update \['v'\].*PyMC's "
                      r"own step \(NUTS.*samples \['v'\] instead"):
        found = bs.steps(model)
    gibbs = [s for s in found if isinstance(s, LatentClassGibbs)][0]
    assert sorted(x.name for x in gibbs.vars) == ["psi_a_simplex__", "psi_b_simplex__"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        swapped = _pi_last(model, draws=150, tune=150)
    default = _pi_last(latent_class_dp_model(release, k=3), draws=150, tune=150)
    assert swapped > 0.7 and swapped > default + 0.3


def test_latent_class_conjugate_swap_keeps_gibbs_with_its_own_parameters(release):
    """v ~ Beta(1, 100) stays in the Gibbs step, which must read 100 (not alpha = 1) from
    the model; a hierarchical psi goes to PyMC."""
    model = latent_class_dp_model(release, k=3, priors={
        "v": lambda name, dims: pm.Beta(name, 1.0, 100.0, dims=dims), "psi": _hierarchical_psi})
    with pytest.warns(UserWarning, match=r"does not update \['psi_a', 'psi_b'\]"):
        found = bs.steps(model)
    gibbs = [s for s in found if isinstance(s, LatentClassGibbs)][0]
    assert [x.name for x in gibbs.vars] == ["v_logodds__"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert _pi_last(model, draws=80, tune=80) > 0.7


def test_a_swapped_latent_class_prior_is_not_reported_as_the_default():
    """After priors={"v": ...} the model's metadata must not claim the Beta(1, alpha) prior."""
    from bayesynth.models.latent_class_dp import latent_class_spec
    from bayesynth.privacy import privatize_marginals

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 2, 60), "b": rng.integers(0, 3, 60)})
    rel = privatize_marginals(df, [("a", "b")], epsilon=2.0,
                              domain={"a": [0, 1], "b": [0, 1, 2]}, random_seed=1)
    model = bs.models.latent_class_dp_model(
        rel, k=3, priors={"v": lambda name, dims: pm.Beta(name, 2.0, 2.0, dims=dims)})
    spec = latent_class_spec(model)
    assert spec.alpha is None and spec.psi_prior == 1.0


def test_latent_class_synthesizer_passes_priors_to_its_model(release, tmp_path):
    """LatentClassSynthesizer(priors=...) builds the model with the swapped prior."""
    from bayesynth.synthesis import LatentClassSynthesizer

    strong_v = {"v": lambda name, dims: pm.Beta(name, 1.0, 100.0, dims=dims)}
    syn = LatentClassSynthesizer(k=3, priors=strong_v, draws=80, tune=80, chains=1,
                                 random_seed=2).fit(release)
    assert syn.model_["v"].owner.inputs[-1].eval() == pytest.approx(100.0)
    assert float(syn.idata_.posterior["pi"].values[..., -1].mean()) > 0.7
    # the priors are a fitting setting: not saved, and the saved posterior is what samples
    back = LatentClassSynthesizer.load(syn.save(tmp_path / "lc"))
    assert back.priors is None
    pd.testing.assert_frame_equal(back.sample(m=1, random_seed=4)[0],
                                  syn.sample(m=1, random_seed=4)[0])
