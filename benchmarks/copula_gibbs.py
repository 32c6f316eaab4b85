"""Speed of the rank-probit copula Gibbs sampler: bare kernels against pm.sample.

Data: the simulated child-health table (2 categorical variables with 5 and 4 levels, 6 binary,
6 integer, 12 continuous columns: p = 26, p* = 33), k = 8 factors, one chain on one core.

Prints, for each n: seconds per Gibbs iteration and iterations per second for the bare kernels
(the same sweep the step methods run, called in a plain loop) and for ``bayesynth.sample``
(PyMC's sampling loop, from the ``sampling_time`` PyMC records, so model set-up and compilation
are excluded), the ratio of the two, the peak resident memory of the process, and the bytes
stored per posterior draw (which must not grow with n).

Usage::

    python benchmarks/copula_gibbs.py [--n 20000 200000] [--iters 300] [--collapse-levels]
    python benchmarks/copula_gibbs.py --n 20000 --per-step   # milliseconds of each step

``--per-step`` also prints the milliseconds per iteration of each step of the bare sweep
(timed one by one in the same loop).
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import resource
import time
import warnings

import numpy as np

import bayesynth as bs
from bayesynth.samplers import assign_copula_steps


def bare_seconds_per_iter(model, iters: int, seed: int, collapse: bool,
                          per_step: dict[str, float] | None = None, warmup: int = 5) -> float:
    """Run the sweep by calling each step's update directly on a plain dict (no PyMC loop).

    With ``per_step`` (a dict), also fill it with each step's seconds per iteration. The
    first ``warmup`` sweeps (compilation, buffers) are not timed.
    """
    steps = assign_copula_steps(model, collapse_levels=collapse)
    rng = np.random.default_rng(seed)
    for s in steps:
        s.rng = rng
    point = dict(model.initial_point())
    for _ in range(warmup):  # compile and settle buffers
        for s in steps:
            s._update(point)
    spent = np.zeros(len(steps))
    t = time.perf_counter()
    for _ in range(iters):
        for i, s in enumerate(steps):
            if per_step is None:
                s._update(point)
            else:
                t_s = time.perf_counter()
                s._update(point)
                spent[i] += time.perf_counter() - t_s
    total = (time.perf_counter() - t) / iters
    if per_step is not None:
        for s, sec in zip(steps, spent):
            per_step[type(s).__name__] = sec / iters
    return total


def pymc_seconds_per_iter(model, iters: int, seed: int, collapse: bool) -> tuple[float, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bs.sample(model, draws=5, tune=0, chains=1, cores=1, random_seed=seed,
                  progressbar=False, collapse_levels=collapse)
        idata = bs.sample(model, draws=iters, tune=0, chains=1, cores=1, random_seed=seed,
                          progressbar=False, collapse_levels=collapse)
    per_draw = sum(v.nbytes for v in idata.posterior.data_vars.values()) // iters
    return idata.posterior.attrs["sampling_time"] / iters, per_draw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[20_000, 200_000])
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--collapse-levels", action="store_true",
                    help="use the collapsed factor-score step (default: the paper's block)")
    ap.add_argument("--per-step", action="store_true",
                    help="also print each step's milliseconds per iteration")
    args = ap.parse_args()
    step = "collapsed factor scores" if args.collapse_levels else "the paper's factor-score block"
    print(f"bayesynth {bs.__version__}; BLAS threads pinned to 1; k = {args.k}; one chain; "
          f"bayesynth's default steps ({step} and every "
          "exact move)")
    print(f"{'n':>8} {'p*':>4} {'bare s/it':>10} {'bare it/s':>10} {'pymc s/it':>10} "
          f"{'pymc it/s':>10} {'pymc/bare':>9} {'peak RSS MB':>12} {'bytes/draw':>11}")
    for n in args.n:
        df = bs.datasets.simulate_child_health(n=n, random_seed=args.seed)
        model = bs.models.rank_probit_copula(df, n_factors=args.k)
        p = len(model.coords["latent"])
        iters = args.iters if n <= 50_000 else max(30, args.iters // 10)
        per_step: dict[str, float] | None = {} if args.per_step else None
        bare = bare_seconds_per_iter(model, iters, args.seed, args.collapse_levels, per_step)
        wrapped, per_draw = pymc_seconds_per_iter(model, iters, args.seed, args.collapse_levels)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>8} {p:>4} {bare:>10.4f} {1 / bare:>10.1f} {wrapped:>10.4f} "
              f"{1 / wrapped:>10.1f} {wrapped / bare:>9.3f} {peak:>12.0f} {per_draw:>11}")
        if per_step:
            print("    ms per iteration by step: " + ", ".join(
                f"{name} {1e3 * sec:.1f}" for name, sec in per_step.items()))


if __name__ == "__main__":
    main()
