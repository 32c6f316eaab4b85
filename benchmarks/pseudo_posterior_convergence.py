"""Convergence of the pseudo-posterior fits at their default settings, judged as bayesynth does.

Every fit of ``PseudoPosteriorSynthesizer`` is judged on its records' log-likelihoods
(:func:`bayesynth.samplers.check_loglik_convergence`). This script prints, per table, seed and
fit, the largest R-hat over the records, the smallest bulk ESS, the divergences after tuning
and the time, for

1. ``--part target``: the unweighted two-component ``beta_mixture`` fitted to 2,000
   Beta(0.5, 3) records (the paper's simulation) by ``bayesynth.sample`` with NUTS's
   ``target_accept`` at PyMC's 0.8 and at bayesynth's 0.95 (one core, chains in sequence);
2. ``--part defaults``: ``PseudoPosteriorSynthesizer(beta_mixture)`` with every default
   (two components with Dirichlet concentration 2, 2 x (1000 + 1000) iterations,
   target_accept 0.95, at most two extensions of 1,000 draws), mechanisms
   ``weighted`` and ``censor_uw`` (epsilon 4, change-one), on the paper's simulation and on
   2,000 of CE's positive expenditures scaled into (0, 1) by 1.01 times their maximum; with
   ``--data sd2011``, ``negative_binomial`` on 2,000 of SD2011's numbers of friends;
3. ``--part censoring``: the share of the records' terms at the censoring bound of
   ``censor_uw`` fits and what it costs the synthetic data (one fit per setting, first seed).

Usage::

    python benchmarks/pseudo_posterior_convergence.py [--part target|defaults|censoring|all]
        [--seeds 1 2 3] [--data sim ce sd2011] [--chains 2] [--mechanisms weighted censor_uw]
        [--concentration 2] [--max-extensions 2]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesynth.errors import PrivacyWarning
from bayesynth.models.pseudo_posterior import beta_mixture, negative_binomial
from bayesynth.samplers import check_loglik_convergence
from bayesynth.samplers import sample as bs_sample
from bayesynth.synthesis import PseudoPosteriorSynthesizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CE = DATA / "ce.csv"
SD2011 = DATA / "sd2011.csv"
#: the model each table is fitted with
FACTORY = {"sim": beta_mixture, "ce": beta_mixture, "sd2011": negative_binomial}


def table(which: str, seed: int) -> pd.DataFrame:
    """The paper's simulation, 2,000 CE expenditures scaled into (0, 1), or 2,000 of SD2011's
    numbers of friends (``nofriend``; its "not applicable" code -8 left out)."""
    if which == "sim":
        return pd.DataFrame({"x": np.random.default_rng(seed).beta(0.5, 3.0, 2000)})
    if which == "sd2011":
        f = pd.read_csv(SD2011, keep_default_na=False, na_values=[""])["nofriend"].dropna()
        f = f[f >= 0].astype(int)
        return pd.DataFrame({"nofriend": f.sample(2000, random_state=seed).to_numpy()})
    e = pd.read_csv(CE)["Expenditure"]
    e = e[e > 0] / (1.01 * e.max())
    return pd.DataFrame({"x": e.sample(2000, random_state=seed).to_numpy()})


def line(label: str, conv, seconds: float, idata=None, share: float | None = None) -> None:
    """Print one judged fit (and, given its posterior, how many times it was continued)."""
    ext = "" if idata is None else \
        f"  extensions {idata.posterior.attrs.get('extensions', 0)}"
    if share is not None:
        ext += f"  at the bound {100 * share:.1f}%"
    print(f"{label:<40} R-hat {conv.max_rhat:.4f}  min ESS {conv.min_ess_bulk:6.0f}  "
          f"divergences {conv.n_divergent:4d}{ext}  {seconds:6.1f} s", flush=True)


def part_target(seeds: list[int], concentration: float | None = None) -> None:
    """Divergences of the unweighted two-component fit at target_accept 0.8 and 0.95."""
    for ta in (0.8, 0.95):
        for seed in seeds:
            x = table("sim", seed)["x"].to_numpy()
            model = beta_mixture(x) if concentration is None else beta_mixture(
                x, concentration=concentration)
            t = time.perf_counter()
            idata = bs_sample(model, draws=1000, tune=1000, chains=2, cores=1,
                              random_seed=seed, progressbar=False, check_convergence=False,
                              target_accept=ta)
            seconds = time.perf_counter() - t
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                conv = check_loglik_convergence(model, idata)
            line(f"sim seed {seed} target_accept {ta}", conv, seconds)


def part_defaults(seeds: list[int], data: list[str], chains: int = 2,
                  mechanisms: tuple[str, ...] = ("weighted", "censor_uw"),
                  concentration: float | None = None, max_extensions: int = 2) -> None:
    """Every fit of the default synthesizer (``chains`` aside), for two mechanisms."""
    for which in data:
        for seed in seeds:
            x = table(which, seed)
            for mech in mechanisms:
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # printed below
                    warnings.simplefilter("ignore", PrivacyWarning)  # the seed is the point
                    syn = PseudoPosteriorSynthesizer(
                        FACTORY[which], mechanism=mech,
                        epsilon=None if mech == "weighted" else 4.0,
                        chains=chains, random_seed=seed, max_extensions=max_extensions,
                        factory_kwargs=None if concentration is None
                        or FACTORY[which] is not beta_mixture
                        else {"concentration": concentration}).fit(x)
                seconds = time.perf_counter() - t
                fits = [("unweighted fit", syn.unweighted_diagnostics_),
                        (f"{mech} fit", syn.diagnostics_)]
                for label, diag in fits:
                    if diag is not None:
                        line(f"{which} seed {seed} {mech}: {label}", diag.convergence,
                             seconds, diag.idata, diag.censored_share)


def part_censoring(seed: int = 1) -> None:
    """How much of the data censored fits follow, and what it costs the synthetic data.

    One fit per setting (2 x (500 + 500), continued as the defaults do; five synthetic
    tables): the share of the records' terms at the censoring bound
    (``diagnostics_.censored_share``) and, on the simulation and CE's expenditures, the max-
    and average-ECDF distances of the synthetic from the real data; on SD2011's numbers of
    friends (``negative_binomial``), the synthetic mean and share of zeros.
    """
    from bayesynth.evaluation import ecdf_distances

    tables = {which: table(which, seed) for which in ("sim", "ce", "sd2011")}
    settings = [("sim", "unweighted", None, "change_one"), ("sim", "censor_uw", 4.0, "add_remove"),
                ("sim", "censor_uw", 4.0, "change_one"), ("sim", "censor_uw", 2.0, "change_one"),
                ("ce", "unweighted", None, "change_one"), ("ce", "censor_uw", 4.0, "change_one"),
                ("sd2011", "unweighted", None, "change_one"),
                ("sd2011", "censor_uw", 4.0, "change_one")]
    for which, mech, eps, nb in settings:
        x = tables[which]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the share is printed below
            syn = PseudoPosteriorSynthesizer(FACTORY[which], mechanism=mech, epsilon=eps,
                                             neighbours=nb, draws=500, tune=500,
                                             random_seed=seed).fit(x)
            out = syn.sample(m=5, random_seed=seed + 1,
                             **({"n_rows": len(x)} if nb == "add_remove" else {}))
        share = syn.diagnostics_.censored_share
        label = (f"{which} {mech}" + ("" if eps is None else f", epsilon {eps:g}, {nb}")
                 + ("" if share is None else f": {100 * share:.1f}% at the bound"))
        real = x.iloc[:, 0]
        if which != "sd2011":
            d = np.mean([ecdf_distances(real, o.iloc[:, 0]) for o in out], axis=0)
            print(f"{label:<62} max-ECDF {d[0]:.3f}  avg-ECDF {d[1]:.4f}", flush=True)
        else:
            means = [o.iloc[:, 0].mean() for o in out]
            zeros = [(o.iloc[:, 0] == 0).mean() for o in out]
            print(f"{label:<62} mean {min(means):.2f}-{max(means):.2f} (real {real.mean():.2f})"
                  f"  zeros {min(zeros):.1%}-{max(zeros):.1%} (real {(real == 0).mean():.1%})",
                  flush=True)


def main() -> None:
    """Run the parts asked for."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("target", "defaults", "censoring", "all"),
                    default="all")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--data", nargs="+", choices=("sim", "ce", "sd2011"),
                    default=["sim", "ce"])
    ap.add_argument("--chains", type=int, default=2, help="chains of every fit in --part "
                    "defaults (the synthesizer's default: 2)")
    ap.add_argument("--mechanisms", nargs="+", choices=("weighted", "censor_uw"),
                    default=["weighted", "censor_uw"])
    ap.add_argument("--concentration", type=float, default=None,
                    help="Dirichlet concentration of beta_mixture's weights (default: the "
                    "factory's, 2; the target_accept table was measured at 1)")
    ap.add_argument("--max-extensions", type=int, default=2,
                    help="max_extensions of every fit in --part defaults (the synthesizer's "
                    "default: 2)")
    args = ap.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    if args.part in ("target", "all"):
        part_target(args.seeds, args.concentration)
    if args.part in ("censoring", "all"):
        part_censoring(args.seeds[0])
    if args.part in ("defaults", "all"):
        part_defaults(args.seeds, args.data, args.chains, tuple(args.mechanisms),
                      args.concentration, args.max_extensions)


if __name__ == "__main__":
    main()
