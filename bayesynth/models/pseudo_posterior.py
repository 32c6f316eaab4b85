"""Record-weighted and censored pseudo likelihoods, and base models that use them.

The pseudo posterior mechanism (Savitsky, Williams & Hu 2022; Hu, Savitsky & Williams 2022)
replaces each record's log-likelihood ``f_theta(x_i)`` by ``alpha_i * f_theta(x_i)`` with weights
``alpha_i`` in [0, 1], and its censored variant clips each (weighted) contribution into
``[-epsilon/2, epsilon/2]``. Here a model's observed variable is a :class:`pymc.CustomDist` whose
generative graph is the base distribution and whose log-density is the weighted (and possibly
censored) one, so that posterior predictive sampling draws synthetic records from the base model
and ``pm.compute_log_likelihood`` returns the pseudo log-likelihood of each record.

Any PyMC model can take part: build its likelihood with :func:`weighted_observed`.

Example: a user's own model (a Poisson regression) ready for every mechanism::

    def my_model(data, weights=None, censor=None):
        with pm.Model() as model:
            b = pm.Normal("b", 0, 2, shape=2)
            mu = pm.math.exp(b[0] + b[1] * data["x"].to_numpy())
            weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size), [mu],
                              data["y"].to_numpy(), weights=weights, censor=censor)
        return model

    PseudoPosteriorSynthesizer(my_model, mechanism="censor_w", epsilon=4).fit(df)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.graph.replace
import pytensor.tensor as pt

from bayesynth.errors import ColumnTypeError, InputTypeError, TooFewRowsError

__all__ = [
    "weighted_observed",
    "record_loglik",
    "observed_name",
    "beta_mixture",
    "negative_binomial",
    "linear_regression",
]

_RECORDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def weighted_observed(
    name: str,
    base: Callable[..., Any],
    params: Sequence[Any],
    observed: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    censor: float | None = None,
    dims: str | tuple[str, ...] | None = None,
):
    """An observed variable with a record-weighted, optionally censored, log-likelihood.

    Parameters
    ----------
    name : str
    base : callable
        ``base(*params, size=None)`` returns the unregistered base distribution of the records,
        e.g. ``lambda mu, sigma, size=None: pm.Normal.dist(mu, sigma, size=size)``.
    params : sequence of tensors
        Its parameters (model variables or expressions of them).
    observed : numpy.ndarray, shape (n,)
        The records.
    weights : numpy.ndarray, optional
        alpha_i in [0, 1] (default all 1: the ordinary posterior). A weight of 0 removes the
        record from the likelihood.
    censor : float, optional
        epsilon: each record's weighted log-likelihood ``alpha_i f_theta(x_i)`` is clipped into
        ``[-epsilon/2, epsilon/2]`` (the censored mechanism; every record's pseudo likelihood
        then lies in ``[exp(-epsilon/2), exp(epsilon/2)]`` for every parameter value).

    Returns
    -------
    TensorVariable
        The observed variable. The raw (unweighted, uncensored) per-record log-likelihood graph is
        registered for :func:`record_loglik`.
    """
    observed = np.asarray(observed)
    n = len(observed)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,):
        raise ValueError(f"weights must have one entry per record ({n}); got {w.shape}.")
    if np.any(~np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
        raise ValueError("weights must lie in [0, 1].")
    half = None if censor is None else 0.5 * float(censor)
    n_params = len(params)

    def dist_fn(*args):  # params..., weights, size
        return base(*args[:n_params], size=args[-1])

    def logp_fn(value, *args):
        lp = args[n_params] * pm.logp(base(*args[:n_params]), value)
        if half is not None:
            lp = pt.clip(lp, -half, half)
        return lp

    model = pm.modelcontext(None)
    wdata = pm.Data(f"{name}_weights", w, dims=dims)
    rv = pm.CustomDist(name, *params, wdata, dist=dist_fn, logp=logp_fn, observed=observed,
                       dims=dims)
    raw = pm.logp(base(*params), pt.as_tensor_variable(observed))
    _RECORDS.setdefault(model, {})[name] = (raw, w, half)
    return rv


def observed_name(model: pm.Model) -> str:
    """The name of the model's (single) weighted observed variable."""
    names = list(_RECORDS.get(model, {}))
    if len(names) != 1:
        raise ValueError(
            "The model needs exactly one variable built with weighted_observed; found "
            f"{names or 'none'}.")
    return names[0]


def record_loglik(model: pm.Model, idata, *, max_draws: int | None = None,
                  random_seed: int | None = 0) -> np.ndarray:
    """Raw per-record log-likelihoods f_theta(x_i) at the posterior draws, shape (S, n).

    Unweighted and uncensored, whatever weights and censoring the model uses.

    Parameters
    ----------
    model : pymc.Model
        Built with :func:`weighted_observed`.
    idata : arviz.InferenceData
        Its posterior.
    max_draws : int, optional
        Evaluate at a random subset of this many draws (all by default).
    """
    name = observed_name(model)
    raw = _RECORDS[model][name][0]
    rvs = [rv for rv in model.free_RVs]
    holders = [rv.type() for rv in rvs]
    graph = pytensor.graph.replace.graph_replace(raw, dict(zip(rvs, holders)), strict=False)
    fn = pytensor.function(holders, graph, on_unused_input="ignore")
    post = idata.posterior.stack(sample=("chain", "draw"))
    S = post.sizes["sample"]
    idx = np.arange(S)
    if max_draws is not None and max_draws < S:
        idx = np.sort(np.random.default_rng(random_seed).choice(S, max_draws, replace=False))
    draws = [np.moveaxis(post[rv.name].values, -1, 0) for rv in rvs]  # (S, ...)
    return np.array([fn(*(d[s] for d in draws)) for s in idx])


# ------------------------------------------------------------------------------ base models


def _column(data: pd.DataFrame | np.ndarray, column: str | None) -> np.ndarray:
    if isinstance(data, pd.DataFrame):
        if column is None:
            if data.shape[1] != 1:
                raise ColumnTypeError("Name the column to model (column=...).")
            column = data.columns[0]
        x = data[column].to_numpy(dtype=float)
    elif isinstance(data, np.ndarray | pd.Series | list):
        x = np.asarray(data, dtype=float).ravel()
    else:
        raise InputTypeError(f"Expected a DataFrame or an array; got {type(data).__name__}.")
    if len(x) < 10:
        raise TooFewRowsError(f"Need at least 10 records; got {len(x)}.")
    if np.any(~np.isfinite(x)):
        raise ColumnTypeError("The records must be finite (no missing or infinite values).")
    return x


def beta_mixture(
    data: pd.DataFrame | np.ndarray,
    weights: np.ndarray | None = None,
    censor: float | None = None,
    *,
    column: str | None = None,
    n_components: int = 2,
    shape_mu: float = 0.0,
    shape_sigma: float = 1.5,
    concentration: float = 1.0,
) -> pm.Model:
    """Mixture of Beta distributions for a continuous variable on (0, 1).

    ``x_i ~ sum_k pi_k Beta(a_k, b_k)``, ``log a_k, log b_k ~ N(shape_mu, shape_sigma^2)``,
    ``pi ~ Dirichlet(concentration)``. Chosen over a logit-normal mixture because its
    components can put unbounded density at the edges (shape below 1), as skewed bounded data
    such as Beta(0.5, 3) need, and a single component reproduces a Beta exactly. Records must lie
    strictly inside (0, 1); rescale a variable with other bounds first.

    Parameters
    ----------
    data : DataFrame or array
    weights, censor
        See :func:`weighted_observed`.
    column : str, optional
        Column of ``data`` (when it has several).
    n_components : int, default 2

    Returns
    -------
    pymc.Model
        Free variables ``log_a``, ``log_b`` (component), ``pi`` (component, when more than one);
        observed ``x``.
    """
    x = _column(data, column)
    if np.any((x <= 0) | (x >= 1)):
        raise ColumnTypeError("beta_mixture needs records strictly inside (0, 1).")
    K = int(n_components)
    with pm.Model(coords={"component": np.arange(K), "record": np.arange(len(x))}) as model:
        log_a = pm.Normal("log_a", shape_mu, shape_sigma, dims="component")
        log_b = pm.Normal("log_b", shape_mu, shape_sigma, dims="component")
        a, b = pt.exp(log_a), pt.exp(log_b)
        if K == 1:
            def base(a, b, size=None):
                return pm.Beta.dist(a[0], b[0], size=size)

            weighted_observed("x", base, [a, b], x, weights=weights, censor=censor,
                              dims="record")
        else:
            pi = pm.Dirichlet("pi", np.full(K, concentration), dims="component")

            def base(pi, a, b, size=None):
                return pm.Mixture.dist(pi, [pm.Beta.dist(a[k], b[k]) for k in range(K)],
                                       size=size)

            weighted_observed("x", base, [pi, a, b], x, weights=weights, censor=censor,
                              dims="record")
    return model


def negative_binomial(
    data: pd.DataFrame | np.ndarray,
    weights: np.ndarray | None = None,
    censor: float | None = None,
    *,
    column: str | None = None,
    mu_prior: float = 10.0,
) -> pm.Model:
    """Negative-binomial model for counts: ``y_i ~ NB(mu, alpha)``,
    ``log mu ~ N(log(mean y), 1)``, ``alpha ~ HalfNormal(mu_prior)``."""
    y = _column(data, column)
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise ColumnTypeError("negative_binomial needs non-negative integer counts.")
    with pm.Model(coords={"record": np.arange(len(y))}) as model:
        log_mu = pm.Normal("log_mu", float(np.log(y.mean() + 0.5)), 1.0)
        alpha = pm.HalfNormal("alpha", mu_prior)
        mu = pt.exp(log_mu)

        def base(mu, alpha, size=None):
            return pm.NegativeBinomial.dist(mu=mu, alpha=alpha, size=size)

        weighted_observed("y", base, [mu, alpha], y.astype(np.int64), weights=weights,
                          censor=censor, dims="record")
    return model


def linear_regression(
    data: pd.DataFrame,
    weights: np.ndarray | None = None,
    censor: float | None = None,
    *,
    response: str,
    predictors: Sequence[str],
    beta_sigma: float = 10.0,
) -> pm.Model:
    """Normal linear regression ``y ~ N(b0 + X b, sigma)`` with weak normal priors (predictors
    standardised inside the model) and ``sigma ~ HalfNormal(sd(y))``. The synthetic records
    redraw the response at the real predictors (partially synthetic data)."""
    if not isinstance(data, pd.DataFrame):
        raise InputTypeError("linear_regression takes a DataFrame.")
    y = _column(data, response)
    X = data[list(predictors)].to_numpy(dtype=float)
    if np.any(~np.isfinite(X)):
        raise ColumnTypeError("Predictors must be finite (no missing values).")
    Xs = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    coords = {"record": np.arange(len(y)), "predictor": list(predictors)}
    with pm.Model(coords=coords) as model:
        b0 = pm.Normal("intercept", float(y.mean()), beta_sigma * (y.std() or 1.0))
        b = pm.Normal("beta", 0.0, beta_sigma * (y.std() or 1.0), dims="predictor")
        sigma = pm.HalfNormal("sigma", float(y.std() or 1.0))
        mu = b0 + pt.dot(Xs, b)

        def base(mu, sigma, size=None):
            return pm.Normal.dist(mu, sigma, size=size)

        weighted_observed("y", base, [mu, sigma], y, weights=weights, censor=censor,
                          dims="record")
    return model
