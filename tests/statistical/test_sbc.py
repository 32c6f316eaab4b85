"""Simulation-based calibration (Talts et al. 2018), small CI version, one run per factory.

Each run draws parameters and a small dataset from the prior predictive distribution, fits the
factory's model to it with bayesynth's sampler, and ranks the true value of each identified
quantity among thinned posterior draws; the ranks must be uniform (Bonferroni at
``tests.mc.SBC_LEVEL`` over a run's quantities; fixed seeds, so a run passes or fails
deterministically). With 25-30 replicates these runs catch gross errors (a wrong log-density, a
Gibbs step with the wrong conditional, a prior implemented at the wrong scale where the prior
matters); the larger runs with their numbers are ``benchmarks/sbc.py`` and
``benchmarks/README.md``. The first tests check the machinery itself against an exact
conjugate posterior, where a small miscalibration must be found.
"""

from __future__ import annotations

import dataclasses

import arviz as az
import matplotlib
import numpy as np
import pandas as pd
import pymc as pm
import pytest

import bayesynth as bs
from bayesynth.errors import InvalidParameterError
from bayesynth.evaluation import SBCResult, copula_sbc_problem, simulation_based_calibration
from bayesynth.evaluation.calibration import copula_table
from bayesynth.models import get_layout
from tests.mc import SBC_LEVEL, SBC_SAMPLE_KWARGS, assert_calibrated, sbc_problem

matplotlib.use("Agg")


# ------------------------------------------------------------------- the machinery, exactly


def _normal_model(tau: float, n: int = 5) -> pm.Model:
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, tau)
        pm.Normal("y", mu, 1.0, shape=n)
    return model


def _exact_sampler(tau: float, sd_factor: float = 1.0):
    """Independent draws from the conjugate posterior of mu (sd scaled by sd_factor)."""
    def sampler(model, *, draws, tune, chains, random_seed):
        y = np.asarray(model.rvs_to_values[model["y"]].data)
        prec = 1 / tau**2 + len(y)
        rng = np.random.default_rng(random_seed)
        mu = rng.normal(y.sum() / prec, sd_factor / np.sqrt(prec), size=(chains, draws))
        return az.from_dict(posterior={"mu": mu})
    return sampler


def _exact_run(sim_tau=1.0, sd_factor=1.0, n_sims=400):
    return simulation_based_calibration(
        _normal_model(sim_tau), ["y"], ["mu"], n_sims=n_sims, draws=19, tune=0,
        sampler=_exact_sampler(1.0, sd_factor), random_seed=1)


def test_exact_posterior_gives_uniform_ranks():
    result = _exact_run()
    assert isinstance(result, SBCResult)
    assert result.ranks.shape == (400, 1) and result.n_draws == 19
    assert result.ranks["mu"].between(0, 19).all()
    assert_calibrated(result)
    table = result.table()
    assert abs(table.loc["mu", "mean_rank"] - 0.5) < 0.05
    assert set(table.columns) >= {"p_chi2", "p_ecdf", "p", "ess_ratio", "contraction"}


@pytest.mark.parametrize("sim_tau, sd_factor", [(2.0, 1.0), (1.0, 0.6)],
                         ids=["prior-scale-doubled-in-simulation", "posterior-too-narrow"])
def test_a_miscalibrated_posterior_fails(sim_tau, sd_factor):
    assert _exact_run(sim_tau, sd_factor).failures(SBC_LEVEL) == ["mu"]


def test_result_plots_and_reports():
    result = _exact_run(n_sims=50)
    fig = result.plot()
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 1
    assert "mu" in result.summary() and "SBCResult" in repr(result)
    matplotlib.pyplot.close(fig)


def test_each_replicates_mixing_is_recorded_not_warned(monkeypatch):
    """With two chains every replicate's largest R-hat is kept, and the summary counts the
    replicates above 1.01: chains drawn from the exact posterior stay near 1, chains one
    posterior sd apart (a sampler stuck in two places) go above it on every replicate. The
    default sampler runs without bayesynth.sample's per-replicate warning."""
    def offset_sampler(shift):
        exact = _exact_sampler(1.0)

        def sampler(model, *, draws, tune, chains, random_seed):
            idata = exact(model, draws=draws, tune=tune, chains=chains,
                          random_seed=random_seed)
            sd = 1 / np.sqrt(1 + 5)  # posterior sd of mu: prior 1, five unit observations
            idata.posterior["mu"][1] += shift * sd
            return idata
        return sampler

    for shift, bad in ((0.0, False), (1.0, True)):
        result = simulation_based_calibration(
            _normal_model(1.0), ["y"], ["mu"], n_sims=20, draws=200, chains=2, tune=0,
            sampler=offset_sampler(shift), random_seed=2)
        rhat = result.replicates["max_rhat"]
        assert rhat.notna().all()
        # R-hat of 2 x 200 independent draws (4,000 simulated): median 1.001, 99% point
        # 1.017, largest 1.041 (6% above 1.01). One sd apart, the four split chains' means
        # are 0, 0, 1, 1 sd: R-hat about sqrt(1 + 1/3) = 1.15 (smallest of 2,000: 1.055)
        assert (rhat > 1.01).all() if bad else (rhat < 1.045).all()
        assert f"{int((rhat > 1.01).sum())} replicates with a quantity's R-hat" in (
            result.summary())
    counted = dataclasses.replace(result, replicates=pd.DataFrame(
        {"seconds": [1.0] * 4, "max_rhat": [1.009, 1.011, 1.2, np.nan]}))
    assert "2 replicates with a quantity's R-hat above 1.01 (largest 1.200)" in (
        counted.summary())
    seen = {}

    def fake_sample(model, **kwargs):
        seen.update(kwargs)
        return _exact_sampler(1.0)(model, draws=kwargs["draws"], tune=kwargs["tune"],
                                   chains=kwargs["chains"], random_seed=kwargs["random_seed"])

    import bayesynth.samplers

    monkeypatch.setattr(bayesynth.samplers, "sample", fake_sample)
    one = simulation_based_calibration(_normal_model(1.0), ["y"], ["mu"], n_sims=2, draws=9,
                                       tune=0, random_seed=3)
    assert seen["check_convergence"] is False and seen["progressbar"] is False
    assert one.replicates["max_rhat"].isna().all()  # one chain: no R-hat


def test_observing_a_non_free_variable_is_refused():
    with pytest.raises(InvalidParameterError, match="not free variables"):
        simulation_based_calibration(_normal_model(1.0), ["nope"], ["mu"], n_sims=2)


def test_copula_table_reads_the_data_back_from_latent_values():
    r = np.random.default_rng(3)
    df = pd.DataFrame({"x": r.normal(size=40), "g": r.choice(["a", "b", "c"], 40, p=[.5, .3, .2]),
                       "flag": (r.random(40) < 0.3).astype(int)})
    problem = copula_sbc_problem(df, n_factors=1)
    layout = get_layout(problem.model)
    back = copula_table(layout, layout.initial_z(), df)  # the start satisfies the constraints
    assert (back["g"] == df["g"]).all() and (back["flag"] == df["flag"]).all()
    assert (back["x"].rank() == df["x"].rank()).all()
    # the same table rebuilds the same parameterisation; C pairs within a variable are left out
    assert problem.condition({"z": layout.initial_z()}) is not None
    labels = problem.quantities({k: v[None] for k, v in problem.model.initial_point().items()
                                 if k in ("alpha", "Lambda")} | {
        "C": np.eye(layout.p_latent)[None], "sigma": np.ones((1, layout.p_latent))})
    assert "C[g[b], g[c]]" not in labels and "C[x, g[b]]" in labels
    assert "P[g=b]" in labels and "P[g=a]" not in labels  # "a" is the reference level


def test_copula_problem_refuses_tied_ordered_columns():
    df = pd.DataFrame({"x": np.arange(30) % 5, "flag": np.arange(30) % 2})
    with pytest.raises(InvalidParameterError, match="untied continuous"):
        copula_sbc_problem(df)


def test_copula_problem_refuses_rules_and_derived_columns():
    r = np.random.default_rng(4)
    df = pd.DataFrame({"x": r.normal(size=40), "g": r.choice(["a", "b"], 40)})
    df["y"] = df["x"] * 2
    schema = bs.infer_schema(df).with_formulas({"y": "x * 2"})
    with pytest.raises(InvalidParameterError, match="rules or derived columns"):
        copula_sbc_problem(df, schema)


# --------------------------------------------------------------------------- every factory

#: (factory, rows, replicates, kept draws, thin, tune, seed). A replicate costs 0.6-1.5 s on
#: two busy cores, mostly PyMC's compilation; the copula run about 35 s, the others 10-20 s.
#: Thinning from the measured ESS per draw (Gibbs for the copula and the latent class model,
#: NUTS elsewhere): the kept draws have ESS close to L.
CI_RUNS = [
    ("rank_probit_copula", 30, 25, 19, 5, 100, 11),
    ("negative_binomial", 30, 20, 19, 2, 200, 12),
    ("linear_regression", 10, 20, 19, 2, 200, 13),
    ("beta_mixture", 10, 15, 19, 2, 200, 14),
    ("saturated_pig", 0, 20, 19, 2, 200, 15),
    ("latent_class_dp", 30, 20, 19, 5, 200, 16),
]


@pytest.mark.slow
@pytest.mark.parametrize("factory, n, n_sims, draws, thin, tune, seed", CI_RUNS,
                         ids=[r[0] for r in CI_RUNS])
def test_sbc_ranks_are_uniform(factory, n, n_sims, draws, thin, tune, seed):
    result = simulation_based_calibration(
        *sbc_problem(factory, n=n or 30, seed=seed), n_sims=n_sims, draws=draws, thin=thin,
        tune=tune, random_seed=seed, sample_kwargs=SBC_SAMPLE_KWARGS.get(factory))
    assert_calibrated(result)


@pytest.mark.skip(reason=(
    "BART rank regression: no cheap SBC. pymc-bart cannot draw from its prior (its random "
    "draws are the mean of Y), so benchmarks/sbc.py grows trees with a hand-written prior "
    "simulator; pymc-bart adapts its leaf sd and split weights while tuning and its leaf "
    "update is not an exact conditional draw, and a replicate costs seconds. Run "
    "`python benchmarks/sbc.py --factory bart_rank_regression` (numbers in "
    "benchmarks/README.md)."))
def test_sbc_bart_rank_regression():  # pragma: no cover - documented skip
    pass
