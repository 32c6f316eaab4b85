"""CopulaSynthesizer: posterior-predictive synthesis, dtypes, missingness, persistence."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import ndtr

import bayesynth as bs
from bayesynth.errors import NotFittedError, SchemaError
from bayesynth.evaluation import ks_distance, tv_distance
from bayesynth.synthesis import draw_latent


@pytest.fixture(scope="module")
def fitted():
    from tests.conftest import make_mixed

    df = make_mixed(n=400, seed=11, missing=True)
    before = df.copy(deep=True)
    syn = bs.CopulaSynthesizer(n_factors=3, draws=200, tune=200, chains=2, random_seed=5,
                               progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: R-hat warning
        syn.fit(df)
    pd.testing.assert_frame_equal(df, before)  # never modifies the caller's data
    return df, syn


def test_same_columns_dtypes_and_categories(fitted):
    df, syn = fitted
    out = syn.sample(m=2, random_seed=1)
    assert len(out) == 2
    for s in out:
        assert list(s.columns) == list(df.columns)
        assert s.shape == df.shape
        pd.testing.assert_series_equal(s.dtypes, df.dtypes)
        assert list(s["level"].cat.categories) == list(df["level"].cat.categories)
        assert s["level"].cat.ordered
        assert set(s["group"].dropna()) <= set(df["group"].dropna())
        assert set(s["flag"]) <= {0, 1}
        assert (s["visits"] >= 0).all() and (s["visits"] == s["visits"].round()).all()
    assert not out[0].equals(out[1])  # different posterior draws


def test_marginals_match(fitted):
    df, syn = fitted
    [s] = syn.sample(m=1, n_rows=4000, random_seed=2)
    n, m = df["visits"].notna().sum(), s["visits"].notna().sum()
    crit = 1.95 * np.sqrt((n + m) / (n * m))  # two-sample KS, alpha = 0.001
    for col in ("visits", "income"):
        assert ks_distance(df[col], s[col]) < crit, col
    for col in ("group", "level", "flag"):
        # total variation of a k-level table: generous 0.001-level multinomial bound
        k = df[col].nunique(dropna=False)
        assert tv_distance(df[col], s[col]) < 2.5 * np.sqrt(k / n), col
    # synthetic continuous values are smoothed, not copies of real ones
    assert not np.isin(s["income"].dropna(), df["income"].dropna()).any()
    lo, hi = df["income"].min(), df["income"].max()
    assert s["income"].min() >= lo and s["income"].max() <= hi


def test_missingness_rates_reproduced(fitted):
    df, syn = fitted
    [s] = syn.sample(m=1, n_rows=5000, random_seed=3)
    for col in ("income", "group"):
        p_real = df[col].isna().mean()
        se = np.sqrt(p_real * (1 - p_real) * (1 / len(df) + 1 / len(s)))
        assert abs(s[col].isna().mean() - p_real) < 4 * se, col
    assert s["flag"].notna().all() and s["visits"].notna().all()


def test_reproducible_and_seeded(fitted):
    _, syn = fitted
    a = syn.sample(m=2, random_seed=9)
    b = syn.sample(m=2, random_seed=9)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)
    c = syn.sample(m=1, random_seed=10)[0]
    assert not a[0].equals(c)


def test_model_mode_valid_and_empirical_needs_its_table(fitted):
    df, syn = fitted
    assert syn.categorical == "model" and syn.combos_ is None  # no real counts kept
    [s] = syn.sample(m=1, n_rows=500, random_seed=4)
    assert set(s["group"].dropna()) <= {"a", "b", "c"}
    assert s["level"].notna().all()
    syn.categorical = "empirical"
    try:
        with pytest.raises(SchemaError, match="fit with categorical='empirical'"):
            syn.sample(m=1)
    finally:
        syn.categorical = "model"


def test_save_load_round_trip(fitted, tmp_path):
    _, syn = fitted
    path = syn.save(tmp_path / "model")
    assert (path / "posterior.nc").exists() and (path / "synthesizer.json").exists()
    assert not list(tmp_path.glob(".*tmp"))  # no temporary left behind
    loaded = bs.CopulaSynthesizer.load(path)
    a = syn.sample(m=2, random_seed=7)
    b = loaded.sample(m=2, random_seed=7)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)
    syn.save(path)  # overwriting an existing save works
    with pytest.raises(SchemaError, match="not a saved"):
        bs.CopulaSynthesizer.load(tmp_path)


def test_not_fitted_and_bad_arguments(fitted):
    with pytest.raises(NotFittedError, match="fit"):
        bs.CopulaSynthesizer().sample()
    with pytest.raises(SchemaError, match="categorical"):
        bs.CopulaSynthesizer(categorical="joint").fit(fitted[0])
    with pytest.raises(ValueError, match="m must"):
        fitted[1].sample(m=0)


# ------------------------------------------------------------------ latent draws: exact answers


def _exact(alpha, lam, sig):
    x, w = hermegauss(120)
    w = w / w.sum()
    p = ndtr((alpha[:3, None] + lam[:3, None] * x) / sig[:3, None])  # (3, nodes)
    wh = np.array([p[h] * np.prod(np.delete(1 - p, h, axis=0), axis=0) for h in range(3)])
    mass = (wh * w).sum(1)
    return mass / mass.sum(), (wh * w * x).sum(1) / mass


@pytest.mark.parametrize("mode", ["model", "empirical"])
@pytest.mark.parametrize("max_tries", [2000, 0])
def test_draw_latent_against_quadrature(mode, max_tries, rng):
    """One 3-level variable, one factor: level probabilities and E[z_other | level] exactly,
    for the rejection sampler and for its Gibbs fallback (max_tries=0)."""
    alpha = np.array([0.3, -0.5, -1.0, 0.0])
    lam = np.array([1.0, -0.6, 0.4, 0.8])
    sig = np.array([0.6, 0.8, 0.5, 0.7])
    probs, eta_mean = _exact(alpha, lam, sig)
    n = 40_000
    codes = None
    if mode == "empirical":
        codes = rng.choice(3, size=(n, 1), p=probs)
    z, got = draw_latent(rng, alpha, lam[:, None], sig, [np.arange(3)], n, codes=codes,
                         max_tries=max_tries, n_sweeps=60)
    got = got[:, 0]
    # exactly one positive level column per record, and it is the reported level
    assert np.all((z[:, :3] > 0).sum(1) == 1)
    assert np.all(np.argmax(z[:, :3], axis=1) == got)
    freq = np.bincount(got, minlength=3) / n
    assert np.all(np.abs(freq - probs) < 4 * np.sqrt(probs * (1 - probs) / n)), (freq, probs)
    for h in range(3):
        zo = z[got == h, 3]
        expect = alpha[3] + lam[3] * eta_mean[h]
        assert abs(zo.mean() - expect) < 4.5 * zo.std() / np.sqrt(len(zo)), (h, zo.mean(),
                                                                             expect)


def test_draw_latent_keeps_the_copula_correlation_with_tight_levels(rng):
    """With level columns nearly determined by the factors (small sigma), the other columns
    must keep the model's correlation given a valid combination (a short Gibbs run from
    eta = 0 attenuates it). Reference: plain rejection from the unconstrained model."""
    lam = np.array([[1.5, 0.2], [-1.2, 0.9], [0.1, -1.4], [-0.3, -0.2],
                    [0.9, 0.5], [0.8, 0.6]])
    sig = np.array([0.15, 0.15, 0.15, 0.15, 0.4, 0.4])
    alpha = np.array([-0.5, -0.8, -0.9, -1.5, 0.0, 0.0])
    big = 600_000
    eta = rng.standard_normal((big, 2))
    zz = alpha + eta @ lam.T + sig * rng.standard_normal((big, 6))
    valid = (zz[:, :4] > 0).sum(axis=1) == 1
    ref = zz[valid]
    target = np.corrcoef(ref[:, 4], ref[:, 5])[0, 1]
    n = 30_000
    _, codes = draw_latent(rng, alpha, lam, sig, [np.arange(4)], n)
    z, _ = draw_latent(rng, alpha, lam, sig, [np.arange(4)], n, codes=codes)
    r = np.corrcoef(z[:, 4], z[:, 5])[0, 1]
    se = (1 - target**2) * np.sqrt(1 / n + 1 / len(ref))
    assert abs(r - target) < 5 * se, (r, target)
    np.testing.assert_allclose(z[:, 4].std(), ref[:, 4].std(), rtol=0.03)
