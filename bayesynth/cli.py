"""The ``bayesynth`` command line.

::

    bayesynth synthesize INPUT.csv -o OUT.csv [--m M] [--schema schema.json] [--draws D] [--seed S]
    bayesynth schema INPUT.csv
    bayesynth evaluate REAL.csv SYN.csv [SYN_2.csv ...] -o report.html [--known a,b] ...
    bayesynth saturate INPUT.csv -o OUT.csv [--variables a,b,c] [--count n] [--family nbi]
                       [--sigma 0.1] [--alpha 0.02 | --max-risk 0.5] [--m M] [--microdata]
    bayesynth demo

CSV files are read with only empty fields as missing values (so labels such as "NA" or "None"
stay labels). Output files are written atomically and never over the input.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayesynth._io import atomic_write
from bayesynth.errors import BayesynthError, InputTypeError, OutputExistsError

__all__ = ["main", "read_table", "output_paths"]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV file; only empty fields are missing values."""
    path = Path(path)
    if not path.exists():
        raise BayesynthError(f"Input file '{path}' does not exist.")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def output_paths(output: str | Path, m: int) -> list[Path]:
    """``OUT.csv`` for one dataset; ``OUT_1.csv`` ... ``OUT_m.csv`` for several."""
    out = Path(output)
    if m == 1:
        return [out]
    suffix = out.suffix or ".csv"
    return [out.with_name(f"{out.stem}_{i}{suffix}") for i in range(1, m + 1)]


def _check_outputs(inputs: Sequence[Path], outputs: Sequence[Path], overwrite: bool) -> None:
    resolved_in = {p.resolve() for p in inputs}
    for out in outputs:
        if out.resolve() in resolved_in:
            raise OutputExistsError(
                f"Output '{out}' is an input file; bayesynth never overwrites its input. "
                "Choose another -o path."
            )
        if out.exists() and not overwrite:
            raise OutputExistsError(
                f"Output '{out}' exists. Remove it, choose another -o path, or pass --overwrite."
            )


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


def _cmd_schema(args: argparse.Namespace) -> int:
    from bayesynth.schema import infer_schema

    df = read_table(args.input)
    print(infer_schema(df).to_json())
    return 0


def _cmd_saturate(args: argparse.Namespace) -> int:
    from bayesynth.evaluation import tune_saturated
    from bayesynth.models import expected_tau, microdata_to_table, table_to_microdata
    from bayesynth.synthesis import synthesize_table

    if args.m < 1:
        raise BayesynthError(f"--m must be at least 1; got {args.m}.")
    outputs = output_paths(args.output, args.m)
    _check_outputs([Path(args.input)], outputs, args.overwrite)
    df = read_table(args.input)
    variables = _split(args.variables) or [c for c in df.columns if c != args.count]
    table = microdata_to_table(df, variables, count=args.count)
    setting = {"family": args.family, "sigma": args.sigma, "alpha": args.alpha}
    if args.max_risk is not None:
        try:
            choice = tune_saturated(table, max_risk=args.max_risk)
        except ValueError as err:
            raise BayesynthError(str(err)) from err
        setting = choice.as_kwargs()
    tau = expected_tau(table, **setting, ks=(1, 2))
    if not args.quiet:
        print(f"table: {table.n_cells:,} cells, {len(table.index):,} non-zero, "
              f"n = {table.n_records:,}")
        print(f"setting: {setting['family']}, sigma = {setting['sigma']:g}, alpha = "
              f"{setting['alpha']:g}; expected tau_4(1) = {tau.loc[1, 'tau4']:.4f}, "
              f"tau_3(1) = {tau.loc[1, 'tau3']:.4f}")
    rng = np.random.default_rng(args.seed)
    for path in outputs:
        syn = synthesize_table(table, **setting, random_seed=rng)
        frame = (table_to_microdata(syn, random_seed=rng) if args.microdata
                 else syn.to_frame().rename(columns={"count": args.count or "count"}))
        _write_csv(frame, path)
        if not args.quiet:
            print(f"wrote {path} ({len(frame):,} rows)")
    return 0


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from bayesynth.schema import Schema, validate_data
    from bayesynth.synthesis import CopulaSynthesizer

    if args.m < 1:
        raise BayesynthError(f"--m must be at least 1; got {args.m}.")
    inputs = [Path(args.input)] + ([Path(args.schema)] if args.schema else [])
    outputs = output_paths(args.output, args.m)
    _check_outputs(inputs, outputs, args.overwrite)
    df = read_table(args.input)
    schema = Schema.from_json(Path(args.schema)) if args.schema else None
    if schema is not None:
        validate_data(df, schema)
    syn = CopulaSynthesizer(
        schema,
        n_factors=args.n_factors,
        categorical=args.categorical,
        draws=args.draws,
        tune=args.tune if args.tune is not None else args.draws,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=not args.quiet,
        targets=_split(args.targets),
        bart_m=args.bart_trees,
    )
    syn.fit(df)
    seed = None if args.seed is None else args.seed + 1
    for frame, path in zip(syn.sample(m=args.m, random_seed=seed), outputs):
        _write_csv(frame, path)
        if not args.quiet:
            print(f"wrote {path} ({len(frame)} rows)")
    if args.save_model:
        syn.save(args.save_model)
        if not args.quiet:
            print(f"saved the fitted synthesizer to {args.save_model}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from bayesynth.datasets import simulate_child_health
    from bayesynth.evaluation import convergence_summary, crosstab_comparison, marginal_fidelity
    from bayesynth.synthesis import CopulaSynthesizer

    t0 = time.perf_counter()
    real = simulate_child_health(n=args.n, random_seed=args.seed)
    print(f"bayesynth demo: simulated child-health table, {real.shape[0]} rows x "
          f"{real.shape[1]} columns (2 categorical, 6 binary, 6 integer, 12 continuous)")
    syn = CopulaSynthesizer(draws=args.draws, tune=args.tune, chains=args.chains,
                            random_seed=args.seed, progressbar=not args.quiet)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        syn.fit(real)
    t_fit = time.perf_counter() - t0
    synth = syn.sample(m=args.m, random_seed=args.seed + 1)
    t_all = time.perf_counter() - t0
    conv = convergence_summary(syn.idata_)
    print(f"\nfit: {syn.idata_.posterior.sizes['factor']} factors, "
          f"{len(syn.latent_names_)} latent columns, {args.chains} chains x {args.draws} draws "
          f"({args.tune} burn-in) in {t_fit:.1f} s")
    print(f"convergence on what synthesis uses (correlations, level probabilities, "
          f"conditional means): max R-hat {conv.max_rhat:.3f} "
          f"({100 * conv.share_rhat_above_1_01:.0f}% above 1.01), bulk ESS min "
          f"{conv.min_ess_bulk:.0f}, median {conv.median_ess_bulk:.0f}")
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            print(f"note: {w.message}")
    fid = pd.concat([marginal_fidelity(real, s, syn.schema_) for s in synth]).groupby(
        level=0, sort=False).mean(numeric_only=True)
    fid["metric"] = ["ks" if syn.schema_[c].type in ("count", "continuous") else "tv"
                     for c in fid.index]
    print(f"\nmarginal fidelity over {args.m} synthetic dataset(s) "
          "(KS = max ECDF gap for numbers, TV = total variation for levels):")
    for metric in ("ks", "tv"):
        d = fid.loc[fid["metric"] == metric, "distance"]
        print(f"  {metric.upper()}: median {d.median():.3f}, worst {d.max():.3f} ({d.idxmax()})")
    _, diff = crosstab_comparison(real, synth[0], ["m_race", "m_educ"])
    print(f"cross-tab m_race x m_educ: largest cell difference {diff:.4f}")
    pairs = [("read", "math"), ("read", "ndi_birth"), ("mage", "read"), ("pm25_1yr", "ri_educ")]
    print("Spearman correlations, real vs synthetic:")
    for a, b in pairs:
        r = real[[a, b]].corr(method="spearman").iloc[0, 1]
        s = synth[0][[a, b]].corr(method="spearman").iloc[0, 1]
        print(f"  {a:>9} ~ {b:<9}  {r:+.3f}  {s:+.3f}")
    copies = _copied_continuous(real, synth[0], syn.schema_.of_type("continuous"))
    print(f"continuous synthetic values equal to a real value: {copies:.2%}")
    if args.output:
        out = Path(args.output)
        _write_csv(real, out / "real.csv")
        for i, s in enumerate(synth, 1):
            _write_csv(s, out / f"synthetic_{i}.csv")
        syn.save(out / "model")
        print(f"\nwrote {out}/real.csv, synthetic_1..{args.m}.csv and the fitted model "
              f"({out}/model)")
    print(f"total {t_all:.1f} s")
    return 0


def _split(text: str | None) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()] if text else []


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from bayesynth.evaluation import report

    out = Path(args.output)
    inputs = [Path(args.real)] + [Path(p) for p in args.synthetic]
    if args.ledger is not None and not Path(args.ledger).is_file():
        raise InputTypeError(f"--ledger: no such file '{args.ledger}'.")
    _check_outputs(inputs, [out, out.with_suffix(".json")], overwrite=True)
    real = read_table(args.real)
    syns = [read_table(p) for p in args.synthetic]
    res = report(
        real, syns, out,
        known=_split(args.known), synthesised=_split(args.synthesised),
        sensitive=args.sensitive, public=args.public, radius=args.radius,
        regression=args.regression, regression_method=args.regression_method,
        random_state=args.seed, ledger=args.ledger,
    )
    print(f"wrote {out} and {out.with_suffix('.json')}")
    prop = res["propensity"]
    spmse = ", ".join(f"{r['s_pmse']:.2f}" for r in prop)
    print(f"S_pMSE per dataset: {spmse}")
    if "identification_risk" in res:
        ir = res["identification_risk"]
        print(f"identification risk at {100 * args.radius:g}%: "
              f"{np.mean([r['risk'] for r in ir['per_dataset']]):.4g}; maximised at radius "
              f"{100 * ir['best_radius']:g}% ({ir['risk_at_best_radius']:.4g})")
    return 0


def _copied_continuous(real: pd.DataFrame, synth: pd.DataFrame, cols: Sequence[str]) -> float:
    if not cols:
        return 0.0
    hits = [np.isin(synth[c].dropna().to_numpy(), real[c].dropna().to_numpy()).mean()
            for c in cols]
    return float(np.mean(hits))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bayesynth",
        description="Bayesian synthetic data with the rank-probit Gaussian copula.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("synthesize", help="fit the copula to a CSV file and write synthetic data")
    s.add_argument("input", help="input CSV file (confidential data)")
    s.add_argument("-o", "--output", required=True, help="output CSV (OUT_1.csv ... for --m > 1)")
    s.add_argument("--m", type=int, default=1, help="number of synthetic datasets (default 1)")
    s.add_argument("--schema", help="schema JSON (as printed by `bayesynth schema`)")
    s.add_argument("--draws", type=int, default=1000, help="posterior draws per chain")
    s.add_argument("--tune", type=int, default=None, help="burn-in per chain (default: draws)")
    s.add_argument("--chains", type=int, default=2)
    s.add_argument("--n-factors", type=int, default=None, help="number of factors")
    s.add_argument("--categorical", choices=("model", "empirical"), default="model",
                   help="how categorical combinations are drawn: from the model (default; copies "
                        "no real combination) or the real joint frequencies")
    s.add_argument("--targets", help="comma-separated key outcomes to synthesise with BART "
                   "rank regressions (Feldman & Kowal, section 5)")
    s.add_argument("--bart-trees", type=int, default=200, help="trees per BART target")
    s.add_argument("--seed", type=int, default=None, help="random seed (reproducible output)")
    s.add_argument("--save-model", help="also save the fitted synthesizer to this directory")
    s.add_argument("--overwrite", action="store_true", help="replace existing output files")
    s.add_argument("--quiet", action="store_true", help="no progress bars or messages")
    s.set_defaults(func=_cmd_synthesize)

    c = sub.add_parser("schema", help="print the inferred schema of a CSV file as JSON")
    c.add_argument("input")
    c.set_defaults(func=_cmd_schema)

    e = sub.add_parser("evaluate", help="utility and disclosure-risk report (HTML + JSON)")
    e.add_argument("real", help="real data CSV")
    e.add_argument("synthetic", nargs="+", help="one or more synthetic CSV files")
    e.add_argument("-o", "--output", default="report.html", help="HTML report path")
    e.add_argument("--known", help="comma-separated unsynthesised variables an intruder knows")
    e.add_argument("--synthesised", "--synthesized", dest="synthesised",
                   help="comma-separated synthesised variables (identification risk)")
    e.add_argument("--sensitive", help="sensitive variable (attribute disclosure)")
    e.add_argument("--public", help="public variable whose outliers are examined")
    e.add_argument("--radius", type=float, default=0.05,
                   help="matching radius as a share of the value (default 0.05)")
    e.add_argument("--regression", help='formula, e.g. "y ~ x1 + x2 + x1:x2"')
    e.add_argument("--regression-method", choices=("ols", "bayes"), default="ols")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--ledger", help="privacy ledger JSON of the release (shown in the report)")
    e.set_defaults(func=_cmd_evaluate)

    t = sub.add_parser("saturate", help="saturated count synthesis of a categorical table "
                       "(Jackson et al.)")
    t.add_argument("input", help="input CSV: records, or one row per cell with --count")
    t.add_argument("-o", "--output", required=True, help="output CSV (OUT_1.csv ... for --m > 1)")
    t.add_argument("--variables", help="comma-separated variables (default: all but --count)")
    t.add_argument("--count", help="column of cell counts (input and output)")
    t.add_argument("--family", choices=("poisson", "nbi", "pig", "dpo"), default="nbi")
    t.add_argument("--sigma", type=float, default=0.1,
                   help="dispersion (nbi, pig) or precision theta (dpo); default 0.1")
    t.add_argument("--alpha", type=float, default=0.0, help="pseudocount of random zeros")
    t.add_argument("--max-risk", type=float, default=None,
                   help="choose family, sigma and alpha so that E tau_4(1) <= this")
    t.add_argument("--m", type=int, default=1, help="number of synthetic tables (default 1)")
    t.add_argument("--microdata", action="store_true",
                   help="write one row per synthetic record instead of cells and counts")
    t.add_argument("--seed", type=int, default=None, help="random seed (reproducible output)")
    t.add_argument("--overwrite", action="store_true", help="replace existing output files")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=_cmd_saturate)

    d = sub.add_parser("demo", help="run the whole job on the embedded child-health data")
    d.add_argument("--n", type=int, default=2000, help="records to simulate (default 2000)")
    d.add_argument("--draws", type=int, default=2500)
    d.add_argument("--tune", type=int, default=2500)
    d.add_argument("--chains", type=int, default=2)
    d.add_argument("--m", type=int, default=5, help="synthetic datasets (default 5)")
    d.add_argument("--seed", type=int, default=2026)
    d.add_argument("--output", default="demo_output",
                   help="folder for real.csv, synthetic_*.csv and the model ('' for none)")
    d.add_argument("--quiet", action="store_true")
    d.set_defaults(func=_cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayesynth`` console script."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BayesynthError as err:
        print(f"bayesynth: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
