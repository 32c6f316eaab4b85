"""Categorical synthesis modes side by side: fidelity against disclosure (issue 12, item 5).

Fits one CopulaSynthesizer (multinomial probit, default settings, ``categorical="empirical"`` so
that the real combinations are kept for that mode) and draws m synthetic datasets per mode from
the same posterior:

* ``empirical``: each record's combination of categorical levels is drawn from the joint
  frequencies of the real data (the paper's choice);
* ``model`` (the default): drawn from the fitted copula, with each variable's one-way
  frequencies either the model's own (``categorical_margins="model"``) or the data's
  (``"data"``, the default).

Per mode it prints, averaged over the m datasets:

* TV joint: total variation between the real and synthetic joint distributions of all the
  categorical columns;
* TV race x educ: the same for the two-way table of mother's race by education;
* unique share: the share of synthetic records whose combination is unique (count 1) in the
  real data;
* uniques reproduced: the share of the real data's unique combinations that appear in the
  synthetic data;
* stores counts: whether ``save()`` writes the real joint table.

Two tables: the child-health demo (n = 2000; race, education and six binary variables), and a
small one (n = 300) with three extra categorical columns, where many combinations are unique.

Usage::

    python benchmarks/categorical_modes.py [--m 5] [--draws 1000]
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import warnings

import numpy as np
import pandas as pd

import bayesynth as bs


def with_extra_columns(n: int, seed: int) -> pd.DataFrame:
    """The demo table plus three categorical columns tied to race, education and nothing."""
    df = bs.datasets.simulate_child_health(n=n, random_seed=seed)
    rng = np.random.default_rng(seed + 1)
    race = df["m_race"].cat.codes.to_numpy()
    educ = df["m_educ"].cat.codes.to_numpy()
    df["region"] = np.array(["north", "south", "east"])[(race + rng.integers(0, 2, n)) % 3]
    df["job"] = np.array(["a", "b", "c", "d"])[np.clip(educ + rng.integers(-1, 2, n), 0, 3)]
    df["pet"] = rng.choice(["cat", "dog", "none"], n, p=[0.3, 0.3, 0.4])
    return df


def joint_keys(df: pd.DataFrame, cols: list[str]) -> pd.Series:
    return df[cols].astype(str).agg("|".join, axis=1)


def tv(a: pd.Series, b: pd.Series) -> float:
    pa, pb = a.value_counts(normalize=True), b.value_counts(normalize=True)
    keys = pa.index.union(pb.index)
    return 0.5 * float(np.abs(pa.reindex(keys, fill_value=0) - pb.reindex(keys, fill_value=0))
                       .sum())


def evaluate(real: pd.DataFrame, syn_frames: list[pd.DataFrame], cols: list[str]) -> dict:
    rk = joint_keys(real, cols)
    counts = rk.value_counts()
    uniques = set(counts.index[counts == 1])
    rows = []
    for s in syn_frames:
        sk = joint_keys(s, cols)
        rows.append({
            "TV joint": tv(rk, sk),
            "TV race x educ": tv(joint_keys(real, ["m_race", "m_educ"]),
                                 joint_keys(s, ["m_race", "m_educ"])),
            "unique share": float(sk.isin(uniques).mean()),
            "uniques reproduced": len(uniques & set(sk)) / max(len(uniques), 1),
        })
    return pd.DataFrame(rows).mean().to_dict()


def run(name: str, real: pd.DataFrame, args) -> None:
    schema = bs.infer_schema(real)
    cols = [c for c in real.columns if schema[c].type in ("categorical", "binary")
            or (schema[c].type == "ordinal" and real[c].nunique() < 10)]
    syn = bs.CopulaSynthesizer(categorical="empirical", draws=args.draws, tune=args.draws,
                               chains=2, random_seed=args.seed, progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        syn.fit(real)
    rk = joint_keys(real, cols).value_counts()
    print(f"\n{name}: n = {len(real)}, categorical columns {cols}; "
          f"{(rk == 1).sum()} of {len(rk)} real combinations are unique "
          f"({(rk == 1).sum() / len(real):.1%} of the records)")
    print(f"{'mode':>26} {'TV joint':>9} {'TV race x educ':>15} {'unique share':>13} "
          f"{'uniques reproduced':>19} {'stores counts':>14}")
    for mode, margins in (("empirical", "data"), ("model", "model"), ("model", "data")):
        syn.categorical, syn.categorical_margins = mode, margins
        r = evaluate(real, syn.sample(m=args.m, random_seed=args.seed + 1), cols)
        label = mode if mode == "empirical" else f"model, {margins} margins"
        stores = "joint" if mode == "empirical" else ("one-way" if margins == "data" else "no")
        print(f"{label:>26} {r['TV joint']:>9.4f} {r['TV race x educ']:>15.4f} "
              f"{r['unique share']:>13.4f} {r['uniques reproduced']:>19.4f} {stores:>14}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    run("child-health demo", bs.datasets.simulate_child_health(n=2000, random_seed=args.seed),
        args)
    run("small table with three extra categorical columns", with_extra_columns(300, args.seed),
        args)


if __name__ == "__main__":
    main()
