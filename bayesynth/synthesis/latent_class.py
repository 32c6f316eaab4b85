"""Posterior summaries and synthetic data from a latent class model of private marginals.

Every quantity here is a function of ``pi`` and ``psi`` computed draw by draw, so it is
invariant to label switching: marginal and full-table cell probabilities, their credible
intervals, and synthetic datasets (each from its own posterior draw).
"""

from __future__ import annotations

from collections.abc import Sequence

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from bayesynth.errors import IncompatibleModelError, SchemaError
from bayesynth.evaluation.regression import combine_estimates

__all__ = [
    "marginal_probabilities",
    "full_table_probabilities",
    "probability_summary",
    "synthesize_latent_class",
    "combine_marginal_estimates",
]


def _variables(posterior: xr.Dataset) -> list[str]:
    names = [v[4:] for v in posterior.data_vars if v.startswith("psi_")]
    if "pi" not in posterior or not names:
        raise IncompatibleModelError("The posterior has no 'pi' and 'psi_<var>': was it sampled "
                                     "from latent_class_dp_model?")
    return names


def marginal_probabilities(idata: az.InferenceData, variables: Sequence[str]) -> xr.DataArray:
    """Posterior draws of the marginal cell probabilities over ``variables``.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior of :func:`bayesynth.models.latent_class_dp_model`.
    variables : sequence of str
        Distinct model variables (at most 45), in the order of the output dims.

    Returns
    -------
    xarray.DataArray
        Dims ``chain``, ``draw`` and one per variable (labelled by its levels):
        ``sum_h pi_h prod_j psi_j[h, c_j]``.
    """
    post = idata.posterior
    known = _variables(post)
    unknown = [v for v in variables if v not in known]
    if unknown:
        raise SchemaError(f"Variables {unknown} are not in the model ({known}).")
    if len(set(variables)) != len(variables):
        raise SchemaError("A variable is repeated.")
    if len(variables) > 45:
        raise SchemaError("At most 45 variables at once (the table would not fit anyway).")
    # einsum over sublists: 0 chain, 1 draw, 2 class, 3.. the variables
    operands: list = [post["pi"].values, [0, 1, 2]]
    for m, v in enumerate(variables):
        operands += [post[f"psi_{v}"].values, [0, 1, 2, 3 + m]]
    operands.append([0, 1, *range(3, 3 + len(variables))])
    vals = np.einsum(*operands, optimize=True)
    coords = {"chain": post["chain"].values, "draw": post["draw"].values}
    for v in variables:
        coords[v] = post[f"psi_{v}"].coords[v].values
    out = xr.DataArray(vals, dims=("chain", "draw", *variables), coords=coords,
                       name="probability")
    return out


def full_table_probabilities(idata: az.InferenceData, *, max_cells: int = 2_000_000
                             ) -> xr.DataArray:
    """Posterior draws of every full-table cell probability (all variables).

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior of :func:`bayesynth.models.latent_class_dp_model`.
    max_cells : int, default 2000000
        Largest table computed.

    Returns
    -------
    xarray.DataArray
        As :func:`marginal_probabilities` over every variable of the model.

    Raises
    ------
    ValueError
        When the table has more than ``max_cells`` cells (ask for marginals instead).
    """
    post = idata.posterior
    variables = _variables(post)
    cells = int(np.prod([post.sizes[v] for v in variables], dtype=float))
    if cells > max_cells:
        raise ValueError(f"The full table has {cells:,} cells (limit {max_cells:,}); use "
                         "marginal_probabilities on fewer variables.")
    return marginal_probabilities(idata, variables)


def probability_summary(draws: xr.DataArray, *, prob: float = 0.95,
                        truth: np.ndarray | None = None) -> pd.DataFrame:
    """Summarise cell probability draws: posterior mean, sd and equal-tailed credible interval.

    Parameters
    ----------
    draws : xarray.DataArray
        Dims ``chain``, ``draw`` and the cell dims (as from :func:`marginal_probabilities`).
    prob : float, default 0.95
        Mass of the credible intervals.
    truth : numpy.ndarray, optional
        True cell probabilities, in the shape of one draw.

    Returns
    -------
    pandas.DataFrame
        One row per cell (MultiIndex of the cell dims): ``mean``, ``sd``, ``lower`` and
        ``upper``, plus ``truth`` and ``covered`` when ``truth`` is given.
    """
    cell_dims = [d for d in draws.dims if d not in ("chain", "draw")]
    flat = draws.stack(sample=("chain", "draw")).transpose(*cell_dims, "sample")
    vals = flat.values.reshape(-1, flat.sizes["sample"])
    lo, hi = np.quantile(vals, [(1 - prob) / 2, (1 + prob) / 2], axis=1)
    index = pd.MultiIndex.from_product([draws.coords[d].values for d in cell_dims],
                                       names=cell_dims)
    out = pd.DataFrame({"mean": vals.mean(1), "sd": vals.std(1, ddof=1), "lower": lo,
                        "upper": hi}, index=index)
    if truth is not None:
        out["truth"] = np.asarray(truth, float).reshape(-1)
        out["covered"] = (out["lower"] <= out["truth"]) & (out["truth"] <= out["upper"])
    return out


def synthesize_latent_class(idata: az.InferenceData, m: int = 20, *, n: int | None = None,
                            random_seed: int | np.random.Generator | None = None,
                            ledger=None) -> list[pd.DataFrame]:
    """Draw m synthetic datasets, each from a different posterior draw.

    The draws are evenly spaced over the chains and draws; each dataset has n records (by
    default the model's n, stored as the total of the first table's counts).

    Records are drawn from the mixture directly (class, then each variable given the class),
    so the full table is never built. Columns are categorical with the domain's levels. The
    posterior is a function of the noisy release alone, so the synthetic data are
    post-processing: they cost no privacy budget beyond the release's (under add/remove
    neighbours the model's n is the release's noisy estimate, not the true n).

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior of :func:`bayesynth.models.latent_class_dp_model`.
    m : int, default 20
    n : int, optional
    random_seed : int or Generator, optional
    ledger : bayesynth.privacy.Ledger, optional
        The release's ledger; an entry records the synthetic datasets as post-processing.

    Returns
    -------
    list of pandas.DataFrame
    """
    post = idata.posterior
    variables = _variables(post)
    rng = np.random.default_rng(random_seed)
    if n is None:
        if "M_t0" not in post:
            raise SchemaError("Give n: the posterior has no true counts to read it from.")
        n = int(post["M_t0"].isel(chain=0, draw=0).sum())
    n_samples = post.sizes["chain"] * post.sizes["draw"]
    if not 1 <= m <= n_samples:
        raise SchemaError(f"m must be between 1 and the {n_samples} posterior draws; got {m}.")
    picks = np.linspace(0, n_samples - 1, m).round().astype(int)
    pi = post["pi"].values.reshape(n_samples, -1)
    psi = {v: post[f"psi_{v}"].values.reshape(n_samples, *post[f"psi_{v}"].shape[2:])
           for v in variables}
    out = []
    for s in picks:
        z = rng.choice(len(pi[s]), size=n, p=pi[s] / pi[s].sum())
        data = {}
        for v in variables:
            cdf = np.cumsum(psi[v][s], axis=1)
            u = rng.random(n) * cdf[z, -1]
            codes = (u[:, None] > cdf[z]).sum(1)
            levels = list(post[f"psi_{v}"].coords[v].values)
            data[v] = pd.Categorical.from_codes(np.minimum(codes, len(levels) - 1),
                                                categories=levels)
        out.append(pd.DataFrame(data))
    if ledger is not None:
        ledger.record(f"{m} synthetic dataset(s) of {n} records", "post-processing of the noisy "
                      "marginals (latent class posterior)", 0.0, guarantee="strict",
                      why="a function of the differentially private release only")
    return out


def combine_marginal_estimates(synthetic: Sequence[pd.DataFrame], variables: Sequence[str],
                               *, level: float = 0.95, n: int | None = None) -> pd.DataFrame:
    """Combine estimates of a marginal's cell proportions from m fully synthetic datasets.

    Reiter's (2003) rules, with per dataset q = the cell's proportion and v = q (1 - q) / n_syn
    (see :func:`bayesynth.evaluation.combine_estimates`, ``rule="reiter2003"``).

    Parameters
    ----------
    synthetic : sequence of pandas.DataFrame
        At least two synthetic datasets of equal size.
    variables : sequence of str
        The marginal's variables.
    level : float, default 0.95
        Confidence level of the intervals.
    n : int, optional
        Records of the real data (default: the size of a synthetic dataset).

    Returns
    -------
    pandas.DataFrame
        One row per cell (MultiIndex of levels): ``estimate``, ``se``, ``lower``, ``upper``.
    """
    if len(synthetic) < 2:
        raise SchemaError("Reiter's rules need at least two synthetic datasets.")
    tabs = []
    for df in synthetic:
        t = df.groupby(list(variables), observed=False).size()
        tabs.append(t / t.sum())
    n_syn = len(synthetic[0])
    rows = []
    for cell in tabs[0].index:
        q = [float(t.loc[cell]) for t in tabs]
        comb = combine_estimates(q, [x * (1 - x) / n_syn for x in q], rule="reiter2003",
                                 n=n or n_syn, n_syn=n_syn, level=level)
        rows.append({"estimate": comb.estimate, "se": comb.se, "lower": comb.lower,
                     "upper": comb.upper})
    return pd.DataFrame(rows, index=tabs[0].index)
