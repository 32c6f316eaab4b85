"""PyMC wiring of the copula steps: assignment, swapped priors, reproducibility, trace contents."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest

import bayesynth as bs
from bayesynth.errors import IncompatibleModelError
from bayesynth.samplers import (
    COPULA_STEPS,
    FactorScoresGibbs,
    LatentGibbs,
    PrecisionGibbs,
    ShrinkageGibbs,
    assign_copula_steps,
)
from bayesynth.samplers.steps import MarginalLoadingsHMC


@pytest.fixture
def model(mixed_missing_df):
    return bs.models.rank_probit_copula(mixed_missing_df, n_factors=2)


def test_every_block_gets_its_gibbs_step(model, mixed_missing_df):
    """Every step of the sweep but the factor scores' own: the sweep's last step (the
    Hamiltonian move) ends with an exact draw from the scores' conditional, so a first step
    drawing them again from it, given the same state, would change nothing in law. With the
    scores' step a Metropolis step (``collapse_levels``), it stays."""
    steps = assign_copula_steps(model)
    assert COPULA_STEPS[0] is FactorScoresGibbs and COPULA_STEPS[-1] is MarginalLoadingsHMC
    assert [type(s) for s in steps] == list(COPULA_STEPS[1:])
    covered = {v.name for s in steps for v in s.vars}
    assert covered == {v.name for v in model.value_vars}
    rpl = bs.models.rank_probit_copula(mixed_missing_df, n_factors=2,
                                       categorical_likelihood="rpl")
    steps = assign_copula_steps(rpl, collapse_levels=True)
    assert type(steps[0]) is FactorScoresGibbs and steps[0].collapsed
    assert type(steps[-1]) is MarginalLoadingsHMC


def test_moves_of_absent_blocks_are_left_out_without_a_warning():
    """A table without categorical variables has no intercepts or utilities to move: the
    categorical steps are left out silently (a warning is for a prior that turned a step off)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=100), "b": rng.integers(0, 5, 100)})
    model = bs.models.rank_probit_copula(df, n_factors=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        names = {type(s).__name__ for s in assign_copula_steps(model)}
    assert not names & {"InterceptGibbs", "UtilityScaleMove", "UtilityTransportScaleMove"}
    assert {"LatentGibbs", "MarginalLoadingsHMC", "RotationMove"} <= names


def test_sample_uses_only_our_steps_and_keeps_small_trace(model, seed):
    idata = bs.sample(model, draws=30, tune=20, chains=1, random_seed=seed, progressbar=False)
    post = idata.posterior
    for name in ("Lambda", "sigma", "alpha", "C", "alpha_scaled", "prec", "phi", "delta"):
        assert name in post
    assert "z" not in post and "eta" not in post
    # no per-record array in the trace: memory per draw independent of n
    assert all("record" not in post[v].dims for v in post.data_vars)
    C = post["C"].values
    np.testing.assert_allclose(np.diagonal(C, axis1=-2, axis2=-1), 1.0)
    assert np.all(np.abs(C) <= 1 + 1e-12)


def test_keep_latent_and_constraints(model, seed):
    idata = bs.sample(model, draws=5, tune=5, chains=1, random_seed=seed, progressbar=False,
                      keep_latent=True)
    z = idata.posterior["z"].values[0, -1]
    assert idata.posterior["eta"].shape[-2:] == (model.coords["record"].__len__(), 2)
    assert bs.models.get_layout(model).bounds_satisfied(z)


@pytest.mark.parametrize("chains", [1, 2])
def test_reproducible_from_seed(model, seed, chains):
    def run(s):
        return bs.sample(model, draws=15, tune=5, chains=chains, random_seed=s,
                         progressbar=False).posterior["C"].values

    a, b, c = run(seed), run(seed), run(seed + 1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_swapped_non_conjugate_prior_goes_to_pymc(mixed_df, seed):
    priors = {
        "sigma": lambda name, dims: pm.HalfNormal(name, sigma=1.0, dims=dims),
        "alpha": lambda name, dims: pm.StudentT(name, nu=4, mu=0, sigma=1, dims=dims),
    }
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2, priors=priors)
    assert "prec" not in model.named_vars
    steps = assign_copula_steps(model)
    names = {type(s).__name__ for s in steps}
    assert "PrecisionGibbs" not in names and "InterceptGibbs" not in names
    assert "ColumnScaleMove" not in names
    assert {"LatentGibbs", "FactorScoresGibbs", "LoadingsGibbs", "ShrinkageGibbs"} <= names
    idata = bs.sample(model, draws=20, tune=20, chains=1, random_seed=seed, progressbar=False)
    assert np.all(np.isfinite(idata.posterior["sigma"].values))
    assert np.all(idata.posterior["sigma"].values > 0)
    assert np.all(np.isfinite(idata.posterior["alpha"].values))


def test_conjugate_swap_keeps_gibbs(mixed_df):
    """A normal prior with another scale on alpha and a plain normal on Lambda stay Gibbs."""
    priors = {
        "alpha": lambda name, dims: pm.Normal(name, mu=0.0, sigma=2.5, dims=dims),
        "Lambda": lambda name, dims: pm.Normal(name, mu=0.0, sigma=0.5, dims=dims),
    }
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2, priors=priors)
    names = {type(s).__name__ for s in assign_copula_steps(model)}
    assert {"InterceptGibbs", "LoadingsGibbs"} <= names
    assert "ShrinkageGibbs" not in names  # no phi/delta any more


def test_steps_refuse_models_they_do_not_fit(mixed_df):
    with pm.Model() as plain:
        pm.Normal("z", 0, 1)
    with pytest.raises(IncompatibleModelError, match="rank-probit"):
        LatentGibbs(model=plain)
    priors = {"sigma": lambda name, dims: pm.HalfNormal(name, sigma=1.0, dims=dims)}
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2, priors=priors)
    with pytest.raises(IncompatibleModelError, match="prec"):
        PrecisionGibbs(model=model)
    model2 = bs.models.rank_probit_copula(mixed_df, n_factors=2, nu=4.0)
    ShrinkageGibbs(model=model2)  # other hyperparameters are read from the graph


def test_bad_prior_names(mixed_df):
    with pytest.raises(bs.errors.InvalidParameterError, match="\\['eta'\\].*alpha.*sigma.*Lambda"):
        bs.models.rank_probit_copula(mixed_df, priors={"eta": lambda n, d: None})
    with pytest.raises(bs.errors.InvalidParameterError, match="n_factors"):
        bs.models.rank_probit_copula(mixed_df, n_factors=0)
    with pytest.raises(bs.errors.InvalidParameterError, match="nu"):
        bs.models.rank_probit_copula(mixed_df, nu=-1.0)
    with pytest.raises(bs.errors.InvalidParameterError, match="n_factors"):
        bs.models.rank_probit_copula(mixed_df, n_factors="x")  # was int()'s own ValueError
    for bad in (float("nan"), float("inf"), 2.5, 1j):  # nan and inf: int()'s own errors
        with pytest.raises(bs.errors.InvalidParameterError, match="n_factors"):
            bs.models.rank_probit_copula(mixed_df, n_factors=bad)
    with pytest.raises(bs.errors.InvalidParameterError, match="alpha_sigma"):
        bs.models.rank_probit_copula(mixed_df, alpha_sigma=float("inf"))


def test_convergence_warning_reads_the_quantities_synthesis_uses(mixed_df):
    """A fake posterior: i.i.d. draws around one parameter value in both chains give no
    warning; shifting one chain's loading of an ordered column makes the warning name a
    quantity that depends on it. Each chain has MAX_DRAWS / 2 draws: with fewer, the largest
    R-hat of independent draws over the quantities exceeds 1.01 by chance (see MAX_DRAWS)."""
    import json

    import arviz as az

    from bayesynth.models.copula_quantities import BLOCKS_ATTR, MAX_DRAWS, CopulaBlocks
    from bayesynth.samplers.sampling import check_copula_convergence

    model = bs.models.rank_probit_copula(mixed_df, n_factors=2)
    lay = bs.models.get_layout(model)
    p, k = lay.p_latent, 2
    r = np.random.default_rng(0)
    base = r.normal(size=(p, k)) * 0.5

    nd = MAX_DRAWS // 2

    def as_idata(shift):
        Lam = base + 0.002 * r.normal(size=(2, nd, p, k))
        Lam[1, :, p - 1, 0] += shift  # the last ordered column, chain 2 only
        sig = np.ones((2, nd, p))
        Om = np.einsum("cdjh,cdlh->cdjl", Lam, Lam) + np.einsum(
            "cdj,jl->cdjl", sig**2, np.eye(p))
        dd = np.sqrt(np.einsum("cdjj->cdj", Om))
        C = Om / dd[..., :, None] / dd[..., None, :]
        names = lay.latent_names
        idata = az.from_dict(
            posterior={"Lambda": Lam, "sigma": sig, "C": C,
                       "alpha": np.zeros((2, nd, len(lay.level_columns)))},
            coords={"latent": names, "latent2": names, "factor": [0, 1],
                    "level": lay.level_names},
            dims={"Lambda": ["latent", "factor"], "sigma": ["latent"],
                  "C": ["latent", "latent2"], "alpha": ["level"]})
        idata.posterior.attrs[BLOCKS_ATTR] = json.dumps(
            CopulaBlocks.from_layout(lay).to_dict())
        return idata

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = check_copula_convergence(as_idata(0.0))
    assert table is not None and table["r_hat"].max() <= 1.01
    assert not [w for w in caught if "Largest R-hat" in str(w.message)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = check_copula_convergence(as_idata(0.5))
    msgs = [str(w.message) for w in caught if "Largest R-hat" in str(w.message)]
    assert len(msgs) == 1 and lay.latent_names[-1] in msgs[0]
    assert table.index[int(table["r_hat"].argmax())] in msgs[0]


# ------------------------------------------------------------------- steps chosen the PyMC way


def _small_copula():
    import bayesynth as bs

    df = bs.datasets.simulate_child_health(n=80, random_seed=5)[["m_race", "male", "read",
                                                                 "mage", "ndi_birth"]]
    return bs.models.rank_probit_copula(df, n_factors=2)


def test_pymc_sample_with_bs_steps_is_bs_sample():
    import warnings

    import pymc as pm

    import bayesynth as bs

    model = _small_copula()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = bs.sample(model, draws=30, tune=30, chains=1, random_seed=7, progressbar=False)
    from bayesynth.samplers.sampling import _factor_analysis_copula_starts

    start = _factor_analysis_copula_starts(model, 1, 7)[0]  # the chain's start, from the seed
    plain = pm.sample(model=model, step=bs.steps(model), draws=30, tune=30, chains=1,
                      random_seed=7, progressbar=False, compute_convergence_checks=False,
                      initvals={"delta": np.ones(2), "phi": np.ones((model["phi"].eval().shape)),
                                **start})
    # the same steps from the same start and seed: the same chain
    np.testing.assert_allclose(plain.posterior["C"].values, ours.posterior["C"].values)
    # and from PyMC's default start (the support points) it runs too
    default = pm.sample(model=model, step=bs.steps(model), draws=5, tune=5, chains=1,
                        random_seed=7, progressbar=False, compute_convergence_checks=False)
    assert np.isfinite(default.posterior["C"].values).all()


def test_pymc_assignment_picks_the_gibbs_blocks_for_a_copula_only():
    import pymc as pm
    from pymc.sampling.mcmc import assign_step_methods

    from bayesynth.samplers.steps import (
        FactorScoresGibbs,
        InterceptGibbs,
        LatentGibbs,
        LoadingsGibbs,
        PrecisionGibbs,
        ShrinkageGibbs,
    )

    model = _small_copula()
    with model:
        _, selected = assign_step_methods(model)
    by_var = {model.values_to_rvs[v].name: cls for cls, vs in selected.items() for v in vs}
    assert by_var == {"z": LatentGibbs, "eta": FactorScoresGibbs, "Lambda": LoadingsGibbs,
                      "phi": ShrinkageGibbs, "delta": ShrinkageGibbs, "prec": PrecisionGibbs,
                      "alpha": InterceptGibbs}
    with pm.Model() as other:
        pm.Normal("z", 0, 1)
        pm.Gamma("prec", 2, 1)
    with other:
        _, chosen = assign_step_methods(other)
    assert all(cls.__module__.startswith("pymc") for cls in chosen)


def test_a_swapped_prior_that_turns_a_step_off_warns():
    import pymc as pm
    import pytest

    import bayesynth as bs

    df = bs.datasets.simulate_child_health(n=60, random_seed=5)[["m_race", "read", "mage"]]
    model = bs.models.rank_probit_copula(df, n_factors=1, priors={
        "sigma": lambda name, dims: pm.HalfNormal(name, 1.0, dims=dims)})
    with pytest.warns(UserWarning, match="PrecisionGibbs is not used.*NUTS.*sigma_free"):
        bs.steps(model)


def test_score_translation_move_shifts_scores_and_keeps_every_likelihood_mean():
    """The step applies the kernel's shift d as documented: eta + d, categorical intercepts
    minus Lambda d, rank columns plus Lambda d, fixed columns untouched."""
    from bayesynth.samplers.kernels import draw_score_translation
    from bayesynth.samplers.steps import ScoreTranslationMove, copula_structure

    df = bs.datasets.simulate_child_health(n=60, random_seed=5)[
        ["m_race", "male", "read", "mage", "temp_t1"]]
    model = bs.models.rank_probit_copula(df, n_factors=2)
    s = copula_structure(model)
    lay = s.layout
    point = model.initial_point()
    r = np.random.default_rng(0)
    s.io["eta"].put(point, r.normal(size=(lay.n, s.k)) + 0.4)
    s.io["Lambda"].put(point, r.normal(size=(s.p, s.k)))
    step = ScoreTranslationMove(model=model, rng=np.random.default_rng(3))
    new, _ = step.step(dict(point))
    cat = np.r_[lay.k_mnp_cols, lay.k_lvl_cols].astype(int)
    Lam = s.value(point, "Lambda")
    d = s.value(new, "eta") - s.value(point, "eta")
    assert np.ptp(d, axis=0).max() < 1e-12 and np.abs(d).max() > 1e-3  # one shift for all
    want = draw_score_translation(np.random.default_rng(3), point["z"], s.alpha_full(point), Lam,
                                  s.value(point, "eta"), s.sd(point), lay,
                                  np.zeros(s.p), np.ones(s.p))
    np.testing.assert_allclose(d[0], want, atol=1e-12)
    mean_old = s.alpha_full(point) + s.value(point, "eta") @ Lam.T
    mean_new = s.alpha_full(new) + s.value(new, "eta") @ Lam.T
    np.testing.assert_allclose(mean_new[:, cat], mean_old[:, cat], atol=1e-12)
    rank, fixed = lay.rank_columns, lay.fixed_columns
    assert len(rank) and len(fixed)
    np.testing.assert_allclose((new["z"] - mean_new)[:, rank], (point["z"] - mean_old)[:, rank],
                               atol=1e-12)
    np.testing.assert_array_equal(new["z"][:, fixed], point["z"][:, fixed])


def test_location_transport_step_is_optional_and_moves_only_categorical_intercepts():
    """UtilityTransportLocationMove is not in the default sweep; run as a step it writes the
    kernel's intercepts, keeps every record in its level and leaves the other columns' latent
    values alone."""
    from bayesynth.samplers import OPTIONAL_COPULA_STEPS
    from bayesynth.samplers.kernels import draw_utility_location_transport
    from bayesynth.samplers.steps import UtilityTransportLocationMove, copula_structure

    assert UtilityTransportLocationMove in OPTIONAL_COPULA_STEPS
    assert UtilityTransportLocationMove not in COPULA_STEPS
    df = bs.datasets.simulate_child_health(n=80, random_seed=5)[
        ["m_race", "m_educ", "male", "read", "mage"]]
    model = bs.models.rank_probit_copula(df, n_factors=2)
    s = copula_structure(model)
    lay = s.layout
    point = model.initial_point()
    step = UtilityTransportLocationMove(model=model, rng=np.random.default_rng(3))
    # each block whole, then each column of a block with several
    sizes = np.diff(lay.k_mnp_off)
    assert len(step._groups) == sum(1 + (m if m > 1 else 0) for m in sizes)
    new, stats = step.step(dict(point))
    want, acc = draw_utility_location_transport(
        np.random.default_rng(3), np.array(point["z"], order="F"), s.alpha_full(point),
        s.value(point, "Lambda"), s.value(point, "eta"), lay, np.zeros(s.p), np.ones(s.p),
        np.full(len(step._groups), 0.1), step._groups)
    assert acc.any()
    np.testing.assert_allclose(s.alpha_full(new), want, atol=1e-12)
    assert lay.bounds_satisfied(new["z"])
    other = np.setdiff1d(np.arange(s.p), lay.k_mnp_cols)
    np.testing.assert_array_equal(new["z"][:, other], point["z"][:, other])
    assert 0.0 <= stats[0]["accept_utility_location"] <= 1.0


@pytest.mark.parametrize("afford", [0, 1, 2, None])
def test_intercept_step_slices_the_intercepts_the_row_moves_need(model, monkeypatch, afford):
    """InterceptGibbs gives the joint (intercept, loadings) row move to the rarest columns the
    budget affords, and the intercept-only collapsed slice to every other column and to the
    row-moved columns whose move is the mode's independence proposal (which needs the slice
    to leave a tail); a row move that takes the Fisher-scoring step, which moves from where
    the chain is, has no slice (with ``slice_stepped`` it has)."""
    import importlib

    from bayesynth.samplers import kernels as K
    from bayesynth.samplers.steps import InterceptGibbs

    steps_mod = importlib.import_module("bayesynth.samplers.steps")
    lay = bs.models.get_layout(model)
    k = int(model.dim_lengths["factor"].eval())
    # the rarest level (22 records, 3 parameters) takes the mode's proposal, the rest the step
    monkeypatch.setattr(K, "ROW_STEP_RECORDS", 8)
    stepped = K.row_step_columns(lay, k)
    per_column = lay.n * (k + 1) ** 2
    budget = 1e12 if afford is None else (afford + 0.5) * per_column
    monkeypatch.setattr(InterceptGibbs, "row_budget", budget)
    seen = {}

    def spy(name, fn):
        def inner(*args, columns=None, **kw):
            seen[name] = None if columns is None else np.asarray(columns, dtype=bool).copy()
            if "step_columns" in kw:
                seen["step_columns"] = kw["step_columns"]
            return fn(*args, columns=columns, **kw)
        return inner

    monkeypatch.setattr(steps_mod, "draw_alpha_collapsed",
                        spy("alpha", steps_mod.draw_alpha_collapsed))
    monkeypatch.setattr(steps_mod, "draw_categorical_rows",
                        spy("rows", steps_mod.draw_categorical_rows))
    step = InterceptGibbs(model=model, rng=np.random.default_rng(0))
    n_cols = len(step._rare)
    assert n_cols >= 3 and step.max_columns >= n_cols
    assert stepped.sum() == n_cols - 1 and not stepped[np.argmin(stepped)]
    point = dict(model.initial_point())
    step._update(point)
    rows = seen.get("rows", np.zeros(n_cols, dtype=bool))
    alpha = seen.get("alpha", np.zeros(n_cols, dtype=bool))
    np.testing.assert_array_equal(rows, step._rare)
    np.testing.assert_array_equal(alpha, ~(step._rare & stepped))
    assert rows.sum() == (n_cols if afford is None else afford)
    np.testing.assert_array_equal(step._stepped, stepped)  # the one rule the kernel is given
    if afford is not None and afford >= 1:
        assert step._rare[~stepped].all()  # the rarest column is row-moved first
        assert seen["step_columns"] is step._stepped
    # with a random subset of the intercepts, the row-moved columns that have the slice are
    # always in it, those with the step never
    monkeypatch.setattr(InterceptGibbs, "max_columns", 1)
    for _ in range(5):
        step._update(point)
        assert np.all(seen["alpha"][step._rare & ~stepped])
        assert not np.any(seen["alpha"][step._rare & stepped])
        assert seen["alpha"][~step._rare].sum() == min(1, (~step._rare).sum())
    # slice_stepped: every column has the slice again
    monkeypatch.setattr(InterceptGibbs, "max_columns", 32)
    monkeypatch.setattr(InterceptGibbs, "slice_stepped", True)
    InterceptGibbs(model=model, rng=np.random.default_rng(0))._update(point)
    np.testing.assert_array_equal(seen["alpha"], np.ones(n_cols, dtype=bool))


def test_loadings_and_precision_steps_redraw_exactly_the_unconstrained_latent_values(
        monkeypatch):
    """With the unconstrained latent values integrated out of the loadings and precisions,
    the steps must redraw those values (and only those) from the factor model given the new
    parameters: leaving them at values drawn under the old ones breaks the block."""
    from bayesynth.samplers.steps import LoadingsGibbs, PrecisionGibbs

    rng = np.random.default_rng(4)
    n = 200
    x = rng.normal(size=n).round(3)
    x[rng.random(n) < 0.7] = np.nan
    # the categorical variable first: its utility columns (fixed scale) come before x, so x's
    # place among the free-scale columns differs from its latent index
    df = pd.DataFrame({"g": rng.choice(["a", "b", "c"], size=n), "x": x,
                       "y": rng.normal(size=n).round(3)})
    model = bs.models.rank_probit_copula(df, n_factors=2)
    lay = bs.models.get_layout(model)
    free = dict(lay.unconstrained_records)
    jx = lay.latent_names.index("x")
    assert set(free) == {jx} and len(free[jx]) == np.isnan(x).sum()
    zkey = model.rvs_to_values[model["z"]].name
    import importlib

    steps_mod = importlib.import_module("bayesynth.samplers.steps")
    passed = []

    def spy(*args, **kw):
        passed.extend(args[7] if len(args) > 7 else kw.get("unconstrained", ()))
        return draw_prec(*args, **kw)

    draw_prec = steps_mod.draw_prec
    monkeypatch.setattr(steps_mod, "draw_prec", spy)
    for cls in (LoadingsGibbs, PrecisionGibbs):
        step = cls(model=model, rng=np.random.default_rng(0))
        point = dict(model.initial_point())
        point[zkey] = np.asfortranarray(rng.normal(size=point[zkey].shape))
        step.structure.io["eta"].put(point, rng.normal(size=(n, 2)))
        before = point[zkey].copy()
        new, _ = step.step(point)
        changed = new[zkey] != before
        assert changed[free[jx], jx].all(), cls.__name__
        changed[free[jx], jx] = False
        assert not changed.any(), cls.__name__
        s = step.structure
        resid = (new[zkey][free[jx], jx] - s.alpha_full(new)[jx]
                 - s.value(new, "eta")[free[jx]] @ s.value(new, "Lambda")[jx])
        assert abs(resid.std() / s.sd(new)[jx] - 1) < 4.5 * np.sqrt(0.5 / len(resid))
    # the precision kernel sees the free-scale columns only: x by its place among them
    free_scale = bs.models.get_layout(model).free_scale_columns
    assert [(int(free_scale[c]), list(U)) for c, U in passed] == [(jx, list(free[jx]))]
    assert jx != int(np.flatnonzero(free_scale == jx)[0])


def test_the_hamiltonian_move_ends_with_an_exact_draw_of_the_factor_scores(mixed_missing_df,
                                                                          monkeypatch):
    """Why the default sweep has no factor-score step of its own: its last step, the
    Hamiltonian move, leaves the scores drawn from their conditional given the state it
    leaves and the latent values the data constrain, N(P_i^-1 sum_(j in O_i) lambda_j
    (z_ij - alpha_j) / sigma_j^2, P_i^-1), P_i = I + sum_(j in O_i) lambda_j lambda_j' /
    sigma_j^2, whatever the scores were before it (here a thousand sds away). The table has
    missing values, so the block drawn is (scores, unconstrained latent values)."""
    from bayesynth.samplers.steps import copula_structure

    model = bs.models.rank_probit_copula(mixed_missing_df, n_factors=2)
    s = copula_structure(model)
    assert s.layout.unconstrained_records  # the patterned block is what is tested
    steps = assign_copula_steps(model)
    assert not any(isinstance(st, FactorScoresGibbs) for st in steps)
    hmc = steps[-1]
    assert isinstance(hmc, MarginalLoadingsHMC)
    rng = np.random.default_rng(3)
    for st in steps:
        st.rng = rng
    point = dict(model.initial_point())
    for _ in range(30):
        for st in steps:
            st._update(point)
    _, groups = s.unconstrained_patterns()
    steps_mod = sys.modules["bayesynth.samplers.steps"]
    calls = []
    draw = steps_mod._draw_scores

    def recorded(step, pt, alpha, Lam, sd):
        calls.append((np.array(alpha), np.array(Lam), np.array(sd)))
        return draw(step, pt, alpha, Lam, sd)

    monkeypatch.setattr(steps_mod, "_draw_scores", recorded)
    resid = []
    for _ in range(150):
        state = {key: np.array(v, copy=True) for key, v in point.items()}
        s.io["eta"].put(state, np.full_like(s.value(state, "eta"), 1e3))
        hmc._update(state)
        Lam, prec = s.value(state, "Lambda"), 1.0 / s.sd(state) ** 2
        # the draw is given the state the move leaves (not its start)
        a_used, lam_used, sd_used = calls.pop()
        np.testing.assert_allclose(sd_used, s.sd(state), rtol=1e-12)
        np.testing.assert_array_equal(lam_used, Lam)
        np.testing.assert_array_equal(a_used, s.alpha_full(state))
        eta, z, alpha = s.value(state, "eta"), s.value(state, "z"), s.alpha_full(state)
        for cols, rows in groups:
            keep = np.setdiff1d(np.arange(s.p), cols)
            Lo, po = Lam[keep], prec[keep]
            P = np.eye(s.k) + (Lo.T * po) @ Lo
            mean = np.linalg.solve(P, (Lo.T * po) @ (z[np.ix_(rows, keep)] - alpha[keep]).T)
            L = np.linalg.cholesky(P)  # P^-1 = L'^-1 L^-1: L' (eta - mean) ~ N(0, I)
            resid.append(L.T @ (eta[rows].T - mean))
    r = np.concatenate(resid, axis=1)  # (k, 150 n) standardised residuals
    m = r.shape[1]
    assert np.all(np.abs(r.mean(axis=1)) < 4.5 / np.sqrt(m)), r.mean(axis=1)
    assert np.all(np.abs(r.var(axis=1) - 1) < 4.5 * np.sqrt(2 / m)), r.var(axis=1)
    assert abs(np.corrcoef(r)[0, 1]) < 4.5 / np.sqrt(m)


def test_a_step_after_the_hamiltonian_move_keeps_the_score_step():
    """The score step is left out only where nothing runs between the Hamiltonian move's score
    draw and the next sweep: with a prior that PyMC's own step samples (appended after the
    copula's steps) or with steps a caller appends (``ends_sweep=False``), it stays."""
    df = bs.datasets.simulate_child_health(n=80, random_seed=5)[["m_race", "male", "read",
                                                                 "mage", "ndi_birth"]]
    swapped = bs.models.rank_probit_copula(df, n_factors=2, priors={
        "alpha": lambda name, dims: pm.StudentT(name, nu=4, mu=0, sigma=1, dims=dims)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        left = assign_copula_steps(swapped)
    assert isinstance(left[-1], MarginalLoadingsHMC) and isinstance(left[0], FactorScoresGibbs)
    model = _small_copula()
    assert not isinstance(assign_copula_steps(model)[0], FactorScoresGibbs)
    kept = bs.steps(model, ends_sweep=False)
    assert isinstance(kept[0], FactorScoresGibbs) and isinstance(kept[-1], MarginalLoadingsHMC)
