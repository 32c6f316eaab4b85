"""Convergence of the copula sampler on what synthesis uses (issue 12 targets).

For a table and a sampler setting it prints the wall time and, for every quantity synthesis
depends on, the worst R-hat and the smallest bulk ESS:

* correlations ``C`` between ordered variables;
* implied level probabilities of every categorical variable, and joint probabilities of every
  pair of categorical variables (what cross-tabulations of synthetic data follow);
* category-conditional means of every ordered column on the synthesis scale.

Quantities are judged as synthesis uses them: by default with the categorical margins
calibrated to the data (``--categorical-margins data``, the synthesizer's default; the level
probabilities of those variables are then fixed and not judged); ``model`` judges the draws'
own intercepts, ``both`` prints both. With ``model`` it also prints the total variation between
the implied level probabilities (posterior mean) and the data's frequencies, per categorical
variable. The sampling time excludes the convergence check ``bayesynth.sample`` runs at the
end; the time of each judgement is printed beside it.

Usage::

    python benchmarks/copula_mixing.py                       # demo table, default settings
    python benchmarks/copula_mixing.py --data sd2011 --cores 1
    python benchmarks/copula_mixing.py --likelihood rpl --n-factors 25   # the paper's setting
    python benchmarks/copula_mixing.py --data ce --add UtilityTransportLocationMove

BLAS is pinned to one thread (bayesynth.sample does so while sampling).
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import dataclasses
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

import bayesynth as bs
from bayesynth.evaluation.diagnostics import synthesis_diagnostics

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load(name: str, n: int | None) -> pd.DataFrame:
    if name == "demo":
        return bs.datasets.simulate_child_health(n=n or 2000, random_seed=2026)
    if name == "sd2011":
        df = pd.read_csv(DATA / "sd2011.csv", keep_default_na=False, na_values=[""])
    elif name == "ce":
        df = pd.read_csv(DATA / "ce.csv")
    elif name == "adult":
        df = pd.read_csv(DATA / "adult.csv")
    elif name == "nltcs":
        df = pd.read_csv(DATA / "nltcs.csv")
        df.columns = [f"d{c}" for c in df.columns]
    else:
        raise SystemExit(f"unknown data {name!r}")
    return df if n is None else df.sample(n=n, random_state=0).reset_index(drop=True)


#: SD2011's answers with a natural order, lowest first (``--schema survey-ordered``): the
#: survey schema leaves them unordered (strings), so each takes K - 1 utility columns.
SD2011_ORDERS = {
    "ls": ("TERRIBLE", "UNHAPPY", "MOSTLY DISSATISFIED", "MIXED", "MOSTLY SATISFIED",
           "PLEASED", "DELIGHTED"),
    "placesize": ("RURAL AREAS", "URBAN BELOW 20,000", "URBAN 20,000-100,000",
                  "URBAN 100,000-200,000", "URBAN 200,000-500,000", "URBAN 500,000 AND OVER"),
    "edu": ("PRIMARY/NO EDUCATION", "VOCATIONAL/GRAMMAR", "SECONDARY",
            "POST-SECONDARY OR HIGHER"),
    "trust": ("ONE CAN`T BE TOO CAREFUL", "IT`S DIFFICULT TO TELL",
              "MOST PEOPLE CAN BE TRUSTED"),
    "trustfam": ("NO", "NO OPINION", "YES"),
    "trustneigh": ("NO", "NO OPINION", "YES"),
    "englang": ("NONE", "PASSIVE", "ACTIVE"),
}



def sd2011_survey(df: pd.DataFrame, *, ordered: bool = False,
                  exclude: Sequence[str] = ()) -> tuple[pd.DataFrame, bs.Schema]:
    """SD2011's columns that the survey schema models, and that schema.

    The schema a survey statistician writes (``benchmarks/real_data.py``): age groups are a
    function of age and bmi of height and weight, so ``CopulaSynthesizer`` leaves them out of
    the copula; the "not applicable" codes follow rules. As the synthesizer does. With
    ``ordered``, the answers of :data:`SD2011_ORDERS` are declared ordinal; ``exclude`` leaves
    columns (and the rules that name them) out.
    """
    from real_data import load as load_survey

    from bayesynth.schema import modelled_schema

    _, full, _ = load_survey("sd2011")
    if ordered:
        full = bs.Schema([dataclasses.replace(full[c], type="ordinal", levels=SD2011_ORDERS[c])
                          if c in SD2011_ORDERS else full[c] for c in full],
                         full.rules, full.suggested_rules)
    schema = modelled_schema(df, full, exclude=list(exclude))
    return df[list(schema.names)], schema

def _cols(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="demo", choices=("demo", "sd2011", "ce", "adult", "nltcs"))
    ap.add_argument("--n", type=int, default=None, help="rows (default: all; demo 2000)")
    ap.add_argument("--likelihood", default="mnp", choices=("mnp", "rpl"))
    ap.add_argument("--n-factors", type=int, default=None)
    ap.add_argument("--draws", type=int, default=2500)
    ap.add_argument("--tune", type=int, default=2500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worst", type=int, default=5, help="worst quantities to list")
    ap.add_argument("--start-from", choices=("factor_analysis", "prior"),
                    default="factor_analysis",
                    help="bayesynth.sample's start_from: each chain at a factor analysis of "
                         "its own quarter of the records (default) or at prior draws")
    ap.add_argument("--shared-start", action="store_true",
                    help="start every chain from one neutral point (loadings, intercepts and "
                         "factor scores at the model's initial point, the default before "
                         "2026-12-04) instead of each chain's own dispersed start")
    ap.add_argument("--drop", default="",
                    help="comma-separated copula steps to leave out (ablation), e.g. "
                         "RotationMove,MarginalLoadingsHMC (FactorScoresGibbs is already out "
                         "while the sweep ends with MarginalLoadingsHMC, and back without it)")
    ap.add_argument("--add", default="",
                    help="comma-separated optional copula steps to add to the sweep, after "
                         "the transport scale move (bayesynth.samplers.OPTIONAL_COPULA_STEPS), "
                         "e.g. UtilityTransportLocationMove")
    ap.add_argument("--eta-in-rows", choices=("on", "off"), default="on",
                    help="integrate the factor scores out of the rare levels' row move")
    ap.add_argument("--row-budget", type=float, default=None,
                    help="InterceptGibbs.row_budget (default 5e7; 0: no joint row moves)")
    ap.add_argument("--save", default=None, help="write the InferenceData to this path")
    ap.add_argument("--categorical-margins", choices=("data", "model", "both"), default="data",
                    help="judge with the margins calibrated to the data (as synthesis does by "
                         "default), with the draws' own, or both")
    ap.add_argument("--categorical", default="",
                    help="comma-separated columns to read as categorical in an inferred "
                         "schema (ce: Tenure,Marital, as real_data.py does)")
    ap.add_argument("--schema", choices=("survey", "survey-ordered", "inferred"),
                    default="survey",
                    help="sd2011: the statistician's schema of real_data.py (rules, derived "
                         "bmi, age groups from age), that schema with the ordered answers "
                         "declared ordinal (SD2011_ORDERS) and modelled as ranks, or the "
                         "inferred one")
    ap.add_argument("--exclude", default="",
                    help="comma-separated data columns to leave out of the model (ablation; "
                         "with the rules that name them), e.g. ymarr,mmarr")
    args = ap.parse_args(argv)
    if args.drop:
        import bayesynth.samplers.sampling as sampling_mod

        drop = {d.strip() for d in args.drop.split(",") if d.strip()}
        known = {c.__name__ for c in sampling_mod.COPULA_STEPS}
        if drop - known:
            raise SystemExit(f"unknown steps {sorted(drop - known)}; known: {sorted(known)}")
        sampling_mod.COPULA_STEPS = tuple(c for c in sampling_mod.COPULA_STEPS
                                          if c.__name__ not in drop)
    if args.add:
        import bayesynth.samplers.sampling as sampling_mod
        from bayesynth.samplers.steps import OPTIONAL_COPULA_STEPS, UtilityTransportScaleMove

        known = {c.__name__: c for c in OPTIONAL_COPULA_STEPS}
        add = [a.strip() for a in args.add.split(",") if a.strip()]
        if set(add) - set(known):
            raise SystemExit(f"unknown optional steps {sorted(set(add) - set(known))}; "
                             f"known: {sorted(known)}")
        sweep = list(sampling_mod.COPULA_STEPS)
        at = sweep.index(UtilityTransportScaleMove) + 1 if UtilityTransportScaleMove in sweep \
            else len(sweep)
        sampling_mod.COPULA_STEPS = tuple(sweep[:at] + [known[a] for a in add] + sweep[at:])
    from bayesynth.samplers.steps import InterceptGibbs

    InterceptGibbs.integrate_eta = args.eta_in_rows == "on"
    if args.row_budget is not None:
        InterceptGibbs.row_budget = args.row_budget
    df = load(args.data, args.n)
    exclude = _cols(args.exclude)
    if set(exclude) - set(df.columns):
        raise SystemExit(f"--exclude: no columns {sorted(set(exclude) - set(df.columns))}")
    unknown = set(_cols(args.categorical)) - set(df.columns) - set(exclude)
    if unknown:
        raise SystemExit(f"--categorical: no columns {sorted(unknown)}")
    if args.categorical and args.data == "sd2011" and args.schema.startswith("survey"):
        raise SystemExit("--categorical applies to an inferred schema (--schema inferred)")
    if args.data == "sd2011" and args.schema.startswith("survey"):
        df, schema = sd2011_survey(df, ordered=args.schema == "survey-ordered",
                                   exclude=exclude)
    else:
        df = df.drop(columns=exclude)
        schema = bs.infer_schema(df, categorical=[c for c in _cols(args.categorical)
                                                  if c not in exclude])
    # declared orders are modelled as ranks from three levels up (the factory's default
    # threshold, 10, models ordinal columns with fewer levels as unordered categorical)
    ranks = {"ordinal_threshold": 3} if args.schema == "survey-ordered" else {}
    model = bs.models.rank_probit_copula(df, schema, n_factors=args.n_factors,
                                         categorical_likelihood=args.likelihood, **ranks)
    k = int(model.dim_lengths["factor"].eval())
    p = int(model.dim_lengths["latent"].eval())
    print(f"{args.data}: n = {len(df)}, {df.shape[1]} columns, p* = {p}, k = {k}, "
          f"likelihood {args.likelihood}, {args.chains} chains x ({args.tune} + {args.draws})")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # judged below, and timed apart
        extra = {}
        if args.shared_start:
            point = model.initial_point()
            extra["initvals"] = {name: point[name] for name in ("Lambda", "alpha", "eta")
                                 if name in point}
        idata = bs.sample(model, draws=args.draws, tune=args.tune, chains=args.chains,
                          random_seed=args.seed, progressbar=False, cores=args.cores,
                          check_convergence=False, start_from=args.start_from, **extra)
    wall = time.perf_counter() - t0
    if args.save:
        idata.to_netcdf(args.save)
    cores = args.cores or min(args.chains, os.cpu_count() or 1)
    per_core = args.chains * (args.draws + args.tune) / cores
    print(f"sampling: {wall:.1f} s wall on {cores} core(s) ({per_core / wall:.1f} iterations/s "
          "per core)")
    modes = ("data", "model") if args.categorical_margins == "both" \
        else (args.categorical_margins,)
    for mode in modes:
        t1 = time.perf_counter()
        d = synthesis_diagnostics(idata, categorical_margins=mode, cores=args.cores)
        r = d.table["r_hat"]
        print(f"categorical margins {mode!r}: {len(r)} quantities judged in "
              f"{time.perf_counter() - t1:.1f} s; max R-hat {r.max():.3f}, "
              f"{100 * (r > 1.01).mean():.1f}% above 1.01")
        for kind, rows in d.table.groupby("kind", sort=False):
            print(f"  {kind:26s} {len(rows):5d} quantities: max R-hat {rows['r_hat'].max():.3f}"
                  f", min bulk ESS {rows['ess_bulk'].min():6.0f}, median "
                  f"{rows['ess_bulk'].median():6.0f}, ESS/s (min) "
                  f"{rows['ess_bulk'].min() / wall:.2f}")
        worst = d.table.sort_values("ess_bulk").head(args.worst)
        for label, row in worst.iterrows():
            print(f"    {label}: ESS {row['ess_bulk']:.0f}, R-hat {row['r_hat']:.3f}")
        if mode == "model":
            tv = d.total_variation(df)
            if len(tv):
                print("  total variation of implied level probabilities vs data: "
                      + ", ".join(f"{k} {v:.4f}" for k, v in tv.items()))


if __name__ == "__main__":
    main()
