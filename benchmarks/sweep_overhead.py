"""Milliseconds per sweep of the copula's default steps, per step.

The bare sweep (each step's update called in a plain loop: ``copula_gibbs.py``'s
``bare_seconds_per_iter``), one chain on one core, default model settings (the default number
of factors), after 20 warm-up sweeps. Tables: ``two-column`` is notebook 01's (a five-level
categorical variable and a Poisson count given it, n = 1,000, seed 61); a number n is the
simulated child-health table of that size (seed 2026); ``sd2011`` is SD2011's 33 modelled
columns under the survey schema of ``real_data.py`` (n = 5,000, with missing values, special
codes and rules; needs ``../shared/data``). Prints the milliseconds of a sweep and of each
step.

Usage::

    python benchmarks/sweep_overhead.py two-column 1000 2000 [--iters 300]
    python benchmarks/sweep_overhead.py sd2011 --iters 40
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse

import numpy as np
import pandas as pd
from copula_gibbs import bare_seconds_per_iter
from copula_mixing import load, sd2011_survey

import bayesynth as bs


def two_column(n: int = 1000, seed: int = 61) -> pd.DataFrame:
    """Notebook 01's table: x1 with five levels, x2 | x1 = l ~ Poisson(r_l)."""
    rng = np.random.default_rng(seed)
    p = np.array([0.35, 0.30, 0.20, 0.10, 0.05])
    rates = np.array([342.0, 345.0, 347.0, 349.0, 353.0])
    x1 = rng.choice(5, size=n, p=p)
    return pd.DataFrame({"x1": pd.Categorical.from_codes(x1, ["L1", "L2", "L3", "L4", "L5"]),
                         "x2": rng.poisson(rates[x1])})


def sweep_ms(df: pd.DataFrame, iters: int, seed: int = 1,
             schema: bs.Schema | None = None) -> tuple[float, dict[str, float]]:
    """Return the milliseconds of a sweep and of each step (bare loop, default steps)."""
    per_step: dict[str, float] = {}
    sec = bare_seconds_per_iter(bs.models.rank_probit_copula(df, schema), iters, seed, False,
                                per_step, warmup=20)
    return 1e3 * sec, {name: 1e3 * v for name, v in per_step.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+",
                    help="'two-column', 'sd2011' or a child-health size n")
    ap.add_argument("--iters", type=int, default=300)
    args = ap.parse_args()
    for name in args.tables:
        schema = None
        if name == "two-column":
            df = two_column()
        elif name == "sd2011":
            df, schema = sd2011_survey(load("sd2011", None))
        else:
            df = bs.datasets.simulate_child_health(n=int(name), random_seed=2026)
        total, per = sweep_ms(df, args.iters, schema=schema)
        print(f"{name}: {total:.2f} ms a sweep ({1e3 / total:.0f} it/s)")
        print("    " + ", ".join(f"{k} {v:.2f}" for k, v in per.items()))


if __name__ == "__main__":
    main()
