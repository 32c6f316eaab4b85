"""Convergence of the pseudo-posterior fits, judged on the records' log-likelihoods.

Posteriors are built by hand, so R-hat and the divergences are known; the records'
log-likelihoods are recomputed with scipy, independently of the model's graph.
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

import bayesynth.samplers.sampling as sampling
import bayesynth.synthesis.weight_calibration as weight_calibration
from bayesynth.errors import InvalidParameterError, PrivacyWarning
from bayesynth.models.pseudo_posterior import (
    beta_mixture,
    negative_binomial,
    record_loglik_chains,
)
from bayesynth.samplers import LoglikConvergence, check_loglik_convergence
from bayesynth.synthesis import PseudoPosteriorSynthesizer, calibrate_weights

X = np.random.default_rng(0).beta(0.5, 3, 200)  # every record judged (at most 200)


def _posterior(log_a, log_b, pi=None, diverging=None):
    """An InferenceData whose posterior holds the given (chain, draw, component) arrays."""
    post = {"log_a": log_a, "log_b": log_b}
    if pi is not None:
        post["pi"] = pi
    stats_ = None if diverging is None else {"diverging": diverging}
    return az.from_dict(posterior=post, sample_stats=stats_)


def _scipy_rhat(log_a, log_b):
    """R-hat of every record's Beta log-density, computed with scipy and ArviZ alone."""
    a, b = np.exp(log_a[..., 0]), np.exp(log_b[..., 0])
    f = stats.beta.logpdf(X[None, None, :], a[..., None], b[..., None])
    return az.rhat(az.convert_to_dataset({"f": f}))["f"].values


def _draws(rng, chains=2, draws=2000, shift=0.0):
    # independent draws: the R-hat of 2 chains of 2,000 (split in four) sits near 1.003; with
    # 500 per chain it reached 1.012 on 300 such records (Monte Carlo error, not a drift)
    log_a = np.log(0.5) + 0.05 * rng.standard_normal((chains, draws, 1))
    log_b = np.log(3.0) + 0.05 * rng.standard_normal((chains, draws, 1))
    log_a[1:] += shift  # the later chains elsewhere
    return log_a, log_b


def test_converged_chains_pass_silently():
    log_a, log_b = _draws(np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = check_loglik_convergence(beta_mixture(X, n_components=1),
                                       _posterior(log_a, log_b))
    ref = _scipy_rhat(log_a, log_b)
    # scipy's and PyTensor's log-densities differ by rounding (4e-15 here). R-hat's folded
    # part ranks |f - median|, and with an even number of draws the two middle draws are
    # equally far from the median: rounding breaks that tie either way (two ranks swap here),
    # so R-hat agrees to about 1e-6, not to the last digit
    assert res.max_rhat == pytest.approx(ref.max(), rel=1e-5)
    assert res.worst_record == int(np.argmax(ref))
    assert res.converged and res.n_divergent == 0
    assert (res.n_records, res.n_draws) == (200, 4000)


def test_chains_apart_warn_with_the_worst_record():
    log_a, log_b = _draws(np.random.default_rng(2), shift=0.02)
    ref = _scipy_rhat(log_a, log_b)
    assert ref.max() > 1.01  # the posterior is built to be unconverged
    with pytest.warns(RuntimeWarning, match=r"(?s)the unweighted fit: the largest R-hat.*"
                      rf"{ref.max():.3f} \(record {int(np.argmax(ref))}\)"):
        res = check_loglik_convergence(beta_mixture(X, n_components=1),
                                       _posterior(log_a, log_b),
                                       what="the unweighted fit")
    assert res.max_rhat == pytest.approx(ref.max(), rel=1e-5)  # rounding: see above
    assert not res.converged
    assert int(np.sum(ref > 1.01)) > 0


def test_label_switching_is_not_read_as_unconverged():
    # two components; chain 1 holds chain 0's draws with the labels swapped: every parameter's
    # R-hat is far above 1, and the records' likelihoods are exactly those of chain 0's draws
    rng = np.random.default_rng(3)
    a0 = np.stack([np.log(0.5) + 0.05 * rng.standard_normal(400),
                   np.log(5.0) + 0.05 * rng.standard_normal(400)], -1)
    b0 = np.stack([np.log(3.0) + 0.05 * rng.standard_normal(400),
                   np.log(2.0) + 0.05 * rng.standard_normal(400)], -1)
    p0 = np.stack([np.full(400, 0.8), np.full(400, 0.2)], -1)
    p0[:, 0] += 0.01 * rng.standard_normal(400)
    p0[:, 1] = 1 - p0[:, 0]
    perm = rng.permutation(400)
    log_a = np.stack([a0, a0[perm][:, ::-1]])
    log_b = np.stack([b0, b0[perm][:, ::-1]])
    pi = np.stack([p0, p0[perm][:, ::-1]])
    idata = _posterior(log_a, log_b, pi)
    assert float(az.rhat(idata.posterior)["log_a"].max()) > 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = check_loglik_convergence(beta_mixture(X, n_components=2), idata)
    assert res.max_rhat < 1.01


def test_divergences_warn_even_with_converged_chains():
    log_a, log_b = _draws(np.random.default_rng(1))
    div = np.zeros((2, 2000), dtype=bool)
    div[1, [10, 20, 30]] = True
    with pytest.warns(RuntimeWarning, match="3 divergent transition"):
        res = check_loglik_convergence(beta_mixture(X, n_components=1),
                                       _posterior(log_a, log_b, diverging=div))
    assert res.n_divergent == 3 and not res.converged
    assert res.max_rhat <= 1.01


def test_one_chain_has_no_rhat():
    log_a, log_b = _draws(np.random.default_rng(1), chains=1)
    res = check_loglik_convergence(beta_mixture(X, n_components=1), _posterior(log_a, log_b))
    assert np.isnan(res.max_rhat) and res.worst_record == -1 and res.converged
    assert res.min_ess_bulk > 100


def test_records_and_draws_are_thinned_with_the_tails_kept():
    x = np.random.default_rng(6).beta(0.5, 3, 5000)  # ends not on an even grid of positions
    rng = np.random.default_rng(5)
    log_a = np.log(0.5) + 0.02 * rng.standard_normal((2, 2500, 1))
    log_b = np.log(3.0) + 0.02 * rng.standard_normal((2, 2500, 1))
    log_b[1] += 0.01  # a small drift, so that R-hat varies over the records
    with pytest.warns(RuntimeWarning, match="convergence is not shown"):
        res = check_loglik_convergence(beta_mixture(x, n_components=1),
                                       _posterior(log_a, log_b))
    assert res.n_draws == 2500  # every 2nd of 2 x 2,500 (at most 4,000 in all)
    assert res.n_records == 200
    _, records = record_loglik_chains(beta_mixture(x, n_components=1),
                                      _posterior(log_a, log_b))
    # Beta(0.5, 3): the smallest value is the most likely record, the largest the least
    assert {int(np.argmin(x)), int(np.argmax(x))} <= set(records.tolist())
    # spread over the whole range of likelihoods, not bunched: every decile of x is there
    deciles = np.searchsorted(np.quantile(x, np.linspace(0.1, 0.9, 9)), x[records])
    assert np.bincount(deciles, minlength=10).min() >= 15
    # R-hat of the judged records, from scipy on the same thinned draws
    a, b = np.exp(log_a[:, ::2, 0]), np.exp(log_b[:, ::2, 0])
    f = stats.beta.logpdf(x[None, None, records], a[..., None], b[..., None])
    ref = az.rhat(az.convert_to_dataset({"f": f}))["f"].values
    assert res.max_rhat == pytest.approx(ref.max(), rel=1e-5)  # rounding: see above
    assert res.worst_record == int(records[np.argmax(ref)])


def test_sample_judges_weighted_likelihood_models(monkeypatch):
    seen = []
    monkeypatch.setattr(sampling, "check_loglik_convergence",
                        lambda model, idata, **kw: seen.append(model))
    model = negative_binomial(np.random.default_rng(6).poisson(3, 50))
    sampling.sample(model, draws=20, tune=20, chains=1, random_seed=1, progressbar=False)
    assert seen == [model]
    sampling.sample(model, draws=20, tune=20, chains=1, random_seed=1, progressbar=False,
                    check_convergence=False)
    assert len(seen) == 1


@pytest.fixture
def no_privacy_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def test_synthesizer_records_each_fits_judgement_and_target_accept(monkeypatch,
                                                                  no_privacy_warning,
                                                                  tmp_path):
    calls = []
    real = weight_calibration.bs_sample

    def spy(model, **kw):
        calls.append((kw["target_accept"], kw["max_extensions"]))
        return real(model, **kw)

    monkeypatch.setattr(weight_calibration, "bs_sample", spy)
    data = pd.DataFrame({"x": X})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short fits
        syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="weighted", draws=60, tune=60,
                                         target_accept=0.9, max_extensions=0, random_seed=1,
                                         factory_kwargs={"n_components": 1}).fit(data)
    assert calls == [(0.9, 0), (0.9, 0)]  # the unweighted and the weighted fit
    for diag in (syn.diagnostics_, syn.unweighted_diagnostics_):
        conv = diag.convergence
        assert isinstance(conv, LoglikConvergence)
        assert (conv.n_records, conv.n_draws) == (200, 120)
    syn.save(tmp_path / "syn")
    back = PseudoPosteriorSynthesizer.load(tmp_path / "syn")
    assert back.diagnostics_.convergence == syn.diagnostics_.convergence
    assert back.unweighted_diagnostics_.convergence == syn.unweighted_diagnostics_.convergence
    assert back.target_accept == 0.9 and back.max_extensions == 0
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short fits
        calibrate_weights(data, beta_mixture, 4.0, c1_grid=(1.0,), draws=30, tune=30,
                          max_extensions=1, random_seed=2,
                          factory_kwargs={"n_components": 1})
    assert [c[1] for c in calls] == [1, 1]  # the reference fits are continued too


def test_from_posterior_judges_the_given_draws(no_privacy_warning):
    log_a, log_b = _draws(np.random.default_rng(2), shift=0.02)
    idata = _posterior(log_a, log_b)
    model = beta_mixture(X, None, None, n_components=1)
    with pytest.warns(RuntimeWarning, match=r"from_posterior\(unweighted\): the largest R-hat"):
        syn = PseudoPosteriorSynthesizer.from_posterior(
            model, idata, factory=beta_mixture, factory_kwargs={"n_components": 1})
    assert syn.diagnostics_.convergence.max_rhat > 1.01


def test_target_accept_is_checked():
    with pytest.raises(InvalidParameterError, match="target_accept"):
        calibrate_weights(pd.DataFrame({"x": X}), beta_mixture, 4.0, target_accept=1.0)



def test_beta_mixtures_weights_default_to_a_dirichlet_above_one_half_d():
    """The default concentration is 2, above d / 2 = 1 (two shapes per component), so an
    unneeded component duplicates another rather than empties (Rousseau & Mengersen 2011):
    the prior of the weights is scipy's Dirichlet(2, 2, 2)."""
    pi = beta_mixture(X, n_components=3)["pi"]
    for p in ([1 / 3, 1 / 3, 1 / 3], [0.9, 0.09, 0.01]):
        got = float(pm.logp(pi, np.array(p)).eval())
        assert got == pytest.approx(stats.dirichlet.logpdf(p, [2.0, 2.0, 2.0]), abs=1e-9)


def _dirichlet_concentration(model) -> np.ndarray:
    """The concentration of the mixture weights' Dirichlet prior in a beta_mixture model."""
    return np.asarray(model["pi"].owner.inputs[-1].eval())


def test_a_save_rebuilds_the_model_with_the_defaults_it_was_fitted_with(no_privacy_warning,
                                                                       tmp_path):
    """The factory's keyword defaults are recorded at save, so a later change of a default
    does not change the model load rebuilds (simulated by editing the recorded value); a
    save that recorded none gets today's default and a warning naming the old one."""
    import json

    data = pd.DataFrame({"x": X})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short fit
        syn = PseudoPosteriorSynthesizer(beta_mixture, draws=30, tune=30, max_extensions=0,
                                         random_seed=1).fit(data)
    np.testing.assert_array_equal(_dirichlet_concentration(syn.model_), [2.0, 2.0])
    path = syn.save(tmp_path / "syn")
    state_file = path / "pseudo_posterior.json"
    state = json.loads(state_file.read_text())
    assert state["factory_defaults"]["concentration"] == 2.0
    assert state["factory_defaults"]["n_components"] == 2
    back = PseudoPosteriorSynthesizer.load(path)
    np.testing.assert_array_equal(_dirichlet_concentration(back.model_), [2.0, 2.0])
    a = syn.sample(m=1, random_seed=3)[0]
    # fitted when the default was 1: the recorded default wins over today's
    state["factory_defaults"]["concentration"] = 1.0
    state_file.write_text(json.dumps(state))
    back = PseudoPosteriorSynthesizer.load(path)
    np.testing.assert_array_equal(_dirichlet_concentration(back.model_), [1.0, 1.0])
    assert back.factory_kwargs["concentration"] == 1.0  # a refit fits the same model
    pd.testing.assert_frame_equal(back.sample(m=1, random_seed=3)[0], a)  # the same draws
    back = PseudoPosteriorSynthesizer.load(path, factory_kwargs={"concentration": 2.0})
    np.testing.assert_array_equal(_dirichlet_concentration(back.model_), [2.0, 2.0])  # stated
    # a save from before defaults were recorded: today's default, and the warning says so
    del state["factory_defaults"]
    state_file.write_text(json.dumps(state))
    with pytest.warns(UserWarning, match=r"concentration of the weights was 1 until "
                      r"2026-12-05.*today's default concentration = 2\.0") as caught:
        back = PseudoPosteriorSynthesizer.load(path)
    assert [w.filename for w in caught if "predates" in str(w.message)] == [__file__]
    np.testing.assert_array_equal(_dirichlet_concentration(back.model_), [2.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # stated: no warning
        back = PseudoPosteriorSynthesizer.load(path, factory_kwargs={"concentration": 1.0})
    np.testing.assert_array_equal(_dirichlet_concentration(back.model_), [1.0, 1.0])
