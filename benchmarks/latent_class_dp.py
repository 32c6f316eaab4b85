"""Seconds for the paper's NLTCS latent class run (target: under 5 minutes on one core).

NLTCS (``../shared/data/nltcs.csv``: 16 binary items, n = 21,574 here; the paper's 2004 wave had
15,636): two-way marginals selected privately with a quarter of the budget (PrivBayes' greedy
network of degree 2: 29 tables, 116 counts), the rest split across them; k = 7 classes;
12,000 iterations (2,000 burn-in), one chain, one core. Also reports the paper's accuracy
summary, the average log ratio log(P_est / P_true) over the selected marginal cells, for the
posterior mean and for the noisy counts used directly; and the total-variation error of the full
table and of all 120 two-way marginals, beside DataSynthesizer's PrivBayes (degree 2, same total
epsilon) when it is installed (``pip install DataSynthesizer``; not needed otherwise), and
private-pgm's graphical-model estimate fitted to the very same noisy tables when an interpreter
with ``mbi`` is given (``--mbi-python``; mbi needs jax, so it lives in its own environment).

Usage::

    python benchmarks/latent_class_dp.py [--epsilon 1.0] [--iterations 12000] [--burn 2000]
        [--chains 1] [--centred-only] [--skip-privbayes]
        [--mbi-python /path/to/venv-with-mbi/bin/python]

With ``--chains 2`` (or more; one core each, up to the machine's) it also prints the mixing
figures of ``benchmarks/README.md``: R-hat and bulk effective sample size of the table
probabilities, and the steps' acceptance rates; ``--centred-only`` leaves out the non-centred
joint moves, for the comparison there. The NUTS comparison there was a separate
run that this script does not reproduce (``tests/models/test_latent_class_dp.py`` checks the
sampler against a NUTS reference on a small problem).
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.models import latent_class_dp_model
from bayesynth.privacy import privatize_marginals, true_marginal

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "nltcs.csv"


def full_table(df: pd.DataFrame) -> np.ndarray:
    """Empirical full-table probabilities of binary columns (C order over the columns)."""
    domain = {c: [0, 1] for c in df.columns}
    return true_marginal(df, list(df.columns), domain).reshape(-1) / len(df)


def two_way_errors(p_full: np.ndarray, truth_full: np.ndarray, pairs) -> float:
    """Mean over the given two-way marginals of their total-variation distance."""
    p = p_full.reshape([2] * 16)
    t = truth_full.reshape([2] * 16)
    out = []
    for a, b in pairs:
        axes = tuple(j for j in range(16) if j not in (a, b))
        out.append(0.5 * np.abs(p.sum(axis=axes) - t.sum(axis=axes)).sum())
    return float(np.mean(out))


def privbayes_full_table(df: pd.DataFrame, epsilon: float, seed: int) -> np.ndarray | None:
    """DataSynthesizer's PrivBayes (degree 2, same total epsilon), or None if not installed."""
    try:
        from DataSynthesizer.DataDescriber import DataDescriber
        from DataSynthesizer.DataGenerator import DataGenerator
    except ImportError:
        return None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, desc, out = (f"{tmp}/{x}" for x in ("in.csv", "desc.json", "out.csv"))
        df.astype(str).to_csv(src, index=False)
        d = DataDescriber(category_threshold=3)
        d.describe_dataset_in_correlated_attribute_mode(
            src, k=2, epsilon=epsilon, attribute_to_is_categorical=dict.fromkeys(df.columns,
                                                                                 True),
            seed=seed)
        d.save_dataset_description_to_file(desc)
        g = DataGenerator()
        g.generate_dataset_in_correlated_attribute_mode(len(df), desc, seed=seed)
        g.save_synthetic_data(out)
        syn = pd.read_csv(out)[df.columns].astype(int)
    return full_table(syn)


def mbi_full_table(rel, python: str | None) -> np.ndarray | None:
    """private-pgm's graphical-model estimate from the same noisy tables, run by ``python``
    (an interpreter with ``mbi``) through ``_mbi_peer.py``; None when not given."""
    if not python:
        return None
    import subprocess
    import tempfile

    names = list(rel.domain)
    with tempfile.TemporaryDirectory() as tmp:
        arrays = {"n": np.array(rel.n), "names": np.array(names),
                  "cells": np.array([",".join(str(names.index(v)) for v in t.variables)
                                     for t in rel.tables])}
        for i, t in enumerate(rel.tables):
            arrays[f"noisy_{i}"] = t.counts
            arrays[f"sd_{i}"] = np.array(np.sqrt(2 * t.q) / (1 - t.q))
        np.savez(f"{tmp}/release.npz", **arrays)
        subprocess.run([python, str(Path(__file__).with_name("_mbi_peer.py")),
                        f"{tmp}/release.npz", f"{tmp}/full.npy"], check=True,
                       capture_output=True)
        return np.load(f"{tmp}/full.npy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--iterations", type=int, default=12_000)
    parser.add_argument("--burn", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--mbi-python", default=None,
                        help="an interpreter with private-pgm (mbi) installed, for the peer")
    parser.add_argument("--skip-privbayes", action="store_true")
    parser.add_argument("--centred-only", action="store_true",
                        help="leave out the non-centred joint moves (the sampler before them)")
    args = parser.parse_args()
    if args.centred_only:
        import functools
        import importlib

        sampling = importlib.import_module("bayesynth.samplers.sampling")
        sampling.latent_class_steps = functools.partial(sampling.latent_class_steps,
                                                        non_centred=False)
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: nothing to benchmark.")
    df = pd.read_csv(DATA)
    domain = {c: [0, 1] for c in df.columns}
    t0 = time.perf_counter()
    rel = privatize_marginals(df, "select", args.epsilon, domain=domain, random_seed=1)
    t_select = time.perf_counter() - t0
    model = latent_class_dp_model(rel, k=args.k)
    t0 = time.perf_counter()
    idata = bs.sample(model, draws=args.iterations - args.burn, tune=args.burn,
                      chains=args.chains, cores=min(args.chains, os.cpu_count() or 1),
                      random_seed=2, progressbar=False)
    t_sample = time.perf_counter() - t0
    if args.chains > 1:
        import arviz as az

        names = [f"P_t{i}" for i in range(len(rel.tables))]
        rhat = np.concatenate([az.rhat(idata, var_names=[v])[v].values.ravel() for v in names])
        ess = np.concatenate([az.ess(idata, var_names=[v])[v].values.ravel() for v in names])
        acc = [v for v in idata.sample_stats.data_vars if "accept" in v]
        print(f"mixing, {args.chains} chains: R-hat of the {rhat.size} table probabilities "
              f"median {np.median(rhat):.2f}, max {rhat.max():.2f}; bulk ESS median "
              f"{np.median(ess):.0f}, min {ess.min():.0f}; "
              + ", ".join(f"{v} {float(idata.sample_stats[v].mean()):.2f}" for v in acc))
    est, noisy_ratio, truth_all = [], [], []
    for i, t in enumerate(rel.tables):
        truth = true_marginal(df, t.variables, domain).reshape(-1) / len(df)
        est.append(idata.posterior[f"P_t{i}"].mean(("chain", "draw")).values)
        noisy_ratio.append(np.clip(t.counts.reshape(-1), 0.5, None) / len(df))
        truth_all.append(truth)
    est, noisy_ratio, truth_all = map(np.concatenate, (est, noisy_ratio, truth_all))
    print(f"NLTCS: n = {len(df):,}, epsilon = {args.epsilon} (selection "
          f"{rel.selection_epsilon:g}), {len(rel.tables)} two-way tables, "
          f"{sum(t.counts.size for t in rel.tables)} counts, k = {args.k}")
    print(f"selection: {t_select:.1f} s; sampling {args.iterations:,} iterations: "
          f"{t_sample:.1f} s ({1000 * t_sample / args.iterations:.2f} ms/iteration; "
          "target 300 s)")
    print(f"average log(P_est / P_true): posterior mean {np.mean(np.log(est / truth_all)):.3f}, "
          f"noisy counts (clipped at 0.5) {np.mean(np.log(noisy_ratio / truth_all)):.3f}")
    print(f"mean |P_est - P_true|: posterior {np.mean(np.abs(est - truth_all)):.4f}, noisy "
          f"{np.mean(np.abs(noisy_ratio - truth_all)):.4f}")
    # full table and all 120 two-way marginals, against a peer on the same total budget
    thin = max(1, idata.posterior.sizes["draw"] // 500)
    ours = np.asarray(bs.synthesis.full_table_probabilities(
        idata.sel(draw=slice(None, None, thin))).mean(("chain", "draw"))).reshape(-1)
    truth_full = full_table(df)
    pairs = [(a, b) for a in range(16) for b in range(a + 1, 16)]
    rows = [("latent class (posterior mean)", ours)]
    t0 = time.perf_counter()
    peer = mbi_full_table(rel, args.mbi_python)
    if peer is not None:
        rows.append((f"private-pgm on the same tables ({time.perf_counter() - t0:.0f} s)",
                     peer))
    t0 = time.perf_counter()
    peer = None if args.skip_privbayes else privbayes_full_table(df, args.epsilon, seed=3)
    t_peer = time.perf_counter() - t0
    if peer is not None:
        rows.append((f"PrivBayes, DataSynthesizer ({t_peer:.0f} s)", peer))
    elif not args.skip_privbayes:
        print("DataSynthesizer is not installed: no PrivBayes comparison")
    print(f"\n{'method':40} {'full-table TV':>14} {'two-way TV (mean of 120)':>25}")
    for name, p in rows:
        print(f"{name:40} {0.5 * np.abs(p - truth_full).sum():14.4f} "
              f"{two_way_errors(p, truth_full, pairs):25.4f}")


if __name__ == "__main__":
    main()
