"""Where a real table's copula fit is slow: communalities, loadings' scale and shrinkage drift.

Fits the copula to a training split of a shared real table (the schema of ``real_data.py``;
the factory leaves the derived and rule-fixed columns out, as the synthesizer does), with
default settings unless told otherwise, and prints

* the convergence judgement on the quantities synthesis uses (max R-hat, share above 1.01,
  min / median bulk ESS per kind, the worst quantities);
* per chain, by fifths of the kept draws: the total sum of squared loadings, the mean
  communality and log tau of a few factors (a trend here means the chains have not settled);
* the latent columns with the largest sum of squared loadings: per chain, with their residual
  sd and posterior communality lambda' lambda / (lambda' lambda + sigma^2);
* per chain, the squared multiple correlation of those columns with all the other latent
  columns under the model, 1 - 1 / (Omega^-1_jj Omega_jj) (every tenth draw): two chains
  that disagree here hold different dependence, not only a different split of one variance.

Usage::

    python benchmarks/copula_structure.py                    # SD2011, default settings
    python benchmarks/copula_structure.py --nu 30            # lighter-tailed loadings
    python benchmarks/copula_structure.py --data ce --save ce.nc
    python benchmarks/copula_structure.py --plain-unconstrained   # factor scores and warp
                                                                  # as before (see --help)

BLAS is pinned to one thread; two chains run on two cores.
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings

import numpy as np
from real_data import DATA, load, split

import bayesynth as bs
from bayesynth.models.copula_quantities import synthesis_quantity_table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="sd2011", choices=("sd2011", "ce", "nltcs", "adult"))
    ap.add_argument("--n-factors", type=int, default=None)
    ap.add_argument("--nu", type=float, default=3.0, help="MGP degrees of freedom (default 3)")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=15, help="columns to list")
    ap.add_argument("--save", default=None, help="write the InferenceData here")
    ap.add_argument("--plain-unconstrained", action="store_true",
                    help="draw the factor scores given the unconstrained latent values and "
                         "warp them with the rest (the sweep before 2026-12-04's "
                         "twenty-second session)")
    args = ap.parse_args(argv)
    if args.plain_unconstrained:
        from bayesynth.samplers.steps import FactorScoresGibbs, WarpMove

        for cls in (FactorScoresGibbs, WarpMove):
            cls.collapse_unconstrained = False
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark needs the shared real data.")
    df, schema, _ = load(args.data)
    train, _ = split(df)  # real_data.py's training split
    model = bs.models.rank_probit_copula(bs.schema.as_numbers(train), schema,
                                         n_factors=args.n_factors, nu=args.nu)
    names = [str(v) for v in model.coords["latent"]]
    print(f"{args.data}: n = {len(train)}, p* = {len(names)}, "
          f"k = {len(model.coords['factor'])}, nu = {args.nu}", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=args.draws, tune=args.tune, chains=2, cores=2,
                          random_seed=args.seed, progressbar=False, check_convergence=False)
    print(f"sampling {time.perf_counter() - t0:.0f} s (2 chains on 2 cores)", flush=True)
    if args.save:
        idata.to_netcdf(args.save)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab, _ = synthesis_quantity_table(idata)
    tab = tab.sort_values("r_hat", ascending=False)
    print(f"\nmax R-hat {tab.r_hat.max():.3f}; {100 * (tab.r_hat > 1.01).mean():.1f}% of "
          f"{len(tab)} quantities above 1.01")
    print(tab.groupby("kind").agg(max_rhat=("r_hat", "max"), min_ess=("ess_bulk", "min"),
                                  median_ess=("ess_bulk", "median")).round(3).to_string())
    print(tab.head(args.top)[["mean", "sd", "ess_bulk", "r_hat"]].round(3).to_string())

    post = idata.posterior
    L = post["Lambda"].values  # chain, draw, p*, k
    sig = post["sigma"].values
    ss = (L ** 2).sum(-1)
    comm = ss / (ss + sig ** 2)
    log_tau = np.log(np.cumprod(post["delta"].values, axis=-1))
    fifth = L.shape[1] // 5
    pick = [h for h in (0, 1, 5, 10, 20, 40) if h < L.shape[-1]]

    def by_fifth(x):
        return [float(x[i * fifth:(i + 1) * fifth].mean()) for i in range(5)]

    print("\nby fifths of the kept draws")
    for ch in range(L.shape[0]):
        print(f"chain {ch}: total sum sq loadings",
              " ".join(f"{v:8.1f}" for v in by_fifth(ss[ch].sum(-1))))
        print(f"chain {ch}: mean communality    ",
              " ".join(f"{v:8.4f}" for v in by_fifth(comm[ch].mean(-1))))
        for h in pick:
            print(f"chain {ch}: log tau_{h:<2d}           ",
                  " ".join(f"{v:8.2f}" for v in by_fifth(log_tau[ch, :, h])))
    print("\nlargest sums of squared loadings (per chain), residual sd, communality")
    top = np.argsort(-ss.mean(axis=(0, 1)))[: args.top]
    for j in top:
        per = " ".join(f"{ss[c, :, j].mean():7.1f}" for c in range(L.shape[0]))
        print(f"  {names[j][:45]:45s} {per}  sigma {sig[..., j].mean():.3f}  "
              f"communality {comm[..., j].mean():.3f}")
    r2 = np.zeros((L.shape[0], len(top)))
    draws = range(0, L.shape[1], 10)
    for c in range(L.shape[0]):
        for d in draws:
            omega = L[c, d] @ L[c, d].T + np.diag(sig[c, d] ** 2)
            prec = np.linalg.inv(omega)
            r2[c] += 1.0 - 1.0 / (np.diag(prec)[top] * np.diag(omega)[top])
    r2 /= len(draws)
    print("\nsquared multiple correlation with the other latent columns (per chain)")
    for i, j in enumerate(top):
        print(f"  {names[j][:45]:45s} " + " ".join(f"{r2[c, i]:.4f}" for c in range(len(r2))))


if __name__ == "__main__":
    main()
