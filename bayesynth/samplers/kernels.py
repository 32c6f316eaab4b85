"""Pure Gibbs kernels of the rank-probit copula factor model (no PyMC inside).

Each ``draw_<block>(rng, ...)`` returns a draw from one full conditional of

    z_i = alpha + Lambda eta_i + eps_i,  eps_i ~ N(0, diag(1/prec)),  eta_i ~ N(0, I_k),
    lambda_jh ~ N(0, 1/(phi_jh tau_h)),  tau_h = prod_{l<=h} delta_l,
    prec_j ~ Gamma(a_sigma, b_sigma),  alpha_j ~ N(m, s^2)  (level columns only),
    z in the rank-probit event E

(Feldman & Kowal 2022, section 4.2; Bhattacharya & Dunson 2011 for phi and delta). Arrays use
``z`` of shape (n, p*), ``eta`` (n, k), ``Lambda`` (p*, k), ``alpha_full`` (p*,) with zeros outside
the level columns, and ``prec`` (p*,) for the residual precisions sigma_j^-2. Every kernel is
tested against its closed form in ``tests/samplers``.
"""

from __future__ import annotations

import ctypes
import math
import warnings
from collections.abc import Sequence

import numba
import numpy as np
from numba.extending import get_cython_function_address
from scipy.linalg import cholesky, solve_triangular
from scipy.special import log_ndtr, ndtri_exp

from bayesynth.models.layout import LatentLayout
from bayesynth.samplers.rng import new_state, normal, standard_normal, uniform, uniform_pos
from bayesynth.samplers.truncnorm import _tn_std

__all__ = [
    "draw_z",
    "draw_eta",
    "unconstrained_patterns",
    "draw_eta_collapsed",
    "draw_Lambda",
    "draw_Lambda_marginal_phi",
    "observed_cross_products",
    "redraw_unconstrained",
    "draw_prec",
    "draw_alpha",
    "draw_alpha_collapsed",
    "draw_categorical_rows",
    "draw_mgp",
    "draw_column_scale",
    "draw_translation",
    "draw_score_translation",
    "score_translation_conditional",
    "draw_warp",
    "draw_factor_scale",
    "draw_utility_scale",
    "draw_utility_scale_transport",
    "factor_mean",
    "marginal_loadings_logp",
    "draw_loadings_hmc",
    "draw_rotation",
]


def factor_mean(alpha_full: np.ndarray, Lambda: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """``alpha + eta @ Lambda.T`` as an (n, p*) array in Fortran order (columns contiguous).

    Parameters
    ----------
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the level columns).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.

    Returns
    -------
    numpy.ndarray, shape (n, p*)
        The latent mean, Fortran-ordered.
    """
    muT = Lambda @ eta.T  # (p*, n), C order
    muT += alpha_full[:, None]
    return muT.T


# ------------------------------------------------------------------------------------ z step


@numba.njit(cache=True)
def _z_sweep(st, sp, zT, muT, sd, lvl_cols, lvl_order, lvl_npos, ord_cols, ord_idx, grp_start,
             grp_off, mis_idx, mis_off, mnp_cols, mnp_off, mnp_codes,
             scratch):  # pragma: no cover - compiled
    n = zT.shape[1]
    inf = np.inf
    # Multinomial-probit utility columns, one column of a block at a time. Record i with the
    # level of column c needs z_ic > max(0, other utilities); with the level of another column
    # d, z_ic < z_id; at the reference level, z_ic < 0; without information, unconstrained.
    for b in range(mnp_off.shape[0] - 1):
        c0 = mnp_off[b]
        c1 = mnp_off[b + 1]
        codes = mnp_codes[b]
        for cc in range(c0, c1):
            j = mnp_cols[cc]
            local = cc - c0
            s = sd[j]
            inv = 1.0 / s
            zj = zT[j]
            mj = muT[j]
            for i in range(n):
                y = codes[i]
                m = mj[i]
                if y == -2:
                    zj[i] = m + s * normal(st, sp)
                elif y == local:
                    lo = 0.0
                    for oc in range(c0, c1):
                        if oc != cc:
                            v = zT[mnp_cols[oc], i]
                            if v > lo:
                                lo = v
                    x = m + s * _tn_std(st, sp, (lo - m) * inv, inf)
                    zj[i] = x if x > lo else np.nextafter(lo, inf)
                else:
                    hi = 0.0 if y == -1 else zT[mnp_cols[c0 + y], i]
                    x = m + s * _tn_std(st, sp, -inf, (hi - m) * inv)
                    zj[i] = x if x < hi else np.nextafter(hi, -inf)
    # Level columns of categorical variables: independent sign constraints, the records with
    # z > 0 first (lvl_order), then those with z < 0.
    for c in range(lvl_cols.shape[0]):
        j = lvl_cols[c]
        s = sd[j]
        inv = 1.0 / s
        zj = zT[j]
        mj = muT[j]
        order = lvl_order[c]
        npos = lvl_npos[c]
        for r in range(npos):
            i = order[r]
            m = mj[i]
            x = m + s * _tn_std(st, sp, -m * inv, inf)
            zj[i] = x if x > 0.0 else np.nextafter(0.0, 1.0)
        for r in range(npos, n):
            i = order[r]
            m = mj[i]
            x = m + s * _tn_std(st, sp, -inf, -m * inv)
            zj[i] = x if x < 0.0 else np.nextafter(0.0, -1.0)
    # Ordered columns: sweep the tie groups from the lowest value up. Group g given the others
    # is a set of independent truncated normals between max z of group g-1 (already updated)
    # and min z of group g+1 (not yet updated). The column is first gathered into sorted order
    # (zs, ms) so that the sweep reads memory sequentially, then scattered back.
    zs = scratch[0]
    ms = scratch[1]
    gmin = scratch[2]
    for c in range(ord_cols.shape[0]):
        j = ord_cols[c]
        s = sd[j]
        inv = 1.0 / s
        zj = zT[j]
        mj = muT[j]
        g0 = grp_off[c]
        G = grp_off[c + 1] - g0 - 1
        r0 = grp_start[g0]
        m = grp_start[g0 + G] - r0
        for r in range(m):
            i = ord_idx[r0 + r]
            zs[r] = zj[i]
            ms[r] = mj[i]
        for g in range(G):
            mn = inf
            for r in range(grp_start[g0 + g] - r0, grp_start[g0 + g + 1] - r0):
                if zs[r] < mn:
                    mn = zs[r]
            gmin[g] = mn
        lo = -inf
        for g in range(G):
            hi = gmin[g + 1] if g + 1 < G else inf
            mx = -inf
            for r in range(grp_start[g0 + g] - r0, grp_start[g0 + g + 1] - r0):
                mu_i = ms[r]
                x = mu_i + s * _tn_std(st, sp, (lo - mu_i) * inv, (hi - mu_i) * inv)
                if x <= lo:
                    x = np.nextafter(lo, inf)
                elif x >= hi:
                    x = np.nextafter(hi, -inf)
                zs[r] = x
                if x > mx:
                    mx = x
            lo = mx
        for r in range(m):
            zj[ord_idx[r0 + r]] = zs[r]
        for r in range(mis_off[c], mis_off[c + 1]):
            i = mis_idx[r]
            zj[i] = mj[i] + s * normal(st, sp)


def draw_z(
    rng: np.random.Generator,
    z: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    layout: LatentLayout,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """One Gibbs sweep of the latent data under the rank-probit constraints.

    Each z_ij is drawn from N(mu_ij, sd_j^2) truncated to its bounds given all other z: for an
    ``"rpl"`` level column (0, inf) or (-inf, 0); for a ``"mnp"`` utility column
    (max(0, the record's other utilities), inf) at the record's level, (-inf, the record's
    winning utility) at another level and (-inf, 0) at the reference level; for an ordered
    column (max z of the next lower value, min z of the next higher value); unbounded where the
    value is missing. Ordered columns are
    updated one tie group at a time, all records of a group at once (they are conditionally
    independent given the neighbouring groups).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Current latent data; must satisfy the constraints.
    mu : numpy.ndarray, shape (n, p*)
        ``alpha + eta @ Lambda.T``; Fortran order avoids a copy.
    sd : numpy.ndarray, shape (p*,)
        Residual standard deviations sigma_j.
    layout : LatentLayout
        The constraint structure.
    out : numpy.ndarray, optional
        Array to write into (may be ``z`` itself for an in-place update; it must then be in
        Fortran order). By default a new Fortran-ordered array.

    Returns
    -------
    numpy.ndarray
        The new latent data, shape (n, p*).
    """
    if out is None:
        out = np.array(z, order="F", dtype=np.float64, copy=True)
    elif out is not z:
        out[...] = z
    if not out.flags.f_contiguous:
        raise ValueError("draw_z: `out` must be Fortran-ordered (columns contiguous).")
    muT = np.ascontiguousarray(np.asarray(mu, dtype=np.float64).T)
    sd = np.ascontiguousarray(sd, dtype=np.float64)
    max_groups = max((o.n_groups for o in layout.ordered), default=0)
    st, sp = new_state(rng)
    _z_sweep(
        st, sp, out.T, muT, sd,
        layout.k_lvl_cols, layout.k_lvl_order, layout.k_lvl_npos,
        layout.k_ord_cols, layout.k_ord_idx, layout.k_grp_start, layout.k_grp_off,
        layout.k_mis_idx, layout.k_mis_off,
        layout.k_mnp_cols, layout.k_mnp_off, layout.k_mnp_codes,
        np.empty((3, max(max_groups, layout.n) + 1)),
    )
    return out


def _log_uniform(rng: np.random.Generator) -> float:
    """Return log U for U ~ Uniform[0, 1) drawn from ``rng``.

    -inf for U = 0, which ``Generator.random`` returns with probability 2^-53 (``math.log``
    would raise there).
    """
    u = rng.random()
    return math.log(u) if u > 0.0 else -math.inf


# ----------------------------------------------------------------------- conjugate Gaussian


def unconstrained_patterns(
    n: int, p: int, unconstrained: Sequence[tuple[int, np.ndarray]]
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Group the records by the set of latent columns the data leave unconstrained on them.

    Parameters
    ----------
    n, p : int
        Records and latent columns.
    unconstrained : sequence of (int, numpy.ndarray)
        Column index and its unconstrained records (``LatentLayout.unconstrained_records``).

    Returns
    -------
    mask : numpy.ndarray of bool, shape (n, p)
        True where the latent value is unconstrained.
    groups : list of (numpy.ndarray, numpy.ndarray)
        Per pattern, its unconstrained columns and its records (every record in one group).
    """
    mask = np.zeros((n, p), dtype=bool)
    for j, U in unconstrained:
        mask[U, j] = True
    if not mask.any():
        return mask, [(np.zeros(0, dtype=np.int64), np.arange(n))]
    pats, inv = np.unique(mask, axis=0, return_inverse=True)
    inv = np.ravel(inv)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(pats) + 1))
    groups = [(np.flatnonzero(pats[g]), order[bounds[g]:bounds[g + 1]])
              for g in range(len(pats))]
    return mask, groups


@numba.njit(cache=True)
def _eta_by_pattern(P, LtS, Lambda, rhs, noise, col_idx, col_off, row_idx, row_off,
                    eta):  # pragma: no cover - compiled
    """Draw the factor scores pattern by pattern (the compiled loop of :func:`draw_eta`).

    Per pattern g: P_g = P - sum over its unconstrained columns of prec_j lambda_j lambda_j',
    its Cholesky factor L, and for each of its records eta_i = L'^-1 (L^-1 rhs_i + e_i)
    (mean P_g^-1 rhs_i, covariance (L L')^-1 = P_g^-1), written into ``eta``.
    """
    k = P.shape[0]
    Pg = np.empty((k, k))
    m = np.empty(k)
    for g in range(col_off.shape[0] - 1):
        for a in range(k):
            for b in range(k):
                Pg[a, b] = P[a, b]
        for q in range(col_off[g], col_off[g + 1]):
            j = col_idx[q]
            for a in range(k):
                la = LtS[a, j]
                for b in range(k):
                    Pg[a, b] -= la * Lambda[j, b]
        L = np.linalg.cholesky(Pg)
        r0, r1 = row_off[g], row_off[g + 1]
        if r1 - r0 >= 16:  # many records: two matrix products (BLAS) with L^-1
            Linv = np.zeros((k, k))
            for c in range(k):  # L Linv = I, column by column
                for a in range(c, k):
                    acc = 1.0 if a == c else 0.0
                    for b in range(c, a):
                        acc -= L[a, b] * Linv[b, c]
                    Linv[a, c] = acc / L[a, a]
            rows = row_idx[r0:r1]
            R = np.empty((r1 - r0, k))
            E = np.empty((r1 - r0, k))
            for q in range(r1 - r0):
                for a in range(k):
                    R[q, a] = rhs[rows[q], a]
                    E[q, a] = noise[rows[q], a]
            # rows: m_i' = rhs_i' Linv', eta_i' = (m_i + e_i)' Linv
            M = np.dot(R, np.ascontiguousarray(Linv.T)) + E
            Eg = np.dot(M, Linv)
            for q in range(r1 - r0):
                for a in range(k):
                    eta[rows[q], a] = Eg[q, a]
            continue
        U = np.ascontiguousarray(L.T)  # rows of L' contiguous for the back substitution
        for q in range(r0, r1):
            i = row_idx[q]
            for a in range(k):  # L m = rhs_i
                acc = rhs[i, a]
                for b in range(a):
                    acc -= L[a, b] * m[b]
                m[a] = acc / L[a, a]
            for a in range(k - 1, -1, -1):  # L' eta_i = m + e_i
                acc = m[a] + noise[i, a]
                for b in range(a + 1, k):
                    acc -= U[a, b] * eta[i, b]
                eta[i, a] = acc / U[a, a]
    return None


def draw_eta(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    prec: np.ndarray,
    patterns: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]] | None = None,
) -> np.ndarray:
    """Draw the factor scores from their normal full conditional.

    Factor scores: eta_i | - ~ N(P^-1 Lambda' Sigma^-1 (z_i - alpha), P^-1), P = I + Lambda'
    Sigma^-1 Lambda, independently over records.

    With ``patterns``, the latent values the data leave unconstrained are integrated out:
    record i's scores are drawn given its constrained columns O_i only,

        eta_i ~ N(P_i^-1 Lambda_O' Sigma_O^-1 (z_iO - alpha_O), P_i^-1),
        P_i = I + sum_(j in O_i) lambda_j lambda_j' / sigma_j^2

    (one Cholesky factor per pattern of unconstrained columns). Follow it with
    :func:`redraw_unconstrained` before anything conditions on those values: the two draw
    (eta, z_U) as one exact block. Given every column instead, an unconstrained value drawn
    from N(alpha_j + lambda_j' eta_i, sigma_j^2) acts on the next draw of eta_i as an
    observation of precision 1 / sigma_j^2; for a column whose factors explain nearly all of
    its variance that pins eta_i along lambda_j to its last value, and the scores of the
    records not shown that column move in steps of about sigma_j / |lambda_j| per iteration.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the level columns).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions sigma_j^-2 (Sigma^-1 = diag(prec)).
    patterns : (mask, groups), optional
        From :func:`unconstrained_patterns`; default: every value constrains the scores.

    Returns
    -------
    numpy.ndarray, shape (n, k)
        The new factor scores.
    """
    n = z.shape[0]
    k = Lambda.shape[1]
    LtS = Lambda.T * prec  # (k, p*)
    P = np.eye(k) + LtS @ Lambda
    if patterns is not None and any(len(cols) for cols, _ in patterns[1]):
        mask, groups = patterns
        if mask.shape != z.shape:
            raise ValueError(f"draw_eta: the patterns' mask has shape {mask.shape}, the latent "
                             f"data {z.shape}")
        W = z - alpha_full
        W[mask] = 0.0  # (a copy: z is not modified)
        rhs = W @ LtS.T  # Lambda_O' Sigma_O^-1 (z_iO - alpha_O), (n, k)
        noise = standard_normal(rng, (n, k))
        eta = np.empty((n, k))
        col_off = np.r_[0, np.cumsum([len(c) for c, _ in groups])].astype(np.int64)
        row_off = np.r_[0, np.cumsum([len(r) for _, r in groups])].astype(np.int64)
        col_idx = np.concatenate([c for c, _ in groups]).astype(np.int64)
        row_idx = np.concatenate([r for _, r in groups]).astype(np.int64)
        _eta_by_pattern(np.ascontiguousarray(P), np.ascontiguousarray(LtS),
                        np.ascontiguousarray(Lambda, dtype=np.float64),
                        np.ascontiguousarray(rhs), noise, col_idx, col_off, row_idx, row_off,
                        eta)
        return eta
    L = cholesky(P, lower=True)
    Linv = solve_triangular(L, np.eye(k), lower=True)  # L^-1; P^-1 = Linv' Linv
    B = Linv.T @ (Linv @ LtS)  # P^-1 Lambda' Sigma^-1, (k, p*)
    eta = z @ B.T  # (n, k)
    eta -= B @ alpha_full
    # e @ Linv has covariance Linv' Linv = P^-1.
    eta += standard_normal(rng, (n, k)) @ Linv
    return eta


@numba.njit(cache=True)
def _log_ndtr(x):  # pragma: no cover - compiled
    """Return log Phi(x), accurate in both tails."""
    if x > 6.0:
        return -0.5 * math.erfc(x / math.sqrt(2.0))
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    return (-0.5 * x * x - math.log(-x) - 0.5 * math.log(2.0 * math.pi)
            + math.log1p(_mills_series(x)))


@numba.njit(inline="always")
def _mills_series(x):  # pragma: no cover - compiled
    """Return s with Phi(x) = phi(x) (1 + s) / (-x), the asymptotic series of the Mills ratio.

    Six terms; at x <= -20 accurate to ~1e-12 (used by :func:`_log_ndtr` and
    :func:`_tail_hazard`).
    """
    r = 1.0 / (x * x)
    return r * (-1.0 + r * (3.0 + r * (-15.0 + r * (105.0 + r * (-945.0 + r * 10395.0)))))


@numba.njit(inline="always")
def _log_phi_acc(x, prod, acc):  # pragma: no cover - compiled
    """Fold log Phi(x) into a running (product, log-sum) pair; see :func:`_level_log_ratio`."""
    if x > 8.3:
        return prod, acc  # Phi(x) rounds to 1 in double precision
    if x < -20.0:
        return prod, acc + _log_ndtr(x)
    if prod < 1e-200:  # Phi(x) >= 2.8e-89 here: flush before the product could underflow
        acc += math.log(prod)
        prod = 1.0
    return prod * 0.5 * math.erfc(-x * 0.7071067811865476), acc


@numba.njit(cache=True)
def _level_log_ratio(eta_new, eta_old, a, L, inv_sd, signT):  # pragma: no cover - compiled
    """Compute the per-record log ratio of the level columns' probit products, new to old.

    Per record: sum_j [log Phi(s_ij v_ij(new) / sd_j) - log Phi(s_ij v_ij(old) / sd_j)],
    v_ij = a_j + L_j' eta_i, over the level columns j.

    Multiplies the Phi values and takes one logarithm per record and state.
    """
    n, k = eta_new.shape
    m = a.shape[0]
    out = np.empty(n)
    for i in range(n):
        p1 = 1.0
        s1 = 0.0
        p0 = 1.0
        s0 = 0.0
        for j in range(m):
            v1 = a[j]
            v0 = a[j]
            for h in range(k):
                v1 += L[j, h] * eta_new[i, h]
                v0 += L[j, h] * eta_old[i, h]
            f = signT[j, i] * inv_sd[j]
            p1, s1 = _log_phi_acc(f * v1, p1, s1)
            p0, s0 = _log_phi_acc(f * v0, p0, s0)
        out[i] = (s1 + math.log(p1)) - (s0 + math.log(p0))
    return out


def draw_eta_collapsed(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    prec: np.ndarray,
    eta: np.ndarray,
    level_cols: np.ndarray,
    level_sign: np.ndarray,
) -> tuple[np.ndarray, float]:
    """Factor scores with the level columns' latent values integrated out (Metropolis-Hastings).

    Given the factor scores, the level columns of categorical variables are independent
    truncated normals, so integrating them out gives, per record,

        p(eta_i | z_ordered, y) propto N(eta_i; m_i, V) prod_j Phi(s_ij (alpha_j + lambda_j' eta_i)
        / sigma_j),

    where N(m_i, V) is the normal full conditional from the ordered columns alone and s_ij = +1
    for the record's level, -1 otherwise. Proposing from N(m_i, V) (an independence proposal),
    the acceptance ratio is the ratio of the probit products. This breaks the strong coupling
    between eta and the level columns' latent values that makes the plain Gibbs step mix slowly;
    the caller must draw the level columns' z given the new eta next (the z step does), which
    makes the pair a partially collapsed Gibbs update (van Dyk & Park 2008).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data (only the columns outside ``level_cols`` enter the proposal).
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the level columns).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions sigma_j^-2 of every column.
    eta : numpy.ndarray, shape (n, k)
        Current factor scores.
    level_cols : numpy.ndarray
        Latent indices of the level columns.
    level_sign : numpy.ndarray, shape (len(level_cols), n)
        +1 where the record has that level, -1 elsewhere (``LatentLayout.k_lvl_sign``).

    Returns
    -------
    eta : numpy.ndarray, shape (n, k)
        The new factor scores (the current ones for records whose proposal was rejected).
    acceptance : float
        Share of records whose proposal was accepted.

    References
    ----------
    van Dyk, D. A. and Park, T. (2008). Partially collapsed Gibbs samplers. *JASA*, 103,
    790-796.
    """
    prec_ord = np.array(prec, dtype=float, copy=True)
    prec_ord[level_cols] = 0.0  # the ordered columns alone
    prop = draw_eta(rng, z, alpha_full, Lambda, prec_ord)
    log_ratio = _level_log_ratio(
        np.ascontiguousarray(prop), np.ascontiguousarray(eta),
        np.ascontiguousarray(alpha_full[level_cols]), np.ascontiguousarray(Lambda[level_cols]),
        np.sqrt(prec[level_cols]), level_sign)
    accept = np.log(rng.random(len(eta))) < log_ratio
    return np.where(accept[:, None], prop, eta), float(accept.mean())


def observed_cross_products(
    z: np.ndarray,
    alpha_full: np.ndarray,
    eta: np.ndarray,
    unconstrained: Sequence[tuple[int, np.ndarray]] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Cross products of the factor scores with themselves and with each latent column.

    For a column j whose latent values are unconstrained on the records U_j (the data say
    nothing about them), ``z_Uj`` given the parameters is N(alpha_j + eta_U lambda_j,
    sigma_j^2) whatever the data, so it can be integrated out of the conditional of
    (lambda_j, sigma_j): that conditional is the one given the other records O_j only. Given
    all n records instead, a column shown for m of them moves its loadings by about
    sigma_j / sqrt(n) per iteration against a posterior spread of sigma_j / sqrt(m), which for
    a column shown for few records (SD2011's ``wkabdur``, shown for 124 of 5,000) leaves its
    associations with an ESS of a few per thousand iterations. Drawing (lambda_j, z_Uj) as one
    block (lambda_j from this marginal conditional, then z_Uj from its normal conditional,
    :func:`redraw_unconstrained`) is an exact Gibbs block.

    Parameters
    ----------
    z : numpy.ndarray, shape (n, p)
        Latent data.
    alpha_full : numpy.ndarray, shape (p,)
        Intercepts.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    unconstrained : sequence of (int, numpy.ndarray)
        Column index (into ``z``) and its unconstrained records.

    Returns
    -------
    G : numpy.ndarray, shape (p, k, k)
        ``eta_O' eta_O`` per column (all records for a column not listed).
    EtZ : numpy.ndarray, shape (k, p)
        ``eta_O' (z_Oj - alpha_j)`` per column.
    """
    n, k = eta.shape
    p = z.shape[1]
    EtE = eta.T @ eta
    EtZ = eta.T @ z - np.outer(eta.sum(axis=0), alpha_full)  # (k, p)
    G = np.broadcast_to(EtE, (p, k, k)).copy()
    grams: dict[int, np.ndarray] = {}  # columns of one categorical variable share their records
    for j, U in unconstrained:
        key = id(U)
        if 2 * len(U) <= n:
            if key not in grams:
                E = eta[U]
                grams[key] = EtE - E.T @ E
            G[j] = grams[key]
            EtZ[:, j] -= eta[U].T @ (z[U, j] - alpha_full[j])
        else:  # most records unconstrained: sum over the others directly
            shown = np.ones(n, dtype=bool)
            shown[U] = False
            E = eta[shown]
            if key not in grams:
                grams[key] = E.T @ E
            G[j] = grams[key]
            EtZ[:, j] = E.T @ (z[shown, j] - alpha_full[j])
    return G, EtZ


def redraw_unconstrained(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    unconstrained: Sequence[tuple[int, np.ndarray]],
) -> None:
    """Redraw the unconstrained latent values from N(alpha_j + eta_i' lambda_j, sigma_j^2).

    Completes the partially collapsed blocks of :func:`draw_Lambda`,
    :func:`draw_Lambda_marginal_phi` and :func:`draw_prec` with ``unconstrained``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p)
        Latent data, updated in place.
    alpha_full, sd : numpy.ndarray, shape (p,)
        Intercepts and residual standard deviations.
    Lambda : numpy.ndarray, shape (p, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    unconstrained : sequence of (int, numpy.ndarray)
        Column index and its unconstrained records.
    """
    if not len(unconstrained):
        return
    cols = np.array([j for j, _ in unconstrained], dtype=np.int64)
    off = np.zeros(len(unconstrained) + 1, dtype=np.int64)
    np.cumsum([len(U) for _, U in unconstrained], out=off[1:])
    rows = np.concatenate([U for _, U in unconstrained]).astype(np.int64, copy=False)
    n, p = z.shape
    if (len(rows) and (rows.min() < 0 or rows.max() >= n)) or cols.min() < 0 or cols.max() >= p:
        raise IndexError("redraw_unconstrained: a record or column index is out of range")
    # one call draws the same stream as one call per column, in order
    noise = rng.standard_normal(int(off[-1]))
    if 8 * off[-1] < len(eta) * len(cols):  # few entries: a product per column's records
        for q, (j, U) in enumerate(unconstrained):
            z[U, j] = alpha_full[j] + eta[U] @ Lambda[j] + sd[j] * noise[off[q]:off[q + 1]]
        return
    # the listed columns' means for every record in one matrix product (BLAS), then the
    # listed entries written; measured against the loop above on SD2011's shape: 2.9 times
    # as fast with 70% of the entries listed, 1.8 times with 18%, 1.3 times slower with 3%
    M = np.ascontiguousarray(eta, dtype=np.float64) @ np.ascontiguousarray(Lambda[cols].T)
    _redraw_records(z, np.ascontiguousarray(alpha_full, dtype=np.float64), M,
                    np.ascontiguousarray(sd, dtype=np.float64), cols, off, rows, noise)


@numba.njit(cache=True, nogil=True)
def _redraw_records(z, alpha_full, M, sd, cols, off, rows, noise):  # pragma: no cover
    """z[i, j] = alpha_j + M[i, q] + sd_j e for each listed (column j = cols[q], record i).

    The compiled loop of :func:`redraw_unconstrained`: column ``cols[q]``'s records are
    ``rows[off[q]:off[q + 1]]``, their noise ``noise[off[q]:off[q + 1]]``, and ``M[:, q]`` is
    eta lambda_j.
    """
    for q in range(cols.shape[0]):
        j = cols[q]
        a_j = alpha_full[j]
        s_j = sd[j]
        for t in range(off[q], off[q + 1]):
            i = rows[t]
            z[i, j] = a_j + M[i, q] + s_j * noise[t]


def draw_Lambda(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    eta: np.ndarray,
    prec: np.ndarray,
    prior_prec: np.ndarray,
    unconstrained: Sequence[tuple[int, np.ndarray]] = (),
) -> np.ndarray:
    """Draw the loadings one row at a time from their multivariate normal full conditional.

    Loadings, one row at a time: lambda_j | - ~ N(Q_j^-1 prec_j eta'(z_j - alpha_j), Q_j^-1),
    Q_j = diag(prior_prec_j) + prec_j eta'eta.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the level columns).
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions sigma_j^-2.
    prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of the loadings (``phi_jh * tau_h`` under the MGP prior).
    unconstrained : sequence of (int, numpy.ndarray), optional
        Columns and the records whose latent values the data leave unconstrained
        (:attr:`~bayesynth.models.layout.LatentLayout.unconstrained_records`). Those values
        are integrated out: each row is drawn given the other records only (see
        :func:`observed_cross_products`); redraw them afterwards with
        :func:`redraw_unconstrained`.

    Returns
    -------
    numpy.ndarray, shape (p*, k)
        The new loadings.
    """
    p, k = prior_prec.shape
    EtE, EtZ = observed_cross_products(z, alpha_full, eta, unconstrained)
    Q = prec[:, None, None] * EtE
    Q[:, np.arange(k), np.arange(k)] += prior_prec
    L = np.linalg.cholesky(Q)  # (p*, k, k), lower
    b = (prec[None, :] * EtZ).T[..., None]  # (p*, k, 1)
    y = np.linalg.solve(L, b)
    LT = np.swapaxes(L, 1, 2)
    mean = np.linalg.solve(LT, y)
    noise = np.linalg.solve(LT, rng.standard_normal((p, k, 1)))
    return (mean + noise)[..., 0]


def draw_alpha(
    rng: np.random.Generator,
    z: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    prec: np.ndarray,
    cols: np.ndarray,
    prior_mu: np.ndarray | float = 0.0,
    prior_sigma: np.ndarray | float = 1.0,
) -> np.ndarray:
    """Draw the intercepts of the level columns ``cols`` from their normal full conditional.

    Intercepts of the level columns ``cols``: alpha_j | - ~ N(v (prec_j S_j + m/s^2), v),
    v = 1/(n prec_j + 1/s^2), S_j = sum_i (z_ij - lambda_j' eta_i).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions sigma_j^-2.
    cols : numpy.ndarray
        Latent indices of the columns whose intercepts are drawn.
    prior_mu : array_like, default 0.0
        Prior mean m (scalar or one per column of ``cols``).
    prior_sigma : array_like, default 1.0
        Prior standard deviation s (scalar or one per column of ``cols``).

    Returns
    -------
    numpy.ndarray, shape (len(cols),)
        The new intercepts.
    """
    n = z.shape[0]
    pj = prec[cols]
    S = z[:, cols].sum(axis=0) - Lambda[cols] @ eta.sum(axis=0)
    prior_prec = 1.0 / np.broadcast_to(np.asarray(prior_sigma, float), pj.shape) ** 2
    v = 1.0 / (n * pj + prior_prec)
    mean = v * (pj * S + prior_prec * np.broadcast_to(np.asarray(prior_mu, float), pj.shape))
    return mean + np.sqrt(v) * rng.standard_normal(len(cols))


def draw_prec(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    a_sigma: np.ndarray | float,
    b_sigma: np.ndarray | float,
    unconstrained: Sequence[tuple[int, np.ndarray]] = (),
) -> np.ndarray:
    """Residual precisions: sigma_j^-2 | - ~ Gamma(a + n/2, rate = b + SSE_j / 2).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data of the columns whose precisions are drawn.
    alpha_full : numpy.ndarray, shape (p*,)
        Their intercepts (zero where a column has none).
    Lambda : numpy.ndarray, shape (p*, k)
        Their loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    a_sigma, b_sigma : array_like
        Shape a and rate b of the gamma prior (scalars or one per column).
    unconstrained : sequence of (int, numpy.ndarray), optional
        Columns (of ``z``) and the records whose latent values the data leave unconstrained:
        integrated out, so the column's n and SSE count the other records only (see
        :func:`observed_cross_products`); redraw them afterwards with
        :func:`redraw_unconstrained`.

    Returns
    -------
    numpy.ndarray, shape (p*,)
        The new precisions, one per column of ``z``.
    """
    n = z.shape[0]
    n_j = np.full(z.shape[1], float(n))
    # SSE_j = sum_i (z_ij - alpha_j - lambda_j' eta_i)^2 from sufficient statistics, without
    # forming the n-by-p* residual matrix.
    zz = np.einsum("ij,ij->j", z, z)
    zs = z.sum(axis=0)
    es = eta.sum(axis=0)
    EtZ = eta.T @ z  # (k, p*)
    EtE = eta.T @ eta
    cross = np.einsum("jh,hj->j", Lambda, EtZ - np.outer(es, alpha_full))
    quad = np.einsum("jh,hl,jl->j", Lambda, EtE, Lambda)
    sse = zz - 2.0 * alpha_full * zs + n * alpha_full**2 - 2.0 * cross + quad
    sse = np.maximum(sse, 0.0)
    for j, U in unconstrained:  # residuals over the constraining records only
        shown = np.ones(n, dtype=bool)
        shown[U] = False
        r = z[shown, j] - alpha_full[j] - eta[shown] @ Lambda[j]
        sse[j] = float(r @ r)
        n_j[j] = float(shown.sum())
    shape = np.asarray(a_sigma, float) + 0.5 * n_j
    rate = np.asarray(b_sigma, float) + 0.5 * sse
    return rng.gamma(shape, 1.0 / rate)


def draw_mgp(
    rng: np.random.Generator,
    Lambda: np.ndarray,
    delta: np.ndarray,
    nu: float,
    delta_shape: np.ndarray,
    delta_rate: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Multiplicative gamma process shrinkage (Bhattacharya & Dunson 2011, section 3.2).

    Draws phi_jh | - ~ Gamma((nu + 1)/2, rate = (nu + tau_h lambda_jh^2)/2), then each delta_h in
    turn: delta_h | - ~ Gamma(a_h + p*(k - h + 1)/2,
    rate = b_h + 1/2 sum_{l >= h} tau_l^(h) sum_j phi_jl lambda_jl^2), tau_l^(h) = tau_l / delta_h.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    delta : numpy.ndarray, shape (k,)
        Current global shrinkage factors (not modified).
    nu : float
        Degrees of freedom of the local shrinkage, phi ~ Gamma(nu/2, rate nu/2).
    delta_shape : numpy.ndarray, shape (k,)
        Prior shapes (a1, a2, a2, ...).
    delta_rate : array_like
        Prior rates (1 in the paper).

    Returns
    -------
    phi : numpy.ndarray, shape (p*, k)
        The new local shrinkage.
    delta : numpy.ndarray, shape (k,)
        The new global shrinkage factors.
    """
    p, k = Lambda.shape
    delta = np.array(delta, dtype=float, copy=True)
    tau = np.cumprod(delta)
    L2 = Lambda**2
    phi = rng.gamma(0.5 * (nu + 1.0), 1.0 / (0.5 * (nu + tau[None, :] * L2)))
    col = (phi * L2).sum(axis=0)  # sum_j phi_jl lambda_jl^2, per factor l
    rates = np.broadcast_to(np.asarray(delta_rate, float), (k,))
    for h in range(k):
        tau_h = np.cumprod(delta)
        partial = tau_h[h:] / delta[h]
        rate = rates[h] + 0.5 * float(np.dot(partial, col[h:]))
        shape = delta_shape[h] + 0.5 * p * (k - h)
        delta[h] = rng.gamma(shape, 1.0 / rate)
    return phi, delta



def draw_column_scale(
    rng: np.random.Generator,
    Lambda: np.ndarray,
    prior_prec: np.ndarray,
    prec: np.ndarray,
    a_sigma: np.ndarray | float,
    b_sigma: np.ndarray | float,
    alpha_full: np.ndarray | None = None,
    level_cols: np.ndarray | None = None,
    alpha_prior_prec: np.ndarray | float = 1.0,
) -> np.ndarray:
    """Scale factors c_j of the parameter-expansion move on each latent column.

    The rank-probit likelihood does not change when a latent column and its parameters are
    rescaled, (z_.j, alpha_j, lambda_j, sigma_j) -> c (z_.j, alpha_j, lambda_j, sigma_j), c > 0,
    so only the priors pin the scale down and the plain Gibbs sampler random-walks along it.
    Under this group action (Liu & Sabatti 2000, Haar measure dc/c) the conditional of
    u = log c^2 is log-concave,

        log pi(u) = q u - (A_j e^u + B_j e^-u) / 2 + const,
        q = (k + 1[level column] - 2 a_sigma) / 2,
        A_j = alpha_j^2 / s_alpha^2 + sum_h prior_prec_jh lambda_jh^2,   B_j = 2 b_sigma prec_j

    (a generalised inverse Gaussian law for c^2), assuming zero-mean normal priors on alpha and
    Lambda and a Gamma(a_sigma, b_sigma) prior on prec = sigma^-2. One independence
    Metropolis-Hastings step per column, with a normal proposal at the mode of log pi and 1.5
    times its curvature scale, leaves pi invariant (the target's tails are lighter than the
    proposal's, so the step is uniformly ergodic).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings of the columns to rescale.
    prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of those loadings.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions sigma_j^-2 of those columns.
    a_sigma, b_sigma : array_like
        Shape and rate of the gamma prior on the precisions (scalars or one per column).
    alpha_full : numpy.ndarray, shape (p*,), optional
        Intercepts of those columns; with ``level_cols``, the A_j of the level columns include
        alpha_j^2 / s_alpha^2.
    level_cols : numpy.ndarray, optional
        Indices (into these columns) of the level columns, which carry an intercept.
    alpha_prior_prec : array_like, default 1.0
        Prior precisions 1 / s_alpha^2 of the intercepts (scalar or one per column).

    Returns
    -------
    numpy.ndarray, shape (p*,)
        c_j (1 where the proposal was rejected); apply as z_.j *= c_j, alpha_j *= c_j,
        lambda_j *= c_j, prec_j /= c_j^2.

    References
    ----------
    Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
    Bayesian computation. *Biometrika*, 87(2), 353-369.
    Liu, J. S. and Wu, Y. N. (1999). Parameter expansion for data augmentation. *JASA*, 94,
    1264-1274.
    """
    p, k = Lambda.shape
    A = np.einsum("jh,jh->j", prior_prec, Lambda**2)
    has_alpha = np.zeros(p)
    if alpha_full is not None and level_cols is not None and len(level_cols):
        has_alpha[level_cols] = 1.0
        A = A + has_alpha * alpha_full**2 * np.broadcast_to(alpha_prior_prec, (p,))
    B = 2.0 * np.broadcast_to(np.asarray(b_sigma, float), (p,)) * prec
    q = 0.5 * (k + has_alpha - 2.0 * np.broadcast_to(np.asarray(a_sigma, float), (p,)))
    A = np.maximum(A, 1e-300)

    def logpi(u: np.ndarray) -> np.ndarray:
        return q * u - 0.5 * (A * np.exp(u) + B * np.exp(-u))

    mode = np.log((q + np.sqrt(q * q + A * B)) / A)
    curv = 0.5 * (A * np.exp(mode) + B * np.exp(-mode))
    scale = 1.5 / np.sqrt(curv)
    u_new = mode + scale * rng.standard_normal(p)
    u_old = np.zeros(p)  # the current state is c = 1

    def logq(u: np.ndarray) -> np.ndarray:
        return -0.5 * ((u - mode) / scale) ** 2

    log_ratio = logpi(u_new) - logpi(u_old) + logq(u_old) - logq(u_new)
    accept = np.log(rng.random(p)) < log_ratio
    return np.where(accept, np.exp(0.5 * u_new), 1.0)


def draw_translation(
    rng: np.random.Generator,
    z: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    cols: np.ndarray,
) -> np.ndarray:
    """Shifts b_j of the translation move on ordered columns.

    The rank likelihood does not change when an ordered latent column is shifted,
    z_.j -> z_.j + b, so only z's normal prior N(mu_.j, sd_j^2) pins its location down, through
    the factor scores, and the plain Gibbs sampler random-walks along it. Under the additive
    group (Haar measure db, Jacobian 1) the conditional of the shift is

        b_j ~ N(mean_i(mu_ij - z_ij), sd_j^2 / n),

    an exact Gibbs draw along the orbit (Liu & Sabatti 2000). Missing entries shift with the
    rest (they are unconstrained).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z, mu : numpy.ndarray, shape (n, p*)
        Latent data and their mean ``alpha + eta @ Lambda.T``.
    sd : numpy.ndarray, shape (p*,)
        Residual standard deviations sd_j.
    cols : numpy.ndarray
        The ordered columns.

    Returns
    -------
    numpy.ndarray, shape (len(cols),)
        Apply as ``z[:, cols] += b``.
    """
    n = z.shape[0]
    cols = np.asarray(cols, dtype=np.int64)
    if not len(cols):
        return np.zeros(0)
    resid = (mu[:, cols] - z[:, cols]).mean(axis=0)
    return resid + sd[cols] / np.sqrt(n) * rng.standard_normal(len(cols))


def score_translation_conditional(
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    layout: LatentLayout,
    alpha_mu: np.ndarray,
    alpha_sd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the normal conditional of the shift d of :func:`draw_score_translation`.

    Parameters
    ----------
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the categorical columns).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    sd : numpy.ndarray, shape (p*,)
        Residual standard deviations.
    layout : LatentLayout
        Which columns are categorical, rank-likelihood or fixed.
    alpha_mu, alpha_sd : numpy.ndarray, shape (p*,)
        Normal prior of the categorical columns' intercepts.

    Returns
    -------
    mean : numpy.ndarray, shape (k,)
    cov : numpy.ndarray, shape (k, k)
    """
    n, k = eta.shape
    Q = n * np.eye(k)
    b = -eta.sum(axis=0)
    cat = layout.level_columns  # every categorical column (where alpha lives)
    if len(cat):
        L = Lambda[cat]
        w = 1.0 / np.asarray(alpha_sd, dtype=float)[cat] ** 2
        Q += (L.T * w) @ L
        b += L.T @ (w * (alpha_full[cat] - np.asarray(alpha_mu, dtype=float)[cat]))
    fixed = layout.fixed_columns
    if len(fixed):
        L = Lambda[fixed]
        w = 1.0 / np.asarray(sd, dtype=float)[fixed] ** 2
        resid = (z[:, fixed] - alpha_full[fixed]).sum(axis=0) - L @ eta.sum(axis=0)
        Q += n * (L.T * w) @ L
        b += L.T @ (w * resid)
    cov = np.linalg.inv(Q)
    cov = 0.5 * (cov + cov.T)
    return cov @ b, cov


def draw_score_translation(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    layout: LatentLayout,
    alpha_mu: np.ndarray,
    alpha_sd: np.ndarray,
) -> np.ndarray:
    """Shift of every record's factor scores, drawn exactly along the translation orbit.

    The move ``eta_i -> eta_i + d`` for every record, with the categorical columns' intercepts
    ``alpha_j -> alpha_j - lambda_j' d`` and the rank-likelihood columns' latent values
    ``z_ij -> z_ij + lambda_j' d``, leaves every categorical and rank-likelihood term of the
    likelihood unchanged (the means ``alpha_j + lambda_j' eta_i`` of the categorical columns
    do not move; the rank columns move with their means, and the rank likelihood does not see
    a shift). What changes is the scores' N(0, I) prior, the intercepts' normal prior and the
    likelihood of the columns whose latent values are fixed at normal scores (which do not
    move). Under the additive group (Haar measure dd, Jacobian 1) the conditional of d is
    normal,

        d ~ N(Q^-1 b, Q^-1),
        Q = n I + sum_cat lambda_j lambda_j' / s_aj^2 + sum_fixed n lambda_j lambda_j' / sd_j^2,
        b = -sum_i eta_i + sum_cat lambda_j (alpha_j - m_aj) / s_aj^2
            + sum_fixed lambda_j sum_i (z_ij - lambda_j' eta_i) / sd_j^2,

    an exact Gibbs draw along the orbit (Liu & Sabatti 2000). The plain updates move the mean
    of the scores, which the intercepts and the columns' locations follow, only by
    O(1/sqrt(n)) steps that the data constrain jointly; that drift moves every implied level
    probability, so they mix slowly without this move.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z, alpha_full, Lambda, eta, sd, layout, alpha_mu, alpha_sd
        As in :func:`score_translation_conditional`.

    Returns
    -------
    numpy.ndarray, shape (k,)
        The shift d. Apply it with ``eta += d``, ``alpha_full[cat] -= Lambda[cat] @ d`` and
        ``z[:, layout.rank_columns] += Lambda[rank] @ d``.
    """
    mean, cov = score_translation_conditional(z, alpha_full, Lambda, eta, sd, layout,
                                              alpha_mu, alpha_sd)
    return mean + np.linalg.cholesky(cov) @ rng.standard_normal(len(mean))


def draw_utility_scale(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    prior_prec: np.ndarray,
    alpha_prior_prec: np.ndarray,
    blocks: list[np.ndarray],
) -> np.ndarray:
    """Scale factors c_b of the joint scale move on each multinomial-probit block.

    The multinomial probit does not change when every utility of a variable is multiplied by
    c > 0 (the argmax and the comparison with the reference utility 0 are scale-free). Moving
    the block's latent values, intercepts and loading rows together,
    (z_.L, alpha_L, Lambda_L) -> c (z_.L, alpha_L, Lambda_L), with the residual scales fixed, the
    conditional along the orbit (left Haar measure dc/c, Jacobian c^d, d = n m + m_alpha + m k
    for m columns) is proportional to

        c^(d - 1) exp(-c^2 (S + A) / 2),

    with S the block's residual sum of squares (each column divided by its variance) and A the
    prior quadratic form of its intercepts and loadings (zero-mean normal priors). So
    c^2 ~ Gamma(d / 2, rate = (S + A) / 2), drawn exactly. This is the marginal-augmentation
    idea of Imai & van Dyk (2005) as an exact group move.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    alpha_full, sd : numpy.ndarray, shape (p*,)
        Intercepts and residual standard deviations.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of the loadings.
    alpha_prior_prec : numpy.ndarray, shape (p*,)
        Prior precisions of the intercepts (0 where a column has none).
    blocks : list of numpy.ndarray
        Latent columns of each block.

    Returns
    -------
    numpy.ndarray, shape (p*,)
        c for every column of a block (1 elsewhere); apply as z *= c, alpha *= c,
        Lambda *= c[:, None].

    References
    ----------
    Imai, K. and van Dyk, D. A. (2005). A Bayesian analysis of the multinomial probit model using
    marginal data augmentation. *Journal of Econometrics*, 124, 311-334.
    Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
    Bayesian computation. *Biometrika*, 87(2), 353-369.
    """
    n, k = eta.shape
    out = np.ones(Lambda.shape[0])
    for cols in blocks:
        cols = np.asarray(cols, dtype=np.int64)
        m = len(cols)
        resid = z[:, cols] - alpha_full[cols] - eta @ Lambda[cols].T
        S = float(np.sum(resid**2 / sd[cols] ** 2))
        a_pp = np.asarray(alpha_prior_prec, float)[cols]
        A = float(np.sum(a_pp * alpha_full[cols] ** 2)
                  + np.sum(prior_prec[cols] * Lambda[cols] ** 2))
        d = n * m + int(np.sum(a_pp > 0)) + m * k
        u = rng.gamma(0.5 * d, 2.0 / (S + A))
        out[cols] = np.sqrt(u)
    return out


def _transport_below(u, m, b, m2, b2):
    """Map N(m, 1) restricted to (-inf, b) onto N(m2, 1) restricted to (-inf, b2) by its CDF.

    Returns the image of ``u`` and log Phi(b2 - m2) - log Phi(b - m), the log of the ratio of
    the two truncation masses, which is what the joint density times the Jacobian of the map
    changes by (standardised arguments; arrays broadcast).
    """
    lb, lb2 = log_ndtr(b - m), log_ndtr(b2 - m2)
    u2 = m2 + ndtri_exp(np.minimum(log_ndtr(u - m) - lb, 0.0) + lb2)
    return np.minimum(u2, np.nextafter(b2, -np.inf)), lb2 - lb


def _transport_above(u, m, a, m2, a2):
    """As :func:`_transport_below` for the one-sided interval (a, inf)."""
    u2, w = _transport_below(-u, -m, -a, -m2, -a2)
    return -u2, w


# scipy's log Phi and its inverse, callable from compiled code (not cacheable: addresses)
_C_DOUBLE_FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
_c_log_ndtr = _C_DOUBLE_FN(get_cython_function_address("scipy.special.cython_special",
                                                       "__pyx_fuse_1log_ndtr"))
_c_ndtri_exp = _C_DOUBLE_FN(get_cython_function_address("scipy.special.cython_special",
                                                        "ndtri_exp"))


@numba.njit(cache=False)
def _below_one(u, m, b, m2, b2):  # pragma: no cover - compiled
    """Scalar :func:`_transport_below`."""
    lb = _c_log_ndtr(b - m)
    lb2 = _c_log_ndtr(b2 - m2)
    q = _c_log_ndtr(u - m) - lb
    if q > 0.0:
        q = 0.0
    u2 = m2 + _c_ndtri_exp(q + lb2)
    hi = np.nextafter(b2, -np.inf)
    if u2 > hi:
        u2 = hi
    return u2, lb2 - lb


@numba.njit(cache=False)
def _transport_block(U, M, M2, codes, changed, U2):  # pragma: no cover - compiled
    """Compiled :func:`utility_transport`, writing into ``U2`` (a copy of ``U``)."""
    n, m = U.shape
    logw = 0.0
    for i in range(n):
        y = codes[i]
        if y == -2:
            for j in range(m):
                if changed[j]:
                    U2[i, j] = U[i, j] - M[i, j] + M2[i, j]
        elif y == -1:
            for j in range(m):
                if changed[j]:
                    u2, w = _below_one(U[i, j], M[i, j], 0.0, M2[i, j], 0.0)
                    U2[i, j] = u2
                    logw += w
        elif changed[y]:
            win = U[i, y]
            u2, w = _below_one(-win, -M[i, y], 0.0, -M2[i, y], 0.0)
            win2 = -u2
            U2[i, y] = win2
            logw += w
            for j in range(m):
                if j != y:
                    u2, w = _below_one(U[i, j], M[i, j], win, M2[i, j], win2)
                    U2[i, j] = u2
                    logw += w
        else:
            win = U[i, y]
            for j in range(m):
                if changed[j]:
                    u2, w = _below_one(U[i, j], M[i, j], win, M2[i, j], win)
                    U2[i, j] = u2
                    logw += w
    return logw


def utility_transport(
    U: np.ndarray, M: np.ndarray, M2: np.ndarray, codes: np.ndarray,
    changed: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Transport one multinomial-probit block's utilities from means ``M`` to means ``M2``.

    Given the means, a record's utilities (unit residual scale) are independent normals
    restricted to the event that its observed level wins: at the reference level (code -1)
    every utility is below 0; at level l (code l) utility l is above 0 and every other utility
    is below utility l; a missing value (code -2) leaves them free. The map takes each
    utility through its conditional CDF given those it is bounded by, in the order "winner,
    then the others" (a triangular map of the event onto itself):

        reference:  u'_j = m'_j + Phi^-1(Phi(u_j - m_j) Phi(-m'_j) / Phi(-m_j)),
        level l:    u'_l  from N(m_l, 1) on (0, inf) to N(m'_l, 1) on (0, inf) alike,
                    u'_j = m'_j + Phi^-1(Phi(u_j - m_j) Phi(u'_l - m'_j) / Phi(u_l - m_j)),
        missing:    u'_j = u_j - m_j + m'_j.

    Each coordinate's derivative is phi(u - m) / phi(u' - m') times its ratio of truncation
    masses, so the joint density of the utilities times the Jacobian changes by the product
    of those mass ratios alone: for the reference level prod_j Phi(-m'_j) / Phi(-m_j), its
    probability ratio exactly; for level l Phi(m'_l) / Phi(m_l) prod_j Phi(u'_l - m'_j) /
    Phi(u_l - m_j), close to it.

    Parameters
    ----------
    U : numpy.ndarray, shape (n, m)
        Utilities in the event of each record's level.
    M, M2 : numpy.ndarray, shape (n, m)
        Current and new means.
    codes : numpy.ndarray of int, shape (n,)
        Level of each record: -1 the reference, 0 .. m - 1 a utility column, -2 missing.
    changed : numpy.ndarray of bool, shape (m,), optional
        The columns whose means differ between ``M`` and ``M2`` (default all). A utility whose
        mean and bound both stay maps to itself, so only the changed columns and the records
        whose winning column changed are computed.

    Returns
    -------
    U2 : numpy.ndarray, shape (n, m)
        The transported utilities, in the same events.
    log_weight : float
        Log of the joint density ratio times the Jacobian (sum of the log mass ratios).
    """
    if changed is None:
        changed = np.ones(U.shape[1], dtype=bool)
    U2 = U.copy()
    U2[:, changed] += M2[:, changed] - M[:, changed]
    logw = 0.0
    ref = np.flatnonzero(codes == -1)
    if len(ref):
        ix = np.ix_(ref, changed)
        u2, w = _transport_below(U[ix], M[ix], 0.0, M2[ix], 0.0)
        U2[ix] = u2
        logw += float(w.sum())
    lvl = codes >= 0
    # a record whose winning column moved: every utility (their bound moved with it)
    idx = np.flatnonzero(lvl & changed[np.maximum(codes, 0)])
    if len(idx):
        lv = codes[idx]
        win, mw, mw2 = U[idx, lv], M[idx, lv], M2[idx, lv]
        win2, w = _transport_above(win, mw, 0.0, mw2, 0.0)
        logw += float(w.sum())
        u2, w = _transport_below(U[idx], M[idx], win[:, None], M2[idx], win2[:, None])
        w[np.arange(len(idx)), lv] = 0.0
        u2[np.arange(len(idx)), lv] = win2
        U2[idx] = u2
        logw += float(w.sum())
    # a record whose winner stayed: only the moved columns, below the same bound
    idx = np.flatnonzero(lvl & ~changed[np.maximum(codes, 0)])
    if len(idx) and changed.any():
        win = U[idx, codes[idx]][:, None]
        ix = np.ix_(idx, changed)
        u2, w = _transport_below(U[ix], M[ix], win, M2[ix], win)
        U2[ix] = u2
        logw += float(w.sum())
    return U2, logw


def _block_group(layout: LatentLayout, b: int,
                 local: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Return block b's latent columns and the mask of those a group moves.

    ``local`` gives positions within the multinomial-probit block; None moves them all.
    """
    cols = layout.k_mnp_cols[layout.k_mnp_off[b]:layout.k_mnp_off[b + 1]]
    mask = np.zeros(len(cols), dtype=bool)
    mask[slice(None) if local is None else local] = True
    return cols, mask


def draw_utility_scale_transport(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    layout: LatentLayout,
    alpha_mu: np.ndarray,
    alpha_sd: np.ndarray,
    tau: np.ndarray,
    nu: float,
    steps: np.ndarray,
    groups: Sequence[tuple[int, np.ndarray | None]] | None = None,
    phi: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Scale each multinomial-probit block's intercepts and loadings, its utilities transported.

    The multinomial probit identifies a categorical variable's utilities only up to their
    residual scale, fixed at 1; when some levels are nearly determined by other variables
    (marital status by age), the data say little about how far apart the utilities are on
    that scale, and the posterior of the block's (alpha, Lambda) is long along
    c (alpha, Lambda). No move that keeps the latent utilities can travel that ridge: the
    residuals pin the scale of :func:`draw_utility_scale` to O(1/sqrt(n)), and the row move
    (:func:`draw_categorical_rows`) updates one utility column given the others. Here the
    proposal is

        (alpha_B, Lambda_B) -> c (alpha_B, Lambda_B),  log c ~ N(0, step^2),
        z_.B -> T_c(z_.B)  (:func:`utility_transport`, conditional CDF by conditional CDF),

    accepted with probability min(1, r),

        r = prior(c alpha_B, c Lambda_B) / prior(alpha_B, Lambda_B) c^(m (k + 1))
            prod_records (mass ratios of the transport),

    the deterministic-map form of Metropolis-Hastings: c^(m (k + 1)) is the Jacobian of the
    parameters' scaling, the mass ratios are the joint density of the utilities times the
    Jacobian of T_c, and log c and its inverse are equally likely. The target has the local
    shrinkage integrated out (each loading's prior is then Student-t,
    (1 + tau_h lambda^2 / nu)^(-(nu + 1) / 2)), so phi_B is redrawn from its gamma conditional
    afterwards (a partially collapsed block; pass ``phi``); with phi held fixed, scaling
    dozens of loadings would cost a prior factor that stops the move.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data; the utilities of accepted blocks are replaced in place.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the categorical columns; not modified).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings (not modified).
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    layout : LatentLayout
        Which columns form each multinomial-probit block and each record's level.
    alpha_mu, alpha_sd : numpy.ndarray, shape (p*,)
        Normal prior of each categorical column's intercept.
    tau : numpy.ndarray, shape (k,)
        Global shrinkage ``cumprod(delta)``.
    nu : float
        Degrees of freedom of the local shrinkage, phi ~ Gamma(nu/2, rate nu/2).
    steps : numpy.ndarray, shape (number of groups,)
        Sd of log c per group.
    groups : sequence of (int, array_like or None), optional
        The moves, in turn: (block, positions of the block's columns to scale, None for all).
        Scaling some of a block's columns is the same move with those columns' priors and a
        Jacobian c^(m_scaled (k + 1)); every utility of the block is transported (the others'
        bounds move with the scaled ones). Default: each whole block once.
    phi : numpy.ndarray, shape (p*, k), optional
        Local shrinkage; when given, the rows of every multinomial-probit column are redrawn
        in place from phi_jh ~ Gamma((nu + 1) / 2, rate (nu + tau_h lambda_jh^2) / 2) at the
        new loadings, as the partially collapsed block requires.

    Returns
    -------
    c : numpy.ndarray, shape (p*,)
        Product of the accepted scale factors of each column (1 elsewhere); apply as
        ``alpha *= c``, ``Lambda *= c[:, None]`` (z is already updated).
    accepted : numpy.ndarray of bool, shape (number of groups,)
        Whether each group's proposal was accepted.

    References
    ----------
    Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
    Bayesian computation. *Biometrika*, 87(2), 353-369.
    van Dyk, D. A. and Park, T. (2008). Partially collapsed Gibbs samplers. *JASA*, 103,
    790-796.
    """
    k = eta.shape[1]
    n_blocks = len(layout.k_mnp_off) - 1
    if groups is None:
        groups = [(b, None) for b in range(n_blocks)]
    out = np.ones(Lambda.shape[0])
    accepted = np.zeros(len(groups), dtype=bool)
    half = 0.5 * (nu + 1.0)
    for g, (b, local) in enumerate(groups):
        cols, scale = _block_group(layout, b, local)
        moved = cols[scale]
        log_c = steps[g] * rng.standard_normal()
        c = math.exp(log_c)
        a, L = alpha_full[moved] * out[moved], Lambda[moved] * out[moved, None]
        mu0, s0 = alpha_mu[moved], alpha_sd[moved]
        log_r = (-0.5 * float(np.sum(((c * a - mu0) ** 2 - (a - mu0) ** 2) / s0**2))
                 - half * float(np.sum(np.log1p(tau * (c * L) ** 2 / nu)
                                       - np.log1p(tau * L**2 / nu)))
                 + len(moved) * (k + 1) * log_c)
        M = alpha_full[cols] * out[cols] + eta @ (Lambda[cols] * out[cols, None]).T
        M2 = M.copy()
        M2[:, scale] *= c
        U = np.ascontiguousarray(z[:, cols])
        U2 = U.copy()
        log_w = _transport_block(U, M, M2, layout.k_mnp_codes[b], scale, U2)
        if _log_uniform(rng) < log_r + log_w:
            z[:, cols] = U2
            out[moved] *= c
            accepted[g] = True
    if phi is not None:
        rows = layout.k_mnp_cols
        L2 = (Lambda[rows] * out[rows, None]) ** 2
        phi[rows] = rng.gamma(half, 1.0 / (0.5 * (nu + tau * L2)))
    return out, accepted


def draw_utility_location_transport(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    layout: LatentLayout,
    alpha_mu: np.ndarray,
    alpha_sd: np.ndarray,
    steps: np.ndarray,
    groups: Sequence[tuple[int, np.ndarray | None]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Shift multinomial-probit intercepts, the block's utilities transported.

    A categorical variable's utilities of a level are bounded by the utility of the record's
    observed level (below it when another level wins, above the others when it wins), so
    with the utilities held, each column's intercept moves by O(1/sqrt(n)) an iteration
    whatever its posterior spread: updating a column with its own utilities integrated out
    (:func:`draw_alpha_collapsed`) still holds the other columns' utilities, and on CE's marital
    status (four utility columns) the intercepts had bulk ESS 7-28 of 2,000 draws. Here the
    proposal is

        alpha_S -> alpha_S + d,  d ~ N(0, step^2)  (one shift for the columns S of the group),
        z_.B -> T_d(z_.B)  (:func:`utility_transport`: every utility of the block carried by
                            its conditional CDF given the bound it has, the winner first),

    accepted with probability min(1, r), r = prior(alpha_S + d) / prior(alpha_S) times the
    product of the transport's mass ratios (the joint density of the utilities times the
    Jacobian of T_d; the shift of the parameters has Jacobian 1 and d, -d are equally
    likely; T_-d at the new means inverts T_d). The move is an exact Metropolis-Hastings
    step of the full conditional of (alpha_S, z_.B); the ratio is close to the ratio of the
    likelihoods with the utilities integrated out, so the shift travels on the scale of the
    posterior.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data; the utilities of accepted groups' blocks are replaced in place.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the categorical columns; not modified).
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    layout : LatentLayout
        Which columns form each multinomial-probit block and each record's level.
    alpha_mu, alpha_sd : numpy.ndarray, shape (p*,)
        Normal prior of each categorical column's intercept.
    steps : numpy.ndarray, shape (number of groups,)
        Sd of the shift d per group.
    groups : sequence of (int, array_like or None), optional
        The moves, in turn: (block, positions of the block's columns to shift, None for all).
        Default: each whole block once.

    Returns
    -------
    alpha : numpy.ndarray, shape (p*,)
        The new intercepts.
    accepted : numpy.ndarray of bool, shape (number of groups,)
        Whether each group's proposal was accepted.

    References
    ----------
    Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
    Bayesian computation. *Biometrika*, 87(2), 353-369.
    """
    n_blocks = len(layout.k_mnp_off) - 1
    if groups is None:
        groups = [(b, None) for b in range(n_blocks)]
    alpha = np.array(alpha_full, dtype=np.float64, copy=True)
    accepted = np.zeros(len(groups), dtype=bool)
    means: dict[int, np.ndarray] = {}
    for g, (b, local) in enumerate(groups):
        cols, shift = _block_group(layout, b, local)
        moved = cols[shift]
        d = steps[g] * rng.standard_normal()
        mu0, s0 = alpha_mu[moved], alpha_sd[moved]
        a = alpha[moved]
        log_r = -0.5 * float(np.sum(((a + d - mu0) ** 2 - (a - mu0) ** 2) / s0**2))
        if b not in means:
            means[b] = np.ascontiguousarray(alpha[cols] + eta @ Lambda[cols].T)
        M = means[b]
        M2 = M.copy()
        M2[:, shift] += d
        U = np.ascontiguousarray(z[:, cols])
        U2 = U.copy()
        log_w = _transport_block(U, M, M2, layout.k_mnp_codes[b], shift, U2)
        if _log_uniform(rng) < log_r + log_w:
            z[:, cols] = U2
            alpha[moved] += d
            means[b] = M2
            accepted[g] = True
    return alpha, accepted


@numba.njit(cache=True)
def _collapsed_log_target(a, kind, bound, m, inv_sd, mu0, prec0):  # pragma: no cover
    """Return log prior(a) + sum_i log P(z_i in its bounds | a): one-sided normal probabilities."""
    prod = 1.0
    acc = -0.5 * prec0 * (a - mu0) ** 2
    for i in range(kind.shape[0]):
        if kind[i] > 0:
            prod, acc = _log_phi_acc((a + m[i] - bound[i]) * inv_sd, prod, acc)
        elif kind[i] < 0:
            prod, acc = _log_phi_acc((bound[i] - a - m[i]) * inv_sd, prod, acc)
    return acc + math.log(prod)


@numba.njit(cache=True)
def _intercept_sweep(st, sp, zT, mT, sd, alpha_full, prior_mu, prior_prec, mnp_cols, mnp_off,
                     mnp_codes, lvl_cols, lvl_sign, kind, bound, todo):  # pragma: no cover
    n = zT.shape[1]
    inf = np.inf
    n_mnp = mnp_cols.shape[0]
    for c in range(n_mnp + lvl_cols.shape[0]):
        if not todo[c]:
            continue
        # bounds of every record's latent value in this column, given the other columns
        if c < n_mnp:
            b = 0
            while mnp_off[b + 1] <= c:
                b += 1
            c0 = mnp_off[b]
            c1 = mnp_off[b + 1]
            j = mnp_cols[c]
            local = c - c0
            codes = mnp_codes[b]
            for i in range(n):
                y = codes[i]
                if y == -2:
                    kind[i] = 0
                elif y == local:
                    lo = 0.0
                    for oc in range(c0, c1):
                        if oc != c:
                            v = zT[mnp_cols[oc], i]
                            if v > lo:
                                lo = v
                    kind[i] = 1
                    bound[i] = lo
                else:
                    kind[i] = -1
                    bound[i] = 0.0 if y == -1 else zT[mnp_cols[c0 + y], i]
        else:
            r = c - n_mnp
            j = lvl_cols[r]
            for i in range(n):
                kind[i] = 1 if lvl_sign[r, i] > 0 else -1
                bound[i] = 0.0
        s = sd[j]
        inv = 1.0 / s
        m = mT[j]
        a0 = alpha_full[j]
        mu0 = prior_mu[j]
        p0 = prior_prec[j]
        # slice sampling (Neal 2003) of the intercept with the column's latent values
        # integrated out. The target is log-concave with a normal prior, so each slice is a
        # bounded interval S around a0; the interval is widened (by doubling steps, without
        # limit) until both ends lie outside S, and shrinkage then returns a point uniform on
        # S whatever the interval was, so a width set from the curvature at the current
        # value (which depends on a0) keeps the step exact.
        info = p0
        for i in range(n):
            if kind[i] != 0:
                t = (a0 + m[i] - bound[i]) * inv if kind[i] > 0 else (bound[i] - a0 - m[i]) * inv
                if t > 8.3:
                    continue  # Phi(t) = 1: no curvature
                if t > -20.0:  # the normal hazard phi(t) / Phi(t), without a logarithm
                    r_ = (0.3989422804014327 * math.exp(-0.5 * t * t)
                          / (0.5 * math.erfc(-t * 0.7071067811865476)))
                elif t > -30.0:
                    r_ = math.exp(-0.5 * t * t - _log_ndtr(t)) / math.sqrt(2.0 * math.pi)
                else:
                    r_ = -t
                info += r_ * (r_ + t) * inv * inv
        w = 3.0 / math.sqrt(info)
        g0 = _collapsed_log_target(a0, kind, bound, m, inv, mu0, p0)
        level = g0 + math.log(uniform_pos(st))
        left = a0 - w * uniform(st)
        right = left + w
        step = w
        while _collapsed_log_target(left, kind, bound, m, inv, mu0, p0) > level:
            left -= step
            step *= 2.0
        step = w
        while _collapsed_log_target(right, kind, bound, m, inv, mu0, p0) > level:
            right += step
            step *= 2.0
        while True:
            a1 = left + (right - left) * uniform(st)
            if _collapsed_log_target(a1, kind, bound, m, inv, mu0, p0) > level:
                break
            if a1 < a0:
                left = a1
            else:
                right = a1
        alpha_full[j] = a1
        # the column's latent values given the new intercept
        zj = zT[j]
        for i in range(n):
            mean = a1 + m[i]
            if kind[i] > 0:
                lo = bound[i]
                x = mean + s * _tn_std(st, sp, (lo - mean) * inv, inf)
                zj[i] = x if x > lo else np.nextafter(lo, inf)
            elif kind[i] < 0:
                hi = bound[i]
                x = mean + s * _tn_std(st, sp, -inf, (hi - mean) * inv)
                zj[i] = x if x < hi else np.nextafter(hi, -inf)
            else:
                zj[i] = mean + s * normal(st, sp)


def draw_alpha_collapsed(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    layout: LatentLayout,
    prior_mu: np.ndarray,
    prior_sd: np.ndarray,
    *,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """Draw the categorical columns' intercepts with their latent values integrated out.

    Intercepts of the categorical columns with their latent values integrated out, then the
    latent values given the new intercepts (a partially collapsed Gibbs block, in place on z).

    For a categorical column j the records' latent values are, given the other columns, the
    factor scores and the loadings, independent normals restricted to one-sided intervals, so

        p(alpha_j | everything but z_.j) propto N(alpha_j; m_0, s_0^2)
            prod_i Phi(+-(alpha_j + lambda_j' eta_i - bound_i) / sigma_j),

    a log-concave density, drawn by slice sampling (Neal 2003); z_.j is then redrawn from its
    truncated normals. The plain Gibbs update of alpha given z moves by O(1/sqrt(n)) per
    iteration, however uncertain alpha is, which for rare levels makes it mix very slowly; the
    collapsed draw moves on the scale of the posterior.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*), Fortran order
        Updated in place.
    alpha_full, sd : numpy.ndarray, shape (p*,)
        Current intercepts (not modified) and residual standard deviations sigma_j.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    layout : LatentLayout
        The constraint structure.
    prior_mu, prior_sd : numpy.ndarray, shape (p*,)
        Normal prior of each column's intercept (used on categorical columns only).
    columns : numpy.ndarray of bool, optional
        Which categorical columns (kernel order: multinomial-probit, then rpl) to update;
        default all.

    Returns
    -------
    numpy.ndarray, shape (p*,)
        The new ``alpha_full``.

    References
    ----------
    van Dyk, D. A. and Park, T. (2008). Partially collapsed Gibbs samplers. *JASA*, 103,
    790-796. Neal, R. M. (2003). Slice sampling. *Annals of Statistics*, 31, 705-767.
    """
    if not z.flags.f_contiguous:
        raise ValueError("draw_alpha_collapsed: z must be Fortran-ordered (columns contiguous).")
    alpha_full = np.array(alpha_full, dtype=np.float64, copy=True)
    mT = np.ascontiguousarray(Lambda @ eta.T)
    st, sp = new_state(rng)
    n = z.shape[0]
    _intercept_sweep(st, sp, z.T, mT, np.ascontiguousarray(sd, dtype=np.float64), alpha_full,
                     np.ascontiguousarray(np.broadcast_to(prior_mu, alpha_full.shape),
                                          dtype=np.float64),
                     np.ascontiguousarray(1.0 / np.broadcast_to(prior_sd, alpha_full.shape) ** 2,
                                          dtype=np.float64),
                     layout.k_mnp_cols, layout.k_mnp_off, layout.k_mnp_codes, layout.k_lvl_cols,
                     layout.k_lvl_sign, np.empty(n, dtype=np.int64), np.empty(n),
                     np.ones(len(layout.k_mnp_cols) + len(layout.k_lvl_cols), dtype=np.bool_)
                     if columns is None else np.asarray(columns, dtype=np.bool_))
    return alpha_full


@numba.njit(cache=True)
def _column_bounds(zT, c, mnp_cols, mnp_off, mnp_codes, lvl_cols, lvl_sign, kind,
                   bound):  # pragma: no cover - compiled
    """Find the one-sided bounds of every record's latent value in categorical column c.

    Column c is in the concatenated order: mnp columns, then rpl level columns; the bounds are
    given the other columns. kind: +1 lower bound, -1 upper bound, 0 none. Returns the latent
    index j.
    """
    n = zT.shape[1]
    n_mnp = mnp_cols.shape[0]
    if c < n_mnp:
        b = 0
        while mnp_off[b + 1] <= c:
            b += 1
        c0 = mnp_off[b]
        c1 = mnp_off[b + 1]
        local = c - c0
        codes = mnp_codes[b]
        for i in range(n):
            y = codes[i]
            if y == -2:
                kind[i] = 0
            elif y == local:
                lo = 0.0
                for oc in range(c0, c1):
                    if oc != c:
                        v = zT[mnp_cols[oc], i]
                        if v > lo:
                            lo = v
                kind[i] = 1
                bound[i] = lo
            else:
                kind[i] = -1
                bound[i] = 0.0 if y == -1 else zT[mnp_cols[c0 + y], i]
        return mnp_cols[c]
    r = c - n_mnp
    for i in range(n):
        kind[i] = 1 if lvl_sign[r, i] > 0 else -1
        bound[i] = 0.0
    return lvl_cols[r]


@numba.njit(cache=True)
def _redraw_column(st, sp, zj, mean, s, kind, bound):  # pragma: no cover - compiled
    inf = np.inf
    inv = 1.0 / s
    for i in range(zj.shape[0]):
        m = mean[i]
        if kind[i] > 0:
            lo = bound[i]
            x = m + s * _tn_std(st, sp, (lo - m) * inv, inf)
            zj[i] = x if x > lo else np.nextafter(lo, inf)
        elif kind[i] < 0:
            hi = bound[i]
            x = m + s * _tn_std(st, sp, -inf, (hi - m) * inv)
            zj[i] = x if x < hi else np.nextafter(hi, -inf)
        else:
            zj[i] = m + s * normal(st, sp)


@numba.njit(cache=True)
def _add_column_scores(T, zj, a_j, lam_j, pj):  # pragma: no cover - compiled
    """Add column j's term pj (z_ij - a_j) lambda_j to T, in place (pj < 0 removes it).

    T holds Lambda' D^-1 (z_i - alpha) per record; without column j's term, T V is the mean
    of eta_i given the other columns.
    """
    n, k = T.shape
    for i in range(n):
        c = pj * (zj[i] - a_j)
        for a in range(k):
            T[i, a] += c * lam_j[a]
    return None


def _mh_log_ratio(lp_prop: float, lp_cur: float, prop: np.ndarray, cur: np.ndarray,
                  mean_c: np.ndarray, L_c: np.ndarray, mean_p: np.ndarray,
                  L_p: np.ndarray) -> float:
    """Return the Metropolis-Hastings log ratio of a move cur -> prop with normal proposals.

    The forward proposal is N(mean_c, (L_c L_c')^-1), the reverse N(mean_p, (L_p L_p')^-1)
    (L lower Cholesky factors of the precisions): log pi(prop) - log pi(cur) +
    log q(cur | prop) - log q(prop | cur).
    """
    u_c = L_c.T @ (prop - mean_c)  # the forward proposal's density at prop
    u_p = L_p.T @ (cur - mean_p)  # the reverse proposal's density at cur
    return float(lp_prop - lp_cur - 0.5 * float(u_p @ u_p) + 0.5 * float(u_c @ u_c)
                 + float(np.sum(np.log(np.diag(L_p))) - np.sum(np.log(np.diag(L_c)))))


#: A categorical column's joint row move proposes by one Fisher-scoring step from the current
#: value when the fewer of its level's records and the other records number at least this
#: many per parameter (k + 1), and from the normal approximation at the mode otherwise. Both
#: are exact; the rule reads only the data's codes, never the chain's state. Measured
#: (2026-12-06): on the demo table (20 or more records per level, k + 1 = 7) the step raised
#: the worst ESS per second of every kind of quantity synthesis reads by 37-82% (two seeds);
#: on SD2011's four rarest levels (3-7 records, k + 1 = 45) it accepted under 1% of
#: proposals against 3-14% for the mode's.
ROW_STEP_RECORDS = 2


def row_step_columns(layout: LatentLayout, k: int) -> np.ndarray:
    """Which categorical columns' joint row move proposes by a Fisher-scoring step.

    Column c (in the kernels' order: the multinomial-probit columns, then the ``"rpl"`` level
    columns) does when the fewer of its level's records (latent value bounded below) and the
    other records with a value (bounded above) number at least :data:`ROW_STEP_RECORDS` per
    parameter, k + 1; the rest propose from the mode (:func:`draw_categorical_rows`). The rule
    reads only the data's codes, so it is fixed for a table and a number of factors.

    Parameters
    ----------
    layout : LatentLayout
    k : int
        Number of factors.

    Returns
    -------
    numpy.ndarray of bool, shape (number of categorical columns,)
    """
    informed = []
    for b in range(len(layout.k_mnp_off) - 1):
        codes = layout.k_mnp_codes[b]
        m = int(layout.k_mnp_off[b + 1] - layout.k_mnp_off[b])
        shown = int(np.count_nonzero(codes != -2))
        at = np.bincount(codes[codes >= 0], minlength=m)[:m]
        informed.extend(np.minimum(at, shown - at).tolist())
    for r in range(len(layout.k_lvl_cols)):
        above = int(np.count_nonzero(layout.k_lvl_sign[r] > 0))
        informed.append(min(above, layout.k_lvl_sign.shape[1] - above))
    return np.asarray(informed, dtype=np.int64) >= ROW_STEP_RECORDS * (k + 1)


def draw_categorical_rows(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    eta: np.ndarray,
    sd: np.ndarray,
    layout: LatentLayout,
    alpha_mu: np.ndarray,
    alpha_sd: np.ndarray,
    lambda_prior_prec: np.ndarray,
    *,
    newton_steps: int = 30,
    columns: np.ndarray | None = None,
    integrate_eta: bool = False,
    mode_cache: np.ndarray | None = None,
    step_columns: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Draw each categorical column's intercept and loadings with its latent values integrated out.

    Intercept and loadings of each categorical column with its latent values integrated out,
    then those values redrawn (an exact partially collapsed block, z updated in place).

    For a categorical column j, given the other columns, the factor scores and sigma_j, the
    records' latent values are independent normals N(alpha_j + lambda_j' eta_i, sigma_j^2)
    restricted to one-sided intervals (the multinomial-probit or rank-probit bounds), so

        p(alpha_j, lambda_j | everything but z_.j) propto prior(alpha_j, lambda_j)
            prod_i Phi(+-(alpha_j + lambda_j' eta_i - bound_i) / sigma_j),

    a log-concave density in k + 1 dimensions (a probit regression on the factor scores). It is
    sampled by one Metropolis-Hastings step, with one of two proposals (both exact: the
    acceptance ratio holds both proposal densities), chosen per column by the data alone
    (:data:`ROW_STEP_RECORDS`):

    * where the level's records and the others are both at least ``ROW_STEP_RECORDS`` per
      parameter, N(theta + M^-1 g, M^-1) from the current value theta, g the gradient and M
      minus the Hessian of the log target at theta (its Gauss-Newton matrix with the scores
      integrated out, below): one Newton step plus the noise of the local normal
      approximation (the stochastic Newton proposal of Martin et al. 2012; see
      :func:`_newton_point`). On a normal target it is the target whatever theta is. Two
      evaluations of the target with its derivatives;
    * otherwise (rare levels, where the target is far from normal and a step from the
      current value lands where the way back is improbable), the normal approximation at the
      target's mode, found by Newton's method to convergence (3-5 evaluations per search).

    Then z_.j is drawn from its truncated normals given the new (alpha_j, lambda_j). The plain
    Gibbs updates move alpha_j and lambda_j by O(1/sqrt(n)) per iteration whatever their
    posterior spread, which for rare levels makes them mix very slowly. Until 2026-12-06
    every column had the mode's proposal (benchmarks/README.md compares the two).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*), Fortran order
        Updated in place.
    alpha_full, sd : numpy.ndarray, shape (p*,)
        Current intercepts (not modified) and residual standard deviations sigma_j.
    Lambda : numpy.ndarray, shape (p*, k)
        Current loadings (not modified).
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    layout : LatentLayout
        The constraint structure.
    alpha_mu, alpha_sd : numpy.ndarray, shape (p*,)
        Normal prior of each column's intercept (categorical columns).
    lambda_prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of the loadings (zero-mean normal).
    newton_steps : int, default 30
        Most Newton steps to the mode (the mode's proposal); iteration stops when a step is
        below 1e-10. A column whose search has not converged within ``newton_steps`` keeps
        its values (the proposal is rejected), with a ``RuntimeWarning``; the measured
        searches take 3-5 steps.
    columns : numpy.ndarray of bool, optional
        Which categorical columns (in kernel order: multinomial-probit columns, then rpl level
        columns) to update; default all.
    integrate_eta : bool, default False
        Also integrate the factor scores out: given the other columns, eta_i ~ N(m_i, V), so
        the column's latent values are N(alpha_j + lambda_j' m_i, sigma_j^2 + lambda_j' V
        lambda_j) and the target is the probit likelihood with that (loading-dependent) scale
        (:func:`_scaled_row_target_work`). That target need not be log-concave: the step's M
        is then its Gauss-Newton matrix (a Fisher-scoring step; positive definite), and the
        mode's proposal holds the scale at the current value's, so it depends on the current
        value and the reverse proposal density (a second search, at the proposed value's
        scale) enters the acceptance ratio. ``eta`` is then stale: redraw it from its full
        conditional before anything conditions on it. This removes the feedback between a
        rare level's loadings and the scores of its few records, which the block given eta
        cannot break.
    mode_cache : numpy.ndarray, shape (number of categorical columns, k + 1), optional
        Starting points of the searches for the mode (with ``integrate_eta``), updated in
        place with the modes found: last iteration's mode is close to this one's, which saves
        Newton steps. The modes themselves do not depend on the start.
    step_columns : numpy.ndarray of bool, shape (number of categorical columns,), optional
        :func:`row_step_columns` of ``layout`` and k, for a caller that computed it once (it
        depends on the data alone); computed here when omitted.

    Returns
    -------
    alpha_full : numpy.ndarray, shape (p*,)
        The new intercepts.
    Lambda : numpy.ndarray, shape (p*, k)
        The new loadings.
    acceptance : float
        Share of columns whose proposal was accepted.

    References
    ----------
    van Dyk, D. A. and Park, T. (2008). Partially collapsed Gibbs samplers. *JASA*, 103,
    790-796. Martin, J., Wilcox, L. C., Burstedde, C. and Ghattas, O. (2012). A stochastic
    Newton MCMC method for large-scale statistical inverse problems with application to
    seismic inversion. *SIAM Journal on Scientific Computing*, 34, A1460-A1487.
    """
    if not z.flags.f_contiguous:
        raise ValueError("draw_categorical_rows: z must be Fortran-ordered.")
    n, k = eta.shape
    d = k + 1
    alpha_full = np.array(alpha_full, dtype=np.float64, copy=True)
    Lambda = np.array(Lambda, dtype=np.float64, copy=True)
    X = np.ascontiguousarray(np.column_stack([np.ones(n), eta]))
    zT = z.T
    kind = np.empty(n, dtype=np.int64)
    bound = np.empty(n)
    grad = np.empty(d)
    H = np.empty((d, d))
    st, sp = new_state(rng)
    n_cols = len(layout.k_mnp_cols) + len(layout.k_lvl_cols)
    accepted = 0
    stalled: list[int] = []  # columns whose Newton search did not converge
    todo = [c for c in range(n_cols) if columns is None or columns[c]]
    step_cols = row_step_columns(layout, k) if step_columns is None else step_columns
    if integrate_eta:
        prec = 1.0 / np.asarray(sd, dtype=float) ** 2
        P = np.eye(k) + (Lambda.T * prec) @ Lambda  # precision of eta_i given every column
        T = np.ascontiguousarray(((z - alpha_full) * prec) @ Lambda)  # Lambda' D^-1 (z_i - alpha)
        Xm = np.empty((n, d))
        Xm[:, 0] = 1.0
        TV = np.empty((n, k))
    gv, Xw, G = np.empty(n), np.empty((n, d)), np.empty((d, d))
    V0 = np.zeros((k, k))
    for c in todo:
        j = _column_bounds(zT, c, layout.k_mnp_cols, layout.k_mnp_off, layout.k_mnp_codes,
                           layout.k_lvl_cols, layout.k_lvl_sign, kind, bound)
        mu0 = np.zeros(d)  # (intercept, loadings); filled, not np.r_ (slow per call)
        mu0[0] = alpha_mu[j]
        P0 = np.empty(d)
        P0[0], P0[1:] = 1.0 / alpha_sd[j] ** 2, lambda_prior_prec[j]
        cur = np.empty(d)
        cur[0], cur[1:] = alpha_full[j], Lambda[j]
        if integrate_eta:
            # given the other columns, eta_i ~ N(m_i, V), so
            # z_ij ~ N(alpha_j + lambda_j' m_i, sd_j^2 + lambda_j' V lambda_j)
            lam_old, a_old = Lambda[j].copy(), alpha_full[j]
            Pm = P - prec[j] * np.outer(lam_old, lam_old)
            Vc = np.linalg.inv(Pm)
            Vc = 0.5 * (Vc + Vc.T)
            # T loses column j's term (in place) and Xm = [1, T V]: the scores' conditional
            # means given the other columns
            _add_column_scores(T, zT[j], a_old, lam_old, -float(prec[j]))
            np.matmul(T, Vc, out=TV)
            Xm[:, 1:] = TV
            Xc = Xm
        else:
            Xc, Vc = X, V0
        sig2 = float(sd[j]) ** 2
        if step_cols[c]:
            # one Fisher-scoring step from the current value, plus the local normal's noise
            lp_cur, mean_c, L_c = _newton_point(cur, Xc, kind, bound, sig2, Vc, mu0, P0,
                                                grad, H, G, gv, Xw)
            prop = mean_c + solve_triangular(L_c.T, rng.standard_normal(d), lower=False)
            lp_prop, mean_p, L_p = _newton_point(prop, Xc, kind, bound, sig2, Vc, mu0, P0,
                                                 grad, H, G, gv, Xw)
            conv = True
        else:
            # the normal approximation at the mode of the target with the scale held at the
            # current value's (the scale is fixed without integrate_eta), and for the reverse
            # density at the proposal's; the two modes do not depend on the search's start
            s_cur2 = sig2 + float(cur[1:] @ Vc @ cur[1:])
            start = cur if mode_cache is None or not integrate_eta else mode_cache[c]
            mean_c, L_c, conv_c = _row_mode(start, Xc, kind, bound, s_cur2, V0, mu0, P0, grad,
                                            H, G, gv, Xw, newton_steps)
            if mode_cache is not None and integrate_eta:
                mode_cache[c] = mean_c
            prop = mean_c + solve_triangular(L_c.T, rng.standard_normal(d), lower=False)
            s_prop2 = sig2 + float(prop[1:] @ Vc @ prop[1:])
            if integrate_eta:  # start next to the first mode rescaled by the scale ratio
                mean_p, L_p, conv_p = _row_mode(mean_c * math.sqrt(s_prop2 / s_cur2), Xc,
                                                kind, bound, s_prop2, V0, mu0, P0, grad, H, G,
                                                gv, Xw, newton_steps)
            else:  # one scale: the reverse proposal is the forward one
                mean_p, L_p, conv_p = mean_c, L_c, conv_c
            lp_cur = _scaled_row_target_work(cur, Xc, kind, bound, sig2, Vc, mu0, P0, grad, H,
                                             G, False, gv, Xw)
            lp_prop = _scaled_row_target_work(prop, Xc, kind, bound, sig2, Vc, mu0, P0, grad,
                                              H, G, False, gv, Xw)
            conv = conv_c and conv_p
            if not conv:
                stalled.append(j)
        log_ratio = _mh_log_ratio(lp_prop, lp_cur, prop, cur, mean_c, L_c, mean_p, L_p)
        if _log_uniform(rng) < log_ratio and conv:
            cur = prop
            accepted += 1
        alpha_full[j], Lambda[j] = cur[0], cur[1:]
        s_new = math.sqrt(sig2 + float(cur[1:] @ Vc @ cur[1:]))
        _redraw_column(st, sp, zT[j], Xc @ cur, s_new, kind, bound)
        if integrate_eta:
            P = Pm + prec[j] * np.outer(cur[1:], cur[1:])
            _add_column_scores(T, zT[j], float(cur[0]), cur[1:].copy(), float(prec[j]))
    if stalled:
        warnings.warn(
            f"draw_categorical_rows: the Newton search to the mode of latent column(s) "
            f"{sorted(set(stalled))} did not converge in {newton_steps} steps; those proposals "
            "were rejected (their acceptance ratio needs the exact mode). Raise newton_steps "
            "if this recurs.", RuntimeWarning, stacklevel=2)
    return alpha_full, Lambda, accepted / max(len(todo), 1)


@numba.njit(cache=True)
def _tail_hazard(t):  # pragma: no cover - compiled
    """Return the normal hazard phi(t) / Phi(t) for t <= -20.

    From the asymptotic series :func:`_mills_series` s, Phi(t) = phi(t) (1 + s) / (-t), so
    the hazard is -t / (1 + s), accurate to rounding where exp(-t^2 / 2) underflows.
    """
    return -t / (1.0 + _mills_series(t))

@numba.njit(cache=True)
def _scaled_row_target_work(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G, need, gv,
                            Xw):  # pragma: no cover - compiled
    """Return the log target of one column's (alpha, lambda) with the factor scores integrated out.

    The records' latent values are N(x_i' theta, s^2) with s^2 = sig2 + lambda' V lambda
    (``theta = (alpha, lambda)``, ``x_i = (1, m_i)``), so the log likelihood is
    sum_i log Phi(t_i), t_i = +-(x_i' theta - bound_i) / s, in which the scale depends on the
    loadings; plus the normal prior N(mu0, diag(1 / P0)). With ``need`` also its gradient
    (``grad``), its Hessian (``H``) and the Gauss-Newton matrix ``G`` (minus the Hessian
    without the second derivatives of t, and with the prior's precision: positive definite
    everywhere, while the Hessian need not be negative definite, since the scale makes the
    target not log-concave in general; with V = 0, G = -H).

    With g = grad s = (0, V lambda) / s, a = sum r_i sg_i x_i, R = sum r_i t_i, b = sum w_i
    sg_i t_i x_i, W2 = sum w_i t_i^2 (r_i the normal hazard at t_i, w_i = r_i (r_i + t_i)):
    gradient (a - R g) / s - diag(P0) (theta - mu0); G = [X' W X - (b g' + g b')
    + W2 g g'] / s^2 + diag(P0); Hessian -G + [-(a g' + g a') + 3 R g g'
    - R blockdiag(0, V)] / s^2.
    """
    n, d = X.shape
    lam_v = np.zeros(d)  # (0, V lambda)
    q = 0.0
    for a in range(1, d):
        acc_ = 0.0
        for b in range(1, d):
            acc_ += V[a - 1, b - 1] * theta[b]
        lam_v[a] = acc_
        q += theta[a] * acc_
    s = math.sqrt(sig2 + q)
    inv_sd = 1.0 / s
    prod = 1.0
    acc = 0.0
    R = 0.0
    W2 = 0.0
    bw = np.zeros(d)
    for i in range(n):
        if need:
            gv[i] = 0.0
        w = 0.0
        if kind[i] != 0:
            m = 0.0
            for a in range(d):
                m += X[i, a] * theta[a]
            sg = 1.0 if kind[i] > 0 else -1.0
            t = sg * (m - bound[i]) * inv_sd
            if t <= 8.3:  # above, Phi(t) = 1 to double precision: no contribution
                if t > -20.0:
                    ph = 0.5 * math.erfc(-t * 0.7071067811865476)
                    if prod < 1e-200:  # flush before the product could underflow
                        acc += math.log(prod)
                        prod = 1.0
                    prod *= ph
                    if need:
                        r = 0.3989422804014327 * math.exp(-0.5 * t * t) / ph
                else:
                    acc += _log_ndtr(t)
                    r = _tail_hazard(t)
                if need:
                    gv[i] = sg * r
                    w2 = max(r * (r + t), 0.0)  # rounding guard in the far tail
                    w = math.sqrt(w2)
                    R += r * t
                    W2 += w2 * t * t
                    c = w2 * sg * t
                    for a in range(d):
                        bw[a] += c * X[i, a]
        if need:
            for a in range(d):
                Xw[i, a] = X[i, a] * w
    val = acc + math.log(prod)
    quad = 0.0
    for a in range(d):
        da = theta[a] - mu0[a]
        quad += P0[a] * da * da
    val -= 0.5 * quad
    if need:
        av = np.dot(X.T, gv)
        g = lam_v * inv_sd
        XtX = np.dot(Xw.T, Xw)
        inv2 = inv_sd * inv_sd
        for a in range(d):
            grad[a] = (av[a] - R * g[a]) * inv_sd - P0[a] * (theta[a] - mu0[a])
        for a in range(d):
            for b in range(d):
                gn = (XtX[a, b] - (bw[a] * g[b] + g[a] * bw[b]) + W2 * g[a] * g[b]) * inv2
                G[a, b] = gn
                second = -(av[a] * g[b] + g[a] * av[b]) + 3.0 * R * g[a] * g[b]
                if a > 0 and b > 0:
                    second -= R * V[a - 1, b - 1]
                H[a, b] = -gn + second * inv2
            G[a, a] += P0[a]
            H[a, a] -= P0[a]
    return val


@numba.njit(cache=True)
def _scaled_row_target(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G,
                       need):  # pragma: no cover - compiled
    """:func:`_scaled_row_target_work` with its work arrays allocated."""
    n, d = X.shape
    if need:
        return _scaled_row_target_work(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G,
                                       True, np.empty(n), np.empty((n, d)))
    return _scaled_row_target_work(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G, False,
                                   np.empty(0), np.empty((0, d)))


@numba.njit(cache=True)
def _newton_point(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G, gv,
                  Xw):  # pragma: no cover - compiled
    """Return the log target at theta, the proposal's mean from theta and its precision factor.

    The proposal from theta is N(theta + M^-1 grad, M^-1), M the Gauss-Newton matrix of
    :func:`_scaled_row_target_work` at theta (minus its Hessian where the scale is fixed,
    V = 0; positive definite always): one Fisher-scoring step plus the noise of the local
    normal approximation. On a normal target it is that normal whatever theta is. With the
    scale depending on the loadings, minus the Hessian itself overshoots where the target
    bends (measured: a chain started 60 posterior sds away stuck at 1 acceptance in 60; with
    M, back in two iterations at 95% acceptance). Returns (log target, mean, lower Cholesky
    factor of M).
    """
    val = _scaled_row_target_work(theta, X, kind, bound, sig2, V, mu0, P0, grad, H, G, True,
                                  gv, Xw)
    M = 0.5 * (G + G.T)
    L = np.linalg.cholesky(M)
    return val, theta + np.linalg.solve(M, grad), L

@numba.njit(cache=True)
def _row_mode(start, X, kind, bound, sig2, V0, mu0, P0, grad, H, G, gv, Xw,
              newton_steps):  # pragma: no cover - compiled
    """Find the mode of one column's fixed-scale (log-concave) row target by damped Newton steps.

    The target is :func:`_scaled_row_target_work` with ``V0 = 0`` (scale sqrt(sig2)), whose
    Gauss-Newton matrix ``G`` is minus its Hessian. Returns the mode, the Cholesky factor of
    ``G`` there (the precision of the normal proposal) and whether the search converged within
    ``newton_steps``. Stops when the next Newton step is below 1e-10 in every coordinate
    (quadratic convergence puts the point that close to the mode); a step is halved only
    while it loses more than the rounding error of the sum over records, so near the mode,
    where the change is below that error, rounding cannot trigger halvings (measured: 3-5
    evaluations per search from the last iteration's mode, against 4-49 with an absolute
    1e-12 test).
    """
    mode = start.astype(np.float64)  # a copy: the caller's start is kept
    val = _scaled_row_target_work(mode, X, kind, bound, sig2, V0, mu0, P0, grad, H, G, True,
                                  gv, Xw)
    converged = False
    for _ in range(newton_steps):
        step = np.linalg.solve(G, grad)
        if np.max(np.abs(step)) < 1e-10:
            converged = True
            break  # at the mode: the proposal no longer depends on the starting value
        # A trial may lose up to the rounding error of the sum over records (about 1e-12 of
        # its size): near the mode the change is below it, and halving would not help.
        slack = 1e-12 * (1.0 + abs(val))
        t = 1.0
        while True:  # each trial also leaves its gradient and matrices in grad, H and G
            trial = mode + t * step
            v2 = _scaled_row_target_work(trial, X, kind, bound, sig2, V0, mu0, P0, grad, H, G,
                                         True, gv, Xw)
            if v2 >= val - slack or t < 1e-6:
                break
            t *= 0.5
        mode, val = trial, v2
    if not converged:  # the last permitted step may have brought it there
        converged = np.max(np.abs(np.linalg.solve(G, grad))) < 1e-10
    return mode, np.linalg.cholesky(0.5 * (G + G.T)), converged


@numba.njit(cache=True)
def _warp_log_target(t, sh, mj, c, s0, inv_var):  # pragma: no cover - compiled
    """Return the log target of the flow time t of the warp move, up to a constant.

    log N(g_t(z); mu, sigma^2) summed over the warped records plus log g_t'(z) summed over
    every one of them but the centre, for the sinh-arcsinh flow
    g_t(x) = c + s0 asinh(e^t sinh((x - c) / s0)); ``sh`` = sinh((z - c) / s0) is
    precomputed, and ``mj`` holds those records' means. With y = e^t sinh(u),
    log g_t'(x) = t + log cosh(u) - log(1 + y^2) / 2; the log cosh(u) terms do not depend on t
    and are left out, and the 1 + y^2 are multiplied (one logarithm per ~200 records).
    """
    et = math.exp(t)
    quad = 0.0
    prod = 1.0
    acc = 0.0
    m = sh.shape[0]
    for i in range(m):
        y = et * sh[i]
        q = 1.0 + y * y
        v = math.log(abs(y) + math.sqrt(q))  # asinh |y|
        if y < 0.0:
            v = -v
        x = c + s0 * v
        quad += (x - mj[i]) ** 2
        prod *= q
        if prod > 1e200:  # q >= 1: flush before the product could overflow
            acc += math.log(prod)
            prod = 1.0
    # the centre record is fixed by the flow and contributes no Jacobian factor (its y is 0):
    # the map's Jacobian is triangular with diagonal g_t'(z_i), i != r
    return -0.5 * inv_var * quad + (m - 1) * t - 0.5 * (acc + math.log(prod))


@numba.njit(cache=True)
def _warp_sweep(st, zT, muT, sd, scale, cols, centers, rec_start, rec_stop, rec_idx, sh,
                mj, max_steps):  # pragma: no cover - compiled
    for r in range(cols.shape[0]):
        j = cols[r]
        zj = zT[j]
        idx = rec_idx[rec_start[r]:rec_stop[r]]
        m = idx.shape[0]
        c = zj[idx[centers[r]]]
        s0 = scale[j]
        inv_var = 1.0 / (sd[j] * sd[j])
        # The slice width: 3 / sqrt(curv), with curv the curvature at t = 0 of the log target
        # the records would have at z = mu (sum of inv_var s0^2 tanh(v)^2 + 2 tanh(v)^2
        # sech(v)^2, v = (mu - c) / s0). It depends only on what the move leaves unchanged
        # (mu, sigma, s0, the centre's value), so it is one fixed width along each orbit, as
        # slice sampling requires (a width from the curvature at the current z would change
        # with the position on the orbit).
        curv = 0.0
        for q in range(m):
            i = idx[q]
            sh[q] = math.sinh((zj[i] - c) / s0)
            mj[q] = muT[j, i]
            th = math.tanh((mj[q] - c) / s0)
            th2 = th * th
            curv += inv_var * s0 * s0 * th2 + 2.0 * th2 * (1.0 - th2)
        shq, mjq = sh[:m], mj[:m]
        width = 3.0 / math.sqrt(curv) if curv > 1e-12 else 1.0
        # slice sampling (Neal 2003) of the flow time t along the orbit (Haar measure dt),
        # from t = 0; stepping out at most max_steps widths, split at random between the two
        # sides (Neal's rule, which keeps the move exact whatever the slice's shape)
        level = _warp_log_target(0.0, shq, mjq, c, s0, inv_var) + math.log(uniform_pos(st))
        left = -width * uniform(st)
        right = left + width
        n_left = int(max_steps * uniform(st))
        n_right = max_steps - 1 - n_left
        while n_left > 0 and _warp_log_target(left, shq, mjq, c, s0, inv_var) > level:
            left -= width
            n_left -= 1
        while n_right > 0 and _warp_log_target(right, shq, mjq, c, s0, inv_var) > level:
            right += width
            n_right -= 1
        while True:
            t = left + (right - left) * uniform(st)
            if _warp_log_target(t, shq, mjq, c, s0, inv_var) > level:
                break
            if t < 0.0:
                left = t
            else:
                right = t
        et = math.exp(t)
        for q in range(m):
            y = et * sh[q]
            v = math.log(abs(y) + math.sqrt(1.0 + y * y))
            zj[idx[q]] = c + s0 * (v if y >= 0.0 else -v)


def draw_warp(
    rng: np.random.Generator,
    z: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    scale: np.ndarray,
    cols: np.ndarray,
    records: Sequence[np.ndarray] | None = None,
) -> None:
    """Monotone warp move on ordered columns (in place on z).

    The rank likelihood is invariant to any increasing map of an ordered column, so the data
    say nothing about its marginal transform; with many distinct values each z_ij is pinned
    between its neighbours and the Gibbs sweep changes the transform only by tiny local steps.
    This move applies the sinh-arcsinh flow

        g_t(x) = c + s asinh(e^t sinh((x - c) / s)),

    which stretches (t > 0) or compresses (t < 0) the column around the centre c and is a
    one-parameter group in t (g_t o g_u = g_{t+u}), so drawing t from

        p(t) propto prod_i N(g_t(z_ij); mu_ij, sigma_j^2) prod_{i != r} g_t'(z_ij)   (Haar dt)

    is an exact generalised Gibbs step (Liu & Sabatti 2000); it is drawn by slice sampling
    (Neal 2003) with stepping out, from t = 0. The slice width is the same at every point of
    an orbit (three standard deviations of a normal approximation built from mu, sigma, s and
    the centre, none of which the move changes) and the stepping out is limited to 60 widths
    split at random between the two sides, so the step is exact whatever the shape of p(t).
    Before 2026-12-05 the width came from the curvature at the current z, which changes along
    the orbit: exact only where every slice is an interval (p(t) unimodal; it was on 2,000
    random three-record states, but that is not proven).
    The centre is the current value of a record r chosen at random, which the flow leaves in
    place, so that the maps (which then act on the whole column, the centre included) form a
    group; their Jacobian is triangular with diagonal g_t'(z_i) for i != r and 1 at r. The
    scale s is the column's marginal standard deviation (a function of the parameters, which
    the move does not change). Random centres give warps of every asymmetry over the
    iterations.

    With ``records``, each column is warped on those records only (its constrained ones): the
    latent values the data leave unconstrained are independent of them given the parameters
    and the factor scores and carry no ranks, so the move on the others, with those values
    integrated out of p(t), leaves the joint law invariant without touching them. Warped
    with the rest, values imputed from N(mu_ij, sigma_j^2) pin t near 0 for a column shown
    for few records (SD2011's ``wkabdur`` is unconstrained for 88% of them).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*), Fortran order
        Updated in place.
    mu : numpy.ndarray, shape (n, p*)
        Mean of the latent data, ``alpha + eta @ Lambda.T``.
    sd : numpy.ndarray, shape (p*,)
        Residual standard deviations.
    scale : numpy.ndarray, shape (p*,)
        Marginal standard deviations sqrt(Omega_jj).
    cols : numpy.ndarray
        Ordered columns to warp.
    records : sequence of numpy.ndarray, optional
        Per column of ``cols``, the records to warp (at least one each); default all.
    """
    if not z.flags.f_contiguous:
        raise ValueError("draw_warp: z must be Fortran-ordered.")
    n = z.shape[0]
    cols = np.asarray(cols, dtype=np.int64)
    if not len(cols):
        return
    if records is None:  # every column on every record: one shared index range
        rec_idx = np.arange(n, dtype=np.int64)
        sizes = np.full(len(cols), n, dtype=np.int64)
        rec_start = np.zeros(len(cols), dtype=np.int64)
    else:
        sizes = np.array([len(r) for r in records], dtype=np.int64)
        if len(sizes) != len(cols) or np.any(sizes < 1):
            raise ValueError("draw_warp: give one non-empty array of records per column.")
        rec_start = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
        rec_idx = np.concatenate([np.asarray(r, dtype=np.int64) for r in records])
    st, _ = new_state(rng)
    centers = rng.integers(0, sizes)  # a position in each column's records
    _warp_sweep(st, z.T, np.ascontiguousarray(np.asarray(mu, dtype=np.float64).T),
                np.ascontiguousarray(sd, dtype=np.float64),
                np.ascontiguousarray(scale, dtype=np.float64), cols, centers, rec_start,
                rec_start + sizes, rec_idx, np.empty(n), np.empty(n), 60)


def draw_log_gig(rng: np.random.Generator, lam: np.ndarray, omega: np.ndarray,
                 max_rounds: int = 1000) -> np.ndarray:
    """Draw y = log x for x ~ GIG(lam, omega), density propto x^(lam - 1) exp(-omega (x + 1/x) / 2).

    The density of y, propto exp(h(y)) with h(y) = lam y - omega cosh(y), is log-concave for
    every real lam and omega > 0 (h'' = -omega cosh(y) < 0), so the tangents of h bound it
    from above. Exact rejection sampling from the hull of the three tangents at the mode m
    (sinh(m) = lam / omega) and at m -+ one Laplace standard deviation
    (1 / sqrt(omega cosh(m))): two exponential tails and a flat top between the tangents'
    intersections, accepting y with probability exp(h(y) - hull(y)). On a normal density the
    hull's mass is 3 / sqrt(2 pi) = 1.20 times the density's, so 84% of the proposals are
    accepted; by quadrature, 0.836 for the concentrated densities of :func:`draw_factor_scale`
    (lam 500-900, omega 100-20,000) and 0.80-0.84 for lam -40 to 3, omega 0.01 to 5. Vectorised over
    the entries; SciPy's ``geninvgauss`` draws one scalar at a time in Python (about 0.35 ms
    each), which was most of :func:`draw_factor_scale`'s time.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    lam, omega : numpy.ndarray, same shape
        GIG parameters, omega > 0 and finite.
    max_rounds : int, default 1000
        Rounds of proposals for the entries still rejected; a round accepted each with
        probability 0.80 or more wherever measured (above), so the limit is not reached in
        practice (a ``RuntimeError`` if it is).

    Returns
    -------
    numpy.ndarray
        log x, the shape of ``lam``.

    References
    ----------
    Devroye, L. (1986). *Non-Uniform Random Variate Generation*, section VII.2 (log-concave
    densities). Springer.
    """
    lam, omega = np.broadcast_arrays(np.asarray(lam, dtype=float),
                                     np.asarray(omega, dtype=float))
    shape = lam.shape
    lam, omega = lam.ravel(), omega.ravel()
    if not (np.all(omega > 0) and np.all(np.isfinite(omega)) and np.all(np.isfinite(lam))):
        raise ValueError("draw_log_gig: omega must be positive and finite, lam finite.")
    m = np.arcsinh(lam / omega)

    def g(y, i):  # h(y) - h(m) of entries i, without cancellation of the two cosh terms
        return lam[i] * (y - m[i]) - 2.0 * omega[i] * np.sinh(0.5 * (y + m[i])) * np.sinh(
            0.5 * (y - m[i]))

    every = np.arange(len(lam))
    delta = 1.0 / np.sqrt(omega * np.cosh(m))  # the Laplace approximation's sd
    yl, yr = m - delta, m + delta
    sl = lam - omega * np.sinh(yl)  # h'(yl) > 0
    sr = lam - omega * np.sinh(yr)  # h'(yr) < 0
    z1 = yl - g(yl, every) / sl  # where the tangent at yl reaches the top, h(m)
    z2 = yr - g(yr, every) / sr
    mass = np.stack([1.0 / sl, z2 - z1, -1.0 / sr])  # left tail, top, right tail
    total = mass.sum(axis=0)
    c1, c2 = mass[0] / total, (mass[0] + mass[1]) / total
    out = np.empty(len(lam))
    todo = every
    for _ in range(max_rounds):
        if not len(todo):
            return out.reshape(shape)
        t = len(todo)
        u, e, log_v = rng.random(t), rng.standard_exponential(t), -rng.standard_exponential(t)
        a, b = c1[todo], c2[todo]
        left, top = u < a, (u >= a) & (u < b)
        lo, hi, s_l, s_r = z1[todo], z2[todo], sl[todo], sr[todo]
        y = np.where(left, lo - e / s_l,
                     np.where(top, lo + (u - a) / np.maximum(b - a, 1e-300) * (hi - lo),
                              hi - e / s_r))
        hull = np.where(left, s_l * (y - lo), np.where(top, 0.0, s_r * (y - hi)))
        ok = log_v <= g(y, todo) - hull
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    raise RuntimeError(f"draw_log_gig: {len(todo)} entries still rejected after {max_rounds} "
                       "rounds of proposals; the parameters are outside what it was built for.")


def draw_factor_scale(
    rng: np.random.Generator,
    eta: np.ndarray,
    Lambda: np.ndarray,
    prior_prec: np.ndarray,
) -> np.ndarray:
    """Scale factors c_h of the parameter-expansion move on each factor.

    The latent data depend on the factors only through ``Lambda eta``, which does not change
    when a factor's scores are multiplied by c and its loadings divided by c; only the priors
    (eta ~ N(0, 1), lambda_jh ~ N(0, 1 / prior_prec_jh)) pin the factor's scale, and the Gibbs
    updates of eta and Lambda, each given the other, move along it in steps of relative size
    O(1/sqrt(n)). Along the orbit (left Haar measure dc/c, Jacobian c^n c^-p) the conditional
    of u = c^2 is a generalised inverse Gaussian,

        p(u) propto u^((n - p)/2 - 1) exp(-(A u + B / u) / 2),
        A = sum_i eta_ih^2,   B = sum_j prior_prec_jh lambda_jh^2,

    drawn exactly (:func:`draw_log_gig`; until 2026-12-07 by SciPy's ``geninvgauss``, one
    scalar at a time): the parameter expansion of Ghosh & Dunson (2009) as a group move.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of the loadings.

    Returns
    -------
    numpy.ndarray, shape (k,)
        c_h; apply as eta[:, h] *= c_h, Lambda[:, h] /= c_h.

    References
    ----------
    Ghosh, J. and Dunson, D. B. (2009). Default prior distributions and efficient posterior
    computation in Bayesian factor analysis. *Journal of Computational and Graphical
    Statistics*, 18(2), 306-320.
    """
    n, k = eta.shape
    p = Lambda.shape[0]
    A = np.maximum(np.einsum("ih,ih->h", eta, eta), 1e-300)
    B = np.maximum(np.einsum("jh,jh->h", prior_prec, Lambda**2), 1e-300)
    lam = np.full(k, 0.5 * (n - p))
    # u = sqrt(B / A) x with x ~ GIG(lam, sqrt(A B)); c = sqrt(u), from log x
    y = draw_log_gig(rng, lam, np.sqrt(A) * np.sqrt(B))
    return np.exp(0.5 * (y + 0.5 * (np.log(B) - np.log(A))))


@numba.njit(cache=True)
def _t_gauss_log(x, m, q, tau, nu):  # pragma: no cover - compiled
    return -0.5 * q * (x - m) ** 2 - 0.5 * (nu + 1.0) * math.log1p(tau * x * x / nu)


@numba.njit(cache=True)
def _lambda_t_sweep(st, Lam, Q, B, tau, nu):  # pragma: no cover - compiled
    p, k = Lam.shape
    for j in range(p):
        for h in range(k):
            q = Q[j, h, h]
            r = B[j, h]
            for g in range(k):
                if g != h:
                    r -= Q[j, h, g] * Lam[j, g]
            m = r / q if q > 0.0 else 0.0  # q = 0: no record constrains the column
            x0 = Lam[j, h]
            t = tau[h]
            level = _t_gauss_log(x0, m, q, t, nu) + math.log(uniform_pos(st))
            w = 3.0 / math.sqrt(q + t)  # fixed: it does not depend on x0
            left = x0 - w * uniform(st)
            right = left + w
            # at most 100 widths, split at random between the sides (Neal 2003, fig. 3): the
            # step is then exact even where the limit binds (a heavy-tailed prior with no
            # record on the column has slices of hundreds of widths)
            c_left = int(100 * uniform(st))
            c_right = 99 - c_left
            while c_left > 0 and _t_gauss_log(left, m, q, t, nu) > level:
                left -= w
                c_left -= 1
            while c_right > 0 and _t_gauss_log(right, m, q, t, nu) > level:
                right += w
                c_right -= 1
            while True:
                x = left + (right - left) * uniform(st)
                if _t_gauss_log(x, m, q, t, nu) > level:
                    break
                if x < x0:
                    left = x
                else:
                    right = x
            Lam[j, h] = x


def draw_Lambda_marginal_phi(
    rng: np.random.Generator,
    z: np.ndarray,
    alpha_full: np.ndarray,
    eta: np.ndarray,
    prec: np.ndarray,
    Lambda: np.ndarray,
    tau: np.ndarray,
    nu: float,
    unconstrained: Sequence[tuple[int, np.ndarray]] = (),
) -> np.ndarray:
    """Draw the loadings one element at a time with the local shrinkage phi integrated out.

    Under the multiplicative gamma process, lambda_jh | tau_h is Student-t with nu degrees of
    freedom and scale tau_h^-1/2 once phi_jh ~ Gamma(nu/2, nu/2) is integrated out. Given the
    rest of its row, lambda_jh's likelihood is normal (precision q = prec_j sum_i eta_ih^2,
    mean from the row's normal equations), so its conditional is normal times Student-t, drawn
    by slice sampling (Neal 2003). Drawing phi afterwards from its gamma conditional
    (:func:`draw_mgp`) completes an exact partially collapsed update. The plain pair of Gibbs
    steps, lambda given phi and phi given lambda, mixes slowly for loadings near zero, where a
    small lambda makes phi large and a large phi keeps lambda small.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    alpha_full : numpy.ndarray, shape (p*,)
        Intercepts (zero outside the level columns).
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    prec : numpy.ndarray, shape (p*,)
        Residual precisions of every column.
    Lambda : numpy.ndarray, shape (p*, k)
        Current loadings.
    tau : numpy.ndarray, shape (k,)
        Global shrinkage cumprod(delta).
    nu : float
        Degrees of freedom of the local shrinkage, phi ~ Gamma(nu/2, rate nu/2).
    unconstrained : sequence of (int, numpy.ndarray), optional
        As in :func:`draw_Lambda`: those latent values are integrated out.

    Returns
    -------
    numpy.ndarray, shape (p*, k)
        The new loadings.
    """
    EtE, EtZ = observed_cross_products(z, alpha_full, eta, unconstrained)
    Q = prec[:, None, None] * EtE
    B = np.ascontiguousarray((prec[None, :] * EtZ).T)
    Lam = np.array(Lambda, dtype=np.float64, copy=True, order="C")
    st, _ = new_state(rng)
    _lambda_t_sweep(st, Lam, np.ascontiguousarray(Q), B,
                    np.ascontiguousarray(tau, dtype=np.float64), float(nu))
    return Lam



def marginal_loadings_logp(
    Lambda: np.ndarray,
    theta: np.ndarray,
    S: np.ndarray,
    n: int,
    d: np.ndarray,
    free: np.ndarray,
    prior_prec: np.ndarray,
    a: float,
    b: float,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Log density of (Lambda, log prec) given the latent data, the factor scores integrated out.

    Given the latent data, the intercepts and the shrinkage parameters, integrating
    ``eta_i ~ N(0, I)`` out of ``z_i = alpha + Lambda eta_i + eps_i`` leaves
    ``z_i ~ N(alpha, Sigma)``, ``Sigma = Lambda Lambda' + D``, so with
    ``S = sum_i (z_i - alpha)(z_i - alpha)'``

        log p = -n/2 log|Sigma| - tr(Sigma^-1 S)/2 - sum_jh prior_prec_jh lambda_jh^2 / 2
                + sum_j (a theta_j - b exp(theta_j)),

    with ``theta_j = log prec_j`` for the free-scale columns (``D_jj = exp(-theta_j)``; the
    last sum is the Gamma(a, b) prior with the Jacobian of the log) and ``D_jj = d_j`` fixed
    elsewhere. With ``G = (Sigma^-1 S Sigma^-1 - n Sigma^-1) / 2`` the gradients are
    ``2 G Lambda - prior_prec * Lambda`` and ``-G_jj D_jj + a - b exp(theta_j)``.

    Parameters
    ----------
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    theta : numpy.ndarray, shape (f,)
        Log residual precisions of the free-scale columns ``free``.
    S : numpy.ndarray, shape (p*, p*)
        Scatter matrix of the latent data about the intercepts.
    n : int
        Number of records.
    d : numpy.ndarray, shape (p*,)
        Residual variances (those of the free-scale columns are replaced).
    free : numpy.ndarray of int, shape (f,)
        Free-scale columns.
    prior_prec : numpy.ndarray, shape (p*, k)
        Prior precisions of the loadings.
    a, b : float
        Shape and rate of the gamma prior on the residual precisions.

    Returns
    -------
    logp : float
        The log density up to a constant (``-inf`` where Sigma is not positive definite).
    grad_Lambda : numpy.ndarray, shape (p*, k)
    grad_theta : numpy.ndarray, shape (f,)
    """
    from scipy.linalg import LinAlgError, cho_solve

    if not (np.all(np.isfinite(Lambda)) and np.all(np.abs(theta) < 700.0)):
        return -np.inf, np.zeros_like(Lambda), np.zeros_like(theta)
    D = np.array(d, dtype=float, copy=True)
    D[free] = np.exp(-theta)
    Sig = Lambda @ Lambda.T
    Sig.flat[:: Sig.shape[0] + 1] += D
    if not np.isfinite(Sig).all():  # overflowed (checked once here, not by each SciPy call)
        return -np.inf, np.zeros_like(Lambda), np.zeros_like(theta)
    try:
        c = cholesky(Sig, lower=True, check_finite=False)
    except (LinAlgError, ValueError):  # not positive definite
        return -np.inf, np.zeros_like(Lambda), np.zeros_like(theta)
    Sinv = cho_solve((c, True), np.eye(len(D)), check_finite=False)
    SinvS = Sinv @ S
    logp = (-n * float(np.sum(np.log(np.diag(c)))) - 0.5 * float(np.trace(SinvS))
            - 0.5 * float(np.sum(prior_prec * Lambda**2))
            + float(np.sum(a * theta - b * np.exp(theta))))
    G = 0.5 * (SinvS @ Sinv - n * Sinv)
    g_lam = 2.0 * (G @ Lambda) - prior_prec * Lambda
    g_th = -np.diag(G)[free] * D[free] + a - b * np.exp(theta)
    return logp, g_lam, g_th


def draw_loadings_hmc(
    rng: np.random.Generator,
    S: np.ndarray,
    n: int,
    Lambda: np.ndarray,
    theta: np.ndarray,
    d: np.ndarray,
    free: np.ndarray,
    prior_prec: np.ndarray,
    a: float,
    b: float,
    *,
    step_size: float,
    n_steps: int,
    inv_mass: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float]:
    """One Hamiltonian Monte Carlo transition for (Lambda, log prec) with eta integrated out.

    The Gibbs updates of the loadings, the residual precisions and the factor scores, each
    given the others, move along the directions that leave ``Sigma = Lambda Lambda' + D`` almost
    unchanged only in steps of order 1/sqrt(n): a pair of strongly correlated columns sharing a
    factor can trade loading against residual variance (the two-indicator ridge), and the
    category-conditional means that synthesis uses inherit that slow drift. This transition
    targets :func:`marginal_loadings_logp`, the conditional of (Lambda, theta) given the latent
    data with the scores integrated out, and travels along such ridges in one trajectory. A
    step size jittered by +-20% (drawn independently of the state) and a fixed diagonal mass
    matrix keep it reversible; the scores are then redrawn from their full conditional
    (the pair is an exact partially collapsed block).

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    S, n, Lambda, theta, d, free, prior_prec, a, b
        As in :func:`marginal_loadings_logp`.
    step_size : float
        Leapfrog step size (before the jitter).
    n_steps : int
        Leapfrog steps per trajectory.
    inv_mass : numpy.ndarray, shape (p* k + f,)
        Diagonal of the inverse mass matrix, over ``Lambda.ravel()`` then ``theta``.

    Returns
    -------
    Lambda, theta : numpy.ndarray
        The new state (the old one when the proposal is rejected).
    accept_prob : float
        The Metropolis acceptance probability of the trajectory.
    """
    shape = Lambda.shape
    m = Lambda.size

    def logp_grad(q):
        lp, gl, gt = marginal_loadings_logp(q[:m].reshape(shape), q[m:], S, n, d, free,
                                            prior_prec, a, b)
        return lp, np.concatenate([gl.ravel(), gt])

    q0 = np.concatenate([Lambda.ravel(), theta])
    lp0, g = logp_grad(q0)
    mom = rng.standard_normal(q0.size) / np.sqrt(inv_mass)
    h0 = -lp0 + 0.5 * float(np.sum(inv_mass * mom**2))
    eps = step_size * rng.uniform(0.8, 1.2)
    q = q0.copy()
    mom = mom + 0.5 * eps * g
    lp = lp0
    for i in range(n_steps):
        q = q + eps * inv_mass * mom
        lp, g = logp_grad(q)
        if not np.isfinite(lp):
            break
        if i < n_steps - 1:
            mom = mom + eps * g
    else:
        mom = mom + 0.5 * eps * g
    if not np.isfinite(lp):
        return Lambda, theta, 0.0
    h1 = -lp + 0.5 * float(np.sum(inv_mass * mom**2))
    accept = float(np.exp(min(0.0, h0 - h1))) if np.isfinite(h1) else 0.0
    if rng.random() < accept:
        return q[:m].reshape(shape), q[m:], accept
    return Lambda, theta, accept


@numba.njit(cache=True)
def _rotation_sweep(Lam, R, tau, nu, rounds, walk, unif, log_u,
                    acc_kind):  # pragma: no cover - compiled
    """Metropolis rotations of every pair of factors (see :func:`draw_rotation`), in place.

    Returns the number of accepted proposals; ``Lam`` and the accumulated rotation ``R`` are
    updated in place, and ``acc_kind`` (int64, length 2) gains the acceptances of the
    random-walk and of the uniform proposals.
    """
    p, k = Lam.shape
    c = -0.5 * (nu + 1.0)
    S = np.zeros(k)  # S[h] = sum_j log1p(tau_h lambda_jh^2 / nu), kept current
    for h in range(k):
        for j in range(p):
            S[h] += math.log1p(tau[h] * Lam[j, h] * Lam[j, h] / nu)
    t = 0
    n_acc = 0
    for _ in range(rounds):
        for h in range(k):
            for g in range(h + 1, k):
                for kind in range(2):
                    theta = walk[t] if kind == 0 else unif[t]
                    ct, st = math.cos(theta), math.sin(theta)
                    # sum_j log(1 + x_j) as the log of a running product (each factor >= 1;
                    # flushed before it could overflow): one logarithm per column, not per
                    # loading
                    ph, pg = 1.0, 1.0
                    sh = 0.0
                    sg = 0.0
                    th, tg = tau[h] / nu, tau[g] / nu
                    for j in range(p):
                        a, b = Lam[j, h], Lam[j, g]
                        a2, b2 = ct * a - st * b, st * a + ct * b
                        ph *= 1.0 + th * a2 * a2
                        pg *= 1.0 + tg * b2 * b2
                        if ph > 1e200:
                            sh += math.log(ph)
                            ph = 1.0
                        if pg > 1e200:
                            sg += math.log(pg)
                            pg = 1.0
                    sh += math.log(ph)
                    sg += math.log(pg)
                    if log_u[t, kind] < c * (sh + sg - S[h] - S[g]):
                        n_acc += 1
                        acc_kind[kind] += 1
                        S[h], S[g] = sh, sg
                        for j in range(p):
                            a, b = Lam[j, h], Lam[j, g]
                            Lam[j, h], Lam[j, g] = ct * a - st * b, st * a + ct * b
                        for j in range(k):
                            a, b = R[j, h], R[j, g]
                            R[j, h], R[j, g] = ct * a - st * b, st * a + ct * b
                t += 1
    return n_acc


def draw_rotation(
    rng: np.random.Generator,
    Lambda: np.ndarray,
    eta: np.ndarray,
    tau: np.ndarray,
    nu: float,
    *,
    step: float = 0.3,
    rounds: int = 1,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Rotate each pair of factors by an exact Metropolis move, then redraw the local shrinkage.

    The likelihood depends on the factors only through ``Lambda eta'``, unchanged when both are
    multiplied by the same rotation; the scores' N(0, I) prior is rotation invariant too, so
    along that orbit only the loadings' prior decides. The Gibbs updates turn the factors only
    slowly, and a row with little information in the data (a rare level) follows the prior
    of whatever rotation the chain is at: its category-conditional means mix as slowly as the
    rotation does. For each pair of factors (h, l) an angle is proposed, two ways in turn (a
    random walk N(0, step^2) and a uniform angle on (-pi/2, pi/2]; both symmetric), and
    accepted with the ratio of the loadings' prior with the local shrinkage integrated out,

        log p(Lambda | tau) = -(nu + 1)/2 sum_jh log(1 + tau_h lambda_jh^2 / nu)

    (a Student-t in each loading), the rotation's Jacobian being 1. The local shrinkage
    phi_jh ~ Gamma((nu + 1)/2, rate = (nu + tau_h lambda_jh^2)/2) is then redrawn from its
    full conditional, which makes (rotation, phi) an exact partially collapsed block.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random generator.
    Lambda : numpy.ndarray, shape (p*, k)
        Loadings.
    eta : numpy.ndarray, shape (n, k)
        Factor scores.
    tau : numpy.ndarray, shape (k,)
        Global shrinkage (the cumulative product of delta).
    nu : float
        Degrees of freedom of the local shrinkage, phi ~ Gamma(nu/2, rate nu/2).
    step : float, default 0.3
        Standard deviation of the random-walk angle (radians).
    rounds : int, default 1
        Sweeps over all pairs (each sweep is itself an exact move; the local shrinkage is
        redrawn once, at the end).
    counts : numpy.ndarray of int64, shape (2,), optional
        Gains the number of accepted random-walk and uniform proposals (for tuning ``step``).

    Returns
    -------
    Lambda : numpy.ndarray, shape (p*, k)
    eta : numpy.ndarray, shape (n, k)
    phi : numpy.ndarray, shape (p*, k)
    acceptance : float
        Share of proposals accepted.
    """
    Lambda = np.array(Lambda, dtype=np.float64, copy=True)
    eta = np.asarray(eta, dtype=float)
    k = Lambda.shape[1]
    tau = np.asarray(tau, dtype=np.float64)
    n_pairs = rounds * k * (k - 1) // 2
    # two proposals per pair and round (random walk, then uniform), in sweep order
    walk = step * rng.standard_normal(n_pairs)
    unif = math.pi * (rng.random(n_pairs) - 0.5)
    log_u = np.log(rng.random((n_pairs, 2)))
    R = np.eye(k)  # the accumulated rotation, applied to the scores once at the end
    acc_kind = np.zeros(2, dtype=np.int64)
    n_acc = _rotation_sweep(Lambda, R, tau, float(nu), rounds, walk, unif, log_u, acc_kind)
    if counts is not None:
        counts += acc_kind
    n_prop = 2 * n_pairs
    if n_acc:
        eta = eta @ R
    phi = rng.gamma(0.5 * (nu + 1.0), 1.0 / (0.5 * (nu + tau[None, :] * Lambda**2)))
    return Lambda, eta, phi, n_acc / max(n_prop, 1)
