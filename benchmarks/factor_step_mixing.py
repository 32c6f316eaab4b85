"""Effective sample size per second of the two factor-score steps (``collapse_levels``).

Two datasets: the paper's section 6.1 simulation (a 5-level categorical variable and a Poisson
count, n = 2000) and the embedded child-health table (n = 2000, 26 variables). For each, both
settings of ``bayesynth.sample(collapse_levels=...)``, 2 chains of ``--draws`` draws after as many
burn-in iterations. Reported over the well-identified copula correlations (``weak`` rows of
``copula_diagnostics`` excluded): sampling seconds, median and minimum bulk ESS, largest R-hat,
and the median ESS per second, overall and for correlations that involve a categorical variable.

Usage::

    python benchmarks/factor_step_mixing.py [--draws 2000]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import warnings

import numpy as np
import pandas as pd

import bayesynth as bs


def paper_simulation(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1 = rng.choice(5, size=n, p=[0.35, 0.30, 0.20, 0.10, 0.05])
    x2 = rng.poisson(np.array([342.0, 345.0, 347.0, 349.0, 353.0])[x1])
    return pd.DataFrame({"x1": pd.Categorical.from_codes(x1, list("abcde")), "x2": x2})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=61)
    args = ap.parse_args()
    data = {
        "section 6.1 simulation": (paper_simulation(2000, args.seed), ["x1["]),
        "child health": (bs.datasets.simulate_child_health(2000, args.seed),
                         ["m_race[", "m_educ["]),
    }
    print(f"{'dataset':>24} {'collapse':>8} {'seconds':>8} {'med ESS':>8} {'min ESS':>8} "
          f"{'max Rhat':>9} {'ESS/s':>7} {'cat ESS/s':>10}")
    for name, (df, cat_prefixes) in data.items():
        model = bs.models.rank_probit_copula(df)
        for collapse in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = bs.sample(model, draws=args.draws, tune=args.draws, chains=2,
                                  random_seed=args.seed, progressbar=False,
                                  collapse_levels=collapse)
            secs = idata.posterior.attrs["sampling_time"]
            d = bs.evaluation.copula_diagnostics(idata)
            d = d[~d["weak"].astype(bool)]
            cat = d[d.index.map(lambda s: any(p in s for p in cat_prefixes))]
            print(f"{name:>24} {str(collapse):>8} {secs:>8.1f} {d.ess_bulk.median():>8.0f} "
                  f"{d.ess_bulk.min():>8.0f} {d.r_hat.max():>9.3f} "
                  f"{d.ess_bulk.median() / secs:>7.1f} {cat.ess_bulk.median() / secs:>10.1f}")


if __name__ == "__main__":
    main()
