"""Columns whose non-atom values lie between their atoms: empirical against smooth marginals.

A numeric column gets its empirical distribution when the smooth part of its values that are
not atoms (values held by at least 1% of the records) would put at least 2% of its draws on
the atoms' values once rounded (:func:`bayesynth.synthesis.marginals.share_on_atoms`,
``ON_ATOMS``, 2026-12-06). Before, such columns (ages in years, heights, weights, hours a
week, test scores) got a smooth marginal with atoms, and the values below the atom share,
lying between atoms, had their mass spread over the gaps and rounded onto the atoms. This
script measures that on the demo's simulated table and the real tables in
``../shared/data``, for every numeric column with more than 50 distinct values and at least
one atom (their values as the copula fits them: no missing values, special codes or values
fixed by a rule):

* ``atoms``: the share of the records held by atoms; ``on atoms``: the smooth part's share
  on atoms (:func:`~bayesynth.synthesis.marginals.share_on_atoms`); ``now``: the marginal the
  column gets (``empirical`` at 0.02 or more);
* for the columns that now get ``empirical``, against the smooth fit forced (``smooth``,
  the marginal until 2026-12-06):

  * ``TV all``: total variation between the marginal fitted to the whole column (rounded as
    synthesis rounds its draws, at 1,000,000 evenly spaced probabilities: exact to 1e-6, no
    sampling error) and the column;
  * ``1-record``: for the values held by one record, the mean chance that a synthetic
    column of the same size holds the value (``1 - (1 - p)^n``, ``p`` its probability under
    the marginal); 0.63 for the empirical distribution, as in a bootstrap;
  * ``TV hold``: the column split at random into halves, *train* and *holdout*, ``--reps``
    times (20); total variation between as many values drawn from the fit to *train* as it
    has and *holdout*, beside ``floor``, *train* against *holdout* (what a second sample
    gives), averaged over the splits;
  * ``worst value``: the value whose probability under the smooth fit is furthest from its
    share of the column, with both.

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
from marginal_copies import fitted_values
from real_data import DATA, load

import bayesynth.synthesis.marginals as marginals
from bayesynth.datasets import simulate_child_health
from bayesynth.evaluation import tv_distance
from bayesynth.schema import infer_schema, round_values


def _fit(x: np.ndarray, col, *, smooth: bool):
    kw = dict(continuous=True, integer=bool(col.integer) or col.type == "count",
              decimals=col.decimals, digits=col.digits)
    if not smooth:
        return marginals.fit_marginal(x, **kw)
    saved = marginals.ON_ATOMS
    marginals.ON_ATOMS = float("inf")  # the rule off: the marginal before 2026-12-06
    try:
        return marginals.fit_marginal(x, **kw)
    finally:
        marginals.ON_ATOMS = saved


def _shares(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Share of ``a`` at each of the sorted values ``v`` (every value of ``a`` among them)."""
    return np.bincount(np.searchsorted(v, a), minlength=len(v)) / len(a)


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
    print(f"'empirical': the marginal as fitted now, 'smooth': the smooth fit forced (before "
          f"2026-12-06); TV hold and floor: mean over {args.reps} random splits into halves")
    print(f"{'table':7s} {'column':15s} {'n':>6s} {'distinct':>8s} {'atoms':>5s} "
          f"{'on atoms':>8s} {'now':>9s} {'TV all':>16s} {'1-record':>16s} {'TV hold':>16s} "
          f"{'floor':>6s}  worst value (smooth): probability / real share")
    sub = "  ".join(f"{'empirical':>9s} {'smooth':>6s}" for _ in range(3))
    print(f"{'':67s} {sub}")
    for name, df, schema in tables:
        schema = schema if schema is not None else infer_schema(df)
        for c in schema.of_type("continuous") + schema.of_type("count"):
            col = schema[c]
            if c in schema.derived:
                continue
            x = fitted_values(df, schema, c)
            values, counts = np.unique(x, return_counts=True)
            is_atom = counts >= marginals.ATOM_SHARE * len(x)
            if len(values) <= marginals.DISCRETE_VALUES or not is_atom.any():
                continue
            smooth_fit = _fit(x, col, smooth=True)
            on = marginals.share_on_atoms(smooth_fit.smooth, values[is_atom],
                                          decimals=col.decimals)
            now = _fit(x, col, smooth=False)
            kind_now = "empirical" if isinstance(now, marginals.DiscreteMarginal) else "smooth"
            head = (f"{name:7s} {c:15s} {len(x):6d} {len(values):8d} "
                    f"{counts[is_atom].sum() / len(x):5.2f} {on:8.3f} {kind_now:>9s}")
            if kind_now == "smooth":
                print(head)
                continue
            tv_all, single, worst = {}, {}, ""
            u = (np.arange(1_000_000) + 0.5) / 1_000_000  # quadrature, not sampling
            for kind, m in (("empirical", now), ("smooth", smooth_fit)):
                big = round_values(m.ppf(u), col)
                v = np.union1d(big, values)
                pb, px = _shares(big, v), _shares(x, v)
                tv_all[kind] = 0.5 * float(np.abs(pb - px).sum())
                once = np.isin(v, values[counts == 1])
                single[kind] = (float(np.mean(1 - (1 - pb[once]) ** len(x))) if once.any()
                                else float("nan"))
                if kind == "smooth":
                    i = int(np.argmax(np.abs(pb - px)))
                    worst = f"{v[i]:g}: {pb[i]:.4f} / {px[i]:.4f}"
            hold = {"empirical": [], "smooth": []}
            floor = []
            for _ in range(args.reps):
                perm = rng.permutation(len(x))
                train, holdout = x[perm[: len(x) // 2]], x[perm[len(x) // 2:]]
                uu = rng.random(len(train))
                for kind in hold:
                    drawn = round_values(_fit(train, col, smooth=kind == "smooth").ppf(uu), col)
                    hold[kind].append(tv_distance(drawn, holdout))
                floor.append(tv_distance(train, holdout))
            print(f"{head} {tv_all['empirical']:9.3f} {tv_all['smooth']:6.3f}  "
                  f"{single['empirical']:9.2f} {single['smooth']:6.2f}  "
                  f"{np.mean(hold['empirical']):9.3f} {np.mean(hold['smooth']):6.3f} "
                  f"{np.mean(floor):6.3f}  {worst}")


if __name__ == "__main__":
    main()
