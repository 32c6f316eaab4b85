"""Diagnostics on the identified quantities, with weakly identified ones flagged."""

from __future__ import annotations

import warnings

import numpy as np

import bayesynth as bs


def test_copula_diagnostics_rows_and_weak_flag(mixed_df, seed):
    model = bs.models.rank_probit_copula(mixed_df, n_factors=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=30, tune=30, chains=2, random_seed=seed,
                          progressbar=False)
    d = bs.evaluation.copula_diagnostics(idata)
    p = len(model.coords["latent"])
    n_alpha = len(model.coords["level"])
    assert len(d) == p * (p - 1) // 2 + n_alpha
    assert "r_hat" in d and "ess_bulk" in d
    assert d.loc["C[group[a], group[b]]", "weak"]
    assert not d.loc["C[group[a], visits]", "weak"]
    assert d.filter(like="alpha_scaled", axis=0)["weak"].all()
    s = bs.evaluation.convergence_summary(idata)
    strong = d[~d["weak"].astype(bool)]
    assert s.max_rhat == strong["r_hat"].max()
    assert np.isfinite(s.median_ess_bulk)


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
