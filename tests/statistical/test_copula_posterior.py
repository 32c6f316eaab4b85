"""Whole-sampler checks: known answers for the composed Gibbs sweep.

* With no information in the data (every value missing) the sampler must reproduce the prior:
  this checks that the blocks, including the parameter-expansion scale move, compose into a
  sampler of the right joint distribution (a Geweke-style test with a closed-form answer).
* With Gaussian-copula data of known correlation (exponential, Poisson and binary margins) the
  posterior must recover the correlation.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesynth as bs
from bayesynth.models.layout import LatentLayout, OrderedColumn
from bayesynth.samplers import kernels as K


def _ess(x: np.ndarray) -> float:
    return float(az.ess(x[None, :]))


def _close_to(x: np.ndarray, truth: float, sd: float, z: float = 4.5) -> None:
    se = sd / np.sqrt(_ess(x))
    assert abs(x.mean() - truth) < z * se, (x.mean(), truth, se)


def test_gibbs_sweep_samples_the_prior_without_data(rng):
    n, p, k = 4, 3, 2
    nu, a1, a2, a_s, b_s = 3.0, 2.0, 3.0, 1.0, 0.3
    cols = [OrderedColumn(f"x{j}", j, "value", np.full(n, -1), 0) for j in range(p)]
    lay = LatentLayout._with_kernel_arrays(n, [c.name for c in cols], [], cols)
    shape = np.r_[a1, np.full(k - 1, a2)]
    z = np.zeros((n, p), order="F")
    eta = rng.normal(size=(n, k))
    Lam = rng.normal(size=(p, k))
    phi, delta, prec = np.ones((p, k)), np.ones(k), np.ones(p)
    zero = np.zeros(p)
    T = 30_000
    rec = {"prec": np.empty(T), "delta0": np.empty(T), "delta1": np.empty(T),
           "phi": np.empty(T), "lam": np.empty(T)}
    for t in range(T):
        mu = K.factor_mean(zero, Lam, eta)
        K.draw_z(rng, z, mu, prec**-0.5, lay, out=z)
        eta = K.draw_eta(rng, z, zero, Lam, prec)
        prior_prec = phi * np.cumprod(delta)[None, :]
        Lam = K.draw_Lambda(rng, z, zero, eta, prec, prior_prec)
        phi, delta = K.draw_mgp(rng, Lam, delta, nu, shape)
        prec = K.draw_prec(rng, z, zero, Lam, eta, a_s, b_s)
        c = K.draw_column_scale(rng, Lam, phi * np.cumprod(delta)[None, :], prec, a_s, b_s)
        z *= c
        Lam = Lam * c[:, None]
        prec = prec / c**2
        rec["prec"][t], rec["delta0"][t], rec["delta1"][t] = prec[0], delta[0], delta[1]
        rec["phi"][t], rec["lam"][t] = phi[1, 0], Lam[2, 0]
    burn = 1000
    prec_d = rec["prec"][burn:]
    _close_to(prec_d, a_s / b_s, np.sqrt(a_s) / b_s)
    _close_to(rec["delta0"][burn:], a1, np.sqrt(a1))
    _close_to(rec["delta1"][burn:], a2, np.sqrt(a2))
    _close_to(rec["phi"][burn:], 1.0, np.sqrt(2 / nu))
    # lambda_31 | phi, delta ~ N(0, 1/(phi delta_1)): its prior mean is 0
    lam = rec["lam"][burn:]
    _close_to(lam, 0.0, lam.std())
    # whole distribution of prec, on draws thinned to be nearly independent
    thin = max(1, int(len(prec_d) / _ess(prec_d)) * 2)
    res = stats.kstest(prec_d[::thin], stats.gamma(a_s, scale=1 / b_s).cdf)
    assert res.pvalue > 1e-3, (thin, res)


@pytest.mark.slow
def test_recovers_known_copula_correlation(seed):
    r = np.random.default_rng(seed)
    L = np.array([[0.8, 0.0], [0.7, 0.35], [0.2, 0.7], [-0.5, 0.45]])
    R = L @ L.T
    np.fill_diagonal(R, 1.0)
    n = 2000
    u = stats.norm.cdf(r.multivariate_normal(np.zeros(4), R, size=n))
    df = pd.DataFrame({
        "e1": stats.expon.ppf(u[:, 0]),
        "e2": 3 * stats.expon.ppf(u[:, 1]),
        "pois": stats.poisson.ppf(u[:, 2], 3).astype(int),
        "bin": (u[:, 3] > 0.6).astype(int),
    })
    schema = bs.infer_schema(df)
    assert [schema[c].type for c in df] == ["continuous", "continuous", "count", "binary"]
    model = bs.models.rank_probit_copula(df, schema, n_factors=2)
    idata = bs.sample(model, draws=1500, tune=500, chains=2, random_seed=seed,
                      progressbar=False)
    C = idata.posterior["C"]
    mean = C.mean(("chain", "draw")).values
    sd = C.std(("chain", "draw")).values
    rhat = az.rhat(idata.posterior[["C"]])["C"].values
    ess = az.ess(idata.posterior[["C"]])["C"].values
    iu = np.triu_indices(4, 1)
    # Posterior sd is the sampling error of the estimate; add the Monte Carlo error.
    tol = 4.0 * sd[iu] + 4.0 * sd[iu] / np.sqrt(ess[iu])
    assert np.all(np.abs(mean[iu] - R[iu]) < tol), (mean[iu], R[iu], tol)
    assert np.all(rhat[iu] < 1.05), rhat[iu]
    assert np.all(ess[iu] > 50), ess[iu]


@pytest.mark.slow
def test_collapsed_factor_step_targets_the_same_posterior(seed):
    """The Metropolis-Hastings factor-score step (level columns integrated out) and the plain
    Gibbs block must give the same posterior, within Monte Carlo error."""
    r = np.random.default_rng(seed)
    n = 150
    g = r.choice(3, size=n, p=[0.5, 0.3, 0.2])
    x = r.normal(loc=np.array([0.0, 0.8, -0.6])[g], scale=1.0)
    df = pd.DataFrame({"g": np.array(["a", "b", "c"])[g], "x": x})
    model = bs.models.rank_probit_copula(df, n_factors=3)
    runs = {}
    for collapse in (False, True):
        idata = bs.sample(model, draws=2500, tune=500, chains=2, random_seed=seed,
                          progressbar=False, collapse_levels=collapse)
        C = idata.posterior["C"].sel(latent2="x").isel(latent=[0, 1, 2])
        runs[collapse] = (C.mean(("chain", "draw")).values, C.std(("chain", "draw")).values,
                          az.ess(C.to_dataset(name="c"))["c"].values)
    (m0, s0, e0), (m1, s1, e1) = runs[False], runs[True]
    se = np.sqrt(s0**2 / e0 + s1**2 / e1)
    assert np.all(np.abs(m0 - m1) < 4.5 * se), (m0, m1, se)
    # the categories really are associated with x in this simulation
    assert m0[1] > 0.1 and m0[2] < -0.1
