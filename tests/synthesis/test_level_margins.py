"""Categorical intercepts shifted to the data's one-way level frequencies."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.synthesis.level_margins import calibrate_block, calibrated_intercepts


def _hard_shares(a, x):
    lev = np.where((a + x).max(axis=1) > 0, (a + x).argmax(axis=1) + 1, 0)
    return np.bincount(lev, minlength=len(a) + 1) / len(x)


def test_calibrated_intercepts_give_the_target_shares_on_fresh_points():
    rng = np.random.default_rng(0)
    d = 5
    A = rng.normal(size=(d, 2))
    S = A @ A.T + np.diag(rng.uniform(0.3, 1.0, d))
    chol = np.linalg.cholesky(S)
    target = np.array([0.004, 0.04, 0.25, 0.106, 0.002])  # reference: 0.598
    M = 20_000
    a = calibrate_block(np.zeros(d), rng.standard_normal((M, d)) @ chol.T, target)
    # On the calibration points the shares match up to the smoothing; on fresh points up
    # to the Monte Carlo error of both point sets.
    fresh = rng.standard_normal((200_000, d)) @ chol.T
    p = np.r_[1 - target.sum(), target]
    se = np.sqrt(p * (1 - p) * (1 / M + 1 / len(fresh)))
    assert np.all(np.abs(_hard_shares(a, fresh) - p) < 5 * se + 1e-3)


def test_a_draw_with_non_unit_scales_is_calibrated_to_its_own_covariance():
    from bayesynth.synthesis.copula import _Block

    rng = np.random.default_rng(2)
    Lam, sig = rng.normal(size=(3, 2)), np.array([0.4, 1.7, 0.9])
    block = _Block("g", np.array([0, 1, 2]), ("a", "b", "c", "d"), "mnp", 3)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    a = calibrated_intercepts(rng, np.zeros(3), Lam, sig, [block], {"g": p})
    S = Lam @ Lam.T + np.diag(sig**2)
    fresh = rng.standard_normal((200_000, 3)) @ np.linalg.cholesky(S).T
    got = _hard_shares(a, fresh)  # reference (level "d") first
    want = np.r_[p[3], p[:3]]
    se = np.sqrt(want * (1 - want) * (1 / 20_000 + 1 / len(fresh)))
    assert np.all(np.abs(got - want) < 5 * se + 1e-3)


def test_only_multinomial_probit_blocks_named_in_the_margins_move():
    from bayesynth.synthesis.copula import _Block

    rng = np.random.default_rng(1)
    Lam, sig = rng.normal(size=(4, 2)), np.ones(4)
    alpha = np.array([0.1, -0.2, 0.3, 0.0])
    blocks = [_Block("g", np.array([0, 1]), ("a", "b", "c"), "mnp", 0),
              _Block("h", np.array([2]), ("u", "v"), "mnp", 0)]
    out = calibrated_intercepts(rng, alpha, Lam, sig, blocks, {"g": [0.2, 0.3, 0.5]})
    assert out[2] == alpha[2] and out[3] == alpha[3]
    assert not np.allclose(out[:2], alpha[:2])


def test_the_synthesizer_draws_the_stored_one_way_frequencies():
    # Replace the stored frequencies by ones far from the model's: the synthetic shares
    # follow them (so the calibration is applied to every dataset), in model mode only.
    r = np.random.default_rng(3)
    n = 600
    x = r.standard_normal(n)
    g = np.where(x < -0.4, "S", np.where(x > 0.9, "W", "M"))
    df = pd.DataFrame({"x": np.round(x, 3), "g": g})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = bs.CopulaSynthesizer(n_factors=1, draws=100, tune=100, chains=1, random_seed=4,
                                   progressbar=False).fit(df)
    assert syn.level_margins_["g"] == [float(np.mean(g == v)) for v in ("M", "S", "W")]
    syn.level_margins_ = {"g": [0.2, 0.2, 0.6]}
    n_rows = 20_000
    for out in syn.sample(m=2, n_rows=n_rows, random_seed=5):
        share = out["g"].value_counts(normalize=True).reindex(["M", "S", "W"]).to_numpy()
        p = np.array([0.2, 0.2, 0.6])
        se = np.sqrt(p * (1 - p) * (1 / n_rows + 1 / 20_000))
        assert np.all(np.abs(share - p) < 5 * se + 1e-3)
    syn.categorical_margins = "model"
    [out] = syn.sample(m=1, n_rows=n_rows, random_seed=5)
    assert abs((out["g"] == "W").mean() - 0.6) > 0.2
