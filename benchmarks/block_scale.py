"""Which parameter holds a slow quantity back: the categorical variables' utility scales.

Fits the copula (default settings, 2 chains on one core) to a few columns of SD2011's training
split with the survey schema of ``real_data.py`` (its rules among those columns are kept;
default ``age, marital, ymarr, sex, socprof, edu``: the age-related relations behind the
whole table's slowest quantities), judges what synthesis uses, and prints, beside the slowest
quantities, the slowest of these identified parameters:

* the *utility scale* of each categorical variable: the log of the sum of squared loadings
  over its utility columns (the residual sd of a multinomial-probit utility is fixed at 1,
  so this is how sharply the factors decide the variable's level; rotation invariant);
* the *communality* of every latent column, lambda' lambda / (lambda' lambda + sigma^2), on
  the logit scale (scale and rotation invariant);

each with its R-hat and bulk ESS, its chain means by tenths of the kept draws, and its
correlation across draws with the slowest quantity; then the leading principal direction of
all of them (standardised), with its R-hat, ESS and largest weights: which parameters drift
together. ``--transport-tries`` runs the utility
transport scale move (which rescales a block given the factor scores) that many times an
iteration, to see whether more proposals of it move the scale.

Usage::

    python benchmarks/block_scale.py                                  # about 3-6 minutes
    python benchmarks/block_scale.py --seed 2
    python benchmarks/block_scale.py --transport-tries 5
    python benchmarks/block_scale.py --columns marital,ymarr,sex,socprof,edu
    python benchmarks/block_scale.py --n-factors 3                   # or --nu 30
    python benchmarks/block_scale.py --load fit.nc                    # a saved fit
"""

from __future__ import annotations

import _setup  # noqa: F401  (first: one BLAS thread, the repository on sys.path)

# isort: split
import argparse
import importlib
import time
import warnings

import arviz as az
import numpy as np
import pandas as pd
from quantity_estimator import posterior_arrays
from real_data import DATA, load, split

import bayesynth as bs
from bayesynth.evaluation.diagnostics import synthesis_diagnostics
from bayesynth.models.copula_quantities import implied_quantities
from bayesynth.schema import modelled_schema


def parameter_draws(idata, arrays: tuple | None = None) -> dict[str, np.ndarray]:
    """Each categorical variable's log utility scale and each latent column's logit communality.

    Parameters
    ----------
    idata : arviz.InferenceData
        A copula fit.
    arrays : tuple, optional
        Its :func:`quantity_estimator.posterior_arrays`, if already read.

    Returns
    -------
    dict
        ``"scale of <variable>"`` and ``"communality of <latent column>"``, each an array of
        shape (chain, draw).
    """
    blocks, nc, nd, _, Lam, sig = posterior_arrays(idata) if arrays is None else arrays
    latent = [str(v) for v in idata.posterior.coords["latent"].values]
    ss = (Lam**2).sum(axis=-1).reshape(nc, nd, -1)
    sig = sig.reshape(nc, nd, -1)
    out = {f"scale of {b['name']}": np.log(ss[:, :, b["latent"]].sum(axis=-1))
           for b in blocks.categorical}
    for j, name in enumerate(latent):
        out[f"communality of {name}"] = np.log(ss[:, :, j] / sig[:, :, j] ** 2)
    return out


def leading_direction(params: dict[str, np.ndarray]) -> tuple[float, pd.Series, np.ndarray]:
    """The first principal direction of the parameters' standardised draws.

    Parameters
    ----------
    params : dict
        Arrays of shape (chain, draw), as :func:`parameter_draws` returns.

    Returns
    -------
    share : float
        Share of the standardised draws' total variance along the direction.
    weights : pandas.Series
        The direction's unit weights, by parameter, largest magnitude first (sign fixed so that
        the largest is positive).
    scores : numpy.ndarray, shape (chain, draw)
        The draws projected on it (to judge with R-hat and ESS like any other quantity).
    """
    names = [n for n, x in params.items() if x.std() > 0]
    X = np.stack([params[n] for n in names], axis=-1)
    Y = X.reshape(-1, len(names))
    Y = (Y - Y.mean(axis=0)) / Y.std(axis=0)
    w, V = np.linalg.eigh(np.cov(Y, rowvar=False))
    v = V[:, -1] * np.sign(V[np.argmax(np.abs(V[:, -1])), -1])
    weights = pd.Series(v, index=names).sort_values(key=np.abs, ascending=False)
    return float(w[-1] / w.sum()), weights, (Y @ v).reshape(X.shape[:2])


def quantity_draws(arrays: tuple, label: str) -> np.ndarray:
    """One conditional mean ``E[column | variable=level]`` per draw, shape (chain, draw).

    ``arrays`` is the fit's :func:`quantity_estimator.posterior_arrays`.
    """
    blocks, nc, nd, af, Lam, sig = arrays
    column, level = label[2:-1].split(" | ")
    q = implied_quantities(af, Lam, sig, blocks, pairs=False)
    h = blocks.category_labels.index(level)
    return q["conditional_mean"][:, h, blocks.ordered_names.index(column)].reshape(nc, nd)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--columns", default="age,marital,ymarr,sex,socprof,edu")
    ap.add_argument("--draws", type=int, default=500, help="kept draws (and tuning) per chain")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--transport-tries", type=int, default=None,
                    help="proposals of the utility transport scale move per iteration "
                         "(default: the sampler's, 1)")
    ap.add_argument("--n-factors", type=int, default=None,
                    help="number of factors (default: the model's rule)")
    ap.add_argument("--nu", type=float, default=None,
                    help="degrees of freedom of the loadings' local shrinkage (default: the "
                         "model's, 3)")
    ap.add_argument("--top", type=int, default=8, help="parameters shown")
    ap.add_argument("--load", default=None, help="examine this saved fit instead of fitting")
    ap.add_argument("--save", default=None, help="write the fit's InferenceData here")
    args = ap.parse_args(argv)
    if args.load:
        idata = az.from_netcdf(args.load)
    else:
        if not DATA.exists():
            raise SystemExit(f"{DATA} is absent: this benchmark needs the shared real data.")
        if args.transport_tries is not None:
            steps = importlib.import_module("bayesynth.samplers.steps")
            steps.UtilityTransportScaleMove.tries = args.transport_tries
        cols = args.columns.split(",")
        df, schema, _ = load("sd2011")
        train, _ = split(df)
        sub = modelled_schema(train, schema, exclude=[c for c in schema.names if c not in cols])
        train = train[sub.names]
        options = {"n_factors": args.n_factors}
        if args.nu is not None:
            options["nu"] = args.nu
        model = bs.models.rank_probit_copula(train, sub, **options)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = bs.sample(model, draws=args.draws, tune=args.draws, chains=2, cores=1,
                              random_seed=args.seed, progressbar=False,
                              check_convergence=False, max_extensions=0)
        print(f"SD2011 {sub.names} (rules: {len(sub.rules)}): n = {len(train)}, "
              f"p* = {len(model.coords['latent'])}, k = {len(model.coords['factor'])}, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if args.save:
            idata.to_netcdf(args.save)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = synthesis_diagnostics(idata).table
    over = float((table["r_hat"] > 1.01).mean())
    print(f"quantities synthesis uses: {len(table)}, {100 * over:.1f}% above R-hat 1.01, "
          f"median bulk ESS {table['ess_bulk'].median():.0f}")
    print(table.sort_values("ess_bulk").head(args.top)[["kind", "mean", "sd", "ess_bulk",
                                                        "r_hat"]].to_string())
    worst = table[table["kind"] == "conditional mean"]["ess_bulk"].idxmin()
    arrays = posterior_arrays(idata)
    qx = quantity_draws(arrays, worst).ravel()
    rows = []
    draws = parameter_draws(idata, arrays)
    for name, x in draws.items():
        tenths = np.array([[part.mean() for part in np.array_split(chain, min(10, len(chain)))]
                           for chain in x])
        rows.append({"parameter": name, "mean": float(x.mean()), "ess_bulk": float(az.ess(x)),
                     "r_hat": float(az.rhat(x)),
                     f"corr with {worst}": float(np.corrcoef(x.ravel(), qx)[0, 1]),
                     "chain means by tenths": "; ".join(
                         " ".join(f"{v:.2f}" for v in row) for row in tenths)})
    params = pd.DataFrame(rows).sort_values("ess_bulk")
    with pd.option_context("display.max_colwidth", 120, "display.width", 250):
        print(params.head(args.top).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        scales = params[params["parameter"].str.startswith("scale of")]
        print(scales.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    share, weights, scores = leading_direction(draws)
    print(f"leading direction of the {len(weights)} parameters' standardised draws: "
          f"{100 * share:.1f}% of their variance, bulk ESS {float(az.ess(scores)):.1f}, "
          f"R-hat {float(az.rhat(scores)):.3f}, correlation with {worst} "
          f"{np.corrcoef(scores.ravel(), qx)[0, 1]:.2f}; largest weights:")
    print(weights.head(args.top).to_string(float_format=lambda v: f"{v:+.2f}"))


if __name__ == "__main__":
    main()
