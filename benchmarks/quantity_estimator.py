"""How much of a copula fit's judged non-convergence is the Monte Carlo error of the judge.

The quantities synthesis uses (implied level probabilities, pair associations, conditional
means) have no closed form: ``implied_quantities`` estimates them per posterior draw from
common Monte Carlo points. That error is a fixed function of the parameters, and where a
parameter drifts slowly along a direction the data barely inform, the error drifts with it.
This script fits the copula (default settings, 2 chains on one core) to a few columns of
SD2011's training split (``real_data.py``'s split; default ``placesize, region, age, weight,
height, sex``, where the conditional means given the regions were the worst quantities of the
whole table), then judges the conditional means of the chosen ordered columns given the chosen
variable's levels at several Monte Carlo sizes (``--points``; 2,000 was the default before
2026-12-05, 8,000 since), each with two seeds of the points, and prints min / median bulk
ESS, max R-hat and the mean posterior sd of those quantities, and the seconds the estimates
took. With enough points the figures stop changing: what is left is the posterior's.

Usage::

    python benchmarks/quantity_estimator.py                       # about 12 minutes
    python benchmarks/quantity_estimator.py --points 2000,8000 --draws 300
    python benchmarks/quantity_estimator.py --load fit.nc         # judge a saved fit
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import json
import time
import warnings

import arviz as az
import numpy as np
from real_data import DATA, load, split

import bayesynth as bs
from bayesynth.models.copula_quantities import (
    BLOCKS_ATTR,
    CopulaBlocks,
    draw_arrays,
    implied_quantities,
)


def posterior_arrays(idata) -> tuple:
    """The blocks, the chain and draw counts, and the draws' (alpha_full, Lambda, sigma)."""
    post = idata.posterior
    blocks = CopulaBlocks.from_dict(json.loads(post.attrs[BLOCKS_ATTR]))
    nc, nd = post.sizes["chain"], post.sizes["draw"]
    af, Lam, sig = (x.reshape(nc * nd, *x.shape[2:]) for x in draw_arrays(post))
    return blocks, nc, nd, af, Lam, sig


def judge(arrays: tuple, variable: str, columns: list[str], n_mc: int, seed: int) -> dict:
    blocks, nc, nd, af, Lam, sig = arrays
    t0 = time.perf_counter()
    q = implied_quantities(af, Lam, sig, blocks, n_mc=n_mc, random_seed=seed, pairs=False)
    secs = time.perf_counter() - t0
    cats, ords = blocks.category_labels, blocks.ordered_names
    ess, rhat, sd = [], [], []
    for c in cats:
        if not c.startswith(variable + "="):
            continue
        for o in columns:
            x = q["conditional_mean"][:, cats.index(c), ords.index(o)].reshape(nc, nd)
            if not np.isfinite(x).all():
                continue
            ess.append(float(az.ess(x)))
            rhat.append(float(az.rhat(x)))
            sd.append(float(x.std()))
    return {"points": n_mc, "seed": seed, "quantities": len(ess), "min ESS": min(ess),
            "median ESS": float(np.median(ess)), "max R-hat": max(rhat),
            "mean sd": float(np.mean(sd)), "seconds": secs}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", default="placesize,region,age,weight,height,sex")
    ap.add_argument("--variable", default="region", help="the categorical variable judged")
    ap.add_argument("--ordered", default="height,weight", help="the ordered columns judged")
    ap.add_argument("--draws", type=int, default=500, help="kept draws (and tuning) per chain")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--points", default="2000,4000,8000,16000,100000",
                    help="Monte Carlo sizes to compare")
    ap.add_argument("--load", default=None, help="judge this saved fit instead of fitting")
    ap.add_argument("--save", default=None, help="write the fit's InferenceData here")
    args = ap.parse_args(argv)
    if args.load:
        idata = az.from_netcdf(args.load)
    else:
        if not DATA.exists():
            raise SystemExit(f"{DATA} is absent: this benchmark needs the shared real data.")
        cols = args.columns.split(",")
        df, _, _ = load("sd2011")
        train = split(df)[0][cols].dropna().reset_index(drop=True)
        schema = bs.infer_schema(train, suggest=False,
                                 categorical=[c for c in cols if train[c].dtype == object])
        model = bs.models.rank_probit_copula(train, schema)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = bs.sample(model, draws=args.draws, tune=args.draws, chains=2, cores=1,
                              random_seed=args.seed, progressbar=False,
                              check_convergence=False, max_extensions=0)
        print(f"SD2011 {cols}: n = {len(train)}, p* = {len(model.coords['latent'])}, "
              f"k = {len(model.coords['factor'])}, {time.perf_counter() - t0:.0f} s", flush=True)
        if args.save:
            idata.to_netcdf(args.save)
    arrays = posterior_arrays(idata)
    rows = []
    for n_mc in (int(v) for v in args.points.split(",")):
        for seed in (0, 1):
            rows.append(judge(arrays, args.variable, args.ordered.split(","), n_mc, seed))
            print(rows[-1], flush=True)
    import pandas as pd

    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
