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
