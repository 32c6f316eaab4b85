"""Record-weighted and censored pseudo likelihoods, and base models that use them.

The pseudo posterior mechanism (Savitsky, Williams & Hu 2022; Hu, Savitsky & Williams 2022)
replaces each record's log-likelihood ``f_theta(x_i)`` by ``alpha_i * f_theta(x_i)`` with weights
``alpha_i`` in [0, 1], and its censored variant clips each (weighted) contribution into
``[-c, c]``; :func:`bayesynth.privacy.censor_bound` gives the c that makes a draw epsilon-DP
under a neighbour relation (epsilon/4 for change-one, epsilon/2 for add/remove). Here a model's
observed variable is a :class:`pymc.CustomDist` whose generative graph is the base distribution
and whose log-density is the weighted (and possibly censored) one, so that posterior predictive
sampling draws synthetic records from the base model and ``pm.compute_log_likelihood`` returns
the pseudo log-likelihood of each record.

Any PyMC model can take part: build its likelihood with :func:`weighted_observed`. For a
differential-privacy guarantee the model must also (a) take fixed, public prior hyperparameters
(nothing computed from the data: a prior centred at the sample mean makes the privacy loss
unbounded, since censoring bounds the likelihood only), and (b) release nothing but draws from
its posterior predictive (a regression that redraws a response at the real predictors releases
those predictors). Declare (b) with ``weighted_observed(..., dp_refusal="why")``;
:func:`data_dependent_priors` detects most violations of (a).

Example: a user's own model (a Poisson regression) ready for every mechanism::

    def my_model(data, weights=None, censor=None):
        with pm.Model() as model:
            log_mu = pm.Normal("log_mu", 1.0, 2.0)  # fixed hyperparameters
            weighted_observed("y", lambda mu, size=None: pm.Poisson.dist(mu, size=size),
                              [pm.math.exp(log_mu)], data["y"].to_numpy(), weights=weights,
                              censor=censor)
        return model

    PseudoPosteriorSynthesizer(my_model, mechanism="censor_uw", epsilon=4).fit(df)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.graph.replace
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors

from bayesynth.errors import (
    ColumnTypeError,
    InputTypeError,
    InvalidParameterError,
    TooFewRowsError,
)
from bayesynth.models.copula_quantities import judge_thinning
from bayesynth.models.metadata import attach_metadata, metadata_names, model_metadata
from bayesynth.models.priors import PriorFactory, Priors

__all__ = [
    "weighted_observed",
    "record_loglik",
    "record_loglik_chains",
    "observed_name",
    "observed_info",
    "contribution_function",
    "data_dependent_priors",
    "beta_mixture",
    "negative_binomial",
    "linear_regression",
]

@dataclass(frozen=True)
class ObservedInfo:
    """What :func:`weighted_observed` registers about a model's weighted likelihood.

    Attributes
    ----------
    name : str
    raw : TensorVariable
        Raw per-record log-likelihood graph f_theta(x_i) (unweighted, uncensored).
    weights : numpy.ndarray
    censor : float or None
        The bound c of each record's contribution.
    dp_refusal : str or None
        Why no differential-privacy guarantee can hold for this model's synthetic data.
    """

    name: str
    raw: Any
    weights: np.ndarray
    censor: float | None
    dp_refusal: str | None


def weighted_observed(
    name: str,
    base: Callable[..., Any],
    params: Sequence[Any],
    observed: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    censor: float | None = None,
    dims: str | tuple[str, ...] | None = None,
    dp_refusal: str | None = None,
):
    """Create an observed variable with a record-weighted, optionally censored, log-likelihood.

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
        record from the likelihood (its term is 0 for every parameter value, also where the
        record is impossible).
    censor : float, optional
        The bound c: each record's weighted log-likelihood ``alpha_i f_theta(x_i)`` is clipped
        into ``[-c, c]`` for every parameter value (an undefined value, NaN, counts as
        ``-c``). :func:`bayesynth.privacy.censor_bound`
        turns an epsilon and a neighbour relation into c.
    dims : str or tuple, optional
    dp_refusal : str, optional
        A sentence saying why no differential-privacy guarantee can hold for this model's
        synthetic data (for example "the real predictors are released"); DP mechanisms refuse
        the model with it. Set automatically when a parameter is computed from an array with
        one entry per record (covariates).

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
        raise InvalidParameterError(f"weights must have one entry per record ({n}); got shape "
                                    f"{w.shape}.", column="weights")
    if np.any(~np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
        raise InvalidParameterError("weights must lie in [0, 1]; got values from "
                                    f"{np.nanmin(w)!r} to {np.nanmax(w)!r}.", column="weights")
    if censor is not None and not (np.isfinite(censor) and censor > 0):
        raise InvalidParameterError(f"censor (the bound c) must be positive and finite; got "
                                    f"{censor!r}.", column="censor")
    bound = None if censor is None else float(censor)
    n_params = len(params)

    def dist_fn(*args):  # params..., weights, size
        return base(*args[:n_params], size=args[-1])

    def logp_fn(value, *args):
        wt = args[n_params]
        # a weight of 0 removes the record: 0 * (-inf) would be nan, and a record that is
        # impossible under theta would still cut theta's support
        lp = pt.switch(pt.gt(wt, 0), wt * pm.logp(base(*args[:n_params]), value), 0.0)
        if bound is not None:
            lp = pt.switch(pt.isnan(lp), -bound, pt.clip(lp, -bound, bound))
        return lp

    raw = pm.logp(base(*params), pt.as_tensor_variable(observed))
    # per-record inputs among the parameters, or captured by ``base`` (a covariate held in
    # its closure): scan the whole log-likelihood graph, the records themselves aside
    if dp_refusal is None and _has_record_constants([raw, *params], n, skip=observed):
        dp_refusal = ("the distribution of the records depends on per-record inputs "
                      "(covariates), so its synthetic records are drawn at the real covariates, "
                      "which are released with them")
    model = pm.modelcontext(None)
    wdata = pm.Data(f"{name}_weights", w, dims=dims)
    rv = pm.CustomDist(name, *params, wdata, dist=dist_fn, logp=logp_fn, observed=observed,
                       dims=dims)
    attach_metadata(f"records_{name}", ObservedInfo(name, raw, w, bound, dp_refusal), model)
    return rv


def _has_record_constants(params: Sequence[Any], n: int, skip: np.ndarray | None = None
                          ) -> bool:
    """Whether the graphs use data with one entry per record (along any axis).

    ``skip``: the records themselves (a constant equal to them is not an input).
    """
    if n < 2:
        return False
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import ancestors

    tensors = [pt.as_tensor_variable(p) for p in params]
    for v in ancestors(tensors):
        if isinstance(v, Constant):
            value = np.asarray(v.data)
        elif isinstance(v, SharedVariable) and not str(v.name or "").endswith("_weights"):
            value = np.asarray(v.get_value())
        else:
            continue
        if n in value.shape:
            if skip is not None and value.size == n and np.array_equal(
                    value.ravel(), np.asarray(skip).ravel(), equal_nan=True):
                continue
            return True
    return False


def observed_name(model: pm.Model) -> str:
    """Return the name of the model's (single) weighted observed variable.

    Parameters
    ----------
    model : pymc.Model

    Returns
    -------
    str
    """
    names = [n[len("records_"):] for n in metadata_names(model, "records_")]
    if len(names) != 1:
        raise InvalidParameterError(
            "The model needs exactly one variable built with weighted_observed; found "
            f"{names or 'none'}.", column="model")
    return names[0]


def observed_info(model: pm.Model) -> ObservedInfo:
    """Return what :func:`weighted_observed` registered for the model's weighted likelihood.

    Parameters
    ----------
    model : pymc.Model

    Returns
    -------
    ObservedInfo
    """
    info = model_metadata(model, f"records_{observed_name(model)}")
    # The raw graph was built on the model the factory returned; after clone_model, pm.observe
    # or pm.do, rebind it to this model's variables (matched by name).
    repl = {}
    for var in ancestors([info.raw]):
        name = getattr(var, "name", None)
        if name and name in model.named_vars and model.named_vars[name] is not var:
            repl[var] = model.named_vars[name]
    if not repl:
        return info
    raw = pytensor.graph.replace.graph_replace(info.raw, repl, strict=False)
    return ObservedInfo(info.name, raw, info.weights, info.censor, info.dp_refusal)


def _posterior(idata) -> Any:
    return idata.posterior if hasattr(idata, "posterior") else idata


def record_loglik(model: pm.Model, idata, *, max_draws: int | None = None,
                  random_seed: int | None = 0) -> np.ndarray:
    """Raw per-record log-likelihoods f_theta(x_i) at the posterior draws, shape (S, n).

    Unweighted and uncensored, whatever weights and censoring the model uses.

    Parameters
    ----------
    model : pymc.Model
        Built with :func:`weighted_observed`.
    idata : arviz.InferenceData or xarray.Dataset
        A posterior of this model, or of the same factory fitted to other data (the parameter
        names and shapes must match): a reference fit evaluated on new records.
    max_draws : int, optional
        Evaluate at a random subset of this many draws (all by default).
    random_seed : int, optional
        Seed of the subset.

    Returns
    -------
    numpy.ndarray
    """
    rvs, fn = _loglik_function(model)
    post = _posterior(idata)
    if "sample" not in post.dims:
        post = post.stack(sample=("chain", "draw"))
    S = post.sizes["sample"]
    idx = np.arange(S)
    if max_draws is not None and max_draws < S:
        idx = np.sort(np.random.default_rng(random_seed).choice(S, max_draws, replace=False))
    draws = [np.moveaxis(post[rv.name].values, -1, 0) for rv in rvs]  # (S, ...)
    return np.array([fn(*(d[s] for d in draws)) for s in idx])


def _loglik_function(model: pm.Model) -> tuple[list[Any], Callable[..., np.ndarray]]:
    """Compile f_theta(x_i) for every record as a function of the free variables (returned)."""
    raw = observed_info(model).raw
    rvs = list(model.free_RVs)
    holders = [rv.type() for rv in rvs]
    graph = pytensor.graph.replace.graph_replace(raw, dict(zip(rvs, holders)), strict=False)
    return rvs, pytensor.function(holders, graph, on_unused_input="ignore")


#: Draws per chain whose mean log-likelihood orders the records that a convergence check
#: reads (:func:`record_loglik_chains`).
PROBE_DRAWS = 25


def record_loglik_chains(model: pm.Model, idata, *, max_draws: int = 4000,
                         max_records: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Per-record log-likelihoods f_theta(x_i) by chain, on thinned draws and chosen records.

    What a convergence check of a weighted-likelihood fit reads: the likelihood of each record
    does not change when mixture components swap labels, and it is what both the Lipschitz
    bound (its largest absolute value over draws) and the synthetic data (the predictive
    density) rest on.

    Parameters
    ----------
    model : pymc.Model
        Built with :func:`weighted_observed`.
    idata : arviz.InferenceData
        A posterior of ``model`` with dims ``chain`` and ``draw``.
    max_draws : int, default 4000
        Draws in all chains together: every ``ceil(chains * draws / max_draws)``-th draw of
        each chain is kept.
    max_records : int, default 200
        With more records than this, the records are ordered by their mean log-likelihood
        over :data:`PROBE_DRAWS` evenly spaced draws of each chain, and ``max_records`` of
        them, evenly spaced in that order, are kept: the least and the most likely records
        (the tails, whose likelihoods vary most) always among them. The log-likelihoods of
        the records are smooth functions of a few parameters, so a few hundred show what all
        show; ArviZ's R-hat and ESS of 2,000 records took 2.4 s per fit.

    Returns
    -------
    loglik : numpy.ndarray
        Shape (chain, kept draw, kept record).
    records : numpy.ndarray
        The kept records' positions.
    """
    rvs, fn = _loglik_function(model)
    post = _posterior(idata)
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    draw_idx = np.arange(0, n_draw, judge_thinning(n_chain, n_draw, max_draws))
    values = [post[rv.name].values for rv in rvs]  # (chain, draw, ...)
    n = len(observed_info(model).weights)
    if n <= max_records:
        records = np.arange(n)
    else:  # evenly spaced in the order of the mean log-likelihood, both ends included
        probe = [(c, d) for c in range(n_chain)
                 for d in np.linspace(0, n_draw - 1, min(n_draw, PROBE_DRAWS)).round()
                 .astype(int)]
        mean = np.zeros(n)
        for c, d in probe:
            mean += np.asarray(fn(*(v[c, d] for v in values)), dtype=float).reshape(-1)
        order = np.argsort(np.nan_to_num(mean, nan=-np.inf, posinf=np.inf), kind="stable")
        records = np.sort(order[np.linspace(0, n - 1, max_records).round().astype(int)])
    out = np.empty((n_chain, len(draw_idx), len(records)))
    for c in range(n_chain):
        for j, d in enumerate(draw_idx):
            out[c, j] = np.asarray(fn(*(v[c, d] for v in values))).reshape(-1)[records]
    return out, records


def contribution_function(model: pm.Model) -> Callable[..., np.ndarray]:
    """Compile the model's own per-record pseudo log-likelihood as a function of new records.

    Compiles the logp graph of the weighted (and censored) observed variable exactly as the
    sampler sees it, with the records and weights replaced by inputs: an audit tool for
    computing privacy losses on neighbouring datasets without rebuilding the model.

    Parameters
    ----------
    model : pymc.Model
        Built with :func:`weighted_observed`.

    Returns
    -------
    callable
        ``f(params, x, weights) -> numpy.ndarray``: ``params`` maps each free variable's name to
        its (untransformed) value; ``x`` and ``weights`` are arrays of records and their weights.
    """
    name = observed_name(model)
    rv = model[name]
    graph = model.logp(vars=[rv], sum=False, jacobian=False)[0]
    value = model.rvs_to_values[rv]
    wdata = model[f"{name}_weights"]
    x = pt.TensorType(value.dtype, shape=(None,) * value.ndim)(name="x")
    w = pt.TensorType(wdata.dtype, shape=(None,) * wdata.ndim)(name="w")
    repl = {value: x, wdata: w}
    thetas = []
    for free in model.free_RVs:
        v = model.rvs_to_values[free]
        theta = free.type(name=free.name)
        transform = model.rvs_to_transforms.get(free)
        repl[v] = theta if transform is None else transform.forward(theta, *free.owner.inputs)
        thetas.append(theta)
    # rebuild_strict=False recomputes every output type, so the record axis is no longer
    # pinned to the n of the model's own data
    out = pytensor.graph.replace.clone_replace(graph, repl, rebuild_strict=False)
    fn = pytensor.function(thetas + [x, w], out, on_unused_input="ignore")
    names = [t.name for t in thetas]

    def contributions(params: Mapping[str, Any], x_new, weights_new) -> np.ndarray:
        return np.asarray(fn(*(np.asarray(params[k]) for k in names),
                             np.asarray(x_new, dtype=x.dtype),
                             np.asarray(weights_new, dtype=w.dtype)))

    return contributions


def _neighbour_datasets(data) -> list:
    """Return two neighbours of ``data``.

    The first has its first record replaced by the record farthest from it, the second its last
    record removed.
    """
    if isinstance(data, pd.DataFrame):
        num = data.select_dtypes("number")
        key = (num.iloc[:, 0].to_numpy(float) if num.shape[1] else np.arange(len(data)))
        far = int(np.nanargmax(np.abs(key - key[0])))
        changed = data.copy()
        changed.iloc[0] = data.iloc[far]
        return [changed, data.iloc[:-1]]
    arr = np.asarray(data)
    flat = arr.astype(float).ravel() if arr.ndim == 1 else arr[:, 0].astype(float)
    far = int(np.nanargmax(np.abs(flat - flat[0])))
    changed = arr.copy()
    changed[0] = arr[far]
    return [changed, arr[:-1]]


def data_dependent_priors(factory: Callable[..., pm.Model], data,
                          factory_kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """Free variables whose prior changes when one record changes: priors built from the data.

    Builds the model on ``data`` and on two neighbours (the first record replaced by the
    record farthest from it, and the last record removed), and compares each free variable's
    prior log-density at the first model's initial point. A prior computed from the data (a mean,
    a standard deviation) almost always shifts; one computed from a statistic that these two
    neighbours leave unchanged would not be detected, so this is a guard, not a proof.

    Parameters
    ----------
    factory : callable
        ``factory(data, weights=None, censor=None, **factory_kwargs) -> pm.Model``.
    data : DataFrame or array
    factory_kwargs : dict, optional

    Returns
    -------
    list of str
        Names of the variables whose prior depends on the data (empty when none is detected).
    """
    kw = dict(factory_kwargs or {})
    base = factory(data, None, None, **kw)
    point = base.initial_point()
    names = [rv.name for rv in base.free_RVs]
    ref = base.compile_logp(vars=base.free_RVs, sum=False, jacobian=False)(point)
    found: set[str] = set()
    for other_data in _neighbour_datasets(data):
        other = factory(other_data, None, None, **kw)
        if [rv.name for rv in other.free_RVs] != names:
            found.add("(the set of parameters)")
            continue
        other_point = {k: v for k, v in point.items()}
        if any(np.shape(other.initial_point()[k]) != np.shape(v) for k, v in point.items()):
            continue  # parameters sized by n (random effects): not comparable this way
        got = other.compile_logp(vars=other.free_RVs, sum=False, jacobian=False)(other_point)
        for name, a, b in zip(names, ref, got):
            if not np.allclose(a, b, rtol=1e-10, atol=1e-12):
                found.add(name)
    return sorted(found)


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
    concentration: float = 2.0,
    priors: Mapping[str, PriorFactory] | None = None,
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
    shape_mu, shape_sigma : float
        Normal prior of every log shape parameter (fixed numbers, as a DP guarantee needs).
    concentration : float, default 2
        Symmetric Dirichlet parameter of the mixture weights. With more components than the
        data need, a concentration above d / 2 (d = 2 shape parameters per component) makes
        the posterior duplicate a component rather than empty one (Rousseau & Mengersen 2011,
        JRSS B 73: 689-710); an emptied component's shapes follow their prior, a funnel in
        which NUTS diverges. Measured (``benchmarks/pseudo_posterior_convergence.py``,
        ``benchmarks/README.md``) on the one-component simulation at concentration 1: the
        unweighted fit diverged at all three seeds tried at PyMC's target_accept 0.8 (17-147
        divergences), and one weighted fit of three at 0.95 (4); at 2 and 0.95, none of 38
        fits diverged (29 on the simulation, 9 on CE's expenditures; 2 or 4 chains).
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`): ``"log_a"``, ``"log_b"``
        (dims ``component``), ``"pi"`` (dims ``component``, with more than one component).

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
    priors = Priors("beta_mixture", priors, {
        "log_a": "Normal(shape_mu, shape_sigma), dims component",
        "log_b": "Normal(shape_mu, shape_sigma), dims component",
        "pi": "Dirichlet(concentration), dims component (n_components > 1)"})
    with pm.Model(coords={"component": np.arange(K), "record": np.arange(len(x))}) as model:
        log_a = priors.get("log_a", "log_a", "component", lambda: pm.Normal(
            "log_a", shape_mu, shape_sigma, dims="component"))
        log_b = priors.get("log_b", "log_b", "component", lambda: pm.Normal(
            "log_b", shape_mu, shape_sigma, dims="component"))
        a, b = pt.exp(log_a), pt.exp(log_b)
        if K == 1:
            def base(a, b, size=None):
                return pm.Beta.dist(a[0], b[0], size=size)

            weighted_observed("x", base, [a, b], x, weights=weights, censor=censor,
                              dims="record")
        else:
            pi = priors.get("pi", "pi", "component", lambda: pm.Dirichlet(
                "pi", np.full(K, concentration), dims="component"))

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
    log_mu_mean: float = 1.0,
    log_mu_sigma: float = 2.0,
    alpha_sigma: float = 10.0,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    """Negative-binomial model for counts.

    ``y_i ~ NB(mu, alpha)``, ``log mu ~ N(log_mu_mean, log_mu_sigma^2)``,
    ``alpha ~ HalfNormal(alpha_sigma)``. The hyperparameters are fixed numbers, never computed
    from the data (the default puts 95% prior mass on mu between about 0.05 and 150), as a
    differential-privacy guarantee requires; set them from public knowledge or a reference
    dataset.

    Parameters
    ----------
    data : DataFrame or array
        Non-negative integer counts.
    weights, censor
        See :func:`weighted_observed`.
    column : str, optional
    log_mu_mean, log_mu_sigma : float
        Normal prior of log mu.
    alpha_sigma : float
        Scale of the half-normal prior of the dispersion alpha.
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`): ``"log_mu"``, ``"alpha"``
        (scalars). Keep their parameters fixed numbers for a differential-privacy guarantee.

    Returns
    -------
    pymc.Model
        Free ``log_mu``, ``alpha``; observed ``y``.
    """
    y = _column(data, column)
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise ColumnTypeError("negative_binomial needs non-negative integer counts.")
    for label, value in (("log_mu_sigma", log_mu_sigma), ("alpha_sigma", alpha_sigma)):
        if not (np.isfinite(value) and value > 0):
            raise InvalidParameterError(f"{label} must be positive; got {value!r}.",
                                        column=label)
    priors = Priors("negative_binomial", priors, {
        "log_mu": "Normal(log_mu_mean, log_mu_sigma)", "alpha": "HalfNormal(alpha_sigma)"})
    with pm.Model(coords={"record": np.arange(len(y))}) as model:
        log_mu = priors.get("log_mu", "log_mu", None, lambda: pm.Normal(
            "log_mu", float(log_mu_mean), float(log_mu_sigma)))
        alpha = priors.get("alpha", "alpha", None, lambda: pm.HalfNormal(
            "alpha", float(alpha_sigma)))
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
    intercept_sigma: float = 10.0,
    beta_sigma: float = 10.0,
    sigma_sigma: float = 10.0,
    center: Sequence[float] | None = None,
    scale: Sequence[float] | None = None,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    """Build the linear regression ``y ~ N(b0 + X b, sigma)`` for partially synthetic responses.

    Priors ``b0 ~ N(0, intercept_sigma)``, ``b ~ N(0, beta_sigma)``,
    ``sigma ~ HalfNormal(sigma_sigma)`` with fixed hyperparameters; predictors are used as
    given, or as ``(X - center) / scale`` with public ``center`` and ``scale`` (never the data's
    own moments). The synthetic records redraw the response at the real predictors, which are
    released unchanged: no differential-privacy mechanism can bound that release, so the DP
    mechanisms refuse this model (the weighted mechanisms, which state no guarantee, accept it).

    Parameters
    ----------
    data : DataFrame
    weights, censor
        See :func:`weighted_observed`.
    response : str
    predictors : sequence of str
    intercept_sigma, beta_sigma, sigma_sigma : float
        Prior scales.
    center, scale : sequence of float, optional
        Public centring and scaling of each predictor.
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`): ``"intercept"``,
        ``"beta"`` (dims ``predictor``), ``"sigma"``.

    Returns
    -------
    pymc.Model
        Free ``intercept``, ``beta`` (dims ``predictor``), ``sigma``; observed ``y``.
    """
    if not isinstance(data, pd.DataFrame):
        raise InputTypeError("linear_regression takes a DataFrame.")
    y = _column(data, response)
    X = data[list(predictors)].to_numpy(dtype=float)
    if np.any(~np.isfinite(X)):
        raise ColumnTypeError("Predictors must be finite (no missing values).")
    p = X.shape[1]
    c = np.zeros(p) if center is None else np.asarray(center, dtype=float)
    sc = np.ones(p) if scale is None else np.asarray(scale, dtype=float)
    if c.shape != (p,) or sc.shape != (p,) or np.any(sc <= 0):
        raise InvalidParameterError(f"center and scale need one value per predictor ({p}), "
                                    "scale positive.", column="scale")
    Xs = (X - c) / sc
    coords = {"record": np.arange(len(y)), "predictor": list(predictors)}
    priors = Priors("linear_regression", priors, {
        "intercept": "Normal(0, intercept_sigma)", "beta": "Normal(0, beta_sigma), dims "
        "predictor", "sigma": "HalfNormal(sigma_sigma)"})
    with pm.Model(coords=coords) as model:
        b0 = priors.get("intercept", "intercept", None, lambda: pm.Normal(
            "intercept", 0.0, float(intercept_sigma)))
        b = priors.get("beta", "beta", "predictor", lambda: pm.Normal(
            "beta", 0.0, float(beta_sigma), dims="predictor"))
        sigma = priors.get("sigma", "sigma", None, lambda: pm.HalfNormal(
            "sigma", float(sigma_sigma)))
        mu = b0 + pt.dot(Xs, b)

        def base(mu, sigma, size=None):
            return pm.Normal.dist(mu, sigma, size=size)

        weighted_observed("y", base, [mu, sigma], y, weights=weights, censor=censor,
                          dims="record",
                          dp_refusal="its synthetic records redraw the response at the real "
                                     "predictors, which are released unchanged (partially "
                                     "synthetic data); no epsilon bounds that release")
    return model
