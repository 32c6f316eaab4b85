"""Targeted synthesis of key outcomes with BART rank-likelihood regressions.

After Feldman & Kowal (2022), section 5.

A target column is synthesized from the synthetic values of its predictors (the copula's
columns and any earlier targets): ``z = f(x) + sigma * eps`` with f and sigma from the fitted
BART rank regression, then ``y = F_hat^-1(G(z))``, where F_hat is the target's marginal (as in
the copula) and G the model's marginal CDF of the latent z over the training records,
``G(z) = mean_i Phi((z - f(x_i)) / sigma)``, tabulated on a grid at fit time so that no training
record is stored.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr
from scipy.special import ndtr

from bayesynth.errors import IncompatibleModelError, InvalidParameterError, SchemaError
from bayesynth.models.bart_rank import BartDesign, bart_rank_regression
from bayesynth.models.metadata import model_metadata
from bayesynth.samplers.sampling import sample as bs_sample
from bayesynth.schema import Schema, encode_levels
from bayesynth.synthesis.bart_forest import BartForest
from bayesynth.synthesis.marginals import (
    AtomMarginal,
    DiscreteMarginal,
    SmoothMarginal,
    fit_marginal,
)

__all__ = ["TargetModel", "fit_target", "target_from_posterior", "TARGET_DRAWS"]

#: How a target's regression function is drawn per synthetic dataset.
TARGET_DRAWS = ("proper", "posterior_mean")
GRID = 512


def _latent_cdf_grid(f_train: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Tabulate G(z) = mean_i Phi((z - f_i) / sigma) on a grid covering its support."""
    lo, hi = f_train.min() - 6 * sigma, f_train.max() + 6 * sigma
    grid = np.linspace(lo, hi, GRID)
    # Bin the f values finely (G is smooth on the scale of sigma) to keep this O(GRID^2).
    counts, edges = np.histogram(f_train, bins=4 * GRID)
    centers = 0.5 * (edges[:-1] + edges[1:])
    keep = counts > 0
    G = (ndtr((grid[:, None] - centers[keep][None, :]) / sigma) * counts[keep]).sum(1)
    G /= counts.sum()
    G[0], G[-1] = 0.0, 1.0
    return grid, np.maximum.accumulate(G)


@dataclass
class TargetModel:
    """A fitted BART rank regression for one target column.

    Attributes
    ----------
    name : str
    design : BartDesign
        Its predictors and how they enter BART.
    forest : BartForest
        The kept posterior draws of f.
    sigma : numpy.ndarray, shape (n_draws,)
        Residual standard deviation of each kept draw.
    grid, cdf : numpy.ndarray, shape (n_draws + 1, GRID)
        Tabulated latent marginal CDF G of each kept draw; the last row belongs to the posterior
        mean of f and sigma.
    marginal : DiscreteMarginal or SmoothMarginal
        The target's estimated marginal.
    """

    name: str
    design: BartDesign
    forest: BartForest
    sigma: np.ndarray
    grid: np.ndarray
    cdf: np.ndarray
    marginal: DiscreteMarginal | SmoothMarginal | AtomMarginal

    def synthesize(self, rng: np.random.Generator, predictors: pd.DataFrame,
                   mode: str) -> np.ndarray:
        """Draw synthetic values of the target given synthetic predictors.

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of randomness.
        predictors : pandas.DataFrame
            Synthetic records with the design's predictor columns.
        mode : {"proper", "posterior_mean"}
            ``"proper"``: one random kept draw of f and sigma; ``"posterior_mean"``: their
            posterior means.

        Returns
        -------
        numpy.ndarray
            One value per record, on the marginal's scale (level codes for binary and ordinal
            targets).

        Raises
        ------
        bayesynth.errors.InvalidParameterError
            If ``mode`` is not one of :data:`TARGET_DRAWS`.
        """
        X = self.design.matrix(predictors)
        n = len(X)
        if mode == "proper":
            d = int(rng.integers(self.forest.n_draws))
            f = self.forest.predict(X, [d])[0]
            sig, row = self.sigma[d], d
        elif mode == "posterior_mean":
            f = self.forest.predict(X).mean(0)
            sig, row = float(self.sigma.mean()), -1
        else:
            raise InvalidParameterError(f"target_draw must be one of {TARGET_DRAWS}; got {mode!r}.",
                                        column="target_draw")
        z = f + sig * rng.standard_normal(n)
        u = np.interp(z, self.grid[row], self.cdf[row])
        return self.marginal.ppf(u)

    def to_dataset(self) -> xr.Dataset:
        """Return the forest, sigma and the latent CDF tables as one netCDF-ready dataset.

        The design and marginal are not included; :meth:`from_parts` takes them separately.

        Returns
        -------
        xarray.Dataset
            :meth:`BartForest.to_dataset` plus ``sigma``, ``grid`` and ``cdf``.
        """
        ds = self.forest.to_dataset()
        ds["sigma"] = ("draw", self.sigma)
        ds["grid"] = (("cdf_row", "grid_point"), self.grid)
        ds["cdf"] = (("cdf_row", "grid_point"), self.cdf)
        return ds

    @classmethod
    def from_parts(cls, name: str, design: dict, marginal, ds: xr.Dataset) -> TargetModel:
        """Rebuild a target model from its saved parts.

        Parameters
        ----------
        name : str
            The target column.
        design : dict
            :meth:`BartDesign.to_dict` output.
        marginal : DiscreteMarginal or SmoothMarginal
            The target's marginal.
        ds : xarray.Dataset
            :meth:`to_dataset` output.

        Returns
        -------
        TargetModel
        """
        return cls(name, BartDesign.from_dict(design), BartForest.from_dataset(ds),
                   ds["sigma"].values, ds["grid"].values, ds["cdf"].values, marginal)


def fit_target(
    df: pd.DataFrame,
    schema: Schema,
    target: str,
    predictors: list[str],
    *,
    m: int = 200,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    random_seed: int | None = None,
    max_draws: int = 200,
    progressbar: bool = True,
    pgbart_kwargs: dict[str, Any] | None = None,
    priors: Mapping[str, Any] | None = None,
    marginal_group: int | None = None,
) -> tuple[TargetModel, Any]:
    """Fit the BART rank regression of ``target`` and keep what synthesis needs.

    Builds :func:`~bayesynth.models.bart_rank_regression`, samples it with
    :func:`bayesynth.sample` and hands the posterior to :func:`target_from_posterior`.

    Parameters
    ----------
    df : pandas.DataFrame
        The real data (numbers, dates as days); the target must have no missing values.
    schema : Schema
        Its schema.
    target : str
        The ordered column to model.
    predictors : list of str
        Columns it is regressed on.
    m : int, default 200
        Trees.
    draws, tune, chains : int
        MCMC settings.
    random_seed : int, optional
        Seed of the fit.
    max_draws : int, default 200
        Largest number of posterior draws kept.
    progressbar : bool, default True
        Show PyMC's progress bar.
    pgbart_kwargs : dict, optional
        Passed to pymc-bart's PGBART.
    priors : mapping, optional
        Replacement priors of the regression by name (its ``SWAPPABLE_PRIORS``: ``"sigma"``).
    marginal_group : int, optional
        Values averaged into each node of the target's smooth marginal (``group`` of
        :func:`~bayesynth.synthesis.marginals.fit_marginal`).

    Returns
    -------
    TargetModel
    arviz.InferenceData
        The fit's trace (sigma, prec).

    Raises
    ------
    bayesynth.errors.SchemaError
        If the target has missing values.
    """
    if df[target].isna().any():
        raise SchemaError(
            f"Target '{target}' has missing values; BART targeting needs a complete response. "
            "Leave it in the copula (which models missingness) or impute it first.",
            column=target)
    model = bart_rank_regression(df, target, predictors, schema, m=m, priors=priors)
    idata = bs_sample(model, draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                      progressbar=progressbar, pgbart_kwargs=pgbart_kwargs)
    return target_from_posterior(model, idata, max_draws=max_draws,
                                 marginal_group=marginal_group), idata


def target_from_posterior(model: pm.Model, idata: Any, *, max_draws: int = 200,
                          marginal_group: int | None = None) -> TargetModel:
    """Keep what synthesis needs from a BART rank regression you sampled yourself.

    Parameters
    ----------
    model : pymc.Model
        A model from :func:`~bayesynth.models.bart_rank_regression`, after sampling (its
        BART variable holds the sampled trees).
    idata : arviz.InferenceData
        The posterior sampled from it (``sigma``).
    max_draws : int, default 200
        Largest number of posterior draws kept (evenly spaced; each holds m trees).
    marginal_group : int, optional
        Values averaged into each node of the target's smooth marginal (``group`` of
        :func:`~bayesynth.synthesis.marginals.fit_marginal`; default its
        :func:`~bayesynth.synthesis.marginals.node_group_size`).

    Returns
    -------
    TargetModel

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        If the model was not built by :func:`~bayesynth.models.bart_rank_regression`, has no
        sampled trees, or the posterior lacks ``sigma``.
    """
    source = model_metadata(model, "bart_source")
    if source is None:
        raise IncompatibleModelError(
            "This model was not built by bayesynth.models.bart_rank_regression.")
    post = getattr(idata, "posterior", None)
    if post is None or "sigma" not in post:
        raise IncompatibleModelError("The posterior lacks 'sigma': pass the InferenceData "
                                     "sampled from this BART model.")
    try:
        forest = BartForest.from_model(model)
    except RuntimeError as err:
        raise IncompatibleModelError(str(err)) from None
    target, schema, design = source["response"], source["schema"], source["design"]
    col = schema[target]
    sigma_all = post["sigma"].stack(s=("chain", "draw")).values
    if len(sigma_all) != forest.n_draws:
        warnings.warn(f"{forest.n_draws} stored tree draws for {len(sigma_all)} trace draws of "
                      f"'{target}'; pairing them in order.", RuntimeWarning, stacklevel=2)
    n_keep = min(max_draws, forest.n_draws, len(sigma_all))
    keep = np.unique(np.linspace(0, min(forest.n_draws, len(sigma_all)) - 1, n_keep).astype(int))
    forest = _subset(forest, keep)
    sigma = sigma_all[keep]
    f_train = forest.predict(model_metadata(model, "bart_design"))
    grids, cdfs = [], []
    for d in range(forest.n_draws):
        g, c = _latent_cdf_grid(f_train[d], sigma[d])
        grids.append(g)
        cdfs.append(c)
    g, c = _latent_cdf_grid(f_train.mean(0), float(sigma.mean()))
    grids.append(g)
    cdfs.append(c)
    y = source["values"]
    if col.type in ("binary", "ordinal"):
        codes = encode_levels(y, col)
        marginal: DiscreteMarginal | SmoothMarginal | AtomMarginal = DiscreteMarginal.fit(
            codes[codes >= 0])
    else:  # as the copula's ordered columns: atoms kept, integers and decimals restored
        x = y.to_numpy(dtype=float, na_value=np.nan)
        marginal = fit_marginal(
            x[~np.isnan(x)], continuous=True,
            integer=(bool(col.integer) or col.type == "count"
                     or pd.api.types.is_integer_dtype(y)),
            decimals=col.decimals, digits=col.digits, group=marginal_group)
    return TargetModel(target, design, forest, sigma, np.array(grids), np.array(cdfs), marginal)


def _subset(forest: BartForest, keep: np.ndarray) -> BartForest:
    T = forest.n_trees
    starts = forest.offsets
    ends = np.r_[starts[1:], len(forest.split_var)]
    offsets, sv, vv = [], [], []
    pos = 0
    for d in keep:
        for t in range(T):
            a, b = starts[d * T + t], ends[d * T + t]
            offsets.append(pos)
            sv.append(forest.split_var[a:b])
            vv.append(forest.value[a:b])
            pos += b - a
    return BartForest(np.asarray(offsets, dtype=np.int64), np.concatenate(sv),
                      np.concatenate(vv), forest.rules, len(keep), T)
