"""What pins a multinomial-probit variable's parameters: conditionals against the posterior.

A Gibbs-type sweep moves a block of parameters about as far per iteration as its conditional
standard deviation given what the sweep holds fixed; where the posterior is much wider than
that conditional, the chain crawls. This script runs the default sweep on a table for
``--sweeps`` iterations (one chain, from the factor-analysis start that ``bayesynth.sample``
gives a chain), then, at that state and
for one multinomial-probit variable, measures the conditional standard deviations that the
candidate collapsed moves would have:

1. for each utility column j, of its intercept alpha_j and of its loading norm |lambda_j|
   (along lambda_j's own direction) given the factor scores eta, (a) with the column's own
   utilities integrated out and the block's other utilities held (the target of the row move
   of ``InterceptGibbs`` without its integration over eta) and (b) with all of the block's
   utilities integrated out (a move that no utility of the block pins): the likelihood of
   a record's level is then one integral over the winning utility, done by 200-point
   Gauss-Legendre quadrature (``--check`` compares it with simulated frequencies);
2. for the block's scale (all its intercepts and loadings multiplied by c: the direction the
   utility transport scale move travels), of log c given eta with the utilities integrated
   out, and with eta integrated out too, given the other columns' latent values (eta's
   conditional given them is normal; its integral is a Monte Carlo average over ``--draws``
   draws per record, independent across records and the same for every c, so the target is
   smooth in c); and the same two for
   scaling only the block's loadings in the factor directions that the other columns leave
   nearly uninformed (eta's conditional variance given them above 0.5).

``mnp_scale_ridge.py`` measures the block scale with the scores integrated out by GHK; the
Monte Carlo integral here gives the same kind of figure, and part 1 and the directions the
other columns leave free are what this script adds.

Curvatures are central second differences of the log likelihood (the priors are weak at these
sizes and left out). With ``--fit`` (an InferenceData saved by ``copula_mixing.py --save``,
same table and schema) it prints beside them the posterior standard deviations and bulk ESS
of the same quantities over that fit's kept draws, and traces one conditional mean of it
(``--quantity``): its autocorrelations, chain means by tenths, and the block parameters it
follows across draws.

Usage::

    python benchmarks/utility_pinning.py                                   # CE, Marital
    python benchmarks/copula_mixing.py --data ce --categorical Tenure,Marital --save ce.nc
    python benchmarks/utility_pinning.py --fit ce.nc --sweeps 1000 --check
    python benchmarks/utility_pinning.py --data demo --variable m_race
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import log_ndtr

import bayesynth as bs
from bayesynth.samplers import assign_copula_steps
from bayesynth.samplers.kernels import _column_bounds
from bayesynth.samplers.sampling import _factor_analysis_copula_starts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SCHEMAS = {"ce": ["Tenure", "Marital"]}  # read as categorical, as real_data.py does


def load(name: str) -> tuple[pd.DataFrame, bs.Schema | None]:
    if name == "demo":
        return bs.datasets.simulate_child_health(n=2000, random_seed=2026), None
    path = DATA / f"{name}.csv"
    if not path.exists():
        raise SystemExit(f"{path} is absent: the shared data folder is needed for {name!r}")
    df = pd.read_csv(path)
    return df, bs.infer_schema(df, categorical=SCHEMAS.get(name, []))


class Block:
    """One multinomial-probit block at a sampler state: its records' levels and likelihoods."""

    def __init__(self, block, codes: np.ndarray, n_nodes: int = 200):
        self.cols = np.asarray(block.latent)
        self.ref = block.reference
        self.col_level = [lv for lv in range(len(block.levels)) if lv != block.reference]
        self.codes = codes
        t, w = np.polynomial.legendre.leggauss(n_nodes)
        self.t, self.w = 8.5 * (t + 1.0), 8.5 * w  # [0, 17] above the lower limit

    def loglik(self, M: np.ndarray, codes: np.ndarray | None = None) -> np.ndarray:
        """Log P(record's level | utility means M), the block's utilities integrated out.

        Reference level: every utility below 0, prod_j Phi(-m_j). Level l: its utility u above
        0 and above every other, int_0^inf phi(u - m_l) prod_{j != l} Phi(u - m_j) du, with
        x = u - m_l from max(-m_l, -8.5) over 17 units (phi(x) < 1e-16 beyond 8.5).
        Records without a level contribute 0.
        """
        codes = self.codes if codes is None else codes
        out = np.zeros(len(M))
        ref = codes == self.ref
        out[ref] = log_ndtr(-M[ref]).sum(1)
        for q, lv in enumerate(self.col_level):
            r = codes == lv
            if not r.any():
                continue
            m = M[r]
            x = np.maximum(-m[:, q], -8.5)[:, None] + self.t[None, :]
            lp = -0.5 * x * x - 0.5 * np.log(2 * np.pi)
            for q2 in range(len(self.col_level)):
                if q2 != q:
                    lp = lp + log_ndtr(m[:, q][:, None] + x - m[:, q2][:, None])
            out[r] = np.log(np.exp(lp) @ self.w)
        return out


def curvature_sd(f, x0: np.ndarray, h: float) -> np.ndarray:
    """Standard deviations of the normal with f's curvature at x0 (second differences)."""
    d = len(x0)
    H = np.zeros((d, d))
    for a in range(d):
        for b in range(a, d):
            ea, eb = np.eye(d)[a] * h, np.eye(d)[b] * h
            H[a, b] = H[b, a] = (f(x0 + ea + eb) - f(x0 + ea - eb) - f(x0 - ea + eb)
                                 + f(x0 - ea - eb)) / (4 * h * h)
    return np.sqrt(np.diag(np.linalg.inv(-H)))


def second_difference_sd(f, h: float) -> float:
    c = -(f(h) - 2 * f(0.0) + f(-h)) / (h * h)
    return float(1.0 / np.sqrt(c)) if c > 0 else float("inf")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="ce", choices=("ce", "demo", "adult", "nltcs"))
    ap.add_argument("--variable", default="Marital")
    ap.add_argument("--sweeps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=64,
                    help="Monte Carlo draws of eta for the integrals over eta")
    ap.add_argument("--fit", default=None, help="a saved fit of the same table (netCDF)")
    ap.add_argument("--quantity", default="Marital=2|Age",
                    help="with --fit: a conditional mean to trace, 'level label|ordered column' "
                         "('' for none)")
    ap.add_argument("--check", action="store_true",
                    help="compare the quadrature's level probabilities with simulation")
    args = ap.parse_args(argv)

    df, schema = load(args.data)
    model = bs.models.rank_probit_copula(df, schema)
    steps = assign_copula_steps(model)
    rng = np.random.default_rng(args.seed)
    for s in steps:
        s.rng = rng
    point = dict(model.initial_point())
    # the start bayesynth.sample gives a chain: a factor analysis of a resample of the records
    for name, value in _factor_analysis_copula_starts(model, 1, args.seed)[0].items():
        rv = model[name]
        tr = model.rvs_to_transforms.get(rv)
        point[model.rvs_to_values[rv].name] = (np.asarray(value) if tr is None else
                                               tr.forward(value, *rv.owner.inputs).eval())
    t0 = time.perf_counter()
    for _ in range(args.sweeps):
        for s in steps:
            s._update(point)
    S = steps[0].structure
    lay = S.layout
    found = [b for b in lay.categorical if b.name == args.variable and b.likelihood == "mnp"]
    if not found:
        raise SystemExit(f"{args.variable!r} is not a multinomial-probit variable of this "
                         f"model; those are {[b.name for b in lay.categorical]}")
    blk = Block(found[0], found[0].codes)
    zkey = model.rvs_to_values[model["z"]].name
    z = np.asarray(point[zkey])
    eta, Lam, af, sd = S.value(point, "eta"), S.value(point, "Lambda"), S.alpha_full(point), \
        S.sd(point)
    cols, n, k = blk.cols, len(z), eta.shape[1]
    print(f"{args.data}: n = {n}, p* = {len(sd)}, k = {k}; {args.variable}: "
          f"{len(cols)} utility columns; state after {args.sweeps} sweeps "
          f"({time.perf_counter() - t0:.0f} s)")
    M = af[cols][None, :] + eta @ Lam[cols].T
    if args.check:
        sim = np.random.default_rng(0)
        idx = sim.choice(n, 8, replace=False)
        for i in idx:
            u = M[i][None, :] + sim.standard_normal((200_000, len(cols)))
            win = np.where(u.max(1) > 0, u.argmax(1), -1)
            code = blk.codes[i]
            q = -1 if code == blk.ref else blk.col_level.index(code)
            freq = np.mean(win == q)
            quad = np.exp(blk.loglik(M[i:i + 1], blk.codes[i:i + 1]))[0]
            print(f"  record {i}: quadrature {quad:.5f}, "
                  f"simulated {freq:.5f} (+-{np.sqrt(freq * (1 - freq) / 200_000):.5f})")

    print("\n1. per utility column, given eta (conditional sd; h = 3e-3)")
    print(f"{'column':24s} {'alpha':>8s} {'|lambda|':>9s} | sd alpha: others held / "
          "block integrated | sd |lambda|: others held / block integrated")
    names = lay.latent_names
    for q, c in enumerate(cols):
        # the row move's own bounds of the column given the block's other utilities
        # (kernels._column_bounds: +1 a lower bound, -1 an upper one, 0 a missing level)
        kind, bound = np.empty(n, dtype=np.int64), np.empty(n)
        _column_bounds(np.ascontiguousarray(z.T), int(np.flatnonzero(lay.k_mnp_cols == c)[0]),
                       lay.k_mnp_cols, lay.k_mnp_off, lay.k_mnp_codes, lay.k_lvl_cols,
                       lay.k_lvl_sign, kind, bound)
        nz = kind != 0
        sg, bd = kind[nz].astype(float), bound[nz]

        def held(t, nz=nz, sg=sg, bd=bd):
            return log_ndtr(sg * ((t[0] + eta @ t[1:])[nz] - bd)).sum()

        def integrated(t, q=q):
            Mq = M.copy()
            Mq[:, q] = t[0] + eta @ t[1:]
            return blk.loglik(Mq).sum()

        # reparametrise: (alpha, |lambda|, the loading's direction fixed)
        norm = np.linalg.norm(Lam[c])
        unit = Lam[c] / norm

        def along(f, x):
            return f(np.r_[x[0], x[1] * unit])

        sa = curvature_sd(lambda x: along(held, x), np.array([af[c], norm]), 3e-3)
        sb = curvature_sd(lambda x: along(integrated, x), np.array([af[c], norm]), 3e-3)
        print(f"{names[c]:24s} {af[c]:+8.3f} {norm:9.3f} | {sa[0]:.4f} / {sb[0]:.4f} "
              f"(x{sb[0] / sa[0]:.2f}) | {sa[1]:.4f} / {sb[1]:.4f} (x{sb[1] / sa[1]:.2f})")

    print(f"\n2. the block's log scale (intercepts and loadings times c), h = 0.01; eta integrated "
          f"by {args.draws} Monte Carlo draws per record")
    others = np.setdiff1d(np.arange(len(sd)), cols)
    Lo = Lam[others] / sd[others][:, None]
    V = np.linalg.inv(np.eye(k) + Lo.T @ Lo)  # eta | the other columns' latent values
    mean = ((z[:, others] - af[others]) / sd[others]) @ Lo @ V
    Lv = np.linalg.cholesky(V)
    # each record its own draws (errors independent across records), the same for every c
    E = np.random.default_rng(args.seed + 1).standard_normal((args.draws, n, k))
    w, Q = np.linalg.eigh(V)
    Uq = Q[:, w > 0.5]
    print(f"   eta's conditional variances given the other columns (eigenvalues): "
          f"{np.round(w, 3).tolist()}; {Uq.shape[1]} above 0.5")

    def eta_integrated(mean_fn):
        def f(x):
            acc = np.full(n, -np.inf)
            for r in range(args.draws):
                acc = np.logaddexp(acc, blk.loglik(mean_fn(x, mean + E[r] @ Lv.T)))
            return float((acc - np.log(args.draws)).sum())
        return f

    def whole(x, et):
        return np.exp(x) * (af[cols][None, :] + et @ Lam[cols].T)

    def sub(x, et):
        Lb = Lam[cols] @ (np.eye(k) + (np.exp(x) - 1.0) * Uq @ Uq.T)
        return af[cols][None, :] + et @ Lb.T

    rows = {
        "whole block, given eta": second_difference_sd(lambda x: blk.loglik(whole(x, eta)).sum(),
                                                       0.01),
        "whole block, eta integrated": second_difference_sd(eta_integrated(whole), 0.01),
        "uninformed directions, given eta": second_difference_sd(
            lambda x: blk.loglik(sub(x, eta)).sum(), 0.01),
        "uninformed directions, eta integrated": second_difference_sd(eta_integrated(sub), 0.01),
    }
    for label, v in rows.items():
        print(f"   {label:40s} sd of log c {v:.4f}")

    if args.fit:
        import arviz as az

        post = az.from_netcdf(args.fit).posterior
        lat = [str(v) for v in post.coords["latent"].values]
        if lat != list(names):
            raise SystemExit("--fit: its latent columns differ from this model's")
        L = post["Lambda"].values
        idx = list(cols)
        scale = 0.5 * np.log((L[..., idx, :] ** 2).sum((-1, -2)))
        print(f"\n3. the fit's posterior ({post.sizes['chain']} chains x "
              f"{post.sizes['draw']} draws)")
        print(f"   block log scale: sd {scale.std():.4f}, bulk ESS {az.ess(scale):.0f}, chain "
              f"means {np.round(scale.mean(1), 3).tolist()}")
        levels = [str(v) for v in post.coords["level"].values]
        for c in cols:
            a = post["alpha"].values[..., levels.index(names[c])]
            nr = np.sqrt((L[..., c, :] ** 2).sum(-1))
            print(f"   {names[c]:24s} sd alpha {a.std():.4f} (ESS {az.ess(a):.0f}), "
                  f"sd |lambda| {nr.std():.4f} (ESS {az.ess(nr):.0f})")
        if args.quantity:
            trace_quantity(post, args.quantity, cols, names, scale)


def trace_quantity(post, spec: str, cols: np.ndarray, names: list[str],
                   scale: np.ndarray) -> None:
    """Print how a conditional mean of the fit mixes and which block parameters it follows.

    ``spec`` is ``"level label|ordered column"`` (``"Marital=2|Age"`` for ``E[Age |
    Marital=2]``), computed for every kept draw as the convergence judge does
    (:func:`~bayesynth.models.copula_quantities.implied_quantities`, margins calibrated to
    the data).
    """
    import arviz as az
    from quantity_estimator import posterior_arrays

    from bayesynth.models import copula_quantities as cq

    blocks, nc, nd, af, Lam, sig = posterior_arrays(az.InferenceData(posterior=post))
    p = len(names)
    q = cq.implied_quantities(af, Lam, sig, blocks, pairs=False)
    label, column = spec.split("|")
    x = q["conditional_mean"][:, blocks.category_labels.index(label),
                              blocks.ordered_names.index(column)]
    xc = x.reshape(nc, nd)
    print(f"\n4. E[{column} | {label}] over all {nc} x {nd} draws: bulk ESS {az.ess(xc):.0f}, "
          f"R-hat {az.rhat(xc):.3f}, posterior sd {x.std():.4f}")
    lags = [g for g in (1, 10, 50, 100, 200, 400) if g < nd // 2]
    for c in range(nc):
        acf = [np.corrcoef(xc[c, :-g], xc[c, g:])[0, 1] for g in lags]
        tenths = xc[c, :nd - nd % 10].reshape(10, -1).mean(axis=1)
        print(f"   chain {c}: autocorrelation at lags {lags}: {np.round(acf, 2).tolist()}; "
              f"means by tenths {np.round(tenths, 3).tolist()}")
    C = cq._stacked(post, "C").reshape(nc * nd, p, p)
    cand = {"block log scale": scale.reshape(-1)}
    for c in cols:
        cand[f"alpha {names[c]}"] = af[:, c]
        for j in range(p):
            if j != c and not (j in cols and j < c):
                cand[f"C[{names[c]}, {names[j]}]"] = C[:, c, j]
    rows = []
    for key, v in cand.items():
        if np.std(v) > 0:
            rows.append((abs(np.corrcoef(x, v)[0, 1]), np.corrcoef(x, v)[0, 1], key,
                         az.ess(v.reshape(nc, nd))))
    rows.sort(reverse=True)
    print("   the block's parameters it follows most closely (correlation across draws, "
          "their bulk ESS):")
    for _, r, key, e in rows[:8]:
        print(f"     {r:+.2f}  {key} (ESS {e:.0f})")


if __name__ == "__main__":
    main()
