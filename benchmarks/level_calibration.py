"""The categorical margins' calibration: robustness from far starts, and the judge's cost.

``calibrate_block`` (``bayesynth.models.level_calibration``) shifts a multinomial-probit
variable's intercepts so that its level shares over Monte Carlo points equal the data's. It runs
once per draw and variable in the convergence check (8,000 points) and once per synthetic
table and variable in synthesis (100,000 points).

1. Forty random problems (1 to 28 utility columns, correlated utilities, 2,000 or 20,000
   points, targets down to 10 points, starts 0, 1, 5 or 15 sds from zero; seeds 1000-1039):
   prints the seconds in all, the slowest problem, the largest difference between a hard share
   and its target, and how many solves warned that they stopped short of their tolerance.
2. With ``--fit PATH`` (an InferenceData saved by ``copula_mixing.py --save``): the seconds of
   ``synthesis_quantity_table`` on it, one process, one BLAS thread (what ``bayesynth.sample``'s
   closing check computes, on one core).

Usage::

    python benchmarks/level_calibration.py [--fit /tmp/sd2011.nc]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings

import numpy as np

from bayesynth.models.level_calibration import calibrate_block


def hard_shares(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Share of the points whose largest utility (the reference's is 0) is each column's."""
    u = np.column_stack([np.zeros(len(x)), a + x])
    return np.bincount(u.argmax(axis=1), minlength=x.shape[1] + 1)[1:] / len(x)


def random_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points, targets and a start of one random calibration problem."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 29))
    M = int(rng.choice([2000, 20000]))
    A = rng.standard_normal((d, d))
    S = A @ A.T / d + rng.uniform(0.1, 1.0) * np.eye(d)
    x = rng.standard_normal((M, d)) @ np.linalg.cholesky(S).T
    t = rng.dirichlet(np.full(d + 1, rng.choice([0.5, 2.0])))
    t = np.maximum(t, 10 / M)
    t /= t.sum()
    start = rng.normal(scale=rng.choice([0.0, 1.0, 5.0, 15.0]), size=d)
    return x, t[1:], start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", default=None, help="a saved copula InferenceData to judge")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)  # compile (or load) the compiled pass before timing
    calibrate_block(np.zeros(8), rng.standard_normal((500, 8)), np.full(8, 0.1))
    seconds, errors, warned = [], [], 0
    for seed in range(1000, 1040):
        x, target, start = random_problem(seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = calibrate_block(start, x, target)
        seconds.append(time.perf_counter() - t0)
        warned += sum(issubclass(w.category, RuntimeWarning) for w in caught)
        errors.append(float(np.max(np.abs(hard_shares(a, x) - target))))
    print(f"40 random problems: {sum(seconds):.2f} s in all, slowest {max(seconds):.2f} s, "
          f"largest hard-share error {max(errors):.2e}, {warned} warned")
    if args.fit:
        import arviz as az

        from bayesynth.models.copula_quantities import synthesis_quantity_table

        idata = az.from_netcdf(args.fit)
        t0 = time.perf_counter()
        table, thin = synthesis_quantity_table(idata, cores=1)
        el = time.perf_counter() - t0
        post = idata.posterior
        judged = post.sizes["chain"] * post.sizes["draw"] // thin
        print(f"{args.fit}: {len(table)} quantities on {judged} draws in {el:.1f} s "
              f"({1000 * el / judged:.1f} ms a draw), one process")


if __name__ == "__main__":
    main()
