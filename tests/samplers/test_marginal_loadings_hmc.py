"""The collapsed HMC move of the loadings and residual precisions, against closed forms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal

from bayesynth.samplers.kernels import draw_loadings_hmc, marginal_loadings_logp
from tests.mc import assert_mc_close


def _problem(seed=0, p=5, k=2, n=40):
    rng = np.random.default_rng(seed)
    lam = rng.normal(size=(p, k))
    free = np.array([0, 2, 3])
    theta = rng.normal(size=3)
    d = np.full(p, 0.7)
    z = rng.normal(size=(n, p)) @ np.diag([1.0, 2.0, 0.5, 1.0, 1.5])
    prior_prec = rng.gamma(2.0, size=(p, k))
    return lam, theta, z, d, free, prior_prec


def test_log_density_matches_the_multivariate_normal():
    lam, theta, z, d, free, pp = _problem()
    n, p = z.shape
    a, b = 1.3, 0.4
    lp, _, _ = marginal_loadings_logp(lam, theta, z.T @ z, n, d, free, pp, a, b)
    D = d.copy()
    D[free] = np.exp(-theta)
    ref = (multivariate_normal(np.zeros(p), lam @ lam.T + np.diag(D)).logpdf(z).sum()
           + 0.5 * n * p * np.log(2 * np.pi) - 0.5 * np.sum(pp * lam**2)
           + np.sum(a * theta - b * np.exp(theta)))
    assert lp == pytest.approx(ref, rel=1e-10, abs=1e-8)


def test_gradient_matches_finite_differences():
    lam, theta, z, d, free, pp = _problem(1)
    S, n, a, b = z.T @ z, z.shape[0], 1.0, 0.3
    lp, g_lam, g_th = marginal_loadings_logp(lam, theta, S, n, d, free, pp, a, b)
    h = 1e-6
    num = np.zeros_like(lam)
    for idx in np.ndindex(*lam.shape):
        up, dn = lam.copy(), lam.copy()
        up[idx] += h
        dn[idx] -= h
        num[idx] = (marginal_loadings_logp(up, theta, S, n, d, free, pp, a, b)[0]
                    - marginal_loadings_logp(dn, theta, S, n, d, free, pp, a, b)[0]) / (2 * h)
    np.testing.assert_allclose(g_lam, num, rtol=1e-5, atol=1e-5)
    num_t = np.array([
        (marginal_loadings_logp(lam, theta + h * e, S, n, d, free, pp, a, b)[0]
         - marginal_loadings_logp(lam, theta - h * e, S, n, d, free, pp, a, b)[0]) / (2 * h)
        for e in np.eye(len(theta))])
    np.testing.assert_allclose(g_th, num_t, rtol=1e-5, atol=1e-5)


def test_log_density_is_minus_infinity_where_sigma_overflows_or_is_not_positive_definite():
    """A trajectory that runs out to loadings so large that Lambda Lambda' overflows, or to a
    Sigma that is not positive definite, must be rejected: -inf and zero gradients, never the
    infinite "Cholesky factor" LAPACK returns for an infinite matrix without complaint."""
    lam, theta, z, d, free, pp = _problem(2)
    S, n = z.T @ z, z.shape[0]
    with np.errstate(over="ignore"):
        lp, g_lam, g_th = marginal_loadings_logp(np.full_like(lam, 1e200), theta, S, n, d,
                                                 free, pp, 1.0, 1.0)
    assert lp == -np.inf and not g_lam.any() and not g_th.any()
    lp, g_lam, g_th = marginal_loadings_logp(lam, theta[:0], S, n, -np.ones_like(d), free[:0],
                                             pp, 1.0, 1.0)  # negative residual variances
    assert lp == -np.inf and not g_lam.any()


def _grid_posterior(S, n, pp, a, b, d2):
    """Posterior moments of (lambda1 lambda2, lambda1^2, theta) by quadrature (p = 2, k = 1)."""
    l1 = np.linspace(-4, 4, 161)
    l2 = np.linspace(-4, 4, 161)
    th = np.linspace(-4, 5, 181)
    L1, L2, T = np.meshgrid(l1, l2, th, indexing="ij")
    s11 = L1**2 + np.exp(-T)
    s22 = L2**2 + d2
    s12 = L1 * L2
    det = s11 * s22 - s12**2
    quad = (s22 * S[0, 0] - 2 * s12 * S[0, 1] + s11 * S[1, 1]) / det
    logp = (-0.5 * n * np.log(det) - 0.5 * quad - 0.5 * (pp[0, 0] * L1**2 + pp[1, 0] * L2**2)
            + a * T - b * np.exp(T))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    return {"l1l2": float(np.sum(w * L1 * L2)), "l1sq": float(np.sum(w * L1**2)),
            "theta": float(np.sum(w * T))}


def test_hmc_chain_matches_quadrature():
    # p = 2 columns, k = 1 factor, the first column's residual precision free: a
    # three-dimensional posterior whose moments quadrature gives to high accuracy.
    rng = np.random.default_rng(7)
    n = 30
    true_l = np.array([[0.9], [0.7]])
    z = rng.normal(size=(n, 1)) @ true_l.T + rng.normal(size=(n, 2)) * np.array([0.5, 1.0])
    S = z.T @ z
    pp = np.array([[1.0], [1.0]])
    a, b, d = 2.0, 1.0, np.array([1.0, 1.0])
    free = np.array([0])
    ref = _grid_posterior(S, n, pp, a, b, d[1])
    lam, theta = np.array([[0.5], [0.5]]), np.array([0.0])
    inv_mass = np.array([0.05, 0.05, 0.3])
    out = []
    for i in range(6000):
        lam, theta, _ = draw_loadings_hmc(rng, S, n, lam, theta, d, free, pp, a, b,
                                          step_size=0.25, n_steps=8, inv_mass=inv_mass)
        if i >= 500:
            out.append([lam[0, 0] * lam[1, 0], lam[0, 0] ** 2, theta[0]])
    out = np.asarray(out)
    assert_mc_close(out[:, 0], ref["l1l2"])
    assert_mc_close(out[:, 1], ref["l1sq"])
    assert_mc_close(out[:, 2], ref["theta"])


def test_rotation_move_samples_the_orbit_of_the_loadings_prior():
    """Along the rotations of two factors the likelihood is constant, so the rotation move must
    sample the angle from the loadings' prior (phi integrated out: Student-t) on the orbit,
    with the uniform (Haar) measure on the angle: computed by quadrature."""
    from bayesynth.samplers.kernels import draw_rotation

    rng = np.random.default_rng(3)
    lam0 = rng.normal(size=(4, 2)) * np.array([1.0, 0.4])
    eta0 = rng.normal(size=(10, 2))
    tau, nu = np.array([2.0, 5.0]), 3.0
    lam, eta = lam0.copy(), eta0.copy()
    cos, sin = [], []
    pinv = np.linalg.pinv(lam0)
    for _ in range(8000):
        lam, eta, phi, _ = draw_rotation(rng, lam, eta, tau, nu)
        R = pinv @ lam
        cos.append(R[0, 0])
        sin.append(R[0, 1])
        assert phi.shape == lam.shape and np.all(phi > 0)
    np.testing.assert_allclose(lam @ eta.T, lam0 @ eta0.T, atol=1e-9)  # likelihood unchanged
    th = np.linspace(-np.pi, np.pi, 20001)[:-1]
    c, s = np.cos(th), np.sin(th)
    a = lam0[:, :1] * c - lam0[:, 1:] * s
    b = lam0[:, :1] * s + lam0[:, 1:] * c
    logp = -(nu + 1) / 2 * (np.log1p(tau[0] * a**2 / nu).sum(0)
                            + np.log1p(tau[1] * b**2 / nu).sum(0))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    assert_mc_close(np.array(cos), float(np.sum(w * c)))
    assert_mc_close(np.array(sin), float(np.sum(w * s)))
    assert_mc_close(np.array(cos) ** 2, float(np.sum(w * c**2)))


def test_rotation_sweep_matches_a_plain_implementation_for_several_factors():
    """The compiled sweep (with its running per-factor prior sums) equals a direct evaluation
    of the t-prior ratio for every proposal, for k = 4 factors and 2 rounds."""
    import math

    from bayesynth.samplers.kernels import _rotation_sweep

    rng = np.random.default_rng(11)
    p, k, rounds, nu = 7, 4, 2, 3.0
    lam = rng.normal(size=(p, k)) * np.array([1.5, 1.0, 0.5, 0.2])
    tau = np.array([0.5, 1.0, 3.0, 9.0])
    n_pairs = rounds * k * (k - 1) // 2
    walk = 0.3 * rng.standard_normal(n_pairs)
    unif = math.pi * (rng.random(n_pairs) - 0.5)
    log_u = np.log(rng.random((n_pairs, 2)))

    def logp(a, t):
        return -(nu + 1) / 2 * np.log1p(t * a * a / nu).sum()

    ref, t, acc, acc_k = lam.copy(), 0, 0, [0, 0]
    for _ in range(rounds):
        for h in range(k):
            for g in range(h + 1, k):
                for kind in range(2):
                    th = walk[t] if kind == 0 else unif[t]
                    a, b = ref[:, h].copy(), ref[:, g].copy()
                    a2 = np.cos(th) * a - np.sin(th) * b
                    b2 = np.sin(th) * a + np.cos(th) * b
                    r = logp(a2, tau[h]) + logp(b2, tau[g]) - logp(a, tau[h]) - logp(b, tau[g])
                    if log_u[t, kind] < r:
                        ref[:, h], ref[:, g] = a2, b2
                        acc += 1
                        acc_k[kind] += 1
                t += 1
    out, R = lam.copy(), np.eye(k)
    kinds = np.zeros(2, dtype=np.int64)
    n_acc = _rotation_sweep(out, R, tau, nu, rounds, walk, unif, log_u, kinds)
    assert n_acc == acc and 0 < acc < 2 * n_pairs and kinds.tolist() == acc_k
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(lam @ R, out, atol=1e-12)  # R is the accumulated rotation


def _stats_after_tuning(df, *, draws, seed, **model_kwargs):
    """One chain of the default sampler after 300 tuning iterations: its sampler stats."""
    import warnings

    import bayesynth as bs

    model = bs.models.rank_probit_copula(df, **model_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=draws, tune=300, chains=1, random_seed=seed,
                          progressbar=False, check_convergence=False)
    return idata.sample_stats


def _factor_data(n, p, k):
    """n records of p columns driven by k factors (seed 4)."""
    rng = np.random.default_rng(4)
    loadings = rng.normal(size=(p, k))
    x = rng.normal(size=(n, k)) @ loadings.T + rng.normal(size=(n, p))
    return pd.DataFrame(x, columns=list("abcdefgh"[:p]))


def _hmc_after_tuning(df, a2, seed):
    ss = _stats_after_tuning(df, draws=100, seed=seed, n_factors=4, a2=a2)
    return float(ss["step_size_hmc"].values[0, -1]), float(ss["accept_hmc"].values.mean())


def test_hmc_step_size_is_not_forced_down_by_factors_the_prior_shrinks_hard():
    """The mass matrix carries each loading's prior precision: with a2 = 40 the last factors'
    prior precisions (tau_4 ~ 2 40^3) dwarf n = 150, and a mass built from sigma^2 / n alone
    forced the adapted step size down by about sqrt(n / tau) (a chain of SD2011 stopped at
    0.004). The step size adapted with hard shrinkage stays close to the one with the default
    a2 = 3, and dual averaging reaches the target acceptance with both."""
    rng = np.random.default_rng(3)
    n = 150
    f = rng.normal(size=n)
    df = pd.DataFrame({"a": f + rng.normal(size=n), "b": f + rng.normal(size=n),
                       "c": rng.normal(size=n) - f, "d": rng.normal(size=n)})
    eps_soft, acc_soft = _hmc_after_tuning(df, 3.0, seed=1)
    eps_hard, acc_hard = _hmc_after_tuning(df, 40.0, seed=1)
    assert eps_hard > 0.5 * eps_soft, (eps_soft, eps_hard)
    # 100 kept draws of an acceptance probability whose sd across draws is below 0.3
    for acc in (acc_soft, acc_hard):
        assert abs(acc - 0.8) < 0.15, (acc_soft, acc_hard)


def test_rotation_angle_is_tuned_to_its_target_acceptance():
    """The random-walk angle's sd is adapted during tuning (dual averaging towards 0.44
    acceptance of those proposals) and frozen after it: the kept draws accept about 44% of
    their random-walk angles (the start, 0.3 radians, accepts about 60% here; a target of
    0.7 gives 0.68)."""
    from bayesynth.samplers.steps import RotationMove

    ss = _stats_after_tuning(_factor_data(150, 5, 2), draws=200, seed=2, n_factors=4)
    step = ss["step_rotation"].values[0]
    assert np.ptp(step) == 0.0  # frozen after tuning
    assert step[0] < RotationMove.max_step  # reached by adaptation, not by the cap
    # 200 draws x 3 rounds x 6 pairs of random-walk proposals: the binomial sd of the share is
    # 0.014; the averaged step of dual averaging lands near, not on, the target
    walk = ss["accept_rotation_walk"].values[0]
    assert abs(walk.mean() - 0.44) < 0.1, (walk.mean(), step[0])


def test_rotation_angle_sd_stops_at_pi_where_every_angle_is_accepted_often():
    """Where even uniform angles are accepted more often than 0.44 (loosely identified
    factors), dual averaging would push the sd up without bound (it reached 3e5 radians); the
    target repeats every pi radians, so the sd stops there."""
    from bayesynth.samplers.steps import RotationMove

    ss = _stats_after_tuning(_factor_data(300, 8, 3), draws=50, seed=2, n_factors=3)
    step = ss["step_rotation"].values[0]
    assert np.all(step == RotationMove.max_step), step[:3]
