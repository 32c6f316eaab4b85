"""Speed and memory of saturated count synthesis (targets from the saturated-count issue).

1. A simulated table shaped like the paper's ESCsub (K = 326 x 20 x 4 x 19 x 7 = 3.5 million
   cells, about 9% non-zero, n = 8,190,870): one synthetic table per family, alpha = 0 and 0.02.
   Targets: Poisson and NBI under 1 s, PIG under 5 s. The paper's R code took 0.2 s (Poisson),
   0.3 s (NBI) and 162 s (PIG) on its machine (no R here to run it beside us).
2. A table of 10^9 cells with 10^7 non-zero cells (five variables 200 x 50 x 20 x 50 x 100),
   synthesised sparsely in a fresh process. Targets: under 60 s and under 4 GiB peak memory.

Times are the best of ``--repeat`` runs after one warm-up (which compiles the numba kernels).

Usage::

    python benchmarks/saturated.py [--repeat 5] [--skip-big]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from bayesynth.datasets import simulate_school_census
from bayesynth.synthesis import synthesize_table
from bayesynth.tables import SparseTable, microdata_to_table

SETTINGS = [("poisson", 0.0), ("nbi", 0.1), ("nbi", 10.0), ("pig", 0.1), ("pig", 10.0),
            ("dpo", 4.0)]
PAPER = {"poisson": 0.2, "nbi": 0.3, "pig": 162.0}


def best_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def esc(repeat: int) -> None:
    t0 = time.perf_counter()
    table = microdata_to_table(simulate_school_census(random_seed=0), count="count")
    print(f"ESCsub-shaped table: K = {table.n_cells:,} cells, {len(table.index):,} non-zero "
          f"({len(table.index) / table.n_cells:.1%}), n = {table.n_records:,}; simulated in "
          f"{time.perf_counter() - t0:.1f} s")
    print(f"{'family':8} {'sigma':>6} {'alpha':>6} {'seconds':>8}  paper (R)")
    for family, sigma in SETTINGS:
        for alpha in (0.0, 0.02):
            sec = best_time(lambda: synthesize_table(table, family=family, sigma=sigma,
                                                     alpha=alpha, random_seed=1), repeat)
            paper = f"{PAPER[family]:g} s" if family in PAPER and alpha == 0 else ""
            print(f"{family:8} {sigma:6g} {alpha:6g} {sec:8.3f}  {paper}")


def big_child() -> None:
    """Run in a fresh process so that its peak resident memory is its own."""
    shape = (200, 50, 20, 50, 100)
    K = int(np.prod(shape))
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    idx = np.unique(rng.integers(0, K, size=10_050_000, dtype=np.int64))[:10_000_000]
    idx = np.sort(rng.permutation(idx)[:10_000_000])
    counts = rng.geometric(0.3, size=len(idx)).astype(np.int64)
    names = [f"v{j}" for j in range(len(shape))]
    table = SparseTable(names, {n: list(range(s)) for n, s in zip(names, shape)}, idx, counts)
    build = time.perf_counter() - t0
    out = {"cells": K, "nonzero": len(idx), "build_s": build, "runs": []}
    for family, sigma, alpha in [("poisson", 0.0, 0.0), ("nbi", 1.0, 0.0), ("pig", 1.0, 0.0),
                                 ("nbi", 1.0, 0.02), ("pig", 1.0, 0.02)]:
        t0 = time.perf_counter()
        syn = synthesize_table(table, family=family, sigma=sigma, alpha=alpha, random_seed=2)
        out["runs"].append({"family": family, "sigma": sigma, "alpha": alpha,
                            "seconds": time.perf_counter() - t0,
                            "nonzero_out": int(len(syn.index))})
        del syn
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(out))


def big() -> None:
    proc = subprocess.run([sys.executable, __file__, "--big-child"], capture_output=True,
                          text=True, check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\n10^9-cell table: K = {res['cells']:,}, {res['nonzero']:,} non-zero "
          f"(built in {res['build_s']:.1f} s)")
    print(f"{'family':8} {'sigma':>6} {'alpha':>6} {'seconds':>8} {'non-zero out':>13}")
    for r in res["runs"]:
        print(f"{r['family']:8} {r['sigma']:6g} {r['alpha']:6g} {r['seconds']:8.2f} "
              f"{r['nonzero_out']:13,}")
    print(f"peak resident memory of the process (table included): {res['peak_rss_gib']:.2f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--big-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.big_child:
        big_child()
        return
    esc(args.repeat)
    if not args.skip_big:
        big()


if __name__ == "__main__":
    main()
