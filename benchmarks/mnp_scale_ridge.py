"""How far a multinomial-probit block's scale can move given the factor scores.

The slow direction of CE's chains is the scale of marital status's utilities (the sum of
squared loadings of ``Marital[5]`` ranges over 12-54 between chains and seeds). A move on a
block's intercepts and loadings that keeps the factor scores eta can at best sample the
conditional law of

    log c,   (alpha_B, Lambda_B) -> c (alpha_B, Lambda_B),

given eta, with the block's latent utilities integrated out: per record the multinomial-probit
probability of its level, a one-dimensional integral (the winner's utility against the
product of the other utilities' normal CDFs; Gauss-Legendre, 48 nodes on [max(0, m - 9),
m + 9], checked against 2,000,000 Monte Carlo draws to within their standard error). This
script fits CE's training split (the split of ``real_data.py``; 2 x (1000 + 1000), the
default sweep, no extension), takes each chain's final state, and prints the sd of that
conditional law of log c on a grid, for each block as a whole and for each of its columns
alone (prior and Jacobian c^(m (k + 1)) included). A random-walk move on it at its best has a
proposal sd of about 2.4 times that sd; compare with the tuned sd of log c of
:class:`~bayesynth.samplers.UtilityTransportScaleMove` (0.041-0.056 on CE, which keeps the
utilities but carries them along).

For each whole block it also prints the same law with the factor scores integrated out as well,
given the other columns' latent values and parameters: eta_i ~ N(m_i, V) given the other
columns, so the block's utilities are N(c (alpha_B + Lambda_B m_i), I + c^2 Lambda_B V
Lambda_B') and each record's level probability is an orthant probability of that normal (GHK
with 200 draws per record, common random numbers over the grid).

``--dataset sd2011`` fits instead the columns ``--columns`` of SD2011's training split with
the survey schema's rules among them (default ``age, marital, ymarr, sex, socprof, edu``, the
six-column table of ``block_scale.py``, where ``socprof``'s scale is the slowest direction),
on one core. Compare the printed sds with how far the scale travels along a chain: ``log c``
is half the log of the block's sum of squared loadings, whose chain spread ``block_scale.py``
prints. Usage::

    python benchmarks/mnp_scale_ridge.py [--seed 1] [--draws 1000] [--tune 1000]
    python benchmarks/mnp_scale_ridge.py --dataset sd2011      # about 12 minutes
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import importlib
import time
import warnings

import numpy as np
import real_data as rd
from scipy.special import log_ndtr, ndtr, ndtri

from bayesynth.models import rank_probit_copula
from bayesynth.samplers.sampling import sample
from bayesynth.schema import modelled_schema

steps = importlib.import_module("bayesynth.samplers.steps")
NODES, WEIGHTS = np.polynomial.legendre.leggauss(48)


def level_loglik(M: np.ndarray, codes: np.ndarray) -> float:
    """Sum over records of log P(level | utility means M), unit residuals, reference at 0."""
    out = np.empty(len(M))
    ref = codes < 0
    out[ref] = log_ndtr(-M[ref]).sum(1)
    for col in range(M.shape[1]):
        rows = codes == col
        if not rows.any():
            continue
        m = M[rows, col]
        lo = np.maximum(0.0, m - 9.0)
        hi = np.maximum(lo + 1.0, m + 9.0)
        u = 0.5 * (hi - lo)[:, None] * NODES + 0.5 * (hi + lo)[:, None]
        lg = -0.5 * (u - m[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
        for other in range(M.shape[1]):
            if other != col:
                lg = lg + log_ndtr(u - M[rows, other][:, None])
        top = lg.max(1)
        out[rows] = np.log((np.exp(lg - top[:, None]) * WEIGHTS).sum(1) * 0.5 * (hi - lo)) + top
    return float(out.sum())


def orthant_loglik(mu: np.ndarray, S: np.ndarray, U: np.ndarray) -> float:
    """Sum over rows of log P(w > 0), w ~ N(mu_i, S), by GHK with the uniforms U (n, R, dim)."""
    L = np.linalg.cholesky(S)
    n, dim = mu.shape
    e = np.zeros((n, U.shape[1], dim))
    logp = np.zeros((n, U.shape[1]))
    for t in range(dim):
        shift = mu[:, t][:, None] + (e[:, :, :t] @ L[t, :t] if t else 0.0)
        lb = -shift / L[t, t]
        logp += log_ndtr(-lb)
        below = ndtr(lb)
        e[:, :, t] = ndtri(np.clip(below + U[:, :, t] * (1 - below), 1e-300, 1 - 1e-16))
    top = logp.max(1)
    return float(np.sum(np.log(np.exp(logp - top[:, None]).mean(1)) + top))


def level_contrasts(m: int, level: int) -> np.ndarray:
    """D with D u > 0 exactly when the utilities u (reference at 0) pick ``level`` (-1: ref)."""
    if level < 0:
        return -np.eye(m)
    D = np.zeros((m, m))
    D[:, level] = 1.0
    others = [j for j in range(m) if j != level]
    for r, j in enumerate(others, start=1):
        D[r, j] = -1.0
    return D


def scores_integrated_sd(point, s, move, cols, codes, grid, draws=200) -> float:
    """Sd of log c for a whole block, its utilities and the factor scores integrated out."""
    alpha = s.alpha_full(point)
    Lam = np.asarray(s.value(point, "Lambda"), dtype=float)
    sd = s.sd(point)
    z = np.asarray(s.value(point, "z"), dtype=float)
    tau = np.cumprod(s.value(point, "delta"))
    nu = move._nu
    mu0, sd0 = steps._alpha_prior(s, move._mu, move._sd, point)
    k, m = Lam.shape[1], len(cols)
    other = np.setdiff1d(np.arange(Lam.shape[0]), cols)
    Lo, so = Lam[other], sd[other]
    V = np.linalg.inv(np.eye(k) + (Lo.T / so**2) @ Lo)
    V = 0.5 * (V + V.T)
    mean_eta = ((z[:, other] - alpha[other]) / so**2) @ Lo @ V
    mu = alpha[cols] + mean_eta @ Lam[cols].T
    LB = Lam[cols]
    rng = np.random.default_rng(0)
    levels = [lv for lv in range(-1, m) if np.any(codes == lv)]
    U = {lv: rng.random((int(np.sum(codes == lv)), draws, m)) for lv in levels}
    log_t = np.empty(len(grid))
    for g, lc in enumerate(grid):
        c = np.exp(lc)
        S = np.eye(m) + c**2 * LB @ V @ LB.T
        ll = sum(orthant_loglik(c * mu[codes == lv] @ level_contrasts(m, lv).T,
                                level_contrasts(m, lv) @ S @ level_contrasts(m, lv).T, U[lv])
                 for lv in levels)
        a, L = c * alpha[cols], c * LB
        log_t[g] = ll + (-0.5 * np.sum(((a - mu0[cols]) / sd0[cols]) ** 2)
                         - 0.5 * (nu + 1) * np.sum(np.log1p(tau * L**2 / nu))
                         + m * (k + 1) * lc)
    w = np.exp(log_t - log_t.max())
    w /= w.sum()
    mean = float(w @ grid)
    return float(np.sqrt(w @ (grid - mean) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--dataset", choices=("ce", "sd2011"), default="ce")
    ap.add_argument("--columns", default="age,marital,ymarr,sex,socprof,edu",
                    help="SD2011's columns to fit (with --dataset sd2011)")
    args = ap.parse_args()
    df, schema, _ = rd.load(args.dataset)
    train, _ = rd.split(df)
    cores = None
    if args.dataset == "sd2011":
        cols = args.columns.split(",")
        schema = modelled_schema(train, schema,
                                 exclude=[c for c in schema.names if c not in cols])
        train = train[schema.names]
        cores = 1
    model = rank_probit_copula(train, schema)
    last: dict[int, dict] = {}

    def keep(trace, draw):
        last[draw.chain] = draw.point

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample(model, draws=args.draws, tune=args.tune, chains=2, cores=cores,
               random_seed=args.seed, progressbar=False, check_convergence=False,
               max_extensions=0, callback=keep)
    print(f"{args.dataset} training split {schema.names}, n = {len(train)}, "
          f"2 x ({args.tune} + {args.draws}), seed {args.seed}: "
          f"{time.perf_counter() - t0:.0f} s")
    s = steps.copula_structure(model)
    lay = s.layout
    with model:
        move = steps.UtilityTransportScaleMove()
    grid = np.linspace(-0.3, 0.3, 121)
    print("chain  group          sum lambda^2  sd of log c given eta  (best random-walk sd)  "
          "sd with eta integrated too")
    for chain in sorted(last):
        point = last[chain]
        alpha = s.alpha_full(point)
        Lam = np.asarray(s.value(point, "Lambda"), dtype=float)
        eta = s.value(point, "eta")
        tau = np.cumprod(s.value(point, "delta"))
        nu = move._nu
        mu0, sd0 = steps._alpha_prior(s, move._mu, move._sd, point)
        k = eta.shape[1]
        for b in range(len(lay.k_mnp_off) - 1):
            cols = lay.k_mnp_cols[lay.k_mnp_off[b]:lay.k_mnp_off[b + 1]]
            codes = lay.k_mnp_codes[b]
            if not np.allclose(s.sd(point)[cols], 1.0):
                raise RuntimeError("multinomial-probit residual sds are not 1")
            shown = codes >= -1
            groups = [("block " + lay.latent_names[cols[0]].split("[")[0],
                       np.arange(len(cols)))]
            groups += [(lay.latent_names[cols[j]], np.array([j])) for j in range(len(cols))]
            for name, pos in groups:
                log_t = np.empty(len(grid))
                for g, lc in enumerate(grid):
                    c = np.ones(len(cols))
                    c[pos] = np.exp(lc)
                    a, L = alpha[cols] * c, Lam[cols] * c[:, None]
                    prior = (-0.5 * np.sum(((a - mu0[cols]) / sd0[cols]) ** 2)
                             - 0.5 * (nu + 1) * np.sum(np.log1p(tau * L**2 / nu))
                             + len(pos) * (k + 1) * lc)
                    log_t[g] = level_loglik((a + eta @ L.T)[shown], codes[shown]) + prior
                w = np.exp(log_t - log_t.max())
                w /= w.sum()
                mean = float(w @ grid)
                sd = float(np.sqrt(w @ (grid - mean) ** 2))
                extra = ""
                if len(pos) == len(cols):  # the whole block: also with eta integrated out
                    extra = f"  {scores_integrated_sd(point, s, move, cols, codes, grid):.3f}"
                print(f"{chain:5d}  {name:14s} {np.sum(Lam[cols[pos]] ** 2):12.2f}  "
                      f"{sd:21.3f}  ({2.4 * sd:.3f}){extra}")


if __name__ == "__main__":
    main()
