"""Posterior summaries and synthetic data from a latent class model of private marginals.

Every quantity here is a function of ``pi`` and ``psi`` computed draw by draw, so it is
invariant to label switching: marginal and full-table cell probabilities, their credible
intervals, and synthetic datasets (each from its own posterior draw).
:class:`LatentClassSynthesizer` puts the model and its synthesis behind the protocol every
synthesizer shares. Inference from the synthetic datasets (Reiter's combining rules) is
evaluation: :func:`bayesynth.evaluation.combine_marginal_estimates`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from bayesynth.errors import IncompatibleModelError, InputTypeError, SchemaError
from bayesynth.synthesis.base import (
    Synthesizer,
    read_idata,
    read_json,
    select_draws,
    write_json,
)

__all__ = [
    "marginal_probabilities",
    "full_table_probabilities",
    "probability_summary",
    "synthesize_latent_class",
    "LatentClassSynthesizer",
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
    picks = select_draws(post, m, spacing="even")
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


class LatentClassSynthesizer(Synthesizer):
    """Synthetic records from differentially private marginal tables (Pistner et al.).

    :meth:`fit` builds :func:`bayesynth.models.latent_class_dp_model` from the noisy release
    and samples it with :func:`bayesynth.sample` (the count moves and the data-augmentation
    Gibbs step); :meth:`sample` draws records from the posterior with
    :func:`synthesize_latent_class`. The synthetic data are post-processing of the release:
    they cost no privacy budget beyond it, under the release's own neighbour relation.

    Parameters
    ----------
    k : int, default 10
        Classes of the truncated stick-breaking prior.
    alpha : float, default 1
        Concentration of the stick-breaking prior (None after :meth:`from_posterior` on a
        model whose prior of ``v`` was swapped).
    psi_prior : float, default 1
        Symmetric Dirichlet parameter of each class's level probabilities (None after
        :meth:`from_posterior` on a model whose prior of ``psi`` was swapped).
    priors : mapping, optional
        Replacement priors by name (``"v"``, ``"psi"``; see
        :func:`bayesynth.models.latent_class_dp_model`), each a callable
        ``(name, dims) -> RV``. Used by :meth:`fit` only (not saved: the posterior is).
    full_table : bool, optional
        Store the full-table cell probabilities in the trace (default: small tables only).
    domain : dict, optional
        Levels of every variable, when :meth:`fit` is given a plain list of marginals.
    n : int, optional
        Number of records, when :meth:`fit` is given a plain list of marginals.
    draws, tune, chains : int
        MCMC settings of :func:`bayesynth.sample`.
    random_seed : int, optional
        Seed of the MCMC run (``sample`` takes its own seed).
    progressbar : bool, default False

    Attributes
    ----------
    model_ : pymc.Model
        The latent class model (not restored by :meth:`load`, which needs only the posterior).
    idata_ : arviz.InferenceData
        Its posterior (a function of the release alone).
    n_ : int
        The model's number of records (the release's n, or its noisy estimate under add/remove
        neighbours): the default size of a synthetic dataset.
    ledger_ : bayesynth.privacy.Ledger or None
        The release's ledger; :meth:`sample` records each synthetic dataset in it as
        post-processing.

    Notes
    -----
    The protocol of :class:`~bayesynth.synthesis.Synthesizer`. :meth:`sample` uses evenly
    spaced posterior draws (:func:`~bayesynth.synthesis.select_draws` with
    ``spacing="even"``, as :func:`synthesize_latent_class` does, which thins the
    autocorrelated chain), so ``m`` cannot exceed the number of draws. :meth:`save` writes
    ``posterior.nc`` and ``latent_class.json`` (n and the ledger).

    Examples
    --------
    >>> import numpy as np, pandas as pd, bayesynth as bs
    >>> from bayesynth.privacy import privatize_marginals
    >>> r = np.random.default_rng(0)
    >>> df = pd.DataFrame({"a": r.integers(0, 2, 200), "b": r.integers(0, 3, 200)})
    >>> release = privatize_marginals(df, "all2", 2.0, domain={"a": [0, 1], "b": [0, 1, 2]})
    >>> syn = bs.synthesis.LatentClassSynthesizer(k=3, draws=50, tune=50, chains=1,
    ...                                           random_seed=1).fit(release)  # doctest: +SKIP
    >>> out = syn.sample(m=5, random_seed=2)  # doctest: +SKIP
    """

    def __init__(self, k: int = 10, *, alpha: float | None = 1.0,
                 psi_prior: float | None = 1.0, priors: Mapping[str, Any] | None = None,
                 full_table: bool | None = None, domain: Mapping[str, Sequence] | None = None,
                 n: int | None = None, draws: int = 1000, tune: int = 1000, chains: int = 2,
                 random_seed: int | None = None, progressbar: bool = False):
        self.k = k
        self.alpha = alpha
        self.psi_prior = psi_prior
        self.priors = priors
        self.full_table = full_table
        self.domain = domain
        self.n = n
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.random_seed = random_seed
        self.progressbar = progressbar

    def fit(self, data: Any) -> LatentClassSynthesizer:
        """Fit the latent class model to a differentially private release.

        Parameters
        ----------
        data : PrivateMarginals or list of NoisyMarginal
            The release (:func:`bayesynth.privacy.privatize_marginals`); never the
            confidential records.

        Returns
        -------
        LatentClassSynthesizer
            ``self``, with ``model_``, ``idata_``, ``n_`` and ``ledger_``.

        Raises
        ------
        bayesynth.errors.InputTypeError
            Given a DataFrame (privatize it first) or anything else that is not a release.
        """
        from bayesynth.models.latent_class_dp import latent_class_dp_model, latent_class_spec
        from bayesynth.samplers.sampling import sample as bs_sample

        if isinstance(data, pd.DataFrame):
            raise InputTypeError(
                "LatentClassSynthesizer.fit takes the differentially private release, not the "
                "confidential records: release = bayesynth.privacy.privatize_marginals(df, "
                "'select', epsilon, domain=...), then fit(release).")
        model = latent_class_dp_model(data, domain=self.domain, n=self.n, k=self.k,
                                      alpha=1.0 if self.alpha is None else self.alpha,
                                      psi_prior=1.0 if self.psi_prior is None
                                      else self.psi_prior,
                                      full_table=self.full_table, priors=self.priors)
        self.model_ = model
        self.idata_ = bs_sample(model, draws=self.draws, tune=self.tune, chains=self.chains,
                                random_seed=self.random_seed, progressbar=self.progressbar)
        self.n_ = int(latent_class_spec(model).n)
        self.ledger_ = getattr(data, "ledger", None)
        return self

    @classmethod
    def from_posterior(cls, model: pm.Model, idata: az.InferenceData, *, ledger: Any = None,
                       **params: Any) -> LatentClassSynthesizer:
        """Synthesize from a latent class posterior you sampled and inspected; no refit.

        Parameters
        ----------
        model : pymc.Model
            Built by :func:`bayesynth.models.latent_class_dp_model`.
        idata : arviz.InferenceData
            Its posterior (``pi`` and ``psi_<var>``).
        ledger : bayesynth.privacy.Ledger, optional
            The release's ledger, to record the synthetic datasets in.
        **params
            Constructor settings (the MCMC settings are not used).

        Returns
        -------
        LatentClassSynthesizer

        Raises
        ------
        bayesynth.errors.IncompatibleModelError
            The model was not built by :func:`~bayesynth.models.latent_class_dp_model`, or the
            posterior lacks its variables.
        """
        from bayesynth.models.latent_class_dp import latent_class_spec

        spec = latent_class_spec(model)
        if spec is None:
            raise IncompatibleModelError("from_posterior needs a model built by "
                                         "bayesynth.models.latent_class_dp_model.")
        post = getattr(idata, "posterior", None)
        if post is None:
            raise IncompatibleModelError("The posterior lacks pi and psi_<var>: pass the "
                                         "InferenceData sampled from this model.")
        absent = [v for v in ["pi", *(f"psi_{x}" for x in spec.variables)] if v not in post]
        if absent:
            raise IncompatibleModelError(f"The posterior lacks {absent}: pass the InferenceData "
                                         "sampled from this model.")
        # alpha / psi_prior are None when the model's prior was swapped (priors=)
        settings = {"k": spec.k, "alpha": spec.alpha, "psi_prior": spec.psi_prior, **params}
        obj = cls(**settings)
        obj.model_ = model
        obj.idata_ = idata
        obj.n_ = int(spec.n)
        obj.ledger_ = ledger
        return obj

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: Any = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets, each from its own (evenly spaced) posterior draw.

        Parameters
        ----------
        m : int, default 1
            At most the number of posterior draws.
        n_rows : int, optional
            Records per dataset (default ``n_``).
        random_seed : int, optional

        Returns
        -------
        list of pandas.DataFrame
            One categorical column per variable, with the domain's levels.

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit`.
        bayesynth.errors.InvalidParameterError
            ``m`` below 1 or above the number of draws, ``n_rows`` below 1, or a bad
            ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        select_draws(self.idata_, m, spacing="even")  # m above the draws: the protocol's error
        return synthesize_latent_class(self.idata_, m, n=self.n_ if n_rows is None else n_rows,
                                       random_seed=random_seed, ledger=self.ledger_)

    # ---------------------------------------------------------------------------- save/load

    _fit_only = ("priors",)

    def _json_params(self) -> dict[str, Any]:
        params = super()._json_params()
        if params.get("domain") is not None:
            params["domain"] = {str(k): v for k, v in params["domain"].items()}
        return params

    def _write(self, directory: Path) -> None:
        """Write ``posterior.nc`` and ``latent_class.json``."""
        self.idata_.to_netcdf(str(directory / "posterior.nc"), engine="h5netcdf")
        write_json(directory, "latent_class.json", {
            "n": self.n_, "ledger": None if self.ledger_ is None else self.ledger_.to_dict()})

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any
              ) -> LatentClassSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        from bayesynth.privacy import Ledger

        state = read_json(directory, "latent_class.json")
        obj = cls(**cls._params_from_json(meta["params"]))
        obj.idata_ = read_idata(directory, "posterior.nc")
        obj.n_ = int(state["n"])
        obj.ledger_ = None if state["ledger"] is None else Ledger.from_dict(state["ledger"])
        return obj
