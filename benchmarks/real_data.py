"""Fidelity and risk on the shared real tables: the copula (default settings) against its peers.

For each dataset (adult, SD2011 with all 35 columns, CE, NLTCS) the real records are split at
random into a training part (80%) and a hold-out part (20%) that no synthesizer sees. Each
synthesizer is fitted to the training part and draws ``--m`` synthetic tables of the same size.
Printed per dataset and synthesizer:

* worst KS: the largest Kolmogorov-Smirnov distance over count and continuous columns, each
  column's distance averaged over ``--m`` synthetic tables (default 5);
* worst TV: the largest total-variation distance over level columns, averaged likewise;
* KS / TV column (floor): the column with the worst distance and, in brackets, its noise floor:
  the mean distance between the training column and a bootstrap sample of it of the same size
  (what a generator of exactly the training distribution scores on one synthetic table, on
  average: the quantity the averaged distances estimate); ``worst KS/TV (one table)`` is the
  same on the first table alone, which a perfect generator also exceeds its floor on by
  sampling noise (for SD2011's 28-level ``eduspec`` the bootstrap distance at n = 5,000 has sd
  0.004 around 0.020);
* new values: discrete columns (at most 50 distinct values) whose synthetic values include
  one the real column does not have; integer: whether every integer column came back integer;
* rules broken: synthetic records breaking a rule stated in the schema (SD2011: the
  "not applicable" codes of ``nociga`` and ``wkabdur``, and the age groups; its ``bmi`` is
  derived from height and weight by a formula);
* S_pMSE: logistic propensity score (main effects), about 1 when indistinguishable, averaged
  over the ``--m`` tables;
* AUC: out-of-fold AUC of a gradient-boosting classifier telling synthetic from real records,
  averaged over the ``--m`` tables (``AUC max``: the largest of them);
* the remaining measures use the first synthetic table;
* CIO: mean confidence-interval overlap of one substantive regression;
* DCR ratio: median distance of a synthetic record to its closest training record over the
  same for hold-out records (at least 1: no closer than new real records);
* copies: share of synthetic records equal to a training record on every column;
* singling out (95% null, p): ``singling_out_risk``'s excess (up to 1,000 predicates of 3
  columns read off the synthetic records; how much more often they isolate a training record
  than a hold-out record) and, in brackets, the 95% quantile of the excess when training and
  hold-out people are exchangeable and the one-sided permutation p-value
  (``SinglingOut.null_test``; "at the edge" where 25,600 splits leave its 99.9% Monte Carlo
  interval holding 0.05): an excess below that quantile is what chance gives;
* wall: fit and synthesis time in seconds;
* copula + BART (with ``--targets``): the copula with BART rank-likelihood regressions for the
  named columns (``CopulaSynthesizer(targets=...)``, 200 trees), so that their nonlinear
  relations to the other columns survive;
* converged, max R-hat: the copula fit's own judgement (``CopulaSynthesizer.convergence_table_``,
  the quantities synthesis uses, margins calibrated as synthesis does);
* extensions: times the copula's chains were continued after failing that check's R-hat (at most 2
  by default; see ``max_extensions`` of ``bayesynth.sample``).

The copula runs at its default settings (two chains of 1000 + 1000 iterations, continued for
1000 more kept draws at most twice while R-hat is above 1.01 and at most 1.1) on up to two
cores; CART is bayesynth's baseline with synthpop's defaults (density smoothing of numeric
donors, leaves of at least 5 records). The peers a Python user would pick, SDV's Gaussian
copula (``"SDV copula"``) and CTGAN (``"CTGAN"``), run at SDV's defaults in their own
environment (``make peers`` installs SDV 2.0.0 with PyTorch's CPU build into ``.venv-peers``;
``_sdv_peer.py``), on the same splits, measured alike.

Usage::

    python benchmarks/real_data.py [--datasets sd2011,ce] [--draws 1000] [--seed 1] [--m 5]
                                   [--node-group 10]
    make peers && python benchmarks/real_data.py --synthesizers "copula,CART,SDV copula,CTGAN"
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import json
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.evaluation import (
    distance_to_closest_record,
    ks_distance,
    propensity_auc,
    propensity_score_utility,
    regression_inference,
    singling_out_risk,
    tv_distance,
)
from bayesynth.rules import Rule
from bayesynth.synthesis import CartSynthesizer, CopulaSynthesizer

logging.getLogger("pymc").setLevel(logging.WARNING)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PEERS = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"


def split(df: pd.DataFrame, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The benchmarks' 80/20 split of a table into training and hold-out records.

    A permutation from ``numpy.random.default_rng(seed)``: the first 80% of it (rounded down)
    is the training table, the rest the hold-out; both with a fresh index. Every SD2011, CE,
    NLTCS and adult figure in benchmarks/README.md was measured on the training table of
    seed 1.
    """
    idx = np.random.default_rng(seed).permutation(len(df))
    cut = int(0.8 * len(df))
    return (df.iloc[idx[:cut]].reset_index(drop=True),
            df.iloc[idx[cut:]].reset_index(drop=True))


def load(name: str) -> tuple[pd.DataFrame, bs.Schema, str]:
    """The table, the schema a user would write, and a regression of substantive interest."""
    if name == "adult":
        df = pd.read_csv(DATA / "adult.csv")
        df.columns = [c.replace("-", "_").replace(">", "gt") for c in df.columns]
        nominal = ["workclass", "marital_status", "occupation", "relationship", "race",
                   "native_country"]
        schema = bs.infer_schema(df, categorical=nominal, suggest=False)
        return df, schema, "incomegt50K ~ age + education_num + hours_per_week + sex"
    if name == "sd2011":
        df = pd.read_csv(DATA / "sd2011.csv", keep_default_na=False, na_values=[""])
        # What a survey statistician states: the "not applicable" rules (cigarettes for
        # non-smokers, unemployment duration for those not out of work, the dates of a
        # marriage for the never married and of a separation for the married and the never
        # married, the emigration plans of those with none; the real data break each for at
        # most 4 records, and infer_schema suggests each), the age groups as a function of
        # age, and the body-mass index as a function of height and weight (synthpop's rules
        # and passive synthesis).
        groups = {"16-24": (16, 24), "25-34": (25, 34), "35-44": (35, 44),
                  "45-59": (45, 59), "60-64": (60, 64), "65+": (65, 120)}
        schema = bs.infer_schema(df, suggest=False).with_rules([
            Rule("nociga", -8, (("smoke", ("NO",)),)),
            Rule("wkabdur", -8, (("workab", ("NO",)),)),
            *(Rule(c, None, (("marital", ("SINGLE",)),)) for c in ("ymarr", "mmarr")),
            *(Rule(c, None, (("marital", ("MARRIED", "SINGLE")),))
              for c in ("msepdiv", "ysepdiv")),
            *(Rule(c, None, (("wkabint", ("NO",)),)) for c in ("wkabintdur", "emcc")),
            # missing together: the weight of those whose height is missing, the month of a
            # marriage or a separation whose year is missing
            Rule("weight", None, (("height", (None,)),)),
            Rule("mmarr", None, (("ymarr", (None,)),)),
            Rule("msepdiv", None, (("ysepdiv", (None,)),)),
            *(Rule("agegr", g, (("age", tuple(range(lo, hi + 1))),))
              for g, (lo, hi) in groups.items()),
        ]).with_formulas({"bmi": "weight / (height / 100) ** 2"})
        return df, schema, "bmi ~ age + sex + edu + smoke"
    if name == "ce":
        df = pd.read_csv(DATA / "ce.csv")
        schema = bs.infer_schema(df, categorical=["Tenure", "Marital"], suggest=False)
        return df, schema, "Expenditure ~ Income + Age + Urban + Educ"
    if name == "nltcs":
        df = pd.read_csv(DATA / "nltcs.csv")
        df.columns = [f"d{c}" for c in df.columns]
        schema = bs.infer_schema(df, suggest=False)
        return df, schema, "d0 ~ d1 + d2 + d3 + d4"
    raise ValueError(name)


def _noise_floor(train, c, distance, rng, reps=20) -> float:
    """Mean distance between the training column and a bootstrap sample of it: what a perfect
    generator of the training distribution scores on one synthetic table of the same size."""
    x = train[c].dropna().to_numpy()
    return float(np.mean([distance(pd.Series(x), pd.Series(rng.choice(x, len(train[c]))))
                          for _ in range(reps)]))


def measure(train, hold, tables, schema, formula, seed) -> dict:
    syn = tables[0]
    ks, tv, ks1, tv1, new_values, integer = {}, {}, {}, {}, [], True
    for c in schema.names:
        col = schema[c]
        if col.type in ("count", "continuous"):
            d = [ks_distance(train[c], t[c]) for t in tables]
            ks[c], ks1[c] = float(np.mean(d)), d[0]
            real_vals = set(train[c].dropna().unique())
            for t in tables:
                if len(real_vals) <= 50 and not set(t[c].dropna().unique()) <= real_vals:
                    new_values.append(c)
                    break
            if col.integer:
                for t in tables:
                    x = pd.to_numeric(t[c], errors="coerce").dropna().to_numpy(float)
                    integer &= bool(np.all(x == np.round(x)))
        else:
            d = [tv_distance(train[c], t[c]) for t in tables]
            tv[c], tv1[c] = float(np.mean(d)), d[0]
            if any(not set(t[c].dropna().unique()) <= set(train[c].dropna().unique())
                   for t in tables):
                new_values.append(c)
    broken = sum(r.broken(t)[1] for t in tables for r in schema.rules)
    # distinguishability of every table, not of one (a table's AUC is itself noisy)
    pmse = [propensity_score_utility(train, t, schema=schema, random_seed=seed).s_pmse
            for t in tables]
    aucs = [propensity_auc(train, t, schema=schema, random_seed=seed) for t in tables]
    comp = regression_inference(train, [syn], formula)
    dcr = distance_to_closest_record(train, syn, hold, schema=schema)
    so = singling_out_risk(train, syn, hold, schema=schema, random_seed=seed)
    rng = np.random.default_rng(seed)
    worst_ks = max(ks, key=ks.get) if ks else None
    worst_tv = max(tv, key=tv.get) if tv else None
    return {"worst KS": ks[worst_ks] if ks else np.nan,
            "KS column (floor)": "-" if worst_ks is None else
            f"{worst_ks} ({_noise_floor(train, worst_ks, ks_distance, rng):.3f})",
            "worst KS (one table)": max(ks1.values()) if ks1 else np.nan,
            "worst TV": tv[worst_tv] if tv else np.nan,
            "TV column (floor)": "-" if worst_tv is None else
            f"{worst_tv} ({_noise_floor(train, worst_tv, tv_distance, rng):.3f})",
            "worst TV (one table)": max(tv1.values()) if tv1 else np.nan,
            "new values": ",".join(new_values) or "-", "integer": integer,
            "rules broken": broken, "S_pMSE": float(np.mean(pmse)),
            "AUC": float(np.mean(aucs)), "AUC max": float(np.max(aucs)), "CIO": comp.mean_cio,
            "DCR ratio": dcr.ratio, "copies": dcr.exact_copy_share,
            "singling out (95% null, p)": _singling(so)}


class SdvPeer:
    """SDV's Gaussian copula or CTGAN through ``_sdv_peer.py`` (SDV lives in its own
    environment, ``make peers``), with the fit/sample interface of bayesynth's synthesizers.

    Columns are categorical or numerical as bayesynth's schema reads them (a categorical column
    written as numbers, such as CE's ``Tenure``, is categorical for SDV too); synthetic tables
    come back with the training table's dtypes (whole-number columns with missing values as
    floats, as the training table holds them)."""

    def __init__(self, schema, python: str, model: str):
        self.schema, self.python, self.model = schema, python, model

    def fit(self, train: pd.DataFrame) -> SdvPeer:
        self.train_ = train
        return self

    def sample(self, m: int, random_seed: int) -> list[pd.DataFrame]:
        import subprocess
        import tempfile

        train = self.train_
        kinds = {c: "numerical" if self.schema[c].type in ("count", "continuous")
                 else "categorical" for c in train.columns}
        with tempfile.TemporaryDirectory() as tmp:
            src, spec = Path(tmp) / "train.csv", Path(tmp) / "spec.json"
            train.to_csv(src, index=False)
            spec.write_text(json.dumps({"columns": kinds, "model": self.model, "m": m,
                                        "n": len(train), "seed": random_seed}))
            subprocess.run([self.python, str(Path(__file__).with_name("_sdv_peer.py")),
                            str(src), str(spec), tmp], check=True)
            text = {c: str for c, kind in kinds.items() if kind == "categorical"}
            tables = [pd.read_csv(Path(tmp) / f"syn_{i}.csv", keep_default_na=False,
                                  na_values=[""], dtype=text) for i in range(m)]
        return [self._dtypes(t) for t in tables]

    def _dtypes(self, table: pd.DataFrame) -> pd.DataFrame:
        out = table.copy()
        for c in self.train_.columns:
            real = self.train_[c]
            if pd.api.types.is_numeric_dtype(real.dtype):
                x = pd.to_numeric(out[c], errors="coerce")
                out[c] = x.astype(real.dtype) if x.notna().all() else x
        return out[list(self.train_.columns)]


def _singling(so) -> str:
    """The excess, the 95% quantile of its permutation null and the p-value, as text."""
    if not so.n_attacks:
        return "not measured"
    test = so.null_test()  # splits added until p is clearly on one side of 0.05
    edge = "" if test.decided else " at the edge"
    return f"{so.excess:.3f} ({test.band:.3f}, p {test.p:.3f}{edge})"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="adult,sd2011,ce,nltcs")
    ap.add_argument("--synthesizers", default="copula,CART")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--m", type=int, default=5,
                    help="synthetic tables whose per-column distances are averaged")
    ap.add_argument("--n-factors", type=int, default=None,
                    help="the copula's number of factors (default: its own rule)")
    ap.add_argument("--out", default=None, help="also write the table as JSON here")
    ap.add_argument("--targets", default="",
                    help="BART targets of the copula per dataset, e.g. 'ce:Expenditure+Income' "
                         "(a second row, 'copula + BART', beside the plain copula's)")
    ap.add_argument("--node-group", type=int, default=None,
                    help="values averaged into each node of the copula's smooth marginals "
                         "(CopulaSynthesizer's marginal_group; default node_group_size, 10 "
                         "from 300 values up; 1: nodes at the values, the marginal before "
                         "2026-12-06)")
    ap.add_argument("--sdv-python", default=str(PEERS),
                    help="an interpreter with SDV (default: .venv-peers from 'make peers'), "
                         "for the synthesizers 'SDV copula' and 'CTGAN'")
    args = ap.parse_args(argv)
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark needs the shared real data.")
    rows = []
    targets = {d: t.split("+") for d, t in (x.split(":") for x in args.targets.split(",") if x)}
    for name in args.datasets.split(","):
        df, schema, formula = load(name)
        train, hold = split(df, args.seed)
        makers = {
            "copula": lambda: CopulaSynthesizer(schema, draws=args.draws, tune=args.draws,
                                                n_factors=args.n_factors,
                                                marginal_group=args.node_group,
                                                random_seed=args.seed, progressbar=False),
            "copula + BART": lambda: CopulaSynthesizer(
                schema, draws=args.draws, tune=args.draws, n_factors=args.n_factors,
                random_seed=args.seed, progressbar=False, targets=targets.get(name, []),
                marginal_group=args.node_group),
            "CART": lambda: CartSynthesizer(schema, random_seed=args.seed),
            "SDV copula": lambda: SdvPeer(schema, args.sdv_python, "gaussian_copula"),
            "CTGAN": lambda: SdvPeer(schema, args.sdv_python, "ctgan"),
        }
        wanted = args.synthesizers.split(",")
        if name in targets and "copula" in wanted:
            wanted.append("copula + BART")
        for label, make in makers.items():
            if label not in wanted:
                continue
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                syn = make().fit(train)
                tables = syn.sample(m=args.m, random_seed=args.seed + 1)
            wall = time.perf_counter() - t0
            judged = getattr(syn, "convergence_table_", None)  # the fit's own judgement
            row = {"dataset": f"{name} (n = {len(train)}, {df.shape[1]} cols)",
                   "synthesizer": label,
                   **measure(train, hold, tables, schema, formula, args.seed),
                   "wall s": wall,
                   "converged": not any("not converged" in str(w.message) for w in caught),
                   "max R-hat": float(judged["r_hat"].max()) if judged is not None else np.nan,
                   # times the copula's chains were continued after failing the check
                   "extensions": (int(syn.idata_.posterior.attrs.get("extensions", 0))
                                  if hasattr(syn, "idata_") else np.nan)}
            rows.append(row)
            print(pd.DataFrame([row]).to_string(index=False, float_format=lambda v: f"{v:.3f}"),
                  flush=True)
    table = pd.DataFrame(rows)
    print()
    print(table.to_markdown(index=False, floatfmt=".3f") if _has_tabulate()
          else table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
