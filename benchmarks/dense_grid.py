"""Columns that fill their precision's grid: empirical against smooth marginals (marginals alone).

A numeric column whose distinct values fill at least half of the whole numbers (or steps of
its decimal places) over their range, and whose atoms (values held by at least 1% of the
records) hold at least half of them, gets its empirical distribution
(:data:`bayesynth.synthesis.marginals.DENSE_GRID`, 2026-12-06). Before, such columns (ages
in years, heights, weights, hours a week, mostly atoms) got a smooth marginal with atoms,
and the values below the atom share, lying between atoms, had their mass spread over the
gaps and rounded onto the atoms. This script measures that, per numeric column with more
than 50 distinct values that fill at least half of their grid, on the demo's simulated
table and the real tables in ``../shared/data`` (total variation means nothing for the
others, whose drawn values are mostly new ones):

* ``cover``: :func:`~bayesynth.synthesis.marginals.grid_coverage` of the column (its values
  as the copula fits them: no missing values, special codes or values fixed by a rule), and
  ``atoms``, the share of its records held by values of at least 1% of them (the rule needs
  both at 0.5 or more: the demo's temperatures fill their grid with no atoms and stay smooth);
* the values are split at random into halves, *train* and *holdout*, ``--reps`` times (20);
  the marginal is fitted to *train* as the copula fits it now (``empirical`` for a dense
  column with atoms) and with the smooth fit forced (``smooth``, the marginal until
  2026-12-06), and as many values as *train* has are drawn from each (the same uniform
  probabilities) and rounded as synthesis rounds them;
* ``TV train``: total variation between the drawn values' distribution and *train*'s (what
  the marginal changes; for ``empirical`` only sampling); ``TV hold``: the same against
  *holdout*, beside ``floor``, *train* against *holdout* (what a second sample gives); and
  ``worst value``: the value whose drawn share is furthest from its *train* share, with both
  shares, for ``smooth``. All averaged over the splits (the worst value from the first).

Only the marginal decides these figures: the copula changes which records the values go to,
not their distribution.

Usage::

    python benchmarks/dense_grid.py [--seed 1] [--reps 20] [--demo-n 4000]
"""

from __future__ import annotations

import _setup  # noqa: F401  (one BLAS thread, the checkout on the path)

# isort: split
import argparse

import numpy as np
import pandas as pd
from real_data import DATA, load

import bayesynth.synthesis.marginals as marginals
from bayesynth.datasets import simulate_child_health
from bayesynth.rules import rule_mask
from bayesynth.schema import infer_schema, round_values


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation between the empirical distributions of two samples."""
    v = np.union1d(a, b)
    pa = np.bincount(np.searchsorted(v, a), minlength=len(v)) / len(a)
    pb = np.bincount(np.searchsorted(v, b), minlength=len(v)) / len(b)
    return 0.5 * float(np.abs(pa - pb).sum())


def _fit(train: np.ndarray, col, *, smooth: bool):
    kw = dict(continuous=True, integer=bool(col.integer) or col.type == "count",
              decimals=col.decimals)
    if not smooth:
        return marginals.fit_marginal(train, **kw)
    saved = marginals.DENSE_GRID
    marginals.DENSE_GRID = float("inf")  # the rule off: the marginal before 2026-12-06
    try:
        return marginals.fit_marginal(train, **kw)
    finally:
        marginals.DENSE_GRID = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--demo-n", type=int, default=4000)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tables = [("demo", simulate_child_health(n=args.demo_n, random_seed=2026), None)]
    for name in ("adult", "sd2011", "ce"):
        if (DATA / f"{name}.csv").exists():
            tables.append((name, *load(name)[:2]))
        else:
            print(f"{name}: skipped ({DATA / name}.csv not found)")
    print(f"mean over {args.reps} random splits into halves; 'empirical': the marginal as "
          "fitted now, 'smooth': the smooth fit forced (before 2026-12-06)")
    print(f"{'table':7s} {'column':15s} {'train':>6s} {'distinct':>8s} {'cover':>6s} {'atoms':>6s} "
          f"{'TV train':>17s} {'TV hold':>17s} {'floor':>6s}  worst value (smooth): "
          "drawn / train share")
    print(f"{'':53s} {'empirical':>9s} {'smooth':>7s} {'empirical':>9s} {'smooth':>7s}")
    for name, df, schema in tables:
        schema = schema if schema is not None else infer_schema(df)
        for c in schema.of_type("continuous") + schema.of_type("count"):
            col = schema[c]
            if c in schema.derived:
                continue
            raw = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
            free = ~np.isnan(raw)
            if schema.rules:
                free &= ~rule_mask(df, schema.rules, c)
            x = raw[free]
            x = x[~np.isin(x, list(col.special_codes or []))]
            if len(np.unique(x)) <= marginals.DISCRETE_VALUES:
                continue
            cover = marginals.grid_coverage(x, integer=bool(col.integer) or col.type == "count",
                                            decimals=col.decimals)
            if cover < marginals.DENSE_GRID:
                continue
            counts = np.unique(x, return_counts=True)[1]
            atoms = counts[counts >= marginals.ATOM_SHARE * len(x)].sum() / len(x)
            tv = {k: {"train": [], "hold": []} for k in ("empirical", "smooth")}
            floor, worst = [], ""
            for rep in range(args.reps):
                perm = rng.permutation(len(x))
                train, holdout = x[perm[: len(x) // 2]], x[perm[len(x) // 2:]]
                u = rng.random(len(train))
                for kind in tv:
                    drawn = round_values(_fit(train, col, smooth=kind == "smooth").ppf(u), col)
                    tv[kind]["train"].append(_tv(drawn, train))
                    tv[kind]["hold"].append(_tv(drawn, holdout))
                    if kind == "smooth" and rep == 0:
                        big = round_values(_fit(train, col, smooth=True).ppf(
                            rng.random(200_000)), col)
                        v = np.union1d(big, train)
                        pd_ = np.bincount(np.searchsorted(v, big), minlength=len(v)) / len(big)
                        pt = np.bincount(np.searchsorted(v, train), minlength=len(v)) / len(train)
                        i = int(np.argmax(np.abs(pd_ - pt)))
                        worst = f"{v[i]:g}: {pd_[i]:.4f} / {pt[i]:.4f}"
                floor.append(_tv(train, holdout))
            m = {k: {s: float(np.mean(w)) for s, w in d.items()} for k, d in tv.items()}
            print(f"{name:7s} {c:15s} {len(x) // 2:6d} {len(np.unique(x)):8d} {cover:6.2f} "
                  f"{atoms:6.2f} "
                  f"{m['empirical']['train']:9.3f} {m['smooth']['train']:7.3f} "
                  f"{m['empirical']['hold']:9.3f} {m['smooth']['hold']:7.3f} "
                  f"{np.mean(floor):6.3f}  {worst}")


if __name__ == "__main__":
    main()
