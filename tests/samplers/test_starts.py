"""The copula chains' factor-analysis starts, against a table with a known factor structure."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr

import bayesynth as bs
from bayesynth.samplers.sampling import FA_START_SHARE, _factor_analysis_copula_starts

N = 4000
LOADINGS = np.array([[0.8, 0.0], [0.7, 0.3], [0.6, -0.4], [0.0, 0.8], [0.2, 0.7], [-0.5, 0.5]])


def _factor_table(seed: int = 0, intercepts=(-0.4, -1.2), utility_loadings=((1.2, 0.0),
                                                                         (0.0, 1.2))
                  ) -> tuple[pd.DataFrame, np.ndarray]:
    """Six Gaussian columns with two known factors, and a categorical variable loading on them.

    The variable is a multinomial probit on the factors: level ``a`` has utility 0, and each
    further level (``b``, ``c``, ...) the given intercept plus loadings times the factors,
    plus a standard normal error. By default three levels.
    """
    rng = np.random.default_rng(seed)
    eta = rng.standard_normal((N, 2))
    resid = np.sqrt(1.0 - np.sum(LOADINGS ** 2, axis=1))
    x = eta @ LOADINGS.T + rng.standard_normal((N, 6)) * resid
    df = pd.DataFrame(x, columns=[f"x{j}" for j in range(6)])
    u = (np.asarray(intercepts) + eta @ np.asarray(utility_loadings).T
         + rng.standard_normal((N, len(intercepts))))
    code = np.where(u.max(axis=1) < 0, 0, 1 + u.argmax(axis=1))
    df["group"] = pd.Categorical(np.array(list("abcdefgh"))[code])
    return df, LOADINGS @ LOADINGS.T + np.diag(resid ** 2)


def _model(df: pd.DataFrame, likelihood: str = "mnp"):
    schema = bs.infer_schema(df)
    return bs.models.rank_probit_copula(df, schema, n_factors=2,
                                        categorical_likelihood=likelihood)


def _implied_correlation(start: dict[str, np.ndarray], sd: np.ndarray) -> np.ndarray:
    lam = start["Lambda"]
    omega = lam @ lam.T + np.diag(sd ** 2)
    d = np.sqrt(np.diag(omega))
    return omega / np.outer(d, d)


def test_factor_analysis_start_recovers_a_known_factor_structure():
    """Each chain's start implies the true correlations of the continuous columns within the
    sampling error of its resample of a quarter of the records; a level column's intercept
    puts the probit probability of its level at the level's share (utilities with unit
    residual scale); the scores are one draw
    from their conditional: covariance I, as the factors' prior says, and covariance with
    the starting latent data equal to the loadings (so they are rotated with them)."""
    df, truth = _factor_table()
    model = _model(df)
    starts = _factor_analysis_copula_starts(model, 2, 11)
    names = list(model.coords["latent"])
    cont = [names.index(f"x{j}") for j in range(6)]
    layout_free = np.zeros(len(names), dtype=bool)
    from bayesynth.samplers.steps import copula_structure

    s = copula_structure(model)
    layout_free[s.free] = True
    m = round(FA_START_SHARE * N)
    for start in starts:
        sd = np.ones(len(names))
        sd[layout_free] = 1.0 / np.sqrt(start["prec"])
        corr = _implied_correlation(start, sd)[np.ix_(cont, cont)]
        # a correlation r estimated from a resample of m of the N records is off the truth
        # by about (1 - r^2) sqrt(1 / m + 1 / N) (resample and data), at most 0.036 here
        off = ~np.eye(6, dtype=bool)
        assert np.max(np.abs(corr - truth)[off]) < 4 * np.sqrt(1 / m + 1 / N)
        # the level columns: Phi(alpha / latent sd) at the level's share, within binomial error
        lam = start["Lambda"][s.level_cols]
        latent_sd = np.sqrt(sd[s.level_cols] ** 2 + np.sum(lam ** 2, axis=1))
        shares = df["group"].value_counts(normalize=True)
        levels = [names[j] for j in s.level_cols]
        for j, name in enumerate(levels):
            f = shares[name.split("[", 1)[1].rstrip("]")]
            assert abs(ndtr(start["alpha"][j] / latent_sd[j]) - f) < 4 * np.sqrt(f * (1 - f)
                                                                                 / m)
        # the scores: one draw from their conditional given the fit, so marginally N(0, I)
        eig = np.linalg.eigvalsh(np.cov(start["eta"].T))
        assert np.all(np.abs(eig - 1.0) < 0.12), eig
        assert np.max(np.abs(start["eta"].mean(axis=0))) < 0.1
        # E[z eta'] = Lambda for the continuous columns (unit variance, so within about
        # 4 / sqrt(N) of sampling error plus the resample's error in Lambda)
        z0 = model.initial_point()["z"]
        cross = z0[:, cont].T @ start["eta"] / N
        assert np.max(np.abs(cross - start["Lambda"][cont])) < 4 * np.sqrt(1 / m + 1 / N)


def test_the_scores_are_centred_where_the_latent_data_are_not():
    """The scores' conditional is ``E[eta | z] = B (z - mean)``: with three rare levels (shares
    near 0.1) the utility columns' starting values (+-0.5) have means near -0.4, and the
    scores must still average 0 over the records. Their mean is ``B (mean(z0) - centre)``
    (the resample mean's error, covariance ``B Sigma B' / m <= I / m``) plus the noise's
    (covariance at most ``I / N``), so each component lies within 4 sqrt(1/m + 1/N)."""
    r = 1.5 / np.sqrt(2)
    df, _ = _factor_table(7, intercepts=(-2.0, -2.0, -2.0),
                          utility_loadings=((1.5, 0.0), (0.0, 1.5), (r, r)))
    model = _model(df)
    m = round(FA_START_SHARE * N)
    utilities = [j for j, name in enumerate(model.coords["latent"])
                 if name.startswith("group[")]
    assert len(utilities) == 3
    utility_means = model.initial_point()["z"].mean(axis=0)[utilities]
    assert np.all(utility_means < -0.3), utility_means  # the case the test is for
    for start in _factor_analysis_copula_starts(model, 2, 0):
        assert np.max(np.abs(start["eta"].mean(axis=0))) < 4 * np.sqrt(1 / m + 1 / N)


def test_the_covariance_fit_is_the_fit_on_the_records():
    """The factor analysis made through the covariance matrix gives what scikit-learn's own fit
    on the records gives (the likelihood reads them only through mean and covariance)."""
    from sklearn.decomposition import FactorAnalysis

    from bayesynth.samplers.sampling import _fit_factor_analysis

    x = np.asarray(_factor_table(4)[0].iloc[:700, :6]) * [1, 2, 3, 1, 1, 0.5] + 3.0
    for k in (1, 2, 3):
        loadings, noise, mean = _fit_factor_analysis(x, k)
        fa = FactorAnalysis(n_components=k, svd_method="lapack").fit(x)
        np.testing.assert_allclose(loadings @ loadings.T, fa.components_.T @ fa.components_,
                                   atol=1e-9)
        np.testing.assert_allclose(noise, fa.noise_variance_, rtol=1e-9)
        np.testing.assert_allclose(mean, x.mean(axis=0))


def test_factor_analysis_starts_differ_by_chain_and_repeat_by_seed():
    df, _ = _factor_table(1)
    model = _model(df)
    a = _factor_analysis_copula_starts(model, 2, 5)
    again = _factor_analysis_copula_starts(model, 2, 5)
    other = _factor_analysis_copula_starts(model, 2, 6)
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    _factor_analysis_copula_starts(model, 1, gen)
    assert gen.bit_generator.state == state  # a Generator seed is read, not consumed
    for name in ("Lambda", "eta", "alpha", "prec"):
        assert not np.allclose(a[0][name], a[1][name]), name
        for c in range(2):
            np.testing.assert_array_equal(a[c][name], again[c][name])
        assert not np.allclose(a[0][name], other[0][name]), name


def test_the_papers_level_columns_start_from_prior_draws():
    """Their starting values are collinear (one positive level per record): no factor
    analysis, the prior draws instead."""
    from bayesynth.samplers.sampling import _dispersed_copula_starts

    df, _ = _factor_table(3)
    model = _model(df, "rpl")
    fa = _factor_analysis_copula_starts(model, 2, 9)
    prior = _dispersed_copula_starts(model, 2, 9)
    for c in range(2):
        assert fa[c].keys() == prior[c].keys()
        for name in fa[c]:
            np.testing.assert_array_equal(fa[c][name], prior[c][name])


def test_sample_refuses_an_unknown_start():
    df, _ = _factor_table(2)
    with pytest.raises(ValueError, match="start_from='map'"):
        bs.sample(_model(df), draws=1, tune=0, chains=1, start_from="map")
