"""Two normalised categorical likelihoods side by side: multinomial and stick-breaking probit.

Issue 12 asks whether another normalised construction mixes better than the multinomial
probit (MNP, the default). The stick-breaking (continuation-ratio) probit is the natural
candidate: a K-level variable gets K - 1 binary columns in a fixed order of its levels (here
by decreasing frequency); a record at level l has column m < l negative, column l positive and
the later columns unconstrained, so the events partition the latent space and the level
probabilities sum to one, while each record's constraint on a column is a fixed sign, not a
bound set by the other utilities (the coupling that slows the MNP Gibbs sweep). It needs no new
code to try: cumulative indicators d_j = 1{level among the first j} with the rules
"d_j = 1 if d_(j-1) = 1" are exactly that model in bayesynth's copula (a rule's records carry
no information about its column).

For a pair of categorical columns of SD2011 (default: placesize, 6 levels, and region, 16),
both models are fitted with default settings (2 chains x (draws + tune)), and the mutual
information of the pair's implied two-way table, which cross-tabs of synthetic data follow, is
computed per kept draw (every fourth) from 40,000 common Monte Carlo points decoded by each
model's own rule; its R-hat, bulk ESS and posterior mean are printed beside the data's.

Usage::

    python benchmarks/stick_breaking.py
    python benchmarks/stick_breaking.py --cols edu,eduspec
    python benchmarks/stick_breaking.py --n-factors 7       # the same k for both
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.rules import Rule

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def mutual_information(x: np.ndarray, y: np.ndarray) -> float:
    t = pd.crosstab(x, y).to_numpy() / len(x)
    outer = t.sum(1, keepdims=True) @ t.sum(0, keepdims=True)
    m = t > 0
    return float((t[m] * np.log(t[m] / outer[m])).sum())


def stick_breaking_table(raw: pd.DataFrame) -> tuple[pd.DataFrame, bs.Schema]:
    parts, rules = {}, []
    for c in raw.columns:
        levels = raw[c].value_counts().index.tolist()  # by decreasing frequency
        for j in range(len(levels) - 1):
            parts[f"{c}__{j}"] = raw[c].isin(levels[: j + 1]).astype(int)
            if j:
                rules.append(Rule(f"{c}__{j}", 1, ((f"{c}__{j - 1}", (1,)),)))
    df = pd.DataFrame(parts)
    schema = bs.infer_schema(df, suggest=False, categorical=list(df.columns)).with_rules(rules)
    return df, schema


def decode(z: np.ndarray, names: list[str], var: str, construction: str) -> np.ndarray:
    if construction == "stick-breaking":  # the first positive column; none: the last level
        pos = z[:, [i for i, n in enumerate(names) if n.startswith(f"{var}__")]] > 0
        return np.where(pos.any(1), pos.argmax(1), pos.shape[1])
    u = z[:, [i for i, n in enumerate(names) if n.startswith(f"{var}[")]]
    arg = u.argmax(1)  # the largest positive utility; none: the reference level
    return np.where(u[np.arange(len(u)), arg] > 0, arg + 1, 0)


def fit(raw: pd.DataFrame, construction: str, draws: int, seed: int, n_mc: int,
        n_factors: int | None) -> dict:
    if construction == "stick-breaking":
        df, schema = stick_breaking_table(raw)
    else:
        df, schema = raw, bs.infer_schema(raw, suggest=False)
    model = bs.models.rank_probit_copula(df, schema, n_factors=n_factors)
    names = [str(v) for v in model.coords["latent"]]
    k = len(model.coords["factor"])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=draws, tune=draws, chains=2, cores=2, random_seed=seed,
                          progressbar=False, check_convergence=False)
    wall = time.perf_counter() - t0
    post = idata.posterior
    rng = np.random.default_rng(0)
    eta, eps = rng.standard_normal((n_mc, k)), rng.standard_normal((n_mc, len(names)))
    levels = [str(v) for v in model.coords["level"]]
    thinned = range(0, post.sizes["draw"], 4)
    mi = np.empty((post.sizes["chain"], len(thinned)))
    for ch in range(post.sizes["chain"]):
        for t, d in enumerate(thinned):
            alpha = np.zeros(len(names))
            alpha[[names.index(v) for v in levels]] = post["alpha"].values[ch, d]
            z = (alpha + eta @ post["Lambda"].values[ch, d].T
                 + eps * post["sigma"].values[ch, d])
            a, b = (decode(z, names, v, construction) for v in raw.columns)
            mi[ch, t] = mutual_information(a, b)
    return {"construction": construction, "p*": len(names), "k": k, "sampling s": wall,
            "MI mean": mi.mean(), "MI sd": mi.std(), "R-hat": float(az.rhat(mi)),
            "bulk ESS": float(az.ess(mi)), "kept draws judged": mi.size}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cols", default="placesize,region")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n-mc", type=int, default=40_000)
    ap.add_argument("--n-factors", type=int, default=None,
                    help="k for both models (default: each its own parallel-analysis choice)")
    args = ap.parse_args(argv)
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark needs the shared real data.")
    cols = args.cols.split(",")
    raw = pd.read_csv(DATA / "sd2011.csv", keep_default_na=False, na_values=[""])[cols].dropna()
    data_mi = mutual_information(raw[cols[0]], raw[cols[1]])
    print(f"SD2011 {cols}: n = {len(raw)}, data MI {data_mi:.4f}")
    rows = [fit(raw, c, args.draws, args.seed, args.n_mc, args.n_factors)
            for c in ("multinomial probit", "stick-breaking")]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
