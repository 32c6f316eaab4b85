"""How much of the data a censored pseudo-posterior fit follows (``censored_share``).

Recomputed independently: by hand on a tiny array, and with scipy's negative-binomial pmf at
every posterior draw of a fit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayesynth.errors import PrivacyWarning
from bayesynth.models.pseudo_posterior import beta_mixture, negative_binomial
from bayesynth.privacy import censor_bound, censored_share
from bayesynth.synthesis import PseudoPosteriorSynthesizer


def test_censored_share_by_hand():
    loglik = np.array([[-2.0, 0.5, np.nan],
                       [0.1, -0.4, -3.0]])
    # terms alpha f: [-2, 0.25, nan], [0.1, -0.2, -3]; at the bound c = 1: 3 of 6 (NaN is -c)
    assert censored_share(loglik, np.array([1.0, 0.5, 1.0]), 1.0) == 0.5
    # a record of weight 0 has the term 0 whatever f is
    assert censored_share(loglik, np.array([1.0, 0.5, 0.0]), 1.0) == pytest.approx(1 / 6)
    # a larger weight puts 0.5 at the bound c = 0.9 (1.0 > 0.9)
    assert censored_share(loglik, np.array([1.0, 2.0, 0.0]), 0.9) == pytest.approx(2 / 6)


@pytest.fixture
def quiet_seed():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        warnings.filterwarnings("ignore", message=".*convergence is not shown.*")
        yield


def test_counts_censored_at_epsilon_4_warn_and_lose_the_data(quiet_seed):
    """Counts with mean 7 (as SD2011's numbers of friends): no count has probability above
    exp(-1), so under change-one at epsilon 4 (c = 1) nearly every term sits at the bound;
    the fit says so, with the share scipy gives at its draws."""
    counts = pd.DataFrame({"y": np.random.default_rng(3).negative_binomial(3, 0.3, 300)})
    c = censor_bound(4.0, "change_one")
    with pytest.warns(RuntimeWarning, match=r"censor_uw, epsilon = 4\): on average over 300 "
                      r"posterior draws, \d+\.\d% of the records' terms are at the censoring "
                      r"bound c = 1") as caught:
        syn = PseudoPosteriorSynthesizer(negative_binomial, mechanism="censor_uw", epsilon=4.0,
                                         draws=150, tune=150, max_extensions=0,
                                         max_loglik_draws=1000, random_seed=1).fit(counts)
    shown = [w for w in caught if "censoring bound" in str(w.message)]
    assert [w.filename for w in shown] == [__file__]  # it points at the user's line
    post = syn.idata_.posterior
    mu = np.exp(post["log_mu"].values.ravel())
    alpha = post["alpha"].values.ravel()
    logpmf = stats.nbinom.logpmf(counts["y"].to_numpy()[None, :], alpha[:, None],
                                 (alpha / (alpha + mu))[:, None])
    ref = float(np.mean(np.abs(logpmf) > c))
    share = syn.diagnostics_.censored_share
    assert share == pytest.approx(ref, abs=1e-12)
    assert share > 0.9
    # what it means: the synthetic counts are nearly all zero (the data's mean is about 7)
    synthetic = syn.sample(m=1, random_seed=2)[0].iloc[:, 0]
    assert counts["y"].mean() > 5 and synthetic.mean() < 1


def test_the_share_of_a_weighted_censored_fit_counts_the_weighted_terms(quiet_seed):
    counts = pd.DataFrame({"y": np.random.default_rng(3).negative_binomial(3, 0.3, 300)})
    w = np.where(np.arange(300) % 2 == 0, 0.2, 1.0)  # fixed weights (set without the data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = PseudoPosteriorSynthesizer(negative_binomial, mechanism="censor_w", epsilon=4.0,
                                         weights=w, draws=100, tune=100, max_extensions=0,
                                         max_loglik_draws=1000, random_seed=1).fit(counts)
    post = syn.idata_.posterior
    mu = np.exp(post["log_mu"].values.ravel())
    alpha = post["alpha"].values.ravel()
    logpmf = stats.nbinom.logpmf(counts["y"].to_numpy()[None, :], alpha[:, None],
                                 (alpha / (alpha + mu))[:, None])
    ref = float(np.mean(np.abs(w * logpmf) > 1.0))
    assert syn.diagnostics_.censored_share == pytest.approx(ref, abs=1e-12)
    assert ref < float(np.mean(np.abs(logpmf) > 1.0))  # the weights keep terms off the bound


def test_a_lightly_censored_fit_is_quiet_and_the_share_is_kept(quiet_seed, tmp_path):
    x = pd.DataFrame({"x": np.random.default_rng(4).beta(0.5, 3.0, 300)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*convergence is not shown.*")
        syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=20.0,
                                         draws=150, tune=150, max_extensions=0, random_seed=1,
                                         factory_kwargs={"n_components": 1}).fit(x)
    share = syn.diagnostics_.censored_share
    assert 0 < share < 0.5
    syn.save(tmp_path / "syn")
    assert PseudoPosteriorSynthesizer.load(tmp_path / "syn").diagnostics_.censored_share == share
    unw = PseudoPosteriorSynthesizer(beta_mixture, mechanism="unweighted", draws=50, tune=50,
                                     max_extensions=0, random_seed=1,
                                     factory_kwargs={"n_components": 1}).fit(x)
    assert unw.diagnostics_.censored_share is None
