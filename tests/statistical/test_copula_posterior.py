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
    # the collapsed step integrates the paper's (rpl) level columns out
    model = bs.models.rank_probit_copula(df, n_factors=3, categorical_likelihood="rpl",
                                         continuous="rank")
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


@pytest.mark.slow
def test_collapsed_loadings_target_the_same_posterior_with_unconstrained_records(seed):
    """Loadings, precisions and factor scores drawn with the unconstrained latent values
    integrated out, and the warp acting on the constrained values only (a column shown for a
    fifth of the records, another with a special code, a categorical
    variable fixed by a rule), and the plain blocks must give the same posterior, within
    Monte Carlo error."""
    import dataclasses

    from bayesynth.rules import Rule
    from bayesynth.samplers.steps import (
        FactorScoresGibbs,
        LoadingsGibbs,
        PrecisionGibbs,
        WarpMove,
    )

    collapsing = (LoadingsGibbs, PrecisionGibbs, FactorScoresGibbs, WarpMove)

    r = np.random.default_rng(seed)
    n = 300
    u = r.multivariate_normal(np.zeros(3), [[1, 0.6, -0.4], [0.6, 1, 0.3], [-0.4, 0.3, 1]], n)
    x = np.round(u[:, 0], 3)
    x[r.random(n) < 0.8] = np.nan  # shown for about a fifth of the records
    y = np.round(np.exp(u[:, 1]), 3)
    y[u[:, 2] > 0.8] = -8.0  # a special code
    g = np.where(u[:, 2] > 0, "hi", "lo")
    h = np.where(g == "hi", "none", np.where(u[:, 0] > 0, "p", "q"))
    df = pd.DataFrame({"x": x, "y": y, "g": g, "h": h})
    base = bs.infer_schema(df, suggest=False)
    schema = bs.Schema([base["x"], dataclasses.replace(base["y"], special_codes=(-8,)),
                        base["g"], base["h"]], [Rule("h", "none", (("g", ("hi",)),))])
    model = bs.models.rank_probit_copula(df, schema, n_factors=3)
    names = [str(v) for v in model.coords["latent"]]
    hcol = next(v for v in names if v.startswith("h["))
    pairs = [("x", "y"), ("x", hcol), ("y", hcol)]
    runs = {}
    try:
        for collapse in (False, True):
            for cls in collapsing:
                cls.collapse_unconstrained = collapse
            idata = bs.sample(model, draws=1500, tune=500, chains=2, random_seed=seed,
                              progressbar=False)
            C = np.stack([idata.posterior["C"].sel(latent=a, latent2=b).values
                          for a, b in pairs], axis=-1)  # (chain, draw, pair)
            ess = az.ess(az.convert_to_dataset({"c": C}))["c"].values
            runs[collapse] = (C.mean(axis=(0, 1)), C.std(axis=(0, 1)), ess)
    finally:
        for cls in collapsing:
            cls.collapse_unconstrained = True
    (m0, s0, e0), (m1, s1, e1) = runs[False], runs[True]
    se = np.sqrt(s0**2 / e0 + s1**2 / e1)
    assert np.all(np.abs(m0 - m1) < 4.5 * se), (m0, m1, se)
    assert m1[0] > 0.2 and abs(m1[1]) > 0.2  # the columns really are associated here
    assert e1[0] > e0[0], (e0, e1)  # and the collapsed blocks mix faster


@pytest.mark.slow
def test_every_move_together_samples_the_prior_without_data(rng):
    """No information anywhere (a three-level multinomial-probit variable and a binary one whose
    levels are all unknown, two ordered columns all missing): the composed sweep of every
    kernel bayesynth runs (z, factor scores, loadings with phi integrated out, shrinkage,
    precisions, collapsed intercepts and categorical rows (with and without the factor scores
    integrated out), column, utility (latent values kept, and transported) and factor scale
    moves, intercept shifts with the utilities transported, translations of rank columns and
    of the factor scores, factor rotations and the
    Hamiltonian move of loadings and precisions, with its mass from the shrinkage) must
    reproduce the prior of every parameter. A wrong
    Jacobian or Haar factor in any move shifts the scale parameters it acts on."""
    from bayesynth.models.layout import CategoricalBlock

    n, k = 4, 2
    nu, a1, a2, a_s, b_s = 3.0, 2.0, 3.0, 1.0, 0.3
    cats = [CategoricalBlock("g", np.array([0, 1]), ("a", "b", "c"), np.full(n, -1), "mnp", 0),
            CategoricalBlock("h", np.array([2]), ("x", "y"), np.full(n, -1), "mnp", 1)]
    ords = [OrderedColumn(f"x{j}", 3 + j, "value", np.full(n, -1), 0) for j in range(2)]
    names = ["g[b]", "g[c]", "h[x]", "x0", "x1"]
    lay = LatentLayout._with_kernel_arrays(n, names, cats, ords)
    p = len(names)
    free = lay.free_scale_columns
    assert list(free) == [3, 4] and list(lay.mnp_columns) == [0, 1, 2]
    shape = np.r_[a1, np.full(k - 1, a2)]
    z = np.asfortranarray(rng.normal(size=(n, p)))
    eta = rng.normal(size=(n, k))
    Lam = rng.normal(size=(p, k)) * 0.5
    phi, delta = np.ones((p, k)), np.ones(k)
    prec = np.ones(len(free))
    alpha = np.zeros(p)
    lvl = lay.level_columns
    a_mu, a_sd = np.zeros(p), np.ones(p)
    rare = np.ones(3, dtype=bool)
    T = 40_000
    rec = {key: np.empty(T) for key in ("prec", "delta0", "delta1", "phi", "lam2", "alpha",
                                        "alpha2", "alpha_h", "eta", "lam2_mnp")}
    cat = np.r_[lay.k_mnp_cols, lay.k_lvl_cols].astype(int)
    pats = K.unconstrained_patterns(n, p, lay.unconstrained_records)
    for t in range(T):
        sd = np.ones(p)
        sd[free] = prec**-0.5
        tau = np.cumprod(delta)
        mu = K.factor_mean(alpha, Lam, eta)
        K.draw_z(rng, z, mu, sd, lay, out=z)
        # every other sweep with the unconstrained latent values (here all) integrated out
        unc = lay.unconstrained_records if t % 2 else []
        Lam = K.draw_Lambda_marginal_phi(rng, z, alpha, eta, sd**-2.0, Lam, tau, nu, unc)
        K.redraw_unconstrained(rng, z, alpha, Lam, eta, sd, unc)
        phi, delta = K.draw_mgp(rng, Lam, delta, nu, shape)
        # every other sweep with the unconstrained values integrated out, then redrawn
        eta = K.draw_eta(rng, z, alpha, Lam, sd**-2.0, patterns=pats if t % 2 else None)
        if t % 2:
            K.redraw_unconstrained(rng, z, alpha, Lam, eta, sd, unc)
        local = [(int(np.flatnonzero(free == j)[0]), U) for j, U in unc if j in free]
        prec = K.draw_prec(rng, z[:, free], alpha[free], Lam[free], eta, a_s, b_s, local)
        sd[free] = prec**-0.5
        K.redraw_unconstrained(rng, z, alpha, Lam, eta, sd, [(j, U) for j, U in unc
                                                             if j in free])
        alpha = K.draw_alpha_collapsed(rng, z, alpha, Lam, eta, sd, lay, a_mu, a_sd)
        pp = phi * np.cumprod(delta)[None, :]
        alpha, Lam, _ = K.draw_categorical_rows(rng, z, alpha, Lam, eta, sd, lay, a_mu, a_sd,
                                                pp, columns=rare, integrate_eta=t % 4 == 2)
        if t % 4 == 2:  # integrated out: redraw them
            eta = K.draw_eta(rng, z, alpha, Lam, sd**-2.0)
        rc = lay.rescalable_columns
        c = K.draw_column_scale(rng, Lam[rc], pp[rc], prec, a_s, b_s, alpha[rc],
                                np.zeros(0, dtype=np.int64), 1.0)
        z[:, rc] *= c
        Lam[rc] *= c[:, None]
        prec = prec / c**2
        sd[free] = prec**-0.5
        app = np.zeros(p)
        app[lvl] = 1.0
        cu = K.draw_utility_scale(rng, z, alpha, Lam, eta, sd, pp, app,
                                  [np.array([0, 1]), np.array([2])])
        z *= cu
        alpha = alpha * cu
        Lam = Lam * cu[:, None]
        tau = np.cumprod(delta)
        # the groups the step uses: each block, then each column of a block with several
        cs, _ = K.draw_utility_scale_transport(
            rng, z, alpha, Lam, eta, lay, a_mu, a_sd, tau, nu, np.full(4, 0.7),
            groups=[(0, None), (0, np.array([0])), (0, np.array([1])), (1, None)], phi=phi)
        alpha = alpha * cs
        Lam = Lam * cs[:, None]
        pp = phi * tau[None, :]
        # the step's groups: each block, then each column of a block with several
        alpha, _ = K.draw_utility_location_transport(
            rng, z, alpha, Lam, eta, lay, a_mu, a_sd, np.full(4, 0.9),
            groups=[(0, None), (0, np.array([0])), (0, np.array([1])), (1, None)])
        b = K.draw_translation(rng, z, K.factor_mean(alpha, Lam, eta), sd, lay.rank_columns)
        z[:, lay.rank_columns] += b
        d = K.draw_score_translation(rng, z, alpha, Lam, eta, sd, lay, a_mu, a_sd)
        eta = eta + d
        alpha[cat] -= Lam[cat] @ d
        z[:, lay.rank_columns] += Lam[lay.rank_columns] @ d
        cf = K.draw_factor_scale(rng, eta, Lam, pp)
        eta *= cf
        Lam /= cf
        Lam, eta, phi, _ = K.draw_rotation(rng, Lam, eta, np.cumprod(delta), nu)
        if t % 4 == 0:  # the costlier moves in a fixed cycle (still an exact composition)
            r = z - alpha
            pp = phi * np.cumprod(delta)[None, :]
            # the mass MarginalLoadingsHMC uses: it depends on the shrinkage, which the move
            # conditions on, and on residual variances frozen apart from the state (here 1)
            inv_mass = np.r_[(1.0 / (n + pp)).ravel(), np.full(len(free), 2.0 / n)]
            Lam, theta, _ = K.draw_loadings_hmc(
                rng, r.T @ r, n, Lam, np.log(prec), sd**2, free, pp, a_s, b_s,
                step_size=0.25, n_steps=8, inv_mass=inv_mass)
            prec = np.exp(theta)
            sd[free] = prec**-0.5
            eta = K.draw_eta(rng, z, alpha, Lam, sd**-2.0)
        rec["prec"][t], rec["delta0"][t], rec["delta1"][t] = prec[0], delta[0], delta[1]
        rec["phi"][t] = phi[1, 0]
        rec["lam2"][t] = Lam[4, 1] ** 2 * phi[4, 1] * np.cumprod(delta)[1]
        rec["alpha"][t], rec["alpha2"][t], rec["alpha_h"][t] = alpha[0], alpha[0] ** 2, alpha[2]
        rec["eta"][t] = eta[0, 0]
        rec["lam2_mnp"][t] = Lam[1, 1] ** 2 * phi[1, 1] * np.cumprod(delta)[1]
    burn = 2000
    get = {key: v[burn:] for key, v in rec.items()}
    _close_to(get["prec"], a_s / b_s, np.sqrt(a_s) / b_s)
    _close_to(get["delta0"], a1, np.sqrt(a1))
    _close_to(get["delta1"], a2, np.sqrt(a2))
    _close_to(get["phi"], 1.0, np.sqrt(2 / nu))
    _close_to(get["lam2"], 1.0, np.sqrt(2.0))  # lambda^2 phi tau ~ chi^2_1
    _close_to(get["lam2_mnp"], 1.0, np.sqrt(2.0))
    _close_to(get["alpha"], 0.0, 1.0)
    _close_to(get["alpha2"], 1.0, np.sqrt(2.0))  # alpha ~ N(0, 1): E alpha^2 = 1
    _close_to(get["alpha_h"], 0.0, 1.0)
    _close_to(get["eta"], 0.0, 1.0)
    prec_d = get["prec"]
    thin = max(1, int(len(prec_d) / _ess(prec_d)) * 2)
    assert stats.kstest(prec_d[::thin], stats.gamma(a_s, scale=1 / b_s).cdf).pvalue > 1e-3
