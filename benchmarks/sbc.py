"""Simulation-based calibration of every model factory (issue 14, item 6): the larger version.

For each factory it runs :func:`bayesynth.evaluation.simulation_based_calibration` (Talts et
al. 2018) on the set-up of ``tests/mc.py`` (``sbc_problem``) and prints, per quantity, the
mean fractional rank, the dispersion statistic (1 under uniformity, above 1 for a U shape), the
chi-square, ECDF (Kolmogorov-Smirnov) and dispersion p-values, the combined p-value, the
posterior contraction and the ESS of the kept draws over L; a quantity fails when its combined
p-value is below 0.001 divided by the number of quantities of that factory (Bonferroni).
``--mutate 2`` doubles the prior scales of the simulation but not of the fit, to show what the
test can detect at that size.

Usage::

    python benchmarks/sbc.py                                  # every factory, default sizes
    python benchmarks/sbc.py --factory rank_probit_copula --n-sims 200 --n 50
    python benchmarks/sbc.py --factory negative_binomial --mutate 2
    python benchmarks/sbc.py --plot sbc.png                   # rank histograms of each run

BLAS is pinned to one thread (bayesynth.sample does so while sampling).
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings
from pathlib import Path

import bayesynth  # noqa: F401  (first: BLAS flags)
from bayesynth.evaluation import simulation_based_calibration
from tests.mc import SBC_FACTORIES, SBC_LEVEL, SBC_SAMPLE_KWARGS, sbc_problem

#: Default settings per factory: replicates, kept draws per chain, thinning, tuning, rows.
#: Thinning follows the ESS per draw of each sampler: NUTS about 1, the copula's and the latent
#: class model's Gibbs steps about 0.2, PGBART (10% of the trees per iteration) under 0.1 for
#: sigma and f.
DEFAULTS = {
    "rank_probit_copula": dict(n_sims=100, draws=39, thin=5, tune=300, n=40),
    "negative_binomial": dict(n_sims=80, draws=39, thin=2, tune=300, n=30),
    "linear_regression": dict(n_sims=80, draws=39, thin=2, tune=300, n=20),
    "beta_mixture": dict(n_sims=80, draws=39, thin=2, tune=300, n=20),
    "saturated_pig": dict(n_sims=80, draws=39, thin=2, tune=300, n=0),
    "latent_class_dp": dict(n_sims=80, draws=39, thin=5, tune=300, n=40),
    "bart_rank_regression": dict(n_sims=40, draws=19, thin=40, tune=300, n=40),
}


def run(factory: str, args: argparse.Namespace) -> tuple[object, float]:
    cfg = dict(DEFAULTS[factory])
    for key in ("n_sims", "draws", "thin", "tune", "n"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    problem = sbc_problem(factory, n=cfg.pop("n") or 30, mutate=args.mutate, seed=args.seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = simulation_based_calibration(
            *problem, **cfg, chains=1, random_seed=args.seed,
            sample_kwargs=SBC_SAMPLE_KWARGS.get(factory), progress=args.progress)
    return result, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--factory", choices=SBC_FACTORIES + ("all",), default="all")
    ap.add_argument("--n-sims", type=int)
    ap.add_argument("--draws", type=int, help="kept draws per replicate (L)")
    ap.add_argument("--thin", type=int)
    ap.add_argument("--tune", type=int)
    ap.add_argument("--n", type=int, help="records per simulated dataset")
    ap.add_argument("--mutate", type=float, default=1.0,
                    help="multiply the simulation's prior scales (1: correct set-up)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--plot", help="save the rank histograms to this file (one per factory)")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args()
    factories = SBC_FACTORIES if args.factory == "all" else (args.factory,)
    total = time.perf_counter()
    for factory in factories:
        result, seconds = run(factory, args)
        table = result.table()
        fails = result.failures(SBC_LEVEL)
        s = result.settings
        print(f"\n== {factory}: {result.n_sims} replicates, L = {result.n_draws} "
              f"(thin {s['thin']}, tune {s['tune']}), {result.n_rejected} rejected, "
              f"{seconds:.0f} s, mutate {args.mutate}, divergences "
              f"{int(result.replicates['divergences'].sum())}")
        cols = ["mean_rank", "dispersion", "p_chi2", "p_ecdf", "p_dispersion", "p",
                "contraction", "ess_ratio"]
        print(table[cols].round(4).to_string())
        print(f"min p {table['p'].min():.4g}; fails at {SBC_LEVEL} / {len(table)}: "
              f"{fails or 'none'}", flush=True)
        if args.plot:
            stem = Path(args.plot)
            out = stem.with_name(f"{stem.stem}_{factory}{stem.suffix or '.png'}")
            result.plot().savefig(out, dpi=100)
    print(f"\ntotal {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
