"""Each Gibbs kernel against its closed-form full conditional on a tiny problem."""

from __future__ import annotations

import warnings

import arviz as az
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


def test_draw_eta_integrates_the_unconstrained_values_out(small, rng):
    """With patterns, each record's scores follow the normal conditional given its constrained
    columns only, whatever the values in its unconstrained ones."""
    L, prec, alpha = small["Lambda"], small["prec"], small["alpha_full"]
    p, k = small["p"], small["k"]
    n = 60_000
    z_i = rng.normal(size=p)
    z = np.tile(z_i, (n, 1))
    # three patterns: none free, column 0 free, columns 1 and 2 free (sharing their records)
    U0 = np.arange(n // 3, 2 * n // 3)
    U12 = np.arange(2 * n // 3, n)
    free = [(0, U0), (1, U12), (2, U12)]
    z[U0, 0] = 40.0 * rng.normal(size=len(U0))  # wild values: they must not matter
    z[U12, 1:3] = -25.0
    pats = K.unconstrained_patterns(n, p, free)
    assert len(pats[1]) == 3 and sum(len(r) for _, r in pats[1]) == n
    before = z.copy()
    draws = K.draw_eta(rng, z, alpha, L, prec, patterns=pats)
    np.testing.assert_array_equal(z, before)  # the input is not modified
    for rows, keep in ((np.arange(n // 3), [0, 1, 2, 3]), (U0, [1, 2, 3]), (U12, [0, 3])):
        Lo, po = L[keep], prec[keep]
        V = np.linalg.inv(np.eye(k) + Lo.T @ np.diag(po) @ Lo)
        m = V @ Lo.T @ np.diag(po) @ (z_i[keep] - alpha[keep])
        _mean_cov_close(draws[rows], m, V)
    # with no free value the patterned and the plain draws agree in law
    none = K.unconstrained_patterns(n, p, [])
    _mean_cov_close(K.draw_eta(rng, np.tile(z_i, (n, 1)), alpha, L, prec, patterns=none),
                    *_eta_moments(L, prec, alpha, z_i))


def test_eta_by_pattern_small_and_large_groups_agree_with_the_direct_solve(rng):
    """The compiled pattern loop solves small groups record by record and large ones (16 or
    more records) with two matrix products by L^-1: both give eta_i = L'^-1 (L^-1 rhs_i + e_i)
    for P_g = L L' = P - sum over the pattern's columns of prec_j lambda_j lambda_j'."""
    n, p, k = 50, 5, 3
    Lam = rng.normal(size=(p, k))
    prec = rng.gamma(3.0, 1.0, size=p)
    LtS = Lam.T * prec
    P = np.eye(k) + LtS @ Lam
    rhs, noise = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    cols = np.array([1, 3])
    Lg = np.linalg.cholesky(P - LtS[:, cols] @ Lam[cols])
    expect = np.linalg.solve(Lg.T, np.linalg.solve(Lg, rhs.T) + noise.T).T
    order = rng.permutation(n)
    for sizes in ([n], [10] * 5, [3, 30, 17]):  # one large, five small, mixed
        off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        eta = np.full((n, k), np.nan)
        K._eta_by_pattern(P, np.ascontiguousarray(LtS), Lam, rhs, noise,
                          np.tile(cols, len(sizes)).astype(np.int64),
                          (np.arange(len(sizes) + 1) * len(cols)).astype(np.int64),
                          order.astype(np.int64), off, eta)
        np.testing.assert_allclose(eta, expect, rtol=1e-10, atol=1e-12)


def _eta_moments(L, prec, alpha, z_i):
    V = np.linalg.inv(np.eye(L.shape[1]) + L.T @ np.diag(prec) @ L)
    return V @ L.T @ np.diag(prec) @ (z_i - alpha), V


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


def _unconstrained_sets(n):
    """Column 0: a few records free; columns 1 and 2: most records free, one shared array (as
    the columns of one categorical variable share theirs); column 3 fully constrained."""
    few = np.array([1, 4, 7])
    most = np.setdiff1d(np.arange(n), [0, 3, 5, 8, 12, 20])
    return [(0, few), (1, most), (2, most)]


def test_observed_cross_products_are_sums_over_the_constraining_records(small, rng):
    n, p, k = 25, small["p"], small["k"]
    eta, z, alpha = rng.normal(size=(n, k)), rng.normal(size=(n, p)), small["alpha_full"]
    free = _unconstrained_sets(n)
    G, EtZ = K.observed_cross_products(z, alpha, eta, free)
    for j in range(p):
        keep = np.ones(n, dtype=bool)
        for jj, U in free:
            if jj == j:
                keep[U] = False
        e = eta[keep]
        np.testing.assert_allclose(G[j], e.T @ e, atol=1e-12)
        np.testing.assert_allclose(EtZ[:, j], e.T @ (z[keep, j] - alpha[j]), atol=1e-12)


def test_draw_Lambda_integrates_the_unconstrained_records_out(small, rng):
    p, k = small["p"], small["k"]
    n = 25
    eta = rng.normal(size=(n, k))
    z = rng.normal(size=(n, p))
    prec, alpha = small["prec"], small["alpha_full"]
    prior_prec = rng.gamma(2.0, 1.0, size=(p, k))
    free = _unconstrained_sets(n)
    draws = np.array([K.draw_Lambda(rng, z, alpha, eta, prec, prior_prec, free)
                      for _ in range(6000)])
    for j in range(p):
        keep = np.ones(n, dtype=bool)
        for jj, U in free:
            keep[U] &= jj != j
        e = eta[keep]
        V = np.linalg.inv(np.diag(prior_prec[j]) + prec[j] * e.T @ e)
        m = V @ (prec[j] * e.T @ (z[keep, j] - alpha[j]))
        _mean_cov_close(draws[:, j, :], m, V)


def test_draw_prec_integrates_the_unconstrained_records_out(small, rng):
    p, k = small["p"], small["k"]
    n = 30
    eta = rng.normal(size=(n, k))
    L, alpha = small["Lambda"], small["alpha_full"]
    z = alpha + eta @ L.T + 0.7 * rng.normal(size=(n, p))
    z[:, 1] += 50.0 * (np.arange(n) % 2)  # wild values where column 1 is unconstrained...
    free = [(0, np.array([2, 9])), (1, np.arange(1, n, 2))]  # ...which are exactly those
    a, b = 1.0, 0.3
    draws = np.array([K.draw_prec(rng, z, alpha, L, eta, a, b, free) for _ in range(4000)])
    for j in range(p):
        keep = np.ones(n, dtype=bool)
        for jj, U in free:
            keep[U] &= jj != j
        sse = float(((z[keep, j] - alpha[j] - eta[keep] @ L[j]) ** 2).sum())
        ref = stats.gamma(a + keep.sum() / 2, scale=1 / (b + sse / 2))
        assert stats.kstest(draws[:, j], ref.cdf).pvalue > P_MIN


def test_redraw_unconstrained_draws_only_those_values_from_the_factor_model(small, rng):
    n, p, k = 4000, small["p"], small["k"]
    eta = rng.normal(size=(n, k))
    L, alpha = small["Lambda"], small["alpha_full"]
    sd = small["prec"] ** -0.5
    z = np.asfortranarray(rng.normal(size=(n, p)))
    before = z.copy()
    free = _unconstrained_sets(n)
    K.redraw_unconstrained(rng, z, alpha, L, eta, sd, free)
    touched = np.zeros((n, p), dtype=bool)
    for j, U in free:
        touched[U, j] = True
        r = (z[U, j] - alpha[j] - eta[U] @ L[j]) / sd[j]
        assert abs(r.mean()) < 4.5 / np.sqrt(len(U)) and abs(r.var() - 1) < 4.5 * np.sqrt(
            2 / len(U))
    np.testing.assert_array_equal(z[~touched], before[~touched])


def test_redraw_unconstrained_writes_the_factor_model_draw_of_each_listed_value(small, rng):
    """Both of its paths (one matrix product for all records where many values are listed, a
    product per column where few are) write alpha_j + eta_i' lambda_j + sd_j e_ij with the
    normals drawn in column order from the generator, as one call per column would."""
    n, p, k = 400, small["p"], small["k"]
    eta = rng.normal(size=(n, k))
    L, alpha = small["Lambda"], small["alpha_full"]
    sd = small["prec"] ** -0.5
    sets = {"many": _unconstrained_sets(n), "few": [(0, np.array([1, 4, 7])),
                                                    (2, np.array([0, 9]))]}
    for name, free in sets.items():
        z = np.asfortranarray(rng.normal(size=(n, p)))
        expect = z.copy()
        g = np.random.default_rng(11)
        for j, U in free:
            expect[U, j] = alpha[j] + eta[U] @ L[j] + sd[j] * g.standard_normal(len(U))
        K.redraw_unconstrained(np.random.default_rng(11), z, alpha, L, eta,
                               np.broadcast_to(sd, (p,)), free)
        np.testing.assert_allclose(z, expect, rtol=1e-13, atol=1e-13, err_msg=name)


def test_redraw_unconstrained_refuses_indices_out_of_range(small, rng):
    """The compiled loop does no bounds checks: the indices are checked before it."""
    n, p, k = 40, small["p"], small["k"]
    z = np.asfortranarray(rng.normal(size=(n, p)))
    args = (small["alpha_full"], small["Lambda"], rng.normal(size=(n, k)), np.ones(p))
    with pytest.raises(IndexError, match="out of range"):
        K.redraw_unconstrained(rng, z, *args, [(0, np.arange(1, n + 1))])
    with pytest.raises(IndexError, match="out of range"):
        K.redraw_unconstrained(rng, z, *args, [(p, np.arange(n))])


def test_draw_eta_reads_a_pattern_list_changed_in_place_afresh(small, rng):
    """Nothing of a pattern list is kept between calls: a list changed in place since the last
    call gives the draws a new list with the same patterns gives; a mask of another shape
    than the latent data is refused."""
    L, prec, alpha = small["Lambda"], small["prec"], small["alpha_full"]
    n, p = 30, small["p"]
    z = rng.normal(size=(n, p))
    mask, groups = K.unconstrained_patterns(n, p, [(0, np.arange(10)), (1, np.arange(5, 20))])
    K.draw_eta(np.random.default_rng(1), z, alpha, L, prec, patterns=(mask, groups))
    # move the records of the first two patterns between each other, in place
    (c0, r0), (c1, r1) = groups[0], groups[1]
    groups[0], groups[1] = (c0, r1), (c1, r0)
    mask2 = np.zeros_like(mask)
    for cols, rows in groups:
        mask2[np.ix_(rows, cols)] = True
    got = K.draw_eta(np.random.default_rng(1), z, alpha, L, prec, patterns=(mask2, groups))
    fresh = [(np.array(c), np.array(r)) for c, r in groups]  # a new list
    want = K.draw_eta(np.random.default_rng(1), z, alpha, L, prec, patterns=(mask2, fresh))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="mask"):
        K.draw_eta(rng, z[:-1], alpha, L, prec, patterns=(mask, groups))


def test_layout_lists_the_records_the_data_leave_unconstrained():
    import dataclasses

    from bayesynth.rules import Rule

    rng = np.random.default_rng(0)
    n = 60
    g = rng.choice(["a", "b", "c"], size=n)
    h = np.where(g == "a", "none", rng.choice(["u", "v"], size=n))
    x = rng.normal(size=n).round(3)
    x[[1, 7]] = np.nan
    x[[3, 11]] = -8.0
    df = pd.DataFrame({"x": x, "g": g, "h": h})
    base = bs.infer_schema(df, suggest=False)
    schema = bs.Schema([dataclasses.replace(base["x"], special_codes=(-8,)), base["g"],
                        base["h"]], [Rule("h", "none", (("g", ("a",)),))])
    lay = LatentLayout.from_data(df, schema)
    free = dict(lay.unconstrained_records)
    assert list(free[lay.latent_names.index("x")]) == [1, 3, 7, 11]  # missing, special code
    ruled = np.flatnonzero(g == "a")  # h fixed by the rule: no information about it
    h_cols = [j for j, name in enumerate(lay.latent_names) if name.startswith("h[")]
    assert h_cols and all(list(free[j]) == list(ruled) for j in h_cols)
    g_cols = [j for j, name in enumerate(lay.latent_names) if name.startswith("g[")]
    assert not set(g_cols) & set(free)  # g is shown for every record


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


def _layout(df: pd.DataFrame, *, layout_kw=None, **kw) -> LatentLayout:
    lk = {"continuous": "rank", **(layout_kw or {})}
    return LatentLayout.from_data(df, bs.infer_schema(df, **kw), **lk)


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
    lay = _layout(df, layout_kw={"categorical_likelihood": "rpl"})
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


@pytest.mark.parametrize("likelihood,continuous", [("mnp", "normal_scores"), ("rpl", "rank")])
def test_z_constraints_hold_exactly(child_small, rng, likelihood, continuous):
    lay = _layout(child_small, layout_kw={"categorical_likelihood": likelihood,
                                          "continuous": continuous})
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
    if continuous == "normal_scores":  # fixed columns never move
        for o in lay.ordered:
            if o.fixed:
                obs = o.codes >= 0
                np.testing.assert_array_equal(z2[obs, o.latent], o.normal_scores[obs])


def _mnp_reference(mu, codes_of, rng, n=400_000):
    """Rejection reference: utilities N(mu, 1) of one record, kept when the argmax rule (with a
    reference utility 0) gives ``codes_of`` (-1 = reference level)."""
    x = mu + rng.standard_normal((n, len(mu)))
    top = np.argmax(x, axis=1)
    level = np.where(x[np.arange(n), top] > 0, top, -1)
    keep = x[level == codes_of]
    return keep.mean(0), keep.std(0)


@pytest.mark.parametrize("level", ["b", "a", "c"])
def test_mnp_utilities_have_the_truncated_law(rng, level):
    """One record of a three-level variable (reference "a", the most frequent), utilities
    N(mu, 1): the Gibbs sweep over its two utility columns has the law of the utilities given
    the argmax rule, which rejection sampling gives independently."""
    df = pd.DataFrame({"g": ["a", "a", "a", "b", "c", level]})
    lay = _layout(df)
    assert [b.likelihood for b in lay.categorical] == ["mnp"]
    block = lay.categorical[0]
    assert block.levels[block.reference] == "a" and lay.p_latent == 2
    mu = np.tile([0.3, -0.4], (6, 1))
    chain = _chain(lay, mu, np.ones(2), 30_000, rng)[:, 5, :]
    target = {"a": -1, "b": 0, "c": 1}[level]
    m, sd = _mnp_reference(mu[5], target, rng)
    _assert_means(chain, m, sd)
    # and the spread, on nearly independent draws
    thin = chain[::20]
    for i in range(2):
        assert abs(thin[:, i].std() - sd[i]) < 0.05 * sd[i] + 4 * sd[i] / np.sqrt(len(thin))


def test_mnp_level_probabilities_sum_to_one(rng):
    """Under the multinomial probit every latent point is some level: the level frequencies of
    unconstrained draws of the utilities sum to one, for any parameters."""
    from bayesynth.models.layout import mnp_levels

    u = rng.normal(size=(10_000, 4)) * 2 + rng.normal(size=4)
    counts = np.bincount(mnp_levels(u) + 1, minlength=5)
    assert counts.sum() == 10_000 and np.all(counts > 0)


# ----------------------------------------------------------------------------- exact moves


def test_translation_conditional_is_the_closed_form(rng):
    """b | rest ~ N(mean(mu - z), sd^2 / n) for each rank column, from the orbit density."""
    n = 50
    z = rng.normal(size=(n, 3))
    mu = rng.normal(size=(n, 3))
    sd = np.array([0.5, 1.0, 2.0])
    draws = np.array([K.draw_translation(rng, z, mu, sd, np.array([0, 2]))
                      for _ in range(20_000)])
    for c, j in enumerate([0, 2]):
        # the orbit density prod_i N(z_ij + b; mu_ij, sd_j), normalised numerically
        grid = np.linspace(-3, 3, 4001)
        logd = stats.norm.logpdf(z[:, j][None, :] + grid[:, None], mu[:, j], sd[j]).sum(1)
        w = np.exp(logd - logd.max())
        w /= w.sum()
        mean = (grid * w).sum()
        sdv = np.sqrt(((grid - mean) ** 2 * w).sum())
        assert abs(draws[:, c].mean() - mean) < 4.5 * sdv / np.sqrt(len(draws))
        assert abs(draws[:, c].std() - sdv) < 0.03 * sdv


def test_utility_scale_conditional_is_the_orbit_density(rng):
    """c^2 of the block scale move against the orbit density computed from the joint density:
    N(c z; c mu, 1) for every utility, the priors of c alpha and c lambda, the Jacobian c^d and
    the Haar measure dc / c, integrated numerically (no formula shared with the kernel)."""
    n, k = 40, 2
    eta = rng.normal(size=(n, k))
    cols = np.array([0, 1])
    Lam = np.array([[0.5, -0.3], [0.2, 0.4]])
    alpha = np.array([0.3, -0.2])
    z = alpha + eta @ Lam.T + rng.normal(size=(n, 2)) * 1.3
    prior_prec = np.array([[1.0, 2.0], [0.5, 3.0]])
    a_pp = np.array([1.0, 1.0])
    draws = np.array([K.draw_utility_scale(rng, z, alpha, Lam, eta, np.ones(2), prior_prec,
                                           a_pp, [cols])[0] for _ in range(20_000)])

    def log_orbit(c):
        zc, ac, Lc = c * z, c * alpha, c * Lam
        out = stats.norm.logpdf(zc, ac + eta @ Lc.T, 1.0).sum()
        out += stats.norm.logpdf(ac, 0, 1 / np.sqrt(a_pp)).sum()
        out += stats.norm.logpdf(Lc, 0, 1 / np.sqrt(prior_prec)).sum()
        d = z.size + alpha.size + Lam.size
        return out + d * np.log(c) - np.log(c)  # Jacobian c^d, Haar measure dc / c

    grid = np.linspace(0.5, 1.5, 4001)
    logd = np.array([log_orbit(c) for c in grid])
    w = np.exp(logd - logd.max())
    w /= w.sum()
    mean = (grid * w).sum()
    sdv = np.sqrt(((grid - mean) ** 2 * w).sum())
    assert abs(draws.mean() - mean) < 4.5 * sdv / np.sqrt(len(draws)), (draws.mean(), mean)
    assert abs(draws.std() - sdv) < 0.03 * sdv


@pytest.mark.parametrize("lam, omega", [(500.0, 2000.0), (0.5, 0.3), (-2.0, 5.0),
                                         (3.0, 0.01), (-40.0, 1.0), (2.0, 300.0), (12.0, 12.0)])
def test_log_gig_draws_follow_scipys_gig(rng, lam, omega):
    """draw_log_gig's rejection sampler against SciPy's GIG distribution function, from
    concentrated (the factor scale move's: lam = (n - p) / 2 in the hundreds) to heavy-tailed
    and negative lam."""
    y = K.draw_log_gig(rng, np.full(20_000, lam), np.full(20_000, omega))
    assert stats.kstest(np.exp(y), stats.geninvgauss(lam, omega).cdf).pvalue > P_MIN


def test_log_gig_draws_where_scipy_cannot_judge(rng):
    """Far outside SciPy's numerical range: lam = omega = 10^5 (log x nearly normal, mean and
    sd from the Laplace approximation at the mode, exact to O(1 / lam)) and omega -> 0
    (x -> Gamma(lam, rate omega / 2))."""
    y = K.draw_log_gig(rng, np.full(20_000, 1e5), np.full(20_000, 1e5))
    m, sd = np.arcsinh(1.0), 1.0 / np.sqrt(1e5 * np.cosh(np.arcsinh(1.0)))
    assert abs(y.mean() - m) < 4.5 * sd / np.sqrt(len(y))
    assert abs(y.std() - sd) < 0.03 * sd
    x = np.exp(K.draw_log_gig(rng, np.full(20_000, 3.0), np.full(20_000, 1e-9)))
    assert stats.kstest(x, stats.gamma(3.0, scale=2.0 / 1e-9).cdf).pvalue > P_MIN
    with pytest.raises(ValueError, match="omega must be positive"):
        K.draw_log_gig(rng, np.ones(2), np.array([1.0, 0.0]))


def test_factor_scale_conditional_is_the_orbit_density(rng):
    """c of the factor scale move: orbit (eta_h c, lambda_h / c) with Jacobian c^n c^-p and Haar
    dc / c, against the density integrated numerically from the priors."""
    n, p = 30, 5
    eta = rng.normal(size=(n, 1)) * 0.7
    Lam = rng.normal(size=(p, 1))
    prior_prec = rng.gamma(2.0, size=(p, 1))
    draws = np.array([K.draw_factor_scale(rng, eta, Lam, prior_prec)[0]
                      for _ in range(20_000)])

    def log_orbit(c):
        out = stats.norm.logpdf(c * eta).sum()
        out += stats.norm.logpdf(Lam / c, 0, 1 / np.sqrt(prior_prec)).sum()
        return out + (n - p) * np.log(c) - np.log(c)

    grid = np.linspace(0.2, 3.0, 6001)
    logd = np.array([log_orbit(c) for c in grid])
    w = np.exp(logd - logd.max())
    w /= w.sum()
    mean = (grid * w).sum()
    sdv = np.sqrt(((grid - mean) ** 2 * w).sum())
    assert abs(draws.mean() - mean) < 4.5 * sdv / np.sqrt(len(draws)), (draws.mean(), mean)
    assert abs(draws.std() - sdv) < 0.03 * sdv


def test_warp_move_keeps_the_rank_posterior(rng):
    """Latent values of one rank column (4 records, fixed order) under N(mu_i, sd): alternating
    the Gibbs sweep with the warp move keeps their exact law (rejection reference)."""
    df = pd.DataFrame({"x": [0.3, 1.7, 0.9, 2.2]})
    lay = _layout(df, continuous=["x"])
    mu = np.array([[0.5], [-0.2], [0.1], [0.8]])
    sd = np.array([0.7])
    z = lay.initial_z()
    out = np.empty((40_000, 4))
    for t in range(len(out)):
        K.draw_z(rng, z, mu, sd, lay, out=z)
        K.draw_warp(rng, z, mu, sd, np.array([1.3]), np.array([0]))
        out[t] = z[:, 0]
    order = np.argsort(df["x"].to_numpy())

    def accept(x):
        xs = x[:, order]
        return np.all(np.diff(xs, axis=1) > 0, axis=1)

    m, s_ = _reference_by_rejection(mu[:, 0], 0.7, accept, rng, n=600_000)
    _assert_means(out, m, s_)


def test_warp_move_on_the_constrained_records_keeps_the_joint_law(rng):
    """A rank column with two missing values (unconstrained): the warp acting on the four
    constrained records only, alternated with the z sweep of those four alone, keeps the
    exact law of all six values (the missing two stay N(mu_i, sd), untouched by the warp)."""
    df = pd.DataFrame({"x": [0.3, np.nan, 0.9, np.nan, 2.2, 1.1]})
    lay = _layout(df, continuous=["x"])
    (j, free), = lay.unconstrained_records
    assert j == 0 and list(free) == [1, 3]
    shown = np.array([0, 2, 4, 5])
    mu = np.array([[0.5, 0.0], [-0.9, 0.0], [0.1, 0.0], [1.4, 0.0], [0.8, 0.0], [-0.3, 0.0]])
    sd = np.array([0.7, 1.0])
    z = lay.initial_z()
    out = np.empty((40_000, 6))
    for t in range(len(out)):
        if t % 3 == 0:  # the z sweep draws the missing ones too; in between only the warp acts
            K.draw_z(rng, z, mu, sd, lay, out=z)
        K.draw_warp(rng, z, mu, sd, np.array([1.3, 1.0]), np.array([0]), [shown])
        out[t] = z[:, 0]
    x = df["x"].to_numpy()
    order = shown[np.argsort(x[shown])]

    def accept(v):
        return np.all(np.diff(v[:, order], axis=1) > 0, axis=1)

    m, s_ = _reference_by_rejection(mu[:, 0], 0.7, accept, rng, n=600_000)
    _assert_means(out, m, s_)
    for i in (1, 3):  # untouched by the warp: their law is N(mu_i, sd) throughout
        assert abs(out[:, i].std() - 0.7) < 0.03


def test_warp_move_touches_each_columns_records_only(rng):
    """With records per column, each column is warped on its own records (which move) and
    nowhere else (bit for bit)."""
    n = 30
    z = np.asfortranarray(rng.normal(size=(n, 3)))
    mu = rng.normal(size=(n, 3))
    recs = [np.arange(0, n, 2), np.arange(5, 17)]
    cols = np.array([0, 2])
    moved = np.zeros((n, 3), dtype=bool)
    for _ in range(20):
        before = z.copy()
        K.draw_warp(rng, z, mu, np.ones(3), np.ones(3), cols, recs)
        moved |= z != before
    expect = np.zeros((n, 3), dtype=bool)
    for j, R in zip(cols, recs):
        expect[R, j] = True
    assert not np.any(moved & ~expect)
    assert moved[expect].mean() > 0.9  # all but the centres moved at some point


def test_marginal_phi_loading_conditional(rng):
    """One loading with phi integrated out: normal likelihood times a Student-t prior, against
    the density integrated numerically."""
    n = 20
    eta = rng.normal(size=(n, 1))
    z = 0.4 * eta + rng.normal(size=(n, 1)) * 2.0
    prec = np.array([0.25])
    tau, nu = np.array([3.0]), 3.0
    Lam = np.array([[0.0]])
    draws = np.empty(20_000)
    for t in range(len(draws)):
        Lam = K.draw_Lambda_marginal_phi(rng, z, np.zeros(1), eta, prec, Lam, tau, nu)
        draws[t] = Lam[0, 0]
    grid = np.linspace(-4, 4, 8001)
    q = prec[0] * (eta[:, 0] ** 2).sum()
    m = prec[0] * (eta[:, 0] * z[:, 0]).sum() / q
    logd = -0.5 * q * (grid - m) ** 2 + stats.t.logpdf(grid, nu, scale=1 / np.sqrt(tau[0]))
    w = np.exp(logd - logd.max())
    w /= w.sum()
    mean = (grid * w).sum()
    sdv = np.sqrt(((grid - mean) ** 2 * w).sum())
    import arviz as az

    ess = float(az.ess(draws[None, :]))
    assert abs(draws.mean() - mean) < 4.5 * sdv / np.sqrt(ess)
    assert abs(draws.std() - sdv) < 0.05 * sdv


def test_column_scale_conditional_is_the_orbit_density(rng):
    """c of the column scale move against the orbit density built from the joint density
    (z, alpha, lambda and sigma all scale by c, prec by c^-2): N(c z; c mu, c sigma) per
    record, Gamma(prec / c^2), N(c alpha), N(c lambda), the Jacobians and the Haar measure
    dc / c, integrated numerically; no formula shared with the kernel."""
    n, k = 25, 2
    a_s, b_s = 1.0, 0.3
    eta = rng.normal(size=(n, k))
    lam = np.array([[0.6, -0.2]])
    alpha = np.array([0.4])
    prec = np.array([1.7])
    z = alpha + eta @ lam.T + rng.normal(size=(n, 1)) / np.sqrt(prec)
    prior_prec = np.array([[1.5, 3.0]])
    draws = np.array([K.draw_column_scale(rng, lam, prior_prec, prec, a_s, b_s, alpha,
                                          np.array([0]), 1.0)[0] for _ in range(20_000)])

    def log_orbit(c):
        sd = c / np.sqrt(prec[0])
        out = stats.norm.logpdf(c * z[:, 0], c * (alpha[0] + eta @ lam[0]), sd).sum()
        out += stats.gamma.logpdf(prec[0] / c**2, a_s, scale=1 / b_s)
        out += stats.norm.logpdf(c * alpha[0]) + stats.norm.logpdf(
            c * lam[0], 0, 1 / np.sqrt(prior_prec[0])).sum()
        # Jacobians: z (n entries) c^n, alpha c, lambda c^k, prec c^-2; Haar dc / c
        return out + (n + 1 + k - 2) * np.log(c) - np.log(c)

    grid = np.linspace(0.05, 6.0, 12001)
    logd = np.array([log_orbit(c) for c in grid])
    w = np.exp(logd - logd.max())
    w /= w.sum()
    accepted = draws[draws != 1.0]  # the move is Metropolis-Hastings: c = 1 when rejected
    assert len(accepted) > 0.5 * len(draws)
    # the stationary law of the state under repeated moves is the orbit density, so iterate
    scale = 1.0
    chain = np.empty(20_000)
    for t in range(len(chain)):
        c = K.draw_column_scale(rng, lam * scale, prior_prec, prec / scale**2, a_s, b_s,
                                alpha * scale, np.array([0]), 1.0)[0]
        scale *= c
        chain[t] = scale
    mean = (grid * w).sum()
    sdv = np.sqrt(((grid - mean) ** 2 * w).sum())
    import arviz as az

    ess = float(az.ess(chain[None, :]))
    assert abs(chain.mean() - mean) < 4.5 * sdv / np.sqrt(ess), (chain.mean(), mean)
    assert abs(chain.std() - sdv) < 0.1 * sdv


def _probit_grid_posterior(eta, y, prior_prec_lambda, alpha_mu=0.0, alpha_sd=1.0):
    """Exact posterior of (alpha, lambda) of a probit column P(y = 1) = Phi(alpha + lambda
    eta) with N(alpha_mu, alpha_sd^2) and N(0, 1 / prior_prec) priors, on a grid."""
    a = np.linspace(-3, 3, 301)
    b = np.linspace(-3, 3, 301)
    A, B = np.meshgrid(a, b, indexing="ij")
    m = A[..., None] + B[..., None] * eta[None, None, :]
    sign = np.where(y == 1, 1.0, -1.0)
    ll = stats.norm.logcdf(sign * m).sum(-1)
    lp = (ll + stats.norm.logpdf(A, alpha_mu, alpha_sd)
          + stats.norm.logpdf(B, 0, 1 / np.sqrt(prior_prec_lambda)))
    w = np.exp(lp - lp.max())
    w /= w.sum()
    return (w * A).sum(), (w * B).sum(), np.sqrt((w * A**2).sum() - (w * A).sum() ** 2), \
        np.sqrt((w * B**2).sum() - (w * B).sum() ** 2)


@pytest.fixture(params=["step", "mode"])
def row_proposal(request, monkeypatch):
    """Both proposals of the joint row move: the Fisher-scoring step (every column has the
    records for it) and the normal approximation at the mode (no column has)."""
    monkeypatch.setattr(K, "ROW_STEP_RECORDS", 0 if request.param == "step" else 10**9)
    return request.param


@pytest.mark.parametrize("kernel", ["rows", "rows_mode", "alpha"])
def test_collapsed_categorical_updates_target_the_probit_posterior(rng, kernel, monkeypatch):
    """A binary variable as a one-column multinomial probit, fixed factor scores: iterating the
    collapsed update (with the z redraw it includes) gives the exact posterior of (alpha,
    lambda), computed on a grid; the intercept-only kernel, with lambda held at a value, the
    exact conditional of alpha. The intercept's prior is not centred at zero (N(0.8, 0.5^2)), so
    a kernel that drops its mean fails (its posterior mean moves by about 0.2)."""
    import arviz as az

    n = 60
    eta = rng.normal(size=(n, 1))
    y = (rng.random(n) < stats.norm.cdf(-0.4 + 0.9 * eta[:, 0])).astype(int)
    lay = _layout(pd.DataFrame({"y": y}), binary=["y"])
    assert [b.likelihood for b in lay.categorical] == ["mnp"] and lay.p_latent == 1
    # the level coded 1 may be the reference: compare on the probability scale's sign
    flip = 1.0 if lay.categorical[0].levels[lay.categorical[0].reference] == 0 else -1.0
    a_mu, a_sd = np.array([0.8]), np.array([0.5])  # the column's own intercept prior
    z = lay.initial_z()
    alpha, Lam = np.zeros(1), np.zeros((1, 1))
    pp = np.array([[2.0]])
    T = 20_000
    out = np.empty((T, 2))
    if kernel.startswith("rows"):
        # the Fisher-scoring step (every column has the records for it) or the mode's proposal
        monkeypatch.setattr(K, "ROW_STEP_RECORDS", 0 if kernel == "rows" else 10**9)
        for t in range(T):
            alpha, Lam, _ = K.draw_categorical_rows(rng, z, alpha, Lam, eta, np.ones(1), lay,
                                                    a_mu, a_sd, pp)
            out[t] = alpha[0], Lam[0, 0]
        ma, mb, sa, sb = _probit_grid_posterior(eta[:, 0], lay.categorical[0].codes, pp[0, 0],
                                                flip * a_mu[0], a_sd[0])
        ref = [(ma, sa), (mb, sb)]
    else:
        Lam = np.array([[0.7]])
        for t in range(T):
            alpha = K.draw_alpha_collapsed(rng, z, alpha, Lam, eta, np.ones(1), lay, a_mu, a_sd)
            out[t] = alpha[0], 0.7
        grid = np.linspace(-4, 4, 8001)
        sign = np.where(lay.categorical[0].codes == 1, 1.0, -1.0)
        lp = stats.norm.logcdf(sign[None, :] * (grid[:, None] + 0.7 * eta[:, 0])).sum(1)
        lp += stats.norm.logpdf(grid, flip * a_mu[0], a_sd[0])
        w = np.exp(lp - lp.max())
        w /= w.sum()
        m = (w * grid).sum()
        ref = [(m, np.sqrt((w * (grid - m) ** 2).sum()))]
    for i, (m, sd) in enumerate(ref):
        x = out[:, i] * (flip if kernel.startswith("rows") or i == 0 else 1.0)
        ess = float(az.ess(x[None, :]))
        assert abs(x.mean() - m) < 4.5 * sd / np.sqrt(ess), (i, x.mean(), m)
        assert abs(x.std() - sd) < 0.1 * sd
    assert lay.bounds_satisfied(z)



def test_row_target_derivatives(rng):
    """The row target of the joint (alpha, lambda) move, with the factor scores integrated out
    (scale s^2 = sigma^2 + lambda' V lambda) and given them (V = 0): its value against scipy's
    log Phi (both far tails, ignored rows), its gradient and Hessian against central
    differences of the value, its Gauss-Newton matrix against one computed from scipy's
    hazard (minus the Hessian where V = 0); the Newton point: mean theta + M^-1 grad with
    M = L L' the Gauss-Newton matrix; and the fixed-scale target's mode."""
    n, k = 400, 3
    d = k + 1
    X = np.column_stack([np.ones(n), rng.normal(size=(n, k))])
    kind = rng.choice([-1, 0, 1], size=n, p=[0.5, 0.1, 0.4]).astype(np.int64)
    bound = rng.normal(size=n)
    bound[:5] = 40.0  # far tails: log Phi of about -1,000 (hazard from the series), and 0
    kind[:3], kind[3:5] = 1, -1
    mu0, P0 = rng.normal(size=d) * 0.1, rng.uniform(0.5, 2.0, size=d)
    A = rng.normal(size=(k, k))
    sig2 = 0.7
    sg = np.where(kind > 0, 1.0, -1.0)
    use = kind != 0
    for V in (A @ A.T * 0.3 + 0.1 * np.eye(k), np.zeros((k, k))):
        theta = rng.normal(size=d) * 0.8

        def f(th, V=V):
            return K._scaled_row_target(th, X, kind, bound, sig2, V, mu0, P0, np.empty(d),
                                        np.empty((d, d)), np.empty((d, d)), False)

        s = np.sqrt(sig2 + theta[1:] @ V @ theta[1:])
        t = sg * (X @ theta - bound) / s
        ref = stats.norm.logcdf(t)[use].sum() - 0.5 * np.sum(P0 * (theta - mu0) ** 2)
        grad, H, G = np.empty(d), np.empty((d, d)), np.empty((d, d))
        val = K._scaled_row_target(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G, True)
        assert val == pytest.approx(ref, rel=1e-10) and f(theta) == val
        h = 1e-5
        num_g = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(d)])
        np.testing.assert_allclose(grad, num_g, rtol=1e-6, atol=1e-5)
        num_H = np.empty((d, d))
        for a, e in enumerate(np.eye(d)):
            g1, g2, junk = np.empty(d), np.empty(d), np.empty((d, d))
            K._scaled_row_target(theta + h * e, X, kind, bound, sig2, V, mu0, P0, g1, junk,
                                 junk.copy(), True)
            K._scaled_row_target(theta - h * e, X, kind, bound, sig2, V, mu0, P0, g2, junk,
                                 junk.copy(), True)
            num_H[a] = (g1 - g2) / (2 * h)
        np.testing.assert_allclose(H, num_H, rtol=1e-5, atol=1e-4 * np.abs(H).max())
        r = np.exp(stats.norm.logpdf(t) - stats.norm.logcdf(t))
        w = r * (r + t)
        gs = np.r_[0.0, V @ theta[1:]] / s
        J = (sg[:, None] * X - t[:, None] * gs[None]) / s  # d t_i / d theta
        np.testing.assert_allclose(G, (J[use].T * w[use]) @ J[use] + np.diag(P0),
                                   rtol=1e-8, atol=1e-8)
        if not V.any():
            np.testing.assert_allclose(G, -H, rtol=1e-10, atol=1e-8)  # t linear in theta
        val2, mean, L = K._newton_point(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G,
                                        np.empty(n), np.empty((n, d)))
        M = G  # the Gauss-Newton matrix: minus the Hessian where the scale is fixed (V = 0)
        assert val2 == val
        np.testing.assert_allclose(L @ L.T, M, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(mean, theta + np.linalg.solve(M, grad), rtol=1e-10)
    # the mode's proposal: the fixed-scale target's mode, the same from two distant starts
    # with a zero gradient there (an independence proposal needs a mode that does not depend
    # on the chain's state), and the precision factor of minus its Hessian
    V0 = np.zeros((k, k))
    modes = []
    for start in (np.zeros(d), rng.normal(size=d) * 3.0):
        m, L, conv = K._row_mode(start, X, kind, bound, sig2, V0, mu0, P0, grad, H, G,
                                 np.empty(n), np.empty((n, d)), 30)
        assert conv
        K._scaled_row_target(m, X, kind, bound, sig2, V0, mu0, P0, grad, H, G, True)
        assert np.max(np.abs(np.linalg.solve(H, grad))) < 1e-9
        np.testing.assert_allclose(L @ L.T, -H, rtol=1e-10, atol=1e-8)
        modes.append(m)
    np.testing.assert_allclose(modes[0], modes[1], rtol=0, atol=1e-9)


def test_categorical_rows_with_scores_integrated_out_target_the_marginal_probit(rng,
                                                                                row_proposal):
    """A binary column y and an ordered column w sharing one factor, with w's latent values,
    loading and residual sd held fixed. Integrating the factor scores out, y follows a probit
    in m_i = V lambda_w z_wi / sd_w^2 with scale sqrt(1 + lambda_y^2 V), V = (1 + lambda_w^2 /
    sd_w^2)^-1; iterating the row move with ``integrate_eta=True`` (which never reads eta)
    must give that posterior of (alpha, lambda_y), computed on a grid."""
    import arviz as az

    n, lam_w, sd_w = 60, 1.2, 0.6
    eta_true = rng.normal(size=n)
    w = lam_w * eta_true + sd_w * rng.normal(size=n)
    y = (rng.random(n) < stats.norm.cdf(-0.3 + 1.0 * eta_true)).astype(int)
    lay = _layout(pd.DataFrame({"y": y, "w": w}), binary=["y"])
    [blk] = lay.categorical
    jy = int(blk.latent[0])
    jw = 1 - jy
    z = lay.initial_z()
    z[:, jw] = w
    sd = np.ones(2)
    sd[jw] = sd_w
    alpha, Lam = np.zeros(2), np.zeros((2, 1))
    Lam[jw, 0] = lam_w
    pp = np.array([[2.0], [2.0]])
    eta_junk = np.full((n, 1), 99.0)  # must not be used
    T = 12_000
    out = np.empty((T, 2))
    acc = 0.0
    V = 1.0 / (1.0 + lam_w**2 / sd_w**2)
    m = V * lam_w * w / sd_w**2
    codes = blk.codes
    flip = 1.0 if blk.levels[blk.reference] == 0 else -1.0  # y = 1 is the modelled level
    sign = np.where(codes == (1 if flip > 0 else 0), 1.0, -1.0)
    pit = []
    for t in range(T):
        alpha, Lam, a = K.draw_categorical_rows(rng, z, alpha, Lam, eta_junk, sd, lay,
                                                np.zeros(2), np.ones(2), pp,
                                                integrate_eta=True)
        acc += a
        out[t] = alpha[jy], Lam[jy, 0]
        assert Lam[jw, 0] == lam_w and np.array_equal(z[:, jw], w)
        if t % 20 == 0:  # the redrawn utilities: N(alpha + lambda m_i, 1 + lambda^2 V) cut at 0
            mean, s = alpha[jy] + Lam[jy, 0] * m, np.sqrt(1.0 + Lam[jy, 0] ** 2 * V)
            cut = stats.norm.cdf(-mean / s)
            u = stats.norm.cdf((z[:, jy] - mean) / s)
            pit.append(np.where(sign > 0, (u - cut) / (1.0 - cut), u / cut))
    assert acc / T > 0.5
    # given the draw, each record's utility is a fresh truncated normal: the probability
    # integral transforms are independent uniforms (a wrong scale of the redraw fails this)
    assert stats.kstest(np.concatenate(pit), "uniform").pvalue > 1e-3
    a = np.linspace(-3, 3, 241)
    b = np.linspace(-3.5, 3.5, 281)
    A, B = np.meshgrid(a, b, indexing="ij")
    scale = np.sqrt(1.0 + B**2 * V)
    ll = stats.norm.logcdf(sign * (A[..., None] + B[..., None] * m) / scale[..., None]).sum(-1)
    lp = ll + stats.norm.logpdf(A) + stats.norm.logpdf(B, 0, 1 / np.sqrt(2.0))
    wgt = np.exp(lp - lp.max())
    wgt /= wgt.sum()
    for i, G in enumerate((A, B)):
        mean = float((wgt * G).sum())
        sdv = float(np.sqrt((wgt * (G - mean) ** 2).sum()))
        x = out[:, i]
        ess = float(az.ess(x[None, :]))
        assert abs(x.mean() - mean) < 4.5 * sdv / np.sqrt(ess), (i, x.mean(), mean)
        assert abs(x.std() - sdv) < 0.1 * sdv, (i, x.std(), sdv)
    assert lay.bounds_satisfied(z)


def test_categorical_rows_with_scores_integrated_out_carry_each_columns_update(rng,
                                                                              monkeypatch,
                                                                              row_proposal):
    """With several columns moved in one call, each column's target is built from the others'
    current values: the scores' conditional means given the other columns, [1, T V], as the
    proposals see them, against those recomputed from scratch from the earlier columns' new
    latent values and parameters and the later columns' old ones."""
    n, k = 40, 2
    df = pd.DataFrame({"y1": rng.integers(0, 2, n), "y2": rng.integers(0, 2, n),
                       "y3": rng.integers(0, 2, n), "w": rng.normal(size=n)})
    lay = _layout(df, binary=["y1", "y2", "y3"])
    p = lay.initial_z().shape[1]
    z = lay.initial_z()
    alpha = rng.normal(size=p) * 0.3
    Lam = rng.normal(size=(p, k))
    sd = rng.uniform(0.5, 1.5, size=p)
    prec = sd**-2.0
    seen = []
    name = "_newton_point" if row_proposal == "step" else "_row_mode"
    real = getattr(K, name)

    def spy(theta, X, *args):
        seen.append(X.copy())
        return real(theta, X, *args)

    monkeypatch.setattr(K, name, spy)
    z0, a0, L0 = z.copy(), alpha.copy(), Lam.copy()
    cols = [int(b.latent[0]) for b in lay.categorical]  # kernel order: one column each
    a1, L1, _ = K.draw_categorical_rows(rng, z, alpha, Lam, np.zeros((n, k)), sd, lay,
                                        np.zeros(p), np.ones(p), np.ones((p, k)),
                                        integrate_eta=True)
    assert len(seen) == 2 * len(cols)  # at the current and at the proposed value
    for c, j in enumerate(cols):
        done = cols[:c]  # moved before column j: new values; the rest as they were
        zc, ac, Lc = z0.copy(), a0.copy(), L0.copy()
        zc[:, done], ac[done], Lc[done] = z[:, done], a1[done], L1[done]
        others = [q for q in range(p) if q != j]
        P = np.eye(k) + (Lc[others].T * prec[others]) @ Lc[others]
        T = ((zc[:, others] - ac[others]) * prec[others]) @ Lc[others]
        expect = np.column_stack([np.ones(n), T @ np.linalg.inv(P)])
        np.testing.assert_allclose(seen[2 * c], expect, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(seen[2 * c + 1], expect, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("integrate_eta", [False, True])
def test_categorical_rows_reject_when_the_newton_search_stalls(rng, integrate_eta, monkeypatch):
    """With the mode's proposal, a search cut off before the mode (one Newton step from a
    start near it) gives no valid proposal: the column keeps its intercept and loadings, its
    latent values stay in their bounds, and a RuntimeWarning names it; with enough steps,
    from a start near the mode, the proposal is accepted."""
    monkeypatch.setattr(K, "ROW_STEP_RECORDS", 10**9)  # every column: the mode's proposal
    n, k = 200, 1
    df = pd.DataFrame({"y": rng.integers(0, 2, n), "w": rng.normal(size=n)})
    lay = _layout(df, binary=["y"])
    p = lay.initial_z().shape[1]
    z = lay.initial_z()
    eta = rng.normal(size=(n, k))
    alpha, Lam = np.full(p, 0.4), np.full((p, k), -0.4)  # near the mode, not at it
    args = (eta, np.ones(p), lay, np.zeros(p), np.ones(p), np.ones((p, k)))
    for _ in range(10):  # proposals near the mode would mostly be accepted
        with pytest.warns(RuntimeWarning, match="did not converge"):
            a1, L1, acc = K.draw_categorical_rows(rng, z, alpha, Lam, *args, newton_steps=1,
                                                  integrate_eta=integrate_eta)
        assert acc == 0.0 and np.array_equal(a1, alpha) and np.array_equal(L1, Lam)
        assert lay.bounds_satisfied(z)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        accs = [K.draw_categorical_rows(rng, z, np.zeros(p), np.zeros((p, k)), *args,
                                        integrate_eta=integrate_eta)[2] for _ in range(5)]
    assert max(accs) == 1.0



def test_row_move_log_ratio_is_the_metropolis_hastings_ratio(rng):
    """The row move's log ratio: target difference plus scipy's normal log densities of the
    reverse move at the current value and of the forward move at the proposal; a move and
    its reverse have opposite ratios."""
    d = 4
    cur, prop, mean_c, mean_p = (rng.normal(size=d) for _ in range(4))
    precs = []
    for _ in range(2):
        A = rng.normal(size=(d, d))
        precs.append(A @ A.T + d * np.eye(d))
    L_c, L_p = (np.linalg.cholesky(P) for P in precs)
    ref = (1.5 - (-2.0)
           + stats.multivariate_normal(mean_p, np.linalg.inv(precs[1])).logpdf(cur)
           - stats.multivariate_normal(mean_c, np.linalg.inv(precs[0])).logpdf(prop))
    got = K._mh_log_ratio(1.5, -2.0, prop, cur, mean_c, L_c, mean_p, L_p)
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)
    back = K._mh_log_ratio(-2.0, 1.5, cur, prop, mean_p, L_p, mean_c, L_c)
    assert back == pytest.approx(-got, rel=1e-12, abs=1e-12)


def test_row_move_proposal_follows_the_records_per_parameter(rng):
    """The rule reads the data: a column whose fewer side (its level's records or the
    others') has at least ROW_STEP_RECORDS records per parameter gets the Fisher-scoring
    step (two Newton points), one with fewer the mode's proposal (one search given the
    scores: the reverse proposal is the forward one)."""
    n, k = 200, 1
    d = k + 1
    cut = K.ROW_STEP_RECORDS * d
    y = np.zeros((n, 4), dtype=int)
    y[:cut - 1, 0] = 1  # one record short of the step
    y[:cut, 1] = 1  # exactly enough
    y[: n // 2, 2] = 1  # balanced
    y[cut - 1:, 3] = 1  # short again, and five records without information (as a rule's),
    df = pd.DataFrame(y, columns=["short", "enough", "balanced", "with_gaps"])
    lay = _layout(df, binary=list(df.columns))
    r = [b.name for b in lay.categorical if b.likelihood == "mnp"].index("with_gaps")
    lay.k_mnp_codes[r, n - 5:] = -2  # which count on neither side
    p = lay.initial_z().shape[1]
    seen = {"step": [], "mode": []}
    real_point, real_mode = K._newton_point, K._row_mode

    def sides(kind):
        return min(int((kind > 0).sum()), int((kind < 0).sum()))

    def point(theta, X, kind, *args):
        seen["step"].append(sides(kind))
        return real_point(theta, X, kind, *args)

    def mode(start, X, kind, *args):
        seen["mode"].append(sides(kind))
        return real_mode(start, X, kind, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(K, "_newton_point", point)
        mp.setattr(K, "_row_mode", mode)
        K.draw_categorical_rows(rng, lay.initial_z(), np.zeros(p), np.zeros((p, k)),
                                rng.normal(size=(n, k)), np.ones(p), lay, np.zeros(p),
                                np.ones(p), np.ones((p, k)))
    assert seen["mode"] == [cut - 1, cut - 1]
    assert sorted(seen["step"]) == [cut, cut, n // 2, n // 2]
    # the rule as the steps read it ahead of the kernel (InterceptGibbs's slices)
    names = [b.name for b in lay.categorical if b.likelihood == "mnp"]
    flags = dict(zip(names, K.row_step_columns(lay, k).tolist()))
    assert flags == {"short": False, "enough": True, "balanced": True, "with_gaps": False}
    # the paper's level columns (one per level, the majority's too): the fewer side counts,
    # so the majority level, with only cut - 1 other records, proposes from the mode too
    g = np.where(np.arange(n) < 1, "a", np.where(np.arange(n) < cut - 1, "b", "c"))
    rpl = _layout(pd.DataFrame({"g": g}), categorical=["g"],
                  layout_kw={"categorical_likelihood": "rpl"})
    above = (rpl.k_lvl_sign > 0).sum(axis=1)
    assert sorted(above.tolist()) == [1, cut - 2, n - cut + 1]
    assert not K.row_step_columns(rpl, k).any()


def test_row_move_returns_from_far_in_the_tail(rng, monkeypatch):
    """Started about 60 posterior sds from the mode, the Fisher-scoring step brings a binary
    column's intercept back within a few iterations (to the mean of a chain started near
    it), given the factor scores and with them integrated out (an ordered column w sharing
    the factor, held fixed, informs them), and the latent values stay in their bounds. With
    the scores integrated out the target is not log-concave, and a step with minus the
    Hessian instead of the Gauss-Newton matrix stays stuck here (measured: 1 acceptance in
    60); this test is about that, not about the acceptance ratio (the posterior tests are)."""
    n, lam_w, sd_w = 2000, 1.2, 0.6
    eta = rng.normal(size=(n, 1))
    w = lam_w * eta[:, 0] + sd_w * rng.normal(size=n)
    y = (rng.random(n) < stats.norm.cdf(-1.0 + 0.8 * eta[:, 0])).astype(int)
    lay = _layout(pd.DataFrame({"y": y, "w": w}), binary=["y"])
    jy = int(lay.categorical[0].latent[0])
    jw = 1 - jy
    sd = np.ones(2)
    sd[jw] = sd_w
    args = (sd, lay, np.zeros(2), np.ones(2), np.ones((2, 1)))
    monkeypatch.setattr(K, "ROW_STEP_RECORDS", 2)  # the step (1,000 records per side here)

    def chain(a0, iters, integrate):
        z = lay.initial_z()
        z[:, jw] = w
        alpha, Lam = np.zeros(2), np.zeros((2, 1))
        alpha[jy], Lam[jw, 0] = a0, lam_w
        path = []
        for _ in range(iters):
            alpha, Lam, _ = K.draw_categorical_rows(rng, z, alpha, Lam, eta, *args,
                                                    integrate_eta=integrate)
            path.append(alpha[jy])
        assert lay.bounds_satisfied(z)
        return np.array(path)

    for integrate in (False, True):
        ref = chain(0.0, 300, integrate)[100:]
        assert ref.std() > 0.01  # the reference chain moves
        far = ref.mean() + 60 * ref.std() * np.sign(-ref.mean())
        path = chain(far, 30, integrate)
        assert abs(path[-10:].mean() - ref.mean()) < 3 * ref.std(), (integrate, path[:5])


def test_score_translation_conditional_is_the_orbit_density(rng):
    """The shift d of the score translation move: the kernel's normal conditional equals the
    full joint log density evaluated along the orbit (every term, including those the move is
    meant to leave unchanged), on a table with multinomial-probit, rank and fixed columns."""
    df = bs.datasets.simulate_child_health(n=40, random_seed=3)[
        ["m_race", "male", "read", "mage", "ndi_birth", "temp_t1"]]
    lay = LatentLayout.from_data(df, bs.infer_schema(df, suggest=False))
    assert len(lay.k_mnp_cols) and len(lay.rank_columns) and len(lay.fixed_columns)
    n, p, k = lay.n, lay.p_latent, 3
    Lam = rng.normal(size=(p, k))
    eta = rng.normal(size=(n, k)) + 0.3
    z = rng.normal(size=(n, p))
    sd = rng.uniform(0.5, 1.5, p)
    cat = np.r_[lay.k_mnp_cols, lay.k_lvl_cols].astype(int)
    alpha = np.zeros(p)
    alpha[cat] = rng.normal(size=len(cat))
    a_mu, a_sd = np.full(p, 0.2), np.full(p, 1.5)
    rank = lay.rank_columns

    def logp(d):
        e = eta + d
        a = alpha.copy()
        a[cat] -= Lam[cat] @ d
        zz = z.copy()
        zz[:, rank] += Lam[rank] @ d
        out = stats.norm.logpdf(e).sum() + stats.norm.logpdf(a[cat], a_mu[cat], a_sd[cat]).sum()
        return out + stats.norm.logpdf(zz, a + e @ Lam.T, sd).sum()

    # the log density is quadratic in d: central differences are exact up to rounding
    h, E = 0.5, np.eye(k)
    g = np.array([(logp(h * E[a]) - logp(-h * E[a])) / (2 * h) for a in range(k)])
    H = np.array([[(logp(h * (E[a] + E[b])) - logp(h * (E[a] - E[b])) - logp(h * (E[b] - E[a]))
                    + logp(-h * (E[a] + E[b]))) / (4 * h * h) for b in range(k)]
                  for a in range(k)])
    cov_bf = np.linalg.inv(-H)
    mean, cov = K.score_translation_conditional(z, alpha, Lam, eta, sd, lay, a_mu, a_sd)
    np.testing.assert_allclose(cov, cov_bf, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(mean, cov_bf @ g, rtol=1e-6, atol=1e-10)
    draws = np.array([K.draw_score_translation(rng, z, alpha, Lam, eta, sd, lay, a_mu, a_sd)
                      for _ in range(4000)])
    _mean_cov_close(draws, mean, cov)


def _mnp_probability(m: np.ndarray, level: int) -> float:
    """P(level | utility means m) of a multinomial probit with reference utility 0, by quad."""
    import math

    from scipy import integrate

    def cdf(x):
        return 0.5 * math.erfc(-x / math.sqrt(2.0))

    if level < 0:
        return math.prod(cdf(-v) for v in m)
    others = [float(v) for v in np.delete(m, level)]
    ml = float(m[level])

    def f(u):
        return math.exp(-0.5 * (u - ml) ** 2) / math.sqrt(2 * math.pi) * math.prod(
            cdf(u - v) for v in others)

    return integrate.quad(f, 0.0, np.inf, epsabs=0.0, epsrel=1e-10, limit=200)[0]


def test_utility_transport_keeps_every_record_in_its_level_and_inverts(rng):
    from bayesynth.models.layout import mnp_levels

    n, m = 400, 3
    M = rng.normal(size=(n, m)) * 2
    U = M + rng.normal(size=(n, m))
    codes = mnp_levels(U)
    codes[rng.random(n) < 0.2] = -2  # missing: no constraint
    M2 = 3.0 * M - 0.5
    U2, w = K.utility_transport(U, M, M2, codes)
    obs = codes != -2
    np.testing.assert_array_equal(mnp_levels(U2[obs]), codes[obs])
    U3, w3 = K.utility_transport(U2, M2, M, codes)
    np.testing.assert_allclose(U3, U, atol=1e-7)
    assert abs(w + w3) < 1e-8 * max(1.0, abs(w))
    # moving one column's means: the shortcut over the unchanged columns is the full map
    M1 = M.copy()
    M1[:, 1] = 2.0 * M[:, 1] + 0.3
    changed = np.array([False, True, False])
    Ua, wa = K.utility_transport(U, M, M1, codes, changed)
    Ub, wb = K.utility_transport(U, M, M1, codes)
    np.testing.assert_allclose(Ua, Ub, atol=1e-9)
    assert abs(wa - wb) < 1e-9 * max(1.0, abs(wb))
    assert not np.allclose(Ua[:, 0], U[:, 0])  # records that won column 1 moved every column
    # the compiled map the sampler uses is this one
    for M_new, ch in ((M2, np.ones(3, dtype=bool)), (M1, changed)):
        Uc = U.copy()
        wc = K._transport_block(U, M, M_new, codes, ch, Uc)
        Ur, wr = K.utility_transport(U, M, M_new, codes, ch)
        np.testing.assert_allclose(Uc, Ur, rtol=1e-12, atol=1e-12)
        assert abs(wc - wr) < 1e-9 * max(1.0, abs(wr))


def _three_level_probit(rng):
    """A three-level multinomial probit block of 30 records (three missing), one factor."""
    from bayesynth.models.layout import CategoricalBlock, mnp_levels

    n, m = 30, 2
    eta = rng.normal(size=(n, 1))
    alpha0 = np.array([0.4, -0.6])
    Lam0 = np.array([[1.2], [-0.8]])
    M0 = alpha0 + eta @ Lam0.T
    util = M0 + rng.normal(size=(n, m))
    y = mnp_levels(util)  # -1 the reference, else the column
    y[:3] = -2  # three missing values
    block = CategoricalBlock("g", np.array([0, 1]), ("r", "a", "b"),
                             np.where(y >= -1, y + 1, -1), "mnp", 0)
    lay = LatentLayout._with_kernel_arrays(n, ["g[a]", "g[b]"], [block], [])
    np.testing.assert_array_equal(lay.k_mnp_codes[0], y)
    return eta, alpha0, Lam0, M0, util, y, lay


def _grid_moments(log_density, grid):
    """Mean and sd of a one-dimensional density known up to a constant, on a grid."""
    logd = np.array([log_density(s) for s in grid])
    w = np.exp(logd - logd.max())
    assert w[0] < 1e-8 and w[-1] < 1e-8  # the grid covers the density
    w /= w.sum()
    mean = (grid * w).sum()
    return mean, np.sqrt(((grid - mean) ** 2 * w).sum())


def _assert_draws_match(draws, mean, sdv):
    """Draws of a chain match a density's mean and sd within 4.5 Monte Carlo standard errors."""
    ess = float(az.ess(draws[None, :]))
    assert ess > 1000, ess
    assert abs(draws.mean() - mean) < 4.5 * sdv / np.sqrt(ess), (draws.mean(), mean, ess)
    # sd of the sample sd of (nearly) normal draws: sd / sqrt(2 ess)
    assert abs(draws.std() - sdv) < 4.5 * sdv / np.sqrt(2 * ess), (draws.std(), sdv)


@pytest.mark.parametrize("local", [None, [1]], ids=["block", "one column"])
def test_utility_location_transport_samples_the_line_density(rng, local):
    """The intercept shift with utilities transported, alternated with the Gibbs sweep of the
    utilities, on a three-level multinomial probit with its loadings fixed: the shift s of
    the moved columns' intercepts must follow prior(alpha0 + s) prod_i P(y_i | M0_i + s)
    (Jacobian 1), with the probabilities computed by quadrature (no formula shared with the
    kernel)."""
    eta, alpha0, Lam0, M0, util, y, lay = _three_level_probit(rng)
    n, m = util.shape
    a_mu, a_sd = np.array([1.0, 0.0]), np.array([0.4, 0.5])  # a prior the data must weigh
    sel = np.zeros(m, dtype=bool)
    sel[slice(None) if local is None else local] = True
    j0 = int(np.flatnonzero(sel)[0])

    def log_line(s):
        d = np.where(sel, s, 0.0)
        out = stats.norm.logpdf(alpha0 + d, a_mu, a_sd).sum()
        return out + sum(np.log(_mnp_probability(M0[i] + d, y[i])) for i in range(n)
                         if y[i] > -2)

    mean, sdv = _grid_moments(log_line, np.linspace(-5.0, 5.0, 1001))

    z = np.asfortranarray(util)
    alpha = alpha0.copy()
    T = 20_000
    shift = np.empty(T)
    for t in range(T):
        K.draw_z(rng, z, K.factor_mean(alpha, Lam0, eta), np.ones(m), lay, out=z)
        alpha, _ = K.draw_utility_location_transport(rng, z, alpha, Lam0, eta, lay, a_mu, a_sd,
                                                     np.array([0.8]), groups=[(0, local)])
        shift[t] = alpha[j0] - alpha0[j0]
    np.testing.assert_allclose(alpha - alpha0, np.where(sel, shift[-1], 0.0), atol=1e-12)
    assert lay.bounds_satisfied(z)
    _assert_draws_match(shift[1000:], mean, sdv)


@pytest.mark.parametrize("local", [None, [1]], ids=["block", "one column"])
def test_utility_scale_transport_samples_the_orbit_density(rng, local):
    """The scale move with utilities transported, alternated with the Gibbs sweep of the
    utilities, on one direction (alpha0, Lambda0) of a three-level multinomial probit: log c of
    the scaled columns (the block, or one column) must follow prior(theta(c)) c^(m (k + 1))
    prod_i P(y_i | M(c)_i) (the density of the ray, t prior of the loadings with phi integrated
    out), with the probabilities computed by quadrature (no formula shared with the
    kernel)."""
    nu, tau = 3.0, np.array([1.5])
    eta, alpha0, Lam0, M0, util, y, lay = _three_level_probit(rng)
    (n, m), k = util.shape, eta.shape[1]
    a_mu, a_sd = np.array([0.2, 0.0]), np.array([1.0, 2.0])

    sel = np.zeros(m, dtype=bool)
    sel[slice(None) if local is None else local] = True
    j0 = int(np.flatnonzero(sel)[0])

    def log_ray(s):
        c = np.where(sel, np.exp(s), 1.0)
        out = stats.norm.logpdf(c * alpha0, a_mu, a_sd).sum()
        out += -0.5 * (nu + 1) * np.log1p(tau * (c[:, None] * Lam0) ** 2 / nu).sum()
        out += sel.sum() * (k + 1) * s
        return out + sum(np.log(_mnp_probability(c * M0[i], y[i])) for i in range(n) if y[i] > -2)

    mean, sdv = _grid_moments(log_ray, np.linspace(-11.0, 2.5, 1351))

    z = np.asfortranarray(util)
    assert lay.bounds_satisfied(z)
    alpha, Lam = alpha0.copy(), Lam0.copy()
    T = 20_000
    log_c = np.empty(T)
    for t in range(T):
        K.draw_z(rng, z, K.factor_mean(alpha, Lam, eta), np.ones(m), lay, out=z)
        c, _ = K.draw_utility_scale_transport(rng, z, alpha, Lam, eta, lay, a_mu, a_sd, tau,
                                              nu, np.array([0.6]), groups=[(0, local)])
        alpha, Lam = alpha * c, Lam * c[:, None]
        log_c[t] = np.log(alpha[j0] / alpha0[j0])
    ratio = np.where(sel, alpha[j0] / alpha0[j0], 1.0)
    np.testing.assert_allclose(alpha, alpha0 * ratio)
    np.testing.assert_allclose(Lam, Lam0 * ratio[:, None])
    assert lay.bounds_satisfied(z)
    _assert_draws_match(log_c[1000:], mean, sdv)
