"""Continuing unconverged chains (``bayesynth.sample(max_extensions=...)``): the copula's
and the weighted-likelihood (pseudo-posterior) models'."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytest

import bayesynth as bs
from bayesynth.errors import InvalidParameterError
from bayesynth.models.pseudo_posterior import weighted_observed
from bayesynth.samplers import LoglikConvergence, sampling


def _small_copula():
    df = bs.datasets.simulate_child_health(n=80, random_seed=5)[
        ["m_race", "male", "read", "mage", "ndi_birth"]]
    return bs.models.rank_probit_copula(df, n_factors=2)


class _Recorder:
    """Wrap pymc.sample: keep each call's initial values and result."""

    def __init__(self, monkeypatch):
        self.calls: list[dict] = []
        self.results: list[az.InferenceData] = []
        real = pm.sample

        def wrapped(*args, **kwargs):
            self.calls.append(kwargs)
            out = real(*args, **kwargs)
            self.results.append(out)
            return out

        monkeypatch.setattr(sampling.pm, "sample", wrapped)


def _run(model, seed, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bs.sample(model, draws=20, tune=20, chains=2, cores=1, random_seed=seed,
                         progressbar=False, **kw)


def test_an_extension_continues_each_chain_from_its_final_state(monkeypatch):
    """Forced to extend (threshold 0), the second run starts every chain exactly at the state
    (every value variable, the latent values included) where its first run ended, and the
    posterior holds the first run's kept draws followed by the extension's."""
    model = _small_copula()
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", np.inf)
    rec = _Recorder(monkeypatch)
    ends: dict[int, list[dict]] = {0: [], 1: []}

    def callback(trace, draw):  # the user's callback still sees every draw
        ends[draw.chain].append(draw.point)

    idata = _run(model, 11, max_extensions=1, callback=callback)
    assert len(rec.calls) == 2
    first, second = rec.results
    more = rec.calls[1]["draws"]
    assert rec.calls[1]["tune"] == sampling._retune(20) and more == 20
    # one seed (a Generator), not a list, which PyMC warns no longer seeds each chain
    assert isinstance(rec.calls[1]["random_seed"], np.random.Generator)
    assert [len(v) for v in ends.values()] == [40 + 100 + more] * 2
    for chain, init in enumerate(rec.calls[1]["initvals"]):
        last = ends[chain][39]  # the first run's final state of this chain
        start = pm.initial_point.make_initial_point_fn(
            model=model, overrides=init, jitter_rvs=set(), return_transformed=True)(0)
        assert set(start) == set(last)
        for name, value in last.items():
            np.testing.assert_array_equal(start[name], value, err_msg=name)
    # the extension's re-tuning draws are dropped; every kept draw stays, in order
    assert idata.posterior.sizes["draw"] == 20 + more
    assert idata.posterior.attrs["extensions"] == 1
    np.testing.assert_array_equal(idata.posterior["C"].values[:, :20],
                                  first.posterior["C"].values)
    np.testing.assert_array_equal(idata.posterior["C"].values[:, 20:],
                                  second.posterior["C"].values)
    assert idata.sample_stats.sizes["draw"] == 20 + more
    # seeded: the whole extended run repeats
    again = _run(model, 11, max_extensions=1)
    np.testing.assert_array_equal(again.posterior["C"].values, idata.posterior["C"].values)


@pytest.mark.parametrize("passes", [True, False])
def test_no_extension_when_the_check_passes_or_the_chains_are_far_apart(monkeypatch, passes):
    model = _small_copula()
    if passes:
        monkeypatch.setattr(sampling, "RHAT_WARN", 1e9)
    else:  # fails, but beyond the largest R-hat an extension is tried for
        monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
        monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", 0.5)
    rec = _Recorder(monkeypatch)
    idata = _run(model, 3, max_extensions=2)
    assert len(rec.calls) == 1
    assert "extensions" not in idata.posterior.attrs
    assert idata.posterior.sizes["draw"] == 20


def test_runs_are_joined_in_order_with_fresh_draw_numbers():
    def run(start, n):
        x = np.arange(start, start + n, dtype=float)[None, :].repeat(2, axis=0)
        return az.from_dict(posterior={"a": x}, sample_stats={"s": x})

    out = sampling._joined([run(0, 10), run(10, 10), run(20, 10)])
    np.testing.assert_array_equal(out.posterior["a"].values[0], np.arange(30))
    np.testing.assert_array_equal(out.sample_stats["s"].values[1], np.arange(30))
    np.testing.assert_array_equal(out.posterior["draw"].values, np.arange(30))


def test_extension_seeds_derive_from_the_run_seed():
    def draws(seed, ext):  # what the Generator the extension gets would draw first
        return sampling._extension_seed(seed, ext, 2).integers(2**31, size=4).tolist()

    a = draws(5, 1)
    assert a == draws(5, 1)
    assert a != draws(5, 2) and a != draws(6, 1) and a != draws([5, 1], 1)
    assert sampling._extension_seed(None, 1, 2) is None
    # the stream PyMC built from the list of per-chain seeds it used to be given
    state = np.random.SeedSequence([5, 7919, 1]).generate_state(2)
    assert a == np.random.default_rng([int(s) for s in state]).integers(2**31, size=4).tolist()
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert (sampling._extension_seed(g1, 1, 2).integers(2**31, size=4).tolist()
            == sampling._extension_seed(g2, 1, 2).integers(2**31, size=4).tolist())


@pytest.mark.parametrize("bad", [-1, 1.5, 2.0, True, None])
def test_bad_max_extensions_is_refused_before_sampling(bad):
    with pytest.raises(InvalidParameterError, match="max_extensions"):
        bs.sample(_small_copula(), draws=5, tune=5, max_extensions=bad, progressbar=False)


def test_an_extension_starts_at_the_state_when_a_bound_depends_on_another_variable(monkeypatch):
    """A prior whose support depends on another variable (b ~ Uniform(0, a)): the initial
    values of the extension, mapped back by PyMC's initial-point function, are the chain's
    final state, both variables included (their back-transforms read a at the state)."""
    model = _small_copula()
    with model:
        a = pm.HalfNormal("a_extra", 1.0)
        pm.Uniform("b_extra", 0.0, a)
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", np.inf)
    rec = _Recorder(monkeypatch)
    ends: dict[int, list[dict]] = {0: [], 1: []}

    def callback(trace, draw):
        ends[draw.chain].append(draw.point)

    _run(model, 5, max_extensions=1, callback=callback)
    assert len(rec.calls) == 2
    for chain, init in enumerate(rec.calls[1]["initvals"]):
        last = ends[chain][39]
        assert 0.0 < init["b_extra"] < init["a_extra"]
        start = pm.initial_point.make_initial_point_fn(
            model=model, overrides=init, jitter_rvs=set(), return_transformed=True)(0)
        for name in ("a_extra_log__", "b_extra_interval__"):
            np.testing.assert_allclose(start[name], last[name], rtol=1e-12, err_msg=name)


def test_copula_chains_start_from_their_own_prior_draws_when_asked(monkeypatch):
    """With ``start_from="prior"`` each chain's loadings, intercepts and factor scores start
    at its own standard normal draw about the model's initial point (shrinkage and
    precisions at one), repeatably from the seed; a start the user gives for a variable wins
    over ours, in every chain."""
    model = _small_copula()
    rec = _Recorder(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in (3, 3, 4):
            bs.sample(model, draws=1, tune=0, chains=2, cores=1, random_seed=seed,
                      progressbar=False, check_convergence=False, start_from="prior")
        mine = np.full(tuple(model["eta"].shape.eval()), 0.25)
        bs.sample(model, draws=1, tune=0, chains=2, cores=1, random_seed=3,
                  progressbar=False, check_convergence=False, initvals={"eta": mine},
                  start_from="prior")
    a, again, other, given = (c["initvals"] for c in rec.calls)
    point = model.initial_point()
    for name in ("Lambda", "alpha", "eta"):
        starts = [np.asarray(a[c][name]) for c in range(2)]
        centre = point[name]
        for s in starts:  # standard normal about the initial point (each has >= 3 values)
            assert s.shape == centre.shape
            assert 0.2 < np.std(s - centre) < 3.0, name
        assert not np.allclose(starts[0], starts[1]), name  # dispersed across chains
        for c in range(2):
            np.testing.assert_array_equal(a[c][name], again[c][name])  # from the seed
        assert not np.allclose(a[0][name], other[0][name]), name
    for c in range(2):
        for name in ("delta", "phi", "prec"):
            np.testing.assert_array_equal(a[c][name], 1.0)
        np.testing.assert_array_equal(given[c]["eta"], mine)
        np.testing.assert_array_equal(given[c]["Lambda"], a[c]["Lambda"])


def test_copula_chains_start_at_their_own_factor_analysis_by_default(monkeypatch):
    """By default each chain starts at its own factor-analysis start (loadings, scores,
    intercepts and residual precisions; shrinkage at one); a start the user gives wins."""
    from bayesynth.samplers.sampling import _factor_analysis_copula_starts

    model = _small_copula()
    rec = _Recorder(monkeypatch)
    mine = np.full(tuple(model["eta"].shape.eval()), 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bs.sample(model, draws=1, tune=0, chains=2, cores=1, random_seed=3,
                  progressbar=False, check_convergence=False)
        bs.sample(model, draws=1, tune=0, chains=2, cores=1, random_seed=3,
                  progressbar=False, check_convergence=False, initvals=[{"eta": mine}, {}])
    ours, given = (c["initvals"] for c in rec.calls)
    expected = _factor_analysis_copula_starts(model, 2, 3)
    for c in range(2):
        for name in ("Lambda", "eta", "alpha", "prec"):
            np.testing.assert_array_equal(ours[c][name], expected[c][name])
        for name in ("delta", "phi"):
            np.testing.assert_array_equal(ours[c][name], 1.0)
    np.testing.assert_array_equal(given[0]["eta"], mine)
    np.testing.assert_array_equal(given[1]["eta"], expected[1]["eta"])


def test_the_warning_states_the_run_length_the_slowest_ess_rate_implies(monkeypatch):
    """Forced to warn, the message names the smallest bulk ESS of the judged quantities and
    the draws per chain that its rate implies for an ESS of ESS_AIM (or the check's floor of
    ESS_MIN_PER_CHAIN per chain, where that is higher); where every ESS reaches the aim it
    only says to increase tune and draws."""
    from bayesynth.models import copula_quantities as cq

    model = _small_copula()
    idata = _run(model, 5, check_convergence=False, max_extensions=0)
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    with pytest.warns(RuntimeWarning, match="Largest R-hat") as got:
        table = sampling.check_copula_convergence(idata)
    ess = table["ess_bulk"].to_numpy(dtype=float)
    slowest = table.index[int(np.nanargmin(ess))]
    need = int(np.ceil(20 * sampling.ESS_AIM / np.nanmin(ess)))
    text = " ".join(str(w.message) for w in got)
    assert f"The smallest bulk ESS is {np.nanmin(ess):.0f} ({slowest}) from 20 draws" in text
    assert f"about {need:,} draws per chain" in text
    # a floor above ESS_AIM (300 per chain: 600 for two) is what the length aims at
    monkeypatch.setattr(cq, "ESS_MIN_PER_CHAIN", 300)
    with pytest.warns(RuntimeWarning, match="Largest R-hat") as got:
        sampling.check_copula_convergence(idata)
    text = " ".join(str(w.message) for w in got)
    need = int(np.ceil(20 * 600 / np.nanmin(ess)))
    assert f"a bulk ESS of 600 takes about {need:,} draws per chain" in text
    monkeypatch.setattr(sampling, "ESS_AIM", 0)
    monkeypatch.setattr(cq, "ESS_MIN_PER_CHAIN", 0)  # the hint's aim: the larger of the two
    with pytest.warns(RuntimeWarning, match="Largest R-hat") as got:
        sampling.check_copula_convergence(idata)
    text = " ".join(str(w.message) for w in got)
    assert "Increase tune and draws (see" in text and "smallest bulk ESS" not in text


def test_too_few_effective_draws_fail_the_check_where_r_hat_passes(monkeypatch):
    """With R-hat within its threshold, a quantity whose bulk ESS is below ESS_MIN_PER_CHAIN
    per chain still fails the closing check, as synthesis_diagnostics judges it: the warning
    counts those quantities against the floor (100 per chain, 200 for two chains) and gives
    the run length; with every ESS at the floor or above it is silent."""
    from bayesynth.models import copula_quantities as cq

    model = _small_copula()
    idata = _run(model, 5, check_convergence=False, max_extensions=0)
    monkeypatch.setattr(sampling, "RHAT_WARN", 1e9)  # R-hat passes whatever it is
    table = sampling._judged(idata, "data")
    ess = cq.effective_ess(table)
    judged = ~np.isnan(ess)
    n_low = int(np.sum(ess[judged] < 200))
    assert 0 < n_low  # 2 x 20 draws: far below 200
    with pytest.warns(RuntimeWarning, match="below 200 \\(100 per chain\\)") as got:
        sampling.check_copula_convergence(idata)
    text = " ".join(str(w.message) for w in got)
    assert f"{n_low} of the {int(judged.sum())} quantities synthesis uses" in text
    assert "not converged" in text  # what benchmarks/real_data.py reads
    assert f"The smallest bulk ESS is {np.nanmin(ess):.0f}" in text
    # as synthesis_diagnostics: the same quantities fail its default ess_min
    assert not bs.evaluation.synthesis_diagnostics(idata, rhat_max=1e9).ok
    # the floor is the module's, read at call time: below the smallest ESS both pass
    monkeypatch.setattr(cq, "ESS_MIN_PER_CHAIN", float(np.nanmin(ess)) / 2 * 0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sampling.check_copula_convergence(idata)
    assert bs.evaluation.synthesis_diagnostics(idata, rhat_max=1e9).ok
    # per chain: at three quarters of the smallest ESS per chain, two chains need 1.5 times it
    monkeypatch.setattr(cq, "ESS_MIN_PER_CHAIN", 0.75 * float(np.nanmin(ess)))
    with pytest.warns(RuntimeWarning, match="quantities synthesis uses have a bulk ESS below"):
        sampling.check_copula_convergence(idata)
    assert not bs.evaluation.synthesis_diagnostics(idata, rhat_max=1e9).ok
    # and a failing R-hat gives its own warning, not this one
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    with pytest.warns(RuntimeWarning, match="Largest R-hat") as got:
        sampling.check_copula_convergence(idata)
    assert not any("quantities synthesis uses have a bulk ESS" in str(w.message) for w in got)


def test_the_run_length_hint_reads_the_quantities_the_summary_judges():
    """The hint takes its quantities as ConvergenceSummary does: a quantity left unjudged (some
    draws without Monte Carlo points, or constant) is passed over even with the smallest ESS,
    and an undefined ESS of a quantity that varies is named, with no run length implied."""
    model = _small_copula()
    idata = _run(model, 5, check_convergence=False, max_extensions=0)
    table = sampling.check_copula_convergence(idata)
    table = table[table["sd"] > 0].copy()
    table["undefined_share"] = 0.0
    table["ess_bulk"] = np.linspace(10.0, 50.0, len(table))
    first, second, third = table.index[:3]
    # the smallest ESS belongs to a quantity some draws left undefined: not judged
    table.loc[first, ["undefined_share", "r_hat"]] = [0.1, np.nan]
    table.loc[second, ["sd", "r_hat"]] = [0.0, np.nan]  # constant: not judged either
    text = sampling._run_length_hint(idata, table)
    ess = table.loc[third, "ess_bulk"]
    assert f"The smallest bulk ESS is {ess:.0f} ({third}) from 20 draws" in text
    assert f"about {int(np.ceil(20 * sampling.ESS_AIM / ess)):,} draws per chain" in text
    assert first not in text and second not in text
    summary = bs.evaluation.ConvergenceSummary.from_table(table)
    assert summary.min_ess_bulk == pytest.approx(ess)
    # an undefined ESS where R-hat is undefined too, for a quantity that varies: none
    fourth = table.index[3]
    table.loc[fourth, ["ess_bulk", "r_hat"]] = np.nan
    text = sampling._run_length_hint(idata, table)
    assert f"The bulk ESS of {fourth} is undefined" in text and "draws per chain" not in text
    assert bs.evaluation.ConvergenceSummary.from_table(table).min_ess_bulk == 0.0


def test_the_run_length_hint_says_when_the_judge_thinned_the_draws(monkeypatch):
    """The judge keeps at most MAX_DRAWS draws in all, evenly thinned: the hint then says the
    ESS came from the thinned draws and that its rate is per draw the sampler kept."""
    model = _small_copula()
    idata = _run(model, 5, check_convergence=False, max_extensions=0)
    table = sampling.check_copula_convergence(idata)
    table = table[table["sd"] > 0].copy()
    table["ess_bulk"] = np.linspace(10.0, 50.0, len(table))
    need = int(np.ceil(20 * sampling.ESS_AIM / 10.0))
    plain = sampling._run_length_hint(idata, table)
    assert "from 20 draws per chain: at that rate" in plain and "thins" not in plain
    monkeypatch.setattr(sampling, "MAX_DRAWS", 20)  # 2 chains x 20 draws: every 2nd kept
    text = sampling._run_length_hint(idata, table)
    assert "from 10 draws per chain (every 2nd of 20: the judge thins to 20 draws in all)" \
        in text
    assert f"at that rate per draw of the 20 a bulk ESS of {sampling.ESS_AIM} takes about " \
        f"{need:,} draws per chain" in text
    monkeypatch.setattr(sampling, "MAX_DRAWS", 13)  # ceil(40 / 13) = 4: draws 0, 4, ..., 16
    assert "from 5 draws per chain (every 4th of 20" in sampling._run_length_hint(idata, table)


# ------------------------------------------------------- weighted-likelihood models (NUTS)

W_X = np.random.default_rng(21).normal(1.5, 1.0, 60)
W_W = np.random.default_rng(22).uniform(0.2, 1.0, 60)
PRIOR_SD = 10.0


def _weighted_normal():
    """x_i ~ N(mu, 1) with weights w_i, mu ~ N(0, 10^2): a conjugate pseudo posterior,
    N(sum w x / (1/100 + sum w), 1 / (1/100 + sum w))."""
    with pm.Model(coords={"record": np.arange(len(W_X))}) as model:
        mu = pm.Normal("mu", 0.0, PRIOR_SD)
        weighted_observed("x", lambda m, size=None: pm.Normal.dist(m, 1.0, size=size), [mu],
                          W_X, weights=W_W, dims="record")
    return model


def _weighted_run(model, seed, draws=20, tune=20, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bs.sample(model, draws=draws, tune=tune, chains=2, cores=1, random_seed=seed,
                         progressbar=False, **kw)


def test_a_weighted_fit_is_continued_from_each_chains_final_state(monkeypatch):
    """Forced to extend, NUTS restarts every chain exactly where it ended (no jitter), and
    the kept draws of both runs are joined, divergence statistics included."""
    model = _weighted_normal()
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", np.inf)
    rec = _Recorder(monkeypatch)
    ends: dict[int, list[dict]] = {0: [], 1: []}
    idata = _weighted_run(model, 4, max_extensions=1,
                          callback=lambda trace, draw: ends[draw.chain].append(draw.point))
    assert len(rec.calls) == 2
    first, second = rec.results
    assert rec.calls[1]["tune"] == sampling._retune(20) and rec.calls[1]["draws"] == 20
    assert "jitter" in rec.calls[0].get("init", "jitter+adapt_diag")  # PyMC's default first
    assert rec.calls[1]["init"] == "adapt_diag"  # then exactly where the chains ended
    for chain, init in enumerate(rec.calls[1]["initvals"]):
        np.testing.assert_array_equal(init["mu"], ends[chain][39]["mu"])
    assert idata.posterior.attrs["extensions"] == 1
    np.testing.assert_array_equal(idata.posterior["mu"].values,
                                  np.concatenate([first.posterior["mu"].values,
                                                  second.posterior["mu"].values], axis=1))
    assert idata.sample_stats["diverging"].sizes["draw"] == 40
    again = _weighted_run(model, 4, max_extensions=1)  # seeded: the whole run repeats
    np.testing.assert_array_equal(again.posterior["mu"].values, idata.posterior["mu"].values)


def test_an_extended_weighted_fit_samples_the_conjugate_pseudo_posterior(monkeypatch):
    """Two forced extensions (three runs of 2 x 400 kept draws joined): the pseudo posterior's
    mean and sd match the closed form within Monte Carlo error."""
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", np.inf)
    idata = _weighted_run(_weighted_normal(), 8, draws=400, tune=300, max_extensions=2)
    assert idata.posterior.attrs["extensions"] == 2
    prec = 1 / PRIOR_SD**2 + W_W.sum()
    mean, sd = (W_W * W_X).sum() / prec, prec**-0.5
    mu = idata.posterior["mu"]
    ess = float(az.ess(mu)["mu"])
    assert ess > 500  # 2,400 draws of a one-dimensional NUTS fit
    # 4 Monte Carlo standard errors; the sd's relative error is about 1 / sqrt(2 ESS)
    assert abs(float(mu.mean()) - mean) < 4 * sd / np.sqrt(ess)
    assert abs(float(mu.std()) / sd - 1) < 4 / np.sqrt(2 * ess)


@pytest.mark.parametrize("case", ["short", "diverged", "far_apart", "converged"])
def test_a_weighted_fit_is_continued_only_where_more_draws_can_help(monkeypatch, case):
    """Chains just apart are continued (here the check never passes: every extension runs).
    Divergences stay in the kept draws whatever follows them, chains beyond R-hat 1.1 need
    more than an extension, and a converged fit needs nothing."""
    rhat, div = {"short": (1.05, 0), "diverged": (1.05, 3), "far_apart": (1.2, 0),
                 "converged": (1.005, 0)}[case]
    judged = LoglikConvergence(max_rhat=rhat, worst_record=0, min_ess_bulk=100.0,
                               n_divergent=div, n_records=60, n_draws=40)
    monkeypatch.setattr(sampling, "_loglik_judgement", lambda *a, **k: (judged, 0, 60))
    rec = _Recorder(monkeypatch)
    idata = _weighted_run(_weighted_normal(), 5, max_extensions=2)
    if case == "short":
        assert len(rec.calls) == 3 and idata.posterior.attrs["extensions"] == 2
        assert idata.posterior.sizes["draw"] == 60
    else:
        assert len(rec.calls) == 1
        assert "extensions" not in idata.posterior.attrs


def test_a_weighted_fit_in_parallel_chains_is_continued_from_their_final_states(monkeypatch):
    """The synthesizer's case: chains in parallel processes (PyMC calls the callback in this
    process with each chain's draws)."""
    monkeypatch.setattr(sampling, "RHAT_WARN", 0.0)
    monkeypatch.setattr(sampling, "EXTEND_RHAT_MAX", np.inf)
    rec = _Recorder(monkeypatch)
    ends: dict[int, list[dict]] = {0: [], 1: []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(_weighted_normal(), draws=20, tune=20, chains=2, cores=2,
                          random_seed=6, progressbar=False, max_extensions=1,
                          callback=lambda trace, draw: ends[draw.chain].append(draw.point))
    assert len(rec.calls) == 2 and idata.posterior.attrs["extensions"] == 1
    for chain, init in enumerate(rec.calls[1]["initvals"]):
        np.testing.assert_array_equal(init["mu"], ends[chain][39]["mu"])


@pytest.mark.parametrize("init, restart", [("auto", "adapt_diag"),
                                           ("jitter+adapt_diag", "adapt_diag"),
                                           ("jitter+adapt_diag_grad", "adapt_diag"),
                                           ("jitter+adapt_full", "adapt_full"),
                                           ("map", "adapt_diag"), ("advi", "adapt_diag")])
def test_an_extension_restarts_nuts_without_jitter_or_optimisation(init, restart):
    assert sampling._restart_init(init) == restart


def test_the_last_judgement_of_the_extension_loop_is_the_final_checks(monkeypatch):
    """The records' log-likelihoods of one posterior are judged once: the loop's judgement of
    a fit that passes is what the final check (and the synthesizer's) reads."""
    calls = []
    real = sampling.record_loglik_chains

    def counted(model, idata, **kw):
        calls.append(id(idata))
        return real(model, idata, **kw)

    monkeypatch.setattr(sampling, "record_loglik_chains", counted)
    model = _weighted_normal()
    monkeypatch.setattr(sampling, "RHAT_WARN", np.inf)  # the loop's check passes at once
    idata = _weighted_run(model, 9, max_extensions=2)
    assert calls == [id(idata)]
    first = sampling.check_loglik_convergence(model, idata)
    assert calls == [id(idata)] and first == sampling.check_loglik_convergence(model, idata)
    other = _weighted_run(model, 9, max_extensions=0, check_convergence=False)
    sampling.check_loglik_convergence(model, other)  # another posterior: judged afresh
    assert calls == [id(idata), id(other)]
