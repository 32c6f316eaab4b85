"""Each Gibbs kernel against its closed-form full conditional on a tiny problem."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesynth as bs
from bayesynth.models.layout import LatentLayout
from bayesynth.samplers import kernels as K

P_MIN = 1e-3


def _mean_cov_close(draws: np.ndarray, mean: np.ndarray, cov: np.ndarray, z: float = 4.5):
    """Sample mean and covariance within z Monte Carlo standard errors of the truth."""
    n = len(draws)
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(draws.mean(0) - mean) < z * se_mean), (draws.mean(0), mean)
    d = np.sqrt(np.diag(cov))
    se_cov = np.sqrt((np.outer(d**2, d**2) + cov**2) / n)
    assert np.all(np.abs(np.cov(draws.T) - cov) < z * se_cov), (np.cov(draws.T), cov)


@pytest.fixture
def small(rng):
    p, k = 4, 2
    return {
        "Lambda": rng.normal(size=(p, k)),
        "prec": rng.gamma(3.0, 1.0, size=p),
        "alpha_full": np.array([0.3, -0.5, 0.0, 0.0]),
        "p": p,
        "k": k,
    }


def test_draw_eta(small, rng):
    L, prec, alpha = small["Lambda"], small["prec"], small["alpha_full"]
    z_i = rng.normal(size=small["p"])
    n = 40_000
    z = np.tile(z_i, (n, 1))
    draws = K.draw_eta(rng, z, alpha, L, prec)
    V = np.linalg.inv(np.eye(small["k"]) + L.T @ np.diag(prec) @ L)
    m = V @ L.T @ np.diag(prec) @ (z_i - alpha)
    _mean_cov_close(draws, m, V)


def test_draw_Lambda(small, rng):
    p, k = small["p"], small["k"]
    n = 25
    eta = rng.normal(size=(n, k))
    z = rng.normal(size=(n, p))
    prec, alpha = small["prec"], small["alpha_full"]
    prior_prec = rng.gamma(2.0, 1.0, size=(p, k))
    draws = np.array([K.draw_Lambda(rng, z, alpha, eta, prec, prior_prec) for _ in range(6000)])
    for j in range(p):
        Q = np.diag(prior_prec[j]) + prec[j] * eta.T @ eta
        V = np.linalg.inv(Q)
        m = V @ (prec[j] * eta.T @ (z[:, j] - alpha[j]))
        _mean_cov_close(draws[:, j, :], m, V)


def test_draw_prec_matches_gamma(small, rng):
    p, k = small["p"], small["k"]
    n = 30
    eta = rng.normal(size=(n, k))
    L, alpha = small["Lambda"], small["alpha_full"]
    z = alpha + eta @ L.T + 0.7 * rng.normal(size=(n, p))
    a, b = 1.0, 0.3
    draws = np.array([K.draw_prec(rng, z, alpha, L, eta, a, b) for _ in range(4000)])
    sse = ((z - alpha - eta @ L.T) ** 2).sum(0)  # direct residuals, not sufficient statistics
    for j in range(p):
        ref = stats.gamma(a + n / 2, scale=1 / (b + sse[j] / 2))
        assert stats.kstest(draws[:, j], ref.cdf).pvalue > P_MIN


def test_draw_prec_fortran_order_and_large_values(rng):
    """Sufficient statistics stay accurate when z is far from 0 relative to its residuals."""
    n, p, k = 500, 3, 2
    eta = rng.normal(size=(n, k))
    L = rng.normal(size=(p, k)) * 30
    alpha = np.array([50.0, 0.0, 0.0])
    z = np.asfortranarray(alpha + eta @ L.T + 0.1 * rng.normal(size=(n, p)))
    sse = ((z - alpha - eta @ L.T) ** 2).sum(0)
    draws = np.array([K.draw_prec(rng, z, alpha, L, eta, 1.0, 0.3) for _ in range(500)])
    expect = (1.0 + n / 2) / (0.3 + sse / 2)
    np.testing.assert_allclose(draws.mean(0), expect, rtol=0.03)


def test_draw_alpha(small, rng):
    p, k = small["p"], small["k"]
    n = 15
    eta = rng.normal(size=(n, k))
    z = rng.normal(size=(n, p)) + 1.0
    L, prec = small["Lambda"], small["prec"]
    cols = np.array([0, 1])
    m0, s0 = 0.2, 1.5
    draws = np.array([K.draw_alpha(rng, z, L, eta, prec, cols, m0, s0) for _ in range(5000)])
    for c, j in enumerate(cols):
        v = 1 / (n * prec[j] + 1 / s0**2)
        m = v * (prec[j] * (z[:, j] - eta @ L[j]).sum() + m0 / s0**2)
        assert stats.kstest(draws[:, c], stats.norm(m, np.sqrt(v)).cdf).pvalue > P_MIN


def test_draw_mgp(rng):
    p, k, nu = 5, 2, 3.0
    L = rng.normal(size=(p, k))
    delta = np.array([1.3, 0.8])
    shape = np.array([2.0, 3.0])
    reps = 5000
    phis, deltas = zip(*[K.draw_mgp(rng, L, delta, nu, shape) for _ in range(reps)])
    phis, deltas = np.array(phis), np.array(deltas)
    tau = np.cumprod(delta)
    # phi_jh | - ~ Gamma((nu+1)/2, rate (nu + tau_h lambda^2)/2), with the input delta
    for j, h in [(0, 0), (3, 1)]:
        ref = stats.gamma((nu + 1) / 2, scale=2 / (nu + tau[h] * L[j, h] ** 2))
        assert stats.kstest(phis[:, j, h], ref.cdf).pvalue > P_MIN
    # delta_1 | phi, delta_2 ~ Gamma(a1 + p k / 2, 1 + 1/2 sum_l tau_l/delta_1 sum_j phi lambda^2)
    col = (phis * L**2).sum(axis=1)  # (reps, k)
    rate1 = 1 + 0.5 * (col[:, 0] * 1.0 + col[:, 1] * delta[1])
    u1 = deltas[:, 0] * rate1
    assert stats.kstest(u1, stats.gamma(shape[0] + p * k / 2).cdf).pvalue > P_MIN
    # delta_2 | delta_1 (just drawn) ~ Gamma(a2 + p/2, 1 + 1/2 delta_1 sum_j phi_j2 lambda_j2^2)
    rate2 = 1 + 0.5 * deltas[:, 0] * col[:, 1]
    u2 = deltas[:, 1] * rate2
    assert stats.kstest(u2, stats.gamma(shape[1] + p * (k - 1) / 2).cdf).pvalue > P_MIN


def test_column_scale_move_leaves_gig_invariant(rng):
    """Iterating the scale move, t = scale^2 settles on GIG(q, A0, B0)."""
    p, k = 20_000, 3
    a_sigma, b_sigma = 1.0, 0.3
    L0 = np.tile([[0.5, -0.2, 0.1]], (p, 1))
    prior_prec = np.tile([[1.0, 2.0, 4.0]], (p, 1))
    prec0 = np.full(p, 2.0)
    alpha0 = np.zeros(p)
    level = np.arange(p // 2)  # half the columns carry an intercept
    alpha0[level] = 0.7
    scale = np.ones(p)
    for _ in range(60):
        c = K.draw_column_scale(rng, L0 * scale[:, None], prior_prec, prec0 / scale**2,
                                a_sigma, b_sigma, alpha0 * scale, level, 1.0)
        scale *= c
    A0 = (prior_prec * L0**2).sum(1) + np.where(np.isin(np.arange(p), level), alpha0**2, 0)
    B0 = 2 * b_sigma * prec0
    for idx, has_alpha in ((level, 1), (np.arange(p // 2, p), 0)):
        q = (k + has_alpha - 2 * a_sigma) / 2
        a_, b_ = A0[idx][0], B0[idx][0]
        ref = stats.geninvgauss(q, np.sqrt(a_ * b_), scale=np.sqrt(b_ / a_))
        assert stats.kstest(scale[idx] ** 2, ref.cdf).pvalue > P_MIN


# ----------------------------------------------------------------------------------- z step


def _layout(df: pd.DataFrame, **kw) -> LatentLayout:
    return LatentLayout.from_data(df, bs.infer_schema(df, **kw))


def _chain(layout, mu, sd, iters, rng):
    z = layout.initial_z()
    out = np.empty((iters,) + z.shape)
    for t in range(iters):
        K.draw_z(rng, z, mu, sd, layout, out=z)
        out[t] = z
    return out


def _reference_by_rejection(mu, sd, accept, rng, n=400_000):
    x = mu + sd * rng.standard_normal((n, len(mu)))
    keep = x[accept(x)]
    return keep.mean(0), keep.std(0)


def _assert_means(chain, ref_mean, ref_sd, z=4.5):
    import arviz as az

    for i in range(chain.shape[1]):
        ess = float(az.ess(chain[None, :, i]))
        se = ref_sd[i] / np.sqrt(ess)
        assert abs(chain[:, i].mean() - ref_mean[i]) < z * se + 2e-3, (i, chain[:, i].mean(),
                                                                        ref_mean[i])


def test_z_order_statistics(rng):
    """Three distinct values, mu = 0, sd = 1: z are the order statistics of three normals."""
    lay = _layout(pd.DataFrame({"x": [0.1, 2.5, 1.0]}), continuous=["x"])
    chain = _chain(lay, np.zeros((3, 1)), np.ones(1), 30_000, rng)[:, :, 0]
    expect = np.array([-0.846284, 0.846284, 0.0])  # means of order statistics, by rank
    _assert_means(chain, expect, np.array([0.748, 0.748, 0.670]))


def test_z_ties_missing_and_means(rng):
    """Tie groups, a missing value and record-specific means, against rejection sampling."""
    x = np.array([1.0, 1.0, 2.0, np.nan, 2.0, 3.0])
    df = pd.DataFrame({"x": x})
    lay = _layout(df, continuous=["x"])
    j = lay.ordered[0].latent
    mu = np.zeros((6, lay.p_latent))
    mu[:, j] = [0.4, -0.3, 0.0, 1.0, 0.8, -0.5]
    sd = np.full(lay.p_latent, 0.8)
    chain = _chain(lay, mu, sd, 30_000, rng)[:, :, j]

    def accept(z):
        g0 = np.maximum(z[:, 0], z[:, 1])
        g1lo = np.minimum(z[:, 2], z[:, 4])
        g1hi = np.maximum(z[:, 2], z[:, 4])
        return (g0 < g1lo) & (g1hi < z[:, 5])

    m, s = _reference_by_rejection(mu[:, j], 0.8, accept, rng)
    _assert_means(chain, m, s)
    # the missingness indicator column exists and is constrained like a binary column
    assert lay.latent_names[-1] == "x[missing]"


def test_z_level_columns_exact_in_one_sweep(rng):
    """Level columns are independent truncated normals given their means: one sweep is exact."""
    n = 20_000
    codes = rng.integers(0, 3, n)
    df = pd.DataFrame({"g": np.array(["a", "b", "c"])[codes]})
    lay = _layout(df)
    mu = np.tile([0.5, -1.0, 2.0], (n, 1))
    sd = np.array([1.0, 0.5, 2.0])
    z = K.draw_z(rng, lay.initial_z(), mu, sd, lay)
    assert lay.bounds_satisfied(z)
    for h in range(3):
        pos = z[codes == h, h]
        neg = z[codes != h, h]
        ref_pos = stats.truncnorm((0 - mu[0, h]) / sd[h], np.inf, loc=mu[0, h], scale=sd[h])
        ref_neg = stats.truncnorm(-np.inf, (0 - mu[0, h]) / sd[h], loc=mu[0, h], scale=sd[h])
        assert stats.kstest(pos, ref_pos.cdf).pvalue > P_MIN
        assert stats.kstest(neg, ref_neg.cdf).pvalue > P_MIN


def test_z_constraints_hold_exactly(child_small, rng):
    lay = _layout(child_small)
    z = lay.initial_z()
    assert lay.bounds_satisfied(z)
    n, p = z.shape
    mu = rng.normal(size=(n, p)) * 3  # far from the data: many far-tail draws
    sd = rng.gamma(2.0, 0.2, size=p)
    for _ in range(5):
        K.draw_z(rng, z, mu, sd, lay, out=z)
        assert lay.bounds_satisfied(z)
    # the pure function leaves its input alone
    z2 = K.draw_z(rng, z, mu, sd, lay)
    assert z2 is not z and lay.bounds_satisfied(z2)
