"""Seconds for the paper's NLTCS latent class run (target: under 5 minutes on one core).

NLTCS (``../shared/data/nltcs.csv``: 16 binary items, n = 21,574 here; the paper's 2004 wave had
15,636): two-way marginals selected privately with a quarter of the budget (PrivBayes' greedy
network of degree 2: 29 tables, 116 counts), the rest split across them; k = 7 classes;
12,000 iterations (2,000 burn-in), one chain, one core. Also reports the paper's accuracy
summary, the average log ratio log(P_est / P_true) over the selected marginal cells, for the
posterior mean and for the noisy counts used directly.

Usage::

    python benchmarks/latent_class_dp.py [--epsilon 1.0] [--iterations 12000] [--burn 2000]
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bayesynth as bs  # noqa: E402
from bayesynth.models import latent_class_dp_model  # noqa: E402
from bayesynth.privacy import privatize_marginals, true_marginal  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "nltcs.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--iterations", type=int, default=12_000)
    parser.add_argument("--burn", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=7)
    args = parser.parse_args()
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: nothing to benchmark.")
    df = pd.read_csv(DATA)
    domain = {c: [0, 1] for c in df.columns}
    t0 = time.perf_counter()
    rel = privatize_marginals(df, "select", args.epsilon, domain=domain, random_seed=1)
    t_select = time.perf_counter() - t0
    model = latent_class_dp_model(rel, k=args.k)
    t0 = time.perf_counter()
    idata = bs.sample(model, draws=args.iterations - args.burn, tune=args.burn, chains=1,
                      cores=1, random_seed=2, progressbar=False)
    t_sample = time.perf_counter() - t0
    est, noisy_ratio, truth_all = [], [], []
    for i, t in enumerate(rel.tables):
        truth = true_marginal(df, t.variables, domain).reshape(-1) / len(df)
        est.append(idata.posterior[f"P_t{i}"].mean(("chain", "draw")).values)
        noisy_ratio.append(np.clip(t.counts.reshape(-1), 0.5, None) / len(df))
        truth_all.append(truth)
    est, noisy_ratio, truth_all = map(np.concatenate, (est, noisy_ratio, truth_all))
    print(f"NLTCS: n = {len(df):,}, epsilon = {args.epsilon} (selection "
          f"{rel.selection_epsilon:g}), {len(rel.tables)} two-way tables, "
          f"{sum(t.counts.size for t in rel.tables)} counts, k = {args.k}")
    print(f"selection: {t_select:.1f} s; sampling {args.iterations:,} iterations: "
          f"{t_sample:.1f} s ({1000 * t_sample / args.iterations:.2f} ms/iteration; "
          "target 300 s)")
    print(f"average log(P_est / P_true): posterior mean {np.mean(np.log(est / truth_all)):.3f}, "
          f"noisy counts (clipped at 0.5) {np.mean(np.log(noisy_ratio / truth_all)):.3f}")
    print(f"mean |P_est - P_true|: posterior {np.mean(np.abs(est - truth_all)):.4f}, noisy "
          f"{np.mean(np.abs(noisy_ratio - truth_all)):.4f}")


if __name__ == "__main__":
    main()
