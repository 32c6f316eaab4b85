"""Diagnostics on the identified quantities, with weakly identified ones flagged."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import bayesynth as bs


def test_copula_diagnostics_cover_what_synthesis_uses(mixed_df, seed):
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=30, tune=30, chains=2, random_seed=seed,
                          progressbar=False)
    d = bs.evaluation.copula_diagnostics(idata, categorical_margins="model")
    kinds = d["kind"].value_counts()
    # ordered: visits, income (2 -> 1 pair); categorical: group (3), level (4), flag (2)
    assert kinds["C (ordered)"] == 1
    assert kinds["level probability"] == 3 + 4 + 2
    assert kinds["pair association"] == 3
    assert kinds["conditional mean"] == (3 + 4 + 2) * 2
    assert {"r_hat", "ess_bulk", "ess_tail", "mean", "sd"} <= set(d.columns)
    probs = d[d["kind"] == "level probability"]
    for var in ("group", "level", "flag"):  # every variable's probabilities sum to one
        assert probs.filter(like=f"{var}=", axis=0)["mean"].sum() == pytest.approx(1.0)
    # The default judges what the synthesizer's default uses: margins calibrated to the
    # data, so the level probabilities (the data's in every draw) are not judged and the
    # other quantities are those of the calibrated draws.
    cal = bs.evaluation.copula_diagnostics(idata)
    assert "level probability" not in set(cal["kind"])
    assert cal.drop(columns="kind").index.equals(d[d["kind"] != "level probability"].index)
    cm = cal["kind"] == "conditional mean"
    assert not np.allclose(cal.loc[cm, "mean"], d.loc[cal.index[cm], "mean"])
    d = cal
    s = bs.evaluation.convergence_summary(idata)
    assert s.max_rhat == d["r_hat"].max()
    assert np.isfinite(s.median_ess_bulk)
    full = bs.evaluation.diagnose(idata)  # the copula default: the same quantities
    assert len(full.table) == len(d) and full.warnings  # 30 draws: not converged
    assert any("R-hat" in w or "ESS" in w for w in full.warnings)



def test_the_judgement_does_not_depend_on_the_processes(mixed_df, seed, monkeypatch):
    # The chains' quantities, then the quantities' R-hat and ESS, are computed in worker
    # processes when cores allow (forked, on Linux); each chain and each quantity is computed
    # on its own either way, so the table is the same to the bit.
    import concurrent.futures

    import pandas as pd

    from bayesynth.models import copula_quantities as cq

    model = bs.models.rank_probit_copula(mixed_df, n_factors=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=30, tune=30, chains=2, random_seed=seed,
                          progressbar=False, check_convergence=False)
    pools = []

    class Counted(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Counted)
    monkeypatch.setattr(cq, "PARALLEL_MIN_DRAWS", 0)
    one, _ = cq.synthesis_quantity_table(idata, cores=1)
    assert pools == []
    two, _ = cq.synthesis_quantity_table(idata, cores=2)
    forked = [2, 2] if sys.platform.startswith("linux") else []
    assert pools == forked
    pd.testing.assert_frame_equal(one, two, check_exact=True)
    monkeypatch.setattr(cq, "PARALLEL_MIN_DRAWS", 61)  # above the 60 draws: one process
    cq.synthesis_quantity_table(idata, cores=2)
    assert pools == forked

def test_diagnose_words_and_defaults(mixed_df, seed):
    import arviz as az

    r = np.random.default_rng(seed)
    good = az.from_dict(posterior={"mu": r.normal(size=(4, 1000))})
    d = bs.evaluation.diagnose(good)
    assert d.ok and d.warnings == [] and "mu" in d.table.index
    bad = az.from_dict(posterior={"mu": r.normal(size=(2, 500)) + np.array([[0.0], [1.0]])})
    d = bs.evaluation.diagnose(bad)
    assert not d.ok and d.warnings[0].startswith("R-hat") and "mu: run more draws" in d.warnings[0]
    # models record their identified quantities; diagnose reads them
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2)
    idata = bs.sample(model, draws=20, tune=20, chains=2, random_seed=seed, progressbar=False)
    assert idata.posterior.attrs["identified_vars"] == "C,alpha_scaled"
    d = bs.evaluation.diagnose(idata)
    assert d.table.index[0].startswith("C[") and not any("Lambda" in i for i in d.table.index)
    assert any("run more draws" in w for w in d.warnings)  # 20 draws are never enough


def test_independent_draws_are_judged_converged(seed):
    """Chains of independent draws from one distribution have converged: on the demo table's
    hundreds of quantities the default judgement must say so. (R-hat of independent draws
    fluctuates: computed on 1,000 draws in all, the largest of 580 exceeds 1.01 about half the
    time, which is why the default keeps up to 4,000.)"""
    from bayesynth.models.copula_quantities import MAX_DRAWS

    df = bs.datasets.simulate_child_health(n=300, random_seed=1)
    model = bs.models.rank_probit_copula(df, n_factors=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=2, tune=2, chains=2, random_seed=seed,
                          progressbar=False)
    post = idata.posterior
    r = np.random.default_rng(seed)
    nc, nd = 2, MAX_DRAWS // 2
    L0 = post["Lambda"].values[0, -1]
    s0 = post["sigma"].values[0, -1]
    free = s0 != 1.0
    Lam = L0 + 0.05 * r.normal(size=(nc, nd) + L0.shape)
    sig = np.broadcast_to(s0, (nc, nd) + s0.shape) * np.where(
        free, np.exp(0.05 * r.normal(size=(nc, nd) + s0.shape)), 1.0)
    omega = Lam @ np.swapaxes(Lam, -1, -2) + sig[..., None] * np.eye(len(s0)) * sig[..., None]
    dd = np.sqrt(np.einsum("...ii->...i", omega))
    alpha = post["alpha"].values[0, -1] + 0.05 * r.normal(size=(nc, nd, post.sizes["level"]))
    dims = {v: post[v].dims for v in ("Lambda", "sigma", "alpha", "C")}
    coords = {c: post.coords[c].values for c in ("latent", "factor", "level", "latent2")}
    import arviz as az

    iid = az.from_dict(posterior={"Lambda": Lam, "sigma": sig, "alpha": alpha,
                                  "C": omega / (dd[..., :, None] * dd[..., None, :])},
                       coords=coords, dims={k: list(v[2:]) for k, v in dims.items()})
    iid.posterior.attrs.update(post.attrs)
    d = bs.evaluation.synthesis_diagnostics(iid)
    assert d.thin == 1 and len(d.table) > 300
    assert d.table["r_hat"].max() <= 1.01, d.table["r_hat"].idxmax()
    assert d.ok, d.warnings


def test_r_hat_just_above_the_threshold_is_not_rounded_away():
    """arviz's summary rounds R-hat to two decimals by default: 1.012 became 1.01, which is
    not above 1.01, and no warning was given."""
    import arviz as az

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4, 1000)) + np.array([0.0, 0.23, 0.0, -0.23])[:, None]
    idata = az.from_dict(posterior={"mu": draws})
    r = float(az.rhat(idata)["mu"])
    assert 1.01 < r < 1.015
    d = bs.evaluation.diagnose(idata, var_names=["mu"])
    assert any("R-hat" in w and "mu" in w for w in d.warnings), (r, d.warnings)


def test_an_undefined_r_hat_is_a_failure_unless_the_quantity_is_constant():
    """ArviZ gives NaN R-hat and ESS when a draw is NaN; the checks used to skip non-finite
    values, so two chains 3 apart with one NaN draw were judged converged."""
    import arviz as az
    import pandas as pd

    from bayesynth.samplers.sampling import _worst_rhat

    rng = np.random.default_rng(0)
    z = rng.normal(size=(2, 500))
    z[0, 10] = np.nan
    z[1] += 3
    d = bs.evaluation.diagnose(az.from_dict(posterior={"z": z}), var_names=["z"])
    assert not d.ok and any("undefined for z" in w for w in d.warnings)
    const = bs.evaluation.diagnose(az.from_dict(posterior={"c": np.ones((2, 500))}),
                                   var_names=["c"])
    assert const.ok  # constant: R-hat undefined, but nothing to converge
    table = pd.DataFrame({"r_hat": [1.001, np.nan, np.nan], "sd": [0.1, 0.0, 0.2]})
    assert _worst_rhat(table) == np.inf
    assert _worst_rhat(table.iloc[:2]) == pytest.approx(1.001)


def test_a_conditional_mean_undefined_in_some_draws_is_reported_not_dropped(seed, monkeypatch,
                                                                            tmp_path):
    """A rare level can get no Monte Carlo point in some draws; its conditional means were
    then NaN there and the quantity was dropped from every convergence judgement without a
    word. It is now listed, marked not judged, and named in the diagnostics and the fit's
    check."""
    import pandas as pd

    from bayesynth.models import copula_quantities as cq
    from bayesynth.samplers.sampling import check_copula_convergence

    r = np.random.default_rng(3)
    g = np.where(r.random(400) < 0.6, "A", "B").astype(object)
    g[:2] = "C"  # share 0.005: about 0.5 of 100 Monte Carlo points
    df = pd.DataFrame({"g": pd.Categorical(g), "x": r.normal(size=400) + (g == "B")})
    model = bs.models.rank_probit_copula(df, n_factors=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=40, tune=40, chains=2, random_seed=seed,
                          progressbar=False, check_convergence=False)
    d = bs.evaluation.synthesis_diagnostics(idata, n_mc=100)
    rare = [q for q in d.table.index if q.startswith("E[x") and "C" in q.split("|")[1]]
    assert len(rare) == 1, list(d.table.index)
    row = d.table.loc[rare[0]]
    assert 0 < row["undefined_share"] < 1 and np.isnan(row["r_hat"])
    assert np.isfinite(row["mean"])
    assert any(rare[0] in w and "not judged" in w for w in d.warnings), d.warnings
    others = d.table.drop(index=rare[0])
    assert (others["undefined_share"] == 0).all()
    s = bs.evaluation.ConvergenceSummary.from_table(d.table)
    assert s.not_judged == 1 and s.max_rhat == others["r_hat"].max()
    # the fit's own check (default Monte Carlo size, lowered here) names it
    monkeypatch.setattr(cq, "N_MC", 100)
    with pytest.warns(RuntimeWarning, match="could not be judged"):
        check_copula_convergence(idata)
    # ArviZ logs a bare "Array contains NaN-value." once a process (a command-line user saw
    # it above the warning that names the quantity): it is given no NaN any more
    import subprocess
    import sys

    idata.to_netcdf(tmp_path / "fit.nc")
    code = ("import arviz as az, bayesynth as bs; "
            f"d = bs.evaluation.synthesis_diagnostics(az.from_netcdf({str(tmp_path / 'fit.nc')!r}),"
            " n_mc=100); print(int(d.table['undefined_share'].gt(0).sum()))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "1" and "NaN-value" not in run.stderr, run.stderr


def test_a_quantity_constant_by_construction_is_judged_without_a_numpy_warning():
    """x is shown only where g is A (a rule), so E[x | g=A] is the shown records' mean, 0 in
    every draw: R-hat is 0/0 there, NaN by design (nothing to converge). NumPy's "invalid
    value encountered in scalar divide" must not reach command-line users as a bare warning."""
    import pandas as pd

    from bayesynth.models.copula_quantities import synthesis_quantity_table
    from bayesynth.rules import Rule

    r = np.random.default_rng(5)
    g = r.choice(["A", "B"], 300)
    df = pd.DataFrame({"g": g, "x": np.where(g == "A", r.normal(size=300), np.nan),
                       "y": r.normal(size=300)})
    schema = bs.infer_schema(df, suggest=False).with_rules([Rule("x", None, (("g", ("B",)),))])
    model = bs.models.rank_probit_copula(df, schema, n_factors=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=40, tune=40, chains=2, random_seed=1,
                          progressbar=False, check_convergence=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table, _ = synthesis_quantity_table(idata)
    row = table.loc["E[x | g=A]"]
    assert row["sd"] == 0 and np.isnan(row["r_hat"]) and row["undefined_share"] == 0
    assert np.isfinite(table.drop(index="E[x | g=A]")["r_hat"]).all()
    # Nothing to converge: no message names it, although ArviZ gives a constant quantity an
    # ESS of the draws (80 here, below the floor of 200), as the closing check reads it.
    assert row["ess_bulk"] < 200
    d = bs.evaluation.synthesis_diagnostics(idata, max_warnings=10_000)
    assert d.warnings and not any("E[x | g=A]" in w for w in d.warnings)
