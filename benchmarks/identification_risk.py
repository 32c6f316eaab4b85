"""Speed of the identification-risk calculation (target: under 30 s).

n = 100,000 real records, m = 20 partially synthetic datasets, 2 known categorical variables
(10 and 5 levels) and 2 synthesised continuous variables (income-like and expenditure-like,
log-normal), radius 5% of the real value; also the six-radius sweep. A brute-force O(n^2)
Python/NumPy loop is timed on the first 2,000 records and extrapolated, for scale.

Usage::

    python benchmarks/identification_risk.py [--n 100000] [--m 20]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time

import numpy as np
import pandas as pd

from bayesynth.evaluation import identification_risk, identification_risk_sweep


def make(n: int, m: int, seed: int) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    rng = np.random.default_rng(seed)
    real = pd.DataFrame({
        "region": rng.integers(0, 10, n),
        "tenure": rng.integers(0, 5, n),
        "income": np.exp(rng.normal(10.5, 0.8, n)).round(0),
        "expend": np.exp(rng.normal(9.0, 0.7, n)).round(2),
    })
    syns = [real.assign(income=(real["income"] * np.exp(rng.normal(0, 0.15, n))).round(0),
                        expend=(real["expend"] * np.exp(rng.normal(0, 0.2, n))).round(2))
            for _ in range(m)]
    return real, syns


def brute_seconds(real: pd.DataFrame, syn: pd.DataFrame, k: int = 2000) -> float:
    key_r = (real["region"] * 10 + real["tenure"]).to_numpy()
    key_s = (syn["region"] * 10 + syn["tenure"]).to_numpy()
    xr, xs = real[["income", "expend"]].to_numpy(), syn[["income", "expend"]].to_numpy()
    t = time.perf_counter()
    for i in range(k):
        ok = (key_s == key_r[i]) & np.all(np.abs(xs - xr[i]) <= 0.05 * np.abs(xr[i]), axis=1)
        ok.sum()
    return (time.perf_counter() - t) / k * len(real)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    real, syns = make(args.n, args.m, args.seed)
    kw = dict(known=["region", "tenure"], synthesized=["income", "expend"])
    identification_risk(real.head(100), [s.head(100) for s in syns[:1]], **kw)  # compile
    t = time.perf_counter()
    res = identification_risk(real, syns, radius=0.05, **kw)
    one = time.perf_counter() - t
    t = time.perf_counter()
    _, best = identification_risk_sweep(real, syns, **kw)
    sweep = time.perf_counter() - t
    brute = brute_seconds(real, syns[0]) * args.m
    print(f"n = {args.n}, m = {args.m}, 2 known categorical + 2 synthesised continuous")
    print(f"identification_risk at 5%: {one:.2f} s "
          f"(mean file-level risk {res.risk:.1f}, true-match rate "
          f"{res.per_dataset['true_match_rate'].mean():.4f})")
    print(f"six-radius sweep: {sweep:.2f} s (maximising radius {100 * best:g}%)")
    print(f"brute force, extrapolated from 2,000 records: {brute:.0f} s "
          f"({brute / one:.0f} times slower)")


if __name__ == "__main__":
    main()
