"""What reading labels as counts costs: CE's tenure and marital status, fitted both ways.

CE codes its tenure (1, 2, 4, 5, 6) and marital status (1-5) as whole numbers. An inferred
schema reads them as counts, which the copula models as ordered (one rank-likelihood column
each); declared categorical they are unordered (a multinomial probit, K - 1 utility columns).
``bayesynth synthesize`` without ``--schema`` names such columns (at most 10 whole values) in
its warning; this script measures what the order costs.

It fits ``CopulaSynthesizer`` with default settings to the whole CE table under each schema
(same seed), draws ``--m`` synthetic tables from each, and prints, averaged over them:

* TV: total variation between the real and synthetic tables of a pair of columns (and of
  marital status alone);
* |d age|: the mean over levels of |mean age of the level, synthetic - real|;
* |d expenditure|: the mean over levels of |median expenditure, synthetic - real| / real;
* the convergence check's largest R-hat and the fit's wall time.

Usage::

    python benchmarks/labels_as_counts.py [--m 5] [--seed 1]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.evaluation import crosstab_comparison, tv_distance

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PAIRS = (("Marital", "Tenure"), ("Marital", "Educ"), ("Tenure", "Educ"), ("Marital", "Urban"),
         ("Tenure", "Urban"), ("Marital",))


def total_variation(real: pd.DataFrame, syn: pd.DataFrame, cols) -> float:
    """Total variation between the two tables' frequencies of one column or a pair."""
    if len(cols) == 1:
        return tv_distance(real[cols[0]], syn[cols[0]])
    table, _ = crosstab_comparison(real, syn, cols)
    return float(0.5 * table["difference"].abs().sum())


def by_level(real: pd.DataFrame, syn: pd.DataFrame, group: str, col: str, stat: str,
             relative: bool) -> float:
    """Mean over ``group``'s real levels of the synthetic statistic's distance to the real."""
    r = real.groupby(group)[col].agg(stat)
    s = syn.groupby(group)[col].agg(stat).reindex(r.index)
    d = (s - r).abs() / (r.abs() if relative else 1.0)
    return float(d.mean())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not (DATA / "ce.csv").exists():
        raise SystemExit(f"needs {DATA / 'ce.csv'}")
    real = pd.read_csv(DATA / "ce.csv")
    rows = {}
    for label, categorical in (("counts (inferred)", []),
                               ("categorical", ["Tenure", "Marital"])):
        schema = bs.infer_schema(real, categorical=categorical, suggest=False)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            syn = bs.CopulaSynthesizer(schema, random_seed=args.seed,
                                       progressbar=False).fit(real)
        wall = time.perf_counter() - t0
        tables = syn.sample(m=args.m, random_seed=args.seed + 1)
        row = {"x".join(c): np.mean([total_variation(real, t, c) for t in tables])
               for c in PAIRS}
        for g in ("Marital", "Tenure"):
            row[f"|d age| by {g}"] = np.mean([by_level(real, t, g, "Age", "mean", False)
                                              for t in tables])
            row[f"|d expenditure| by {g}"] = np.mean(
                [by_level(real, t, g, "Expenditure", "median", True) for t in tables])
        row["max R-hat"] = float(syn.convergence_table_["r_hat"].max())
        row["not converged"] = any("have not converged" in str(w.message) for w in caught)
        row["fit s"] = wall
        rows[label] = row
    out = pd.DataFrame(rows)
    with pd.option_context("display.float_format", "{:.3f}".format, "display.width", 120):
        print(out)


if __name__ == "__main__":
    main()
