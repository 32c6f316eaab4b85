"""Speed of the BART rank-likelihood regression (issue: targeted synthesis).

n = 20,000 records, 20 predictors (15 continuous, 3 binary, 2 categorical), m = 200 trees, one
chain on one core. Prints seconds per iteration of the whole sweep and of its parts (pymc-bart's
PGBART, and bayesynth's latent-data + precision step), and the projected time of the paper's
1,100 iterations (target: under 30 minutes, i.e. 1.64 s per iteration).

Usage::

    python benchmarks/bart_rank.py [--n 20000] [--m 200] [--iters 20]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.models import bart_rank_regression
from bayesynth.samplers.bart_steps import bart_steps


def make(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {f"x{j}": rng.normal(size=n) for j in range(15)}
    cols.update({f"b{j}": rng.integers(0, 2, n) for j in range(3)})
    cols.update({f"c{j}": rng.choice(list("abcde"), n) for j in range(2)})
    df = pd.DataFrame(cols)
    f = (np.sin(df["x0"]) + 0.5 * df["x1"] ** 2 + df["x2"] * df["b0"]
         + (df["c0"] == "b") - 0.5 * (df["c1"] == "e"))
    df["y"] = np.round(350 + 5 * (f + 0.5 * rng.normal(size=n)))
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=float, default=0.1,
                    help="share of trees PGBART updates per iteration (pymc-bart: 0.1; the "
                         "paper's dbarts updates all, 1.0)")
    args = ap.parse_args()
    df = make(args.n, args.seed)
    preds = [c for c in df.columns if c != "y"]
    t = time.perf_counter()
    model = bart_rank_regression(df, "y", preds, m=args.m)
    build = time.perf_counter() - t
    steps = bart_steps(model, random_seed=args.seed, batch=(args.batch, args.batch))
    point = dict(model.initial_point())
    parts = np.zeros(2)
    for s in steps:
        s.tune = False
    for it in range(args.iters + 2):
        for j, s in enumerate(steps):
            t = time.perf_counter()
            point, _ = s.step(point)
            if it >= 2:  # first sweeps compile and warm up
                parts[j] += time.perf_counter() - t
    per = parts / args.iters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=args.iters, tune=0, chains=1, random_seed=args.seed,
                          progressbar=False, pgbart_kwargs={"batch": (args.batch, args.batch)})
    wrapped = idata.posterior.attrs["sampling_time"] / args.iters
    total = per.sum()
    print(f"n = {args.n}, {len(preds)} predictors, m = {args.m} trees, one chain, one core, "
          f"{100 * args.batch:g}% of the trees updated per iteration")
    print(f"model build {build:.1f} s")
    print(f"per iteration: PGBART {per[0]:.3f} s, latent z + precision {per[1]:.4f} s, "
          f"sweep {total:.3f} s; through pm.sample {wrapped:.3f} s")
    print(f"paper's 1,100 iterations: {1100 * wrapped / 60:.1f} minutes "
          f"(target 30; {'met' if 1100 * wrapped < 1800 else 'NOT met'})")


if __name__ == "__main__":
    main()
