"""How often a synthetic value equals a real one, against what chance gives (the marginals alone).

``make demo`` prints the share of continuous synthetic values equal to a real value. At the
data's precision values repeat by chance, so the share means something only beside what a
second sample of the same population gives. This script measures both, per numeric column, on
the demo's simulated table and on the real tables in ``../shared/data``:

* the column's non-missing values (special codes and values fixed by a rule left out, as the
  copula does) are split at random into two halves, *train* and *holdout*;
* the copula's marginal (:func:`bayesynth.synthesis.marginals.fit_marginal`, with the column's
  schema: atoms, integers, decimals, significant digits) is fitted to *train*, and as many
  values as *train* has are drawn from it (uniform probabilities, as synthesis feeds it) and
  rounded as synthesis rounds them;
* ``synthetic``: the share of the drawn values equal to a *train* value; ``holdout``: the share
  of the *holdout* values equal to a *train* value; both averaged over ``--reps`` splits (20),
  ``distinct`` the training halves' mean number of distinct values; ``ratio``: synthetic /
  holdout;
* fidelity beside it: ``KS syn``, the Kolmogorov-Smirnov distance between the drawn values and
  the *holdout* half, and ``KS train``, the same for the *train* half itself (what sampling
  alone gives), and ``sd ratio``, the drawn values' standard deviation over the *train*
  half's (a marginal that cut the tails would show it), all averaged over the splits.

Each is measured twice from the same uniform draws: with the marginal as fitted (``groups``)
and with nodes at the values themselves (``values``, ``group=1``), the marginal until
2026-12-06. Only the marginal decides these shares: the copula changes which records the
values go to, not their distribution. A ratio above 1 means synthetic values sit on real
values more often than the population's would (they follow the training sample's own
spacing, see the module docstring of :mod:`bayesynth.synthesis.marginals`); a ratio below 1
means the marginal smooths heaping the real values have. Columns with at most 50 distinct
values are left out: their synthetic values are real values by design (empirical
distribution).

``--prototype`` prints instead a comparison on simulated columns (normal and lognormal, two
decimals, n = 300 and 2,000, ``--reps`` replicates): for the marginal as fitted (``groups``:
nodes at means of ten values), with nodes at the values (``values``, ``group=1``, the marginal
before 2026-12-06) and for an alternative that is not in the library (quantile nodes at the
order statistics smoothed by a Gaussian window of ``k`` ranks, ``k`` = 0, 2, 5, 10), the
Kolmogorov-Smirnov distance of 20,000 draws
from the true distribution and the share of n rounded draws equal to a training value, beside
a second sample's (whose KS distance is that of its n values); and the share of draws each
puts in the gap between two clusters of values (uniform on [0, 10] and [100, 110], 2,000
each). k = 0 interpolates the sorted values, ties included: a tie is a cell of width 0, so it
copies real values exactly.

Usage::

    python benchmarks/marginal_copies.py [--seed 1] [--demo-n 4000] [--reps 20] [--prototype]
"""

from __future__ import annotations

import _setup  # noqa: F401  (one BLAS thread, the checkout on the path)

# isort: split
import argparse
from collections.abc import Iterator

import numpy as np
import pandas as pd
from real_data import DATA, load
from scipy.stats import ks_2samp

from bayesynth.datasets import simulate_child_health
from bayesynth.rules import rule_mask
from bayesynth.schema import Schema, infer_schema, round_values
from bayesynth.synthesis.marginals import DiscreteMarginal, SmoothMarginal, fit_marginal


def fitted_values(df: pd.DataFrame, schema: Schema, c: str) -> np.ndarray:
    """The values of numeric column ``c`` the copula fits its marginal to: no missing values,
    no special codes, no value fixed by a rule."""
    raw = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
    free = ~np.isnan(raw)
    if schema.rules:
        free &= ~rule_mask(df, schema.rules, c)
    x = raw[free]
    return x[~np.isin(x, list(schema[c].special_codes or []))]


def _tables(demo_n: int) -> Iterator[tuple[str, pd.DataFrame, Schema]]:
    """The demo table (``demo_n`` records, twice the demo's default n, so that each half is
    the demo's size) and the real tables with the schema a user would write
    (``real_data.load``)."""
    demo = simulate_child_health(n=demo_n, random_seed=2026)
    yield "demo", demo, infer_schema(demo)
    for name in ("sd2011", "ce"):
        if (DATA / f"{name}.csv").exists():
            df, schema, _ = load(name)
            yield name, df, schema
        else:
            print(f"{name}: skipped ({DATA / name}.csv not found)")


def _rank_window_draws(x: np.ndarray, u: np.ndarray, k: float) -> np.ndarray:
    """Prototype (not in the library): invert the order statistics smoothed over ``k`` ranks."""
    from scipy.ndimage import gaussian_filter1d

    xs = np.sort(x)
    nodes = gaussian_filter1d(xs, k, mode="nearest") if k > 0 else xs
    return np.interp(u, (np.arange(len(xs)) + 0.5) / len(xs), nodes)


def _prototype(rng: np.random.Generator, reps: int = 20) -> None:
    from scipy import stats

    ks_values = (0, 2, 5, 10)
    laws = {"normal": stats.norm(50, 10), "lognormal": stats.lognorm(1.0, scale=np.exp(3.0))}
    print("KS distance from the true law (of 20,000 draws; the second sample's of its n values) "
          f"/ share of n draws equal to a training value; mean of {reps} replicates")
    for name, law in laws.items():
        for n in (300, 2000):
            rows: dict[str, list[tuple[float, float]]] = {}
            for _ in range(reps):
                train = np.round(law.rvs(n, random_state=rng), 2)
                second = np.round(law.rvs(n, random_state=rng), 2)
                u = rng.random(20_000)
                draws = {"groups": SmoothMarginal.fit(train).ppf(u),
                         "values": SmoothMarginal.fit(train, group=1).ppf(u)}
                draws.update({f"k={k}": _rank_window_draws(train, u, k) for k in ks_values})
                for key, y in draws.items():
                    rows.setdefault(key, []).append(
                        (stats.kstest(y, law.cdf).statistic,
                         np.isin(np.round(y[:n], 2), train).mean()))
                rows.setdefault("second sample", []).append(
                    (stats.kstest(second, law.cdf).statistic, np.isin(second, train).mean()))
            cells = [f"{key} {np.mean([r[0] for r in v]):.4f}/{np.mean([r[1] for r in v]):.3f}"
                     for key, v in rows.items()]
            print(f"{name:9s} n={n:4d}  " + "  ".join(cells))
    x = np.r_[rng.uniform(0, 10, 2000), rng.uniform(100, 110, 2000)]
    u = rng.random(400_000)
    shares = {"groups": SmoothMarginal.fit(x).ppf(u),
              "values": SmoothMarginal.fit(x, group=1).ppf(u)}
    shares.update({f"k={k}": _rank_window_draws(x, u, k) for k in ks_values[1:]})
    print("share of draws in the gap (10, 100): " + ", ".join(
        f"{key} {np.mean((y > 10) & (y < 100)):.4f}" for key, y in shares.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--demo-n", type=int, default=4000,
                    help="records of the simulated demo table, split in two (default 4000)")
    ap.add_argument("--reps", type=int, default=20,
                    help="random splits of each column, averaged (default 20)")
    ap.add_argument("--prototype", action="store_true",
                    help="compare the current marginal with a rank-window prototype instead")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.prototype:
        _prototype(rng, args.reps)
        return
    print(f"mean over {args.reps} random splits of each column into halves; 'groups': the "
          "marginal as fitted (nodes at means of ten values), 'values': nodes at the values "
          "(group=1, before 2026-12-06)")
    print(f"{'table':7s} {'column':12s} {'type':10s} {'train':>6s} {'distinct':>8s} "
          f"{'holdout':>8s} {'synthetic':>17s} {'ratio':>13s} {'KS syn':>15s} {'KS train':>8s} "
          f"{'sd ratio':>13s}")
    print(f"{'':54s} {'groups':>8s} {'values':>8s} {'groups':>6s} {'values':>6s} "
          f"{'groups':>7s} {'values':>7s} {'':8s} {'groups':>6s} {'values':>6s}")
    for name, df, schema in _tables(args.demo_n):
        for c in schema.of_type("continuous") + schema.of_type("count"):
            col = schema[c]
            if c in schema.derived:
                continue  # computed from other columns, not drawn
            x = fitted_values(df, schema, c)
            hold: list[float] = []
            distinct: list[int] = []
            ks_train: list[float] = []
            syn: dict[int | None, list[float]] = {None: [], 1: []}
            ks_syn: dict[int | None, list[float]] = {None: [], 1: []}
            sd_syn: dict[int | None, list[float]] = {None: [], 1: []}
            for _ in range(args.reps):
                perm = rng.permutation(len(x))
                train, holdout = x[perm[: len(x) // 2]], x[perm[len(x) // 2:]]
                u = rng.random(len(train))
                marginals = {group: fit_marginal(train, continuous=True,
                                                 integer=bool(col.integer) or col.type == "count",
                                                 decimals=col.decimals, digits=col.digits,
                                                 group=group)
                             for group in syn}
                if any(isinstance(m, DiscreteMarginal) for m in marginals.values()):
                    break  # real values by design
                for group, marginal in marginals.items():
                    drawn = round_values(marginal.ppf(u), col)
                    syn[group].append(np.isin(drawn, train).mean())
                    ks_syn[group].append(ks_2samp(drawn, holdout).statistic)
                    sd_syn[group].append(drawn.std() / train.std())
                hold.append(np.isin(holdout, train).mean())
                distinct.append(len(np.unique(train)))
                ks_train.append(ks_2samp(train, holdout).statistic)
            if not hold:
                continue
            h_mean = float(np.mean(hold))
            s_mean = {g: float(np.mean(v)) for g, v in syn.items()}
            ratio = {g: v / h_mean if h_mean else float("nan") for g, v in s_mean.items()}
            print(f"{name:7s} {c:12s} {col.type:10s} {len(x) // 2:6d} "
                  f"{np.mean(distinct):8.0f} {h_mean:8.3f} {s_mean[None]:8.3f} {s_mean[1]:8.3f} "
                  f"{ratio[None]:6.2f} {ratio[1]:6.2f} {np.mean(ks_syn[None]):7.4f} "
                  f"{np.mean(ks_syn[1]):7.4f} {np.mean(ks_train):8.4f} "
                  f"{np.mean(sd_syn[None]):6.3f} {np.mean(sd_syn[1]):6.3f}")


if __name__ == "__main__":
    main()
