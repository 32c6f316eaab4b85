"""``bayesynth.sample``: :func:`pymc.sample` with the copula Gibbs steps assigned."""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from threadpoolctl import threadpool_limits

from bayesynth.errors import IncompatibleModelError, check_integer
from bayesynth.models import copula_quantities as _copula_quantities
from bayesynth.models.copula_quantities import (
    MAX_DRAWS,
    N_MC,
    effective_ess,
    effective_rhat,
    judge_thinning,
    not_judged,
)
from bayesynth.models.latent_class_dp import latent_class_spec
from bayesynth.models.metadata import metadata_names
from bayesynth.models.pseudo_posterior import record_loglik_chains
from bayesynth.models.rank_probit_copula import get_layout
from bayesynth.samplers.bart_steps import bart_steps, has_bart
from bayesynth.samplers.latent_class import latent_class_steps
from bayesynth.samplers.steps import (
    COPULA_STEPS,
    CopulaGibbsStep,
    FactorScoresGibbs,
    LatentGibbs,
    MarginalLoadingsHMC,
    _uncovered_variables,
)

__all__ = ["steps", "sample", "assign_copula_steps", "check_copula_convergence",
           "check_loglik_convergence", "LoglikConvergence", "IDENTIFIED_VARS", "LATENT_VARS"]

_log = logging.getLogger("bayesynth")

#: Identified quantities of the copula model, on which convergence is judged.
IDENTIFIED_VARS: tuple[str, ...] = ("C", "alpha_scaled")
#: Per-record latent variables, left out of the trace unless ``keep_latent=True``.
LATENT_VARS: tuple[str, ...] = ("z", "eta")
#: R-hat above which bayesynth.sample warns (Vehtari et al. 2021 recommend 1.01).
RHAT_WARN = 1.01
#: Bulk ESS that the warning's estimate of the run length aims at (Vehtari et al. 2021: 100
#: per chain for four chains).
ESS_AIM = 400
#: The latent class models' threshold (their composite likelihood mixes slowly; see its docs).
RHAT_WARN_LATENT_CLASS = 1.05
#: Chains are continued (``max_extensions``) only while the largest R-hat is at most this:
#: further apart, two extensions of ``draws`` do not bring them within RHAT_WARN (see
#: ``max_extensions`` of :func:`sample`) and would only multiply the run time.
EXTEND_RHAT_MAX = 1.1
#: Convergence tables already computed, per posterior object (the extension loop's last
#: judgement is the final check's).
_TABLES: dict[int, tuple[str, Any, pd.DataFrame]] = {}
#: The same for the weighted-likelihood judgements (see _loglik_judgement).
_LOGLIK: dict[int, tuple[Any, Any, Any, tuple[LoglikConvergence, int, int]]] = {}


def assign_copula_steps(
    model: pm.Model | None = None, *, collapse_levels: bool = False, ends_sweep: bool = True
) -> list[CopulaGibbsStep]:
    """Instantiate every copula Gibbs step that fits ``model``.

    A step whose block is absent (for example ``prec`` after the ``sigma`` prior was replaced) or
    whose prior is not conjugate is skipped, and :func:`pymc.sample` assigns its own step method
    to those variables.

    When the sweep ends with :class:`~bayesynth.samplers.steps.MarginalLoadingsHMC` (the
    default) and nothing runs after it, :class:`~bayesynth.samplers.steps.FactorScoresGibbs`
    is left out: the Hamiltonian move ends by drawing the factor scores (and the unconstrained
    latent values) exactly from their conditional, and the scores' own step, first in the next
    sweep, would draw them again from the same conditional given the same state. Leaving it
    out changes nothing in the chain's law but its first sweep, which starts from the initial
    scores; on SD2011 the step took 8% of a sweep (``benchmarks/README.md``). With
    ``collapse_levels=True`` the scores' step is a Metropolis step, not that draw, and stays;
    so it does where PyMC would append its own step for a variable these steps leave over (a
    replaced prior) or a caller appends steps (``ends_sweep=False``), since those run between
    the two draws and change their conditional.

    Parameters
    ----------
    model : pymc.Model, optional
        Taken from the context when omitted.
    collapse_levels : bool, default False
        Update the factor scores with the categorical level columns integrated out (see
        :class:`~bayesynth.samplers.steps.FactorScoresGibbs`); ``False`` gives the paper's
        plain Gibbs block.
    ends_sweep : bool, default True
        Whether these steps end the sweep (no step of the caller's runs after them); see
        above.

    Returns
    -------
    list of CopulaGibbsStep
        In Gibbs-sweep order.
    """
    model = modelcontext(model)
    steps: list[CopulaGibbsStep] = []
    skipped: list[tuple[type, Exception]] = []
    layout = get_layout(model)
    for cls in COPULA_STEPS:
        if not cls.applies(layout):
            continue
        kwargs = {"collapse_levels": collapse_levels} if cls is FactorScoresGibbs else {}
        try:
            steps.append(cls(model=model, **kwargs))
        except IncompatibleModelError as err:
            if cls is LatentGibbs:
                raise
            skipped.append((cls, err))
    if (ends_sweep and len(steps) > 1 and isinstance(steps[0], FactorScoresGibbs)
            and not steps[0].collapsed and isinstance(steps[-1], MarginalLoadingsHMC)
            and not _uncovered_variables(model, steps[1:])):
        # The sweep's last step ends by drawing the factor scores (with the unconstrained
        # latent values) from the very conditional the first step draws them from, given the
        # same state: the first step would redraw a block just drawn exactly, which leaves
        # the chain's law unchanged (a Gibbs block's draw does not depend on the block's old
        # value). Only the first sweep differs: it starts from the initial scores. Nothing may
        # run in between: no PyMC step for a left-over variable, no step a caller appends.
        steps.pop(0)
    leftover = _uncovered_variables(model, steps)
    for cls, err in skipped:
        if cls.primary and leftover:
            what = (f"PyMC's own step (NUTS for continuous variables) samples {leftover} "
                    "instead")
        else:
            what = "the other steps still sample the posterior, with one move fewer"
        warnings.warn(f"{cls.__name__} is not used ({err}); {what}.", UserWarning,
                      stacklevel=3)
    return steps


def _is_copula(model: pm.Model) -> bool:
    try:
        get_layout(model)
    except IncompatibleModelError:
        return False
    return True


def _trace_names(model: pm.Model, keep_latent: bool) -> list[str]:
    names = []
    for var in list(model.free_RVs) + list(model.deterministics):
        dims = model.named_vars_to_dims.get(var.name, ()) or ()
        if not keep_latent and (var.name in LATENT_VARS or "record" in dims):
            continue
        names.append(var.name)
    return names


def check_copula_convergence(idata: az.InferenceData, categorical_margins: str = "data", *,
                             stacklevel: int = 2, cores: int | None = None
                             ) -> pd.DataFrame | None:
    """Judge a copula posterior on the quantities synthesis uses; warn unless it converged.

    The check :func:`sample` runs after sampling a copula (unless ``check_convergence=False``),
    as a function, so that a caller that samples with the check off (a benchmark timing the
    sampler alone, a synthesizer that keeps the table) runs exactly the same judgement. The
    quantities are those of :func:`bayesynth.evaluation.synthesis_diagnostics`: the
    correlations between ordered variables, the implied level probabilities, the pairwise
    association of categorical variables and the category-conditional means of ordered columns
    (computed on at most :data:`~bayesynth.models.copula_quantities.MAX_DRAWS` evenly thinned
    draws, 4000), with the categorical margins as ``categorical_margins`` says.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`sample` on a copula model.
    categorical_margins : {"data", "model"}, default "data"
        See :func:`sample`.
    stacklevel : int, default 2
        As :func:`warnings.warn`'s, counted from the caller of this function (2: the line
        that called it; a wrapper passes 3 to point at its own caller).
    cores : int, optional
        Processes over which the chains' quantities are computed (default: as many as the
        chains and the machine's cores allow; the table does not depend on it).

    Returns
    -------
    pandas.DataFrame or None
        The quantity table (``kind``, ``mean``, ``sd``, ``ess_bulk``, ``ess_tail``, ``r_hat``
        per quantity), or None where there is nothing to judge (not a copula posterior, one
        chain, fewer than four draws).

    Warns
    -----
    RuntimeWarning
        When the largest R-hat exceeds :data:`RHAT_WARN`; the message names that quantity and
        how many of those judged exceed it. Where R-hat passes, when some quantity's bulk ESS
        is below :data:`~bayesynth.models.copula_quantities.ESS_MIN_PER_CHAIN` (100) per
        chain, the criterion :func:`~bayesynth.evaluation.synthesis_diagnostics` judges by
        (with few effective draws R-hat is itself too noisy to show convergence). Where the
        smallest ESS is below the aim (400, or that floor if higher), both messages give the
        run length the slowest quantity's ESS rate implies. Also when
        some quantities could not be judged (a rare
        level, or a pair of columns rarely shown together, that
        got no Monte Carlo point in some draws: see
        :func:`~bayesynth.models.copula_quantities.synthesis_quantity_table`).
    """
    table = _judged(idata, categorical_margins, cores)
    skipped = not_judged(table) if table is not None else []
    if skipped:
        shown = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3
                                           else "")
        warnings.warn(
            f"{len(skipped)} of the {len(table)} quantities synthesis uses could not be judged "
            f"({shown}): in some draws none of the {N_MC} Monte Carlo points fell in their "
            "level, or showed both of their columns, so R-hat and ESS are undefined. Judge "
            "them with "
            f"bayesynth.evaluation.synthesis_diagnostics(idata, n_mc={10 * N_MC}) or more.",
            RuntimeWarning,
            stacklevel=stacklevel,
        )
    worst = _worst_rhat(table)
    ext = int(idata.posterior.attrs.get("extensions", 0))
    after = f" after {ext} extension(s) of the chains" if ext else ""
    if worst is not None and worst > RHAT_WARN:
        rhat = effective_rhat(table)
        label = table.index[int(np.nanargmax(rhat))]
        n_bad = int(np.sum(rhat > RHAT_WARN))
        n_judged = int(np.sum(~np.isnan(rhat)))  # constant and unjudged quantities are NaN
        value = (f"{worst:.3f}" if np.isfinite(worst) else
                 "undefined (some draws are missing or infinite)")
        warnings.warn(
            f"Largest R-hat of the quantities synthesis uses is {value} ({label}), above "
            f"{RHAT_WARN}; {n_bad} of the {n_judged} quantities judged exceed it: the chains "
            "have not "
            f"converged{after}. {_run_length_hint(idata, table)}(see "
            "bayesynth.evaluation.synthesis_diagnostics).",
            RuntimeWarning,
            stacklevel=stacklevel,
        )
    elif worst is not None:  # R-hat passes: too few effective draws still fail the check
        ess = effective_ess(table)
        floor = _copula_quantities.ESS_MIN_PER_CHAIN * int(idata.posterior.sizes["chain"])
        low = ess < floor  # NaN (not judged) compares False
        if low.any():
            warnings.warn(
                f"{int(low.sum())} of the {int(np.sum(~np.isnan(ess)))} quantities synthesis "
                f"uses have a bulk ESS below {floor:g} "
                f"({_copula_quantities.ESS_MIN_PER_CHAIN} per chain); the largest R-hat, "
                f"{worst:.3f}, is within {RHAT_WARN}, but with so few effective draws R-hat "
                "cannot show convergence and the posterior means carry a large Monte Carlo "
                f"error: not converged by the criteria of synthesis_diagnostics{after}. "
                f"{_run_length_hint(idata, table)}(see "
                "bayesynth.evaluation.synthesis_diagnostics).",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
    return table


@dataclass(frozen=True)
class LoglikConvergence:
    """How far a weighted-likelihood fit converged, judged on the records' log-likelihoods.

    Attributes
    ----------
    max_rhat : float
        Largest rank-normalised split R-hat of f_theta(x_i) over the judged records (NaN with
        one chain or fewer than four kept draws per chain).
    worst_record : int
        Position of the record with that R-hat (-1 when there is none).
    min_ess_bulk : float
        Smallest bulk effective sample size over the judged records.
    n_divergent : int
        Divergent transitions among the kept draws (NUTS; 0 for samplers that have none).
    n_records, n_draws : int
        Records and draws (all chains) judged.
    """

    max_rhat: float
    worst_record: int
    min_ess_bulk: float
    n_divergent: int
    n_records: int
    n_draws: int

    @property
    def converged(self) -> bool:
        """No divergence, and R-hat at most :data:`RHAT_WARN` (or not computable)."""
        return self.n_divergent == 0 and not (self.max_rhat > RHAT_WARN)


def _has_weighted_likelihood(model: pm.Model) -> bool:
    return len(metadata_names(model, "records_")) == 1


def _loglik_judgement(model: pm.Model, idata: az.InferenceData
                      ) -> tuple[LoglikConvergence, int, int]:
    """Judge a weighted-likelihood fit (:func:`check_loglik_convergence` without the warning).

    Returns the judgement, the number of records above :data:`RHAT_WARN` and the number with
    a finite R-hat. Kept per posterior object, so that the final check after
    :func:`sample`'s extension loop reuses the loop's last judgement (as the copula's
    convergence tables are kept in ``_TABLES``).
    """
    post = idata.posterior
    stats = getattr(idata, "sample_stats", None)
    hit = _LOGLIK.get(id(idata))
    if hit is not None and hit[0] is post and hit[1] is model and hit[2] is stats:
        return hit[3]
    L, records = record_loglik_chains(model, idata)
    n_chain, n_draw, _ = L.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant or infinite records: NaN
        ds = xr.Dataset({"f": (("chain", "draw", "record"), L)})
        rhat = (az.rhat(ds)["f"].values if n_chain >= 2 and n_draw >= 4
                else np.full(L.shape[2], np.nan))
        ess = az.ess(ds)["f"].values if n_draw >= 4 else np.full(L.shape[2], np.nan)
    div = (int(stats["diverging"].sum()) if stats is not None and "diverging" in stats
           else 0)
    finite = np.isfinite(rhat)
    worst = int(np.argmax(np.where(finite, rhat, -np.inf))) if finite.any() else -1
    result = LoglikConvergence(
        float(rhat[worst]) if worst >= 0 else math.nan,
        int(records[worst]) if worst >= 0 else -1,
        float(np.nanmin(ess)) if np.isfinite(ess).any() else math.nan,
        div, int(L.shape[2]), int(n_chain * n_draw))
    out = (result, int(np.sum(rhat[finite] > RHAT_WARN)), int(finite.sum()))
    if id(idata) not in _LOGLIK:  # forget the judgement with the posterior
        weakref.finalize(idata, _LOGLIK.pop, id(idata), None)
    _LOGLIK[id(idata)] = (post, model, stats, out)
    return out


def check_loglik_convergence(model: pm.Model, idata: az.InferenceData, *,
                             what: str | None = None, stacklevel: int = 2
                             ) -> LoglikConvergence:
    """Judge a weighted-likelihood fit on its records' log-likelihoods; warn if unconverged.

    The check :func:`sample` runs after sampling a model built with
    :func:`~bayesynth.models.pseudo_posterior.weighted_observed` (the pseudo-posterior base
    models). It reads f_theta(x_i), the log-likelihood of each record at each draw
    (:func:`~bayesynth.models.pseudo_posterior.record_loglik_chains`: at most 4,000 draws,
    evenly thinned, and 200 records, evenly spaced in the order of their mean log-likelihood,
    the least and the most likely included), not the parameters: f does not change when mixture
    components swap labels (a two-component ``beta_mixture`` fitted to one-component data has
    parameter R-hats near 1.8 with converged likelihoods), and it is what both the empirical
    Lipschitz bound and the synthetic data (the predictive density) rest on.

    Parameters
    ----------
    model : pymc.Model
        Built with ``weighted_observed``.
    idata : arviz.InferenceData
        Its posterior.
    what : str, optional
        Which fit this is, to start the warning with (for example
        ``"PseudoPosteriorSynthesizer(weighted): the unweighted fit"``).
    stacklevel : int, default 2
        As :func:`warnings.warn`'s, counted from the caller of this function.

    Returns
    -------
    LoglikConvergence

    Warns
    -----
    RuntimeWarning
        When the largest R-hat exceeds :data:`RHAT_WARN` (1.01), or when NUTS reported
        divergent transitions after tuning (the draws may then miss part of the posterior).
    """
    result, n_bad, n_judged = _loglik_judgement(model, idata)
    problems = []
    if result.max_rhat > RHAT_WARN:
        problems.append(
            f"the largest R-hat of the records' log-likelihoods f_theta(x_i) is "
            f"{result.max_rhat:.3f} (record {result.worst_record}), above {RHAT_WARN}, for "
            f"{n_bad} of the {n_judged} records judged: convergence is not shown "
            "(the chains are apart, or too short to tell)")
    if result.n_divergent:
        problems.append(
            f"{result.n_divergent} divergent transition(s) after tuning: the draws may miss "
            "part of the posterior (raise target_accept)")
    if problems:
        start = f"{what}: " if what else ""
        warnings.warn(
            f"{start}{'; '.join(problems)}. The empirical Lipschitz bound and the synthetic "
            f"data rest on these draws; run longer (draws, tune). Smallest bulk ESS "
            f"{result.min_ess_bulk:.0f} of {result.n_draws} draws judged.",
            RuntimeWarning, stacklevel=stacklevel)
    return result


def _run_length_hint(idata: az.InferenceData, table: pd.DataFrame) -> str:
    """How many draws per chain the slowest quantity's ESS rate implies for the ESS aimed at.

    The aim is :data:`ESS_AIM` (400), or the closing check's floor
    (:data:`~bayesynth.models.copula_quantities.ESS_MIN_PER_CHAIN` per chain) where that is
    higher (more than four chains), so that the length given passes the check's ESS part.

    A linear extrapolation of this run's bulk ESS per draw, and stated as one: the ESS of a
    slowly mixing chain grows more slowly than its draws until the run is many times its
    autocorrelation time. On six columns of SD2011 (``benchmarks/block_scale.py``, seed 1)
    2 x 500 kept draws gave the slowest quantity an ESS of 5.4, hence about 37,000 draws per
    chain; 2 x 2,500 gave 16.6 (not the 27 of a linear rate), hence about 60,000.

    The ESS is :func:`~bayesynth.models.copula_quantities.effective_ess`, as
    :class:`~bayesynth.evaluation.ConvergenceSummary` reads it: the quantities judged only,
    and an undefined ESS of one of them counts as none, when no length is implied. It is
    computed on the draws the judge keeps (at most ``MAX_DRAWS`` in all, evenly thinned), and
    the hint says so where they were thinned: the rate is then per draw the sampler kept, which
    understates a fast-mixing chain's rate (thinning costs it ESS) and so overstates the run
    it needs.
    """
    ess = effective_ess(table)
    judged = ~np.isnan(ess)
    draws = int(idata.posterior.sizes.get("draw", 0))
    chains = int(idata.posterior.sizes.get("chain", 1))
    aim = max(ESS_AIM, _copula_quantities.ESS_MIN_PER_CHAIN * chains)
    if not judged.any() or draws == 0 or np.min(ess[judged]) >= aim:
        return "Increase tune and draws "
    i = int(np.flatnonzero(judged)[np.argmin(ess[judged])])
    if ess[i] <= 0:
        return (f"The bulk ESS of {table.index[i]} is undefined, so this run implies no run "
                "length. Increase tune and draws ")
    need = int(math.ceil(draws * aim / ess[i]))
    thin = judge_thinning(chains, draws, MAX_DRAWS)
    if thin > 1:
        used = -(-draws // thin)
        source = (f"from {used} draws per chain (every {_ordinal(thin)} of {draws}: the "
                  f"judge thins to {MAX_DRAWS:,} draws in all)")
        rate = f"at that rate per draw of the {draws}"
        caveat = (", a chain that mixes slowly often needs more than this linear estimate, "
                  "and one that mixes fast may need less (thinning lowers its ESS per draw)")
    else:
        source, rate = f"from {draws} draws per chain", "at that rate"
        caveat = (", and a chain that mixes slowly often needs more than this linear "
                  "estimate")
    return (f"The smallest bulk ESS is {ess[i]:.0f} ({table.index[i]}) {source}: {rate} a "
            f"bulk ESS of {aim:g} takes about {need:,} draws per chain{caveat}. Increase "
            "tune and draws accordingly ")


def _ordinal(k: int) -> str:
    """Return 2nd, 3rd, 4th, 11th, 21st, ... for k."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def steps(
    model: pm.Model | None = None,
    *,
    random_seed: int | Sequence[int] | np.random.Generator | None = None,
    collapse_levels: bool = False,
    pgbart_kwargs: dict[str, Any] | None = None,
    ends_sweep: bool = True,
) -> list:
    """Return bayesynth's step methods for ``model``, for :func:`pymc.sample`.

    ``pm.sample(model=model, step=bs.steps(model))`` samples a bayesynth model with its custom
    steps: for the rank-probit copula every Gibbs block that fits the model's priors plus the
    exact group moves (:mod:`bayesynth.samplers.steps`), for a BART rank regression a seeded
    PGBART and the latent-data step, for a latent class model for private counts its count
    moves and Gibbs steps. PyMC assigns its own steps to any variable left over (a replaced
    prior, a variable a user added). A model of another kind gets an empty list (PyMC's default
    assignment). :func:`bayesynth.sample` is a convenience over exactly this, with one
    difference for BART: it runs the chains one after the other, and so must a direct
    ``pm.sample`` call (``cores=1``): with parallel chains pymc-bart stores the trees in the
    order the processes finish, so they no longer pair with the trace's draws and a seeded run
    does not repeat.

    PyMC's automatic assignment alone (``with model: pm.sample()``) also picks the copula's
    Gibbs blocks, whose ``competence`` recognises the structure they were written for, but not
    the group moves, which no single variable calls for; it is correct and mixes more slowly.

    Parameters
    ----------
    model : pymc.Model, optional
        Taken from the context when omitted.
    random_seed : int, sequence of int or Generator, optional
        Seeds pymc-bart's global random state for BART models (PyMC seeds the others).
    collapse_levels : bool, default False
        See :func:`sample`.
    pgbart_kwargs : dict, optional
        See :func:`sample`.
    ends_sweep : bool, default True
        For the copula: whether these steps end the sweep. Pass ``False`` when appending steps
        of your own (``step=bs.steps(model, ends_sweep=False) + [mine]``): the copula's last
        step then no longer ends with the factor scores' draw that makes their own step
        redundant, so it is kept (:func:`assign_copula_steps`).

    Returns
    -------
    list
        Step method instances.

    Warns
    -----
    UserWarning
        When a prior a user replaced turns one of the custom steps off; the message names the
        step and what samples its variables instead.
    """
    model = modelcontext(model)
    if has_bart(model):
        return bart_steps(model, random_seed=random_seed, **(pgbart_kwargs or {}))
    if _is_copula(model):
        return list(assign_copula_steps(model, collapse_levels=collapse_levels,
                                        ends_sweep=ends_sweep))
    if latent_class_spec(model) is not None:
        return latent_class_steps(model)
    return []


def sample(
    model: pm.Model | None = None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    random_seed: int | Sequence[int] | np.random.Generator | None = None,
    keep_latent: bool = False,
    *,
    progressbar: bool = True,
    cores: int | None = None,
    step: Any = None,
    collapse_levels: bool = False,
    blas_threads: int | None = 1,
    pgbart_kwargs: dict[str, Any] | None = None,
    categorical_margins: str = "data",
    check_convergence: bool = True,
    max_extensions: int = 0,
    start_from: str = "factor_analysis",
    **kwargs: Any,
) -> az.InferenceData:
    """Sample a bayesynth model: the copula and BART models with their own steps, others by PyMC.

    For the rank-probit copula, every block that has a conjugate full conditional gets its
    custom step (:mod:`bayesynth.samplers.steps`); any variable left over (a prior a user replaced
    with a non-conjugate one, or a variable a user added) goes to PyMC's own step assignment
    (NUTS for continuous variables). Initial values come from the model, without jitter, so the
    latent data start inside the constraint set; each chain's loadings, factor scores,
    categorical intercepts and residual precisions start at a factor analysis of its own
    bootstrap resample of the starting latent data (``start_from``; derived from
    ``random_seed``). BART rank regressions get a seeded PGBART and
    the latent-data step (chains one after the other). Latent class models for private counts
    get the count moves, the data-augmentation Gibbs step and the non-centred joint moves
    (:mod:`bayesynth.samplers.latent_class`); their true counts start at the noisy counts made
    feasible and each chain's ``v`` and ``psi`` at its own prior draw (derived from
    ``random_seed``), so that R-hat can see the separate modes of the composite likelihood.
    Any other model (for example the pseudo
    posterior base models) is sampled by PyMC's default steps, with the BLAS and parallel-chain
    settings below; models built with
    :func:`~bayesynth.models.pseudo_posterior.weighted_observed` are then judged on their
    records' log-likelihoods (:func:`check_loglik_convergence`).

    Parameters
    ----------
    model : pymc.Model, optional
        Taken from the context when omitted.
    draws, tune : int
        Kept draws and burn-in iterations per chain (``tune`` is burn-in; the adaptive moves,
        such as the utility transport, rotation and HMC moves, tune their step sizes during
        it and freeze them afterwards).
    chains : int, default 2
        Number of chains.
    random_seed : int, sequence of int or Generator, optional
        Makes the run reproducible: the same seed gives the same draws.
    keep_latent : bool, default False
        Keep the latent data ``z`` and the factor scores ``eta`` (n-by-p* per draw) in the trace.
        By default only the parameters and identified quantities are stored, so memory per draw
        does not depend on the number of records.
    progressbar : bool, default True
        Show PyMC's progress bar.
    cores : int, optional
        Processes for parallel chains; by default one per chain up to the number of CPUs
        (PyMC's own default halves the CPU count, assuming hyper-threads). The copula's
        convergence judgement computes its chains in up to as many forked processes (on Linux,
        from 100 draws; see
        :func:`~bayesynth.models.copula_quantities.synthesis_quantity_table`); its result does
        not depend on it.
    step : step method or list, optional
        Extra step methods for other variables; they are run after the copula steps.
    collapse_levels : bool, default False
        With ``categorical_likelihood="rpl"``: update the factor scores with the level columns'
        latent values integrated out (an exact Metropolis-Hastings step, then the z step
        redraws those values). Measured on the paper's two-variable simulation it gives about
        three times the effective sample size of categorical-by-numeric correlations, but not on
        the 26-variable child-health table (``benchmarks/README.md``). No effect on
        multinomial-probit models, whose categorical columns have their own collapsed moves.
    pgbart_kwargs : dict, optional
        For BART models: keyword arguments of pymc-bart's PGBART (``num_particles``,
        ``batch``: the share of trees updated per iteration during and after tuning, default
        (0.1, 0.1); ``(1.0, 1.0)`` updates every tree each iteration, as the paper's dbarts does).
    blas_threads : int or None, default 1
        BLAS threads per process while sampling. The products here are tall and skinny (n by k);
        more threads make them slower and oversubscribe the cores when chains run in parallel
        (measured: three times slower with two threads on two cores). ``None`` leaves the BLAS
        settings alone.
    categorical_margins : {"data", "model"}, default "data"
        Copula only: how the convergence check reads the categorical margins, as the
        synthesizer will (``CopulaSynthesizer(categorical_margins=...)``): ``"data"`` with each
        draw's intercepts calibrated to the data's level frequencies, ``"model"`` with the
        draw's own (see :func:`bayesynth.evaluation.synthesis_diagnostics`).
    check_convergence : bool, default True
        Copula, latent class and weighted-likelihood (pseudo-posterior) models: judge
        convergence after sampling and warn (see Returns). The copula's judgement computes
        every quantity synthesis uses for each kept draw. On one core that takes about 7 ms a
        draw for the demo table's 559 quantities (25.0-28.8 s on the 4,000 draws of
        ``make demo``, the most it judges) and 75 ms a draw for SD2011's 2,353 (27.6-31.9 s
        for the 400 draws of a 2 x (200 + 200) fit, so about 150 s on 2,000), measured
        2026-12-07; half of SD2011's is the calibration of each draw's categorical margins to
        the data's (:func:`~bayesynth.models.level_calibration.calibrate_block`; before its
        steps were capped and its many-level solves compiled: 80-86 s for those 400 draws, and
        the calibration four fifths of a shorter fit's check). On Linux the chains are judged
        in up to ``cores`` forked processes, from 100 draws, and then the quantities' R-hat
        and ESS, a share of the quantities in each (two processes: the demo's 4,000 draws
        15.0-16.9 s, SD2011's 400 draws 18.7-18.8 s). ``False`` skips it, for a caller that runs
        :func:`check_copula_convergence`
        (or :func:`~bayesynth.evaluation.synthesis_diagnostics`, or
        :func:`check_loglik_convergence`) itself.
    max_extensions : int, default 0
        Copula models, and weighted-likelihood models that PyMC's NUTS samples alone (no
        ``step``, no other step method, ``nuts_sampler="pymc"``), with two or more chains:
        when the largest R-hat
        of the quantities synthesis uses (for a weighted-likelihood model: of the records'
        log-likelihoods, as :func:`check_loglik_convergence` reads them, and only when NUTS
        did not diverge after tuning, which more draws would not mend) exceeds
        :data:`RHAT_WARN` after sampling, but not :data:`EXTEND_RHAT_MAX` (1.1;
        chains further apart need a longer run than two extensions give), continue every
        chain from its final state (all latent values included) for ``max(100, tune // 5)``
        re-tuning iterations (the adaptive steps, NUTS's step size and mass matrix included,
        start their adaptation afresh; NUTS starts without jitter, with ``init``
        ``"adapt_full"`` if it was a full-matrix one and ``"adapt_diag"`` otherwise; these
        draws are discarded), then
        ``draws`` more kept draws, appended to the chains' kept draws;
        repeat at most ``max_extensions`` times, stopping as soon as R-hat passes (a fit that
        fails the check on its ESS alone is not continued, and warns). Below
        that R-hat the chains are close and short of effective draws rather than of warm-up,
        so every kept draw stays (a drift left in them keeps the rank-normalised split R-hat
        high). A fixed length, not one predicted from R-hat: on CE an extension sized to bring
        R-hat from 1.043 to 1.01 (3,260 draws, if ``R-hat - 1`` fell as one over the draws)
        gave 1.049, so a prediction would only multiply the run time where the chains drift
        (``benchmarks/README.md``). Each extension is logged; the posterior's ``extensions``
        attribute counts them and its ``draw`` size is ``draws * (1 + extensions)``. The
        extensions' seeds derive from ``random_seed``, so a seeded run repeats. The closing
        check is the same with or without extensions: a run still unconverged after the last
        one warns as without them.
    start_from : {"factor_analysis", "prior"}, default "factor_analysis"
        Copula models: where each chain's loadings, scores,
        intercepts and precisions start. ``"factor_analysis"``: a maximum-likelihood factor
        analysis with the model's k factors of the chain's own bootstrap resample of a
        quarter of the records' starting latent data (normal scores, level indicators), its
        loadings turned by a random rotation; the chains start on the choice of dependence
        the data favour, dispersed about it at least as widely as the posterior (about twice
        its standard deviation on large tables). ``"prior"``: standard normal draws about
        the model's initial point (the default before 2026-12-06). From prior draws the
        chains can settle on different choices of which dependence the k factors carry and
        stay there (at n = 20,000 the demo's chains did, max R-hat 1.83 at both measured
        seeds); R-hat then sees it, but the run is lost. Models with the paper's level
        columns (``categorical_likelihood="rpl"``) start from prior draws either way (their
        starting values are collinear). A start given in ``initvals`` wins.
    **kwargs
        Passed to :func:`pymc.sample`.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` holds ``Lambda``, ``sigma``, ``alpha``, ``C``, ``alpha_scaled`` and the
        hyperparameters. For the copula a :class:`RuntimeWarning` is issued when the R-hat of
        any quantity synthesis uses (the correlations between variables, implied level
        probabilities, pair associations and category-conditional means; see
        :func:`bayesynth.evaluation.synthesis_diagnostics`) exceeds :data:`RHAT_WARN` (1.01),
        or, where none does, when the bulk ESS of any is below 100 per chain
        (:data:`~bayesynth.models.copula_quantities.ESS_MIN_PER_CHAIN`; ``max_extensions``
        continues chains for R-hat only); for a latent class model when a table
        probability's exceeds 1.05; for a model built with
        :func:`~bayesynth.models.pseudo_posterior.weighted_observed` when a record's
        log-likelihood's exceeds 1.01 or NUTS diverged (:func:`check_loglik_convergence`).
        R-hat of ``Lambda`` is meaningless: it is not identified.

    Examples
    --------
    >>> import bayesynth as bs
    >>> df = bs.datasets.simulate_child_health(n=200, random_seed=0)
    >>> model = bs.models.rank_probit_copula(df, n_factors=3)
    >>> idata = bs.sample(model, draws=20, tune=20, chains=1, random_seed=1,
    ...                   progressbar=False)
    >>> "C" in idata.posterior
    True
    """
    from bayesynth.models.copula_quantities import check_categorical_margins

    check_categorical_margins(categorical_margins)  # before sampling, not after
    if start_from not in ("factor_analysis", "prior"):
        raise ValueError(f"start_from={start_from!r}: use 'factor_analysis' (each copula "
                         "chain starts at a factor analysis of its own bootstrap resample) or "
                         "'prior' (at standard normal draws of the loadings, intercepts and "
                         "scores).")
    max_extensions = check_integer(max_extensions, "max_extensions", 0)
    check_integer(draws, "draws", 1)
    check_integer(tune, "tune", 0)
    if chains is not None:  # None: PyMC's default
        check_integer(chains, "chains", 1)
    model = modelcontext(model)
    copula = False
    extra = [] if step is None else list(step) if isinstance(step, list | tuple) else [step]
    found: list[Any] = steps(model, random_seed=random_seed, collapse_levels=collapse_levels,
                             pgbart_kwargs=pgbart_kwargs, ends_sweep=not extra)
    if has_bart(model):
        # Chains run one after the other so that pymc-bart's stored trees follow the
        # (chain, draw) order of the trace.
        cores = 1
    elif _is_copula(model):
        copula = True
        # Unit shrinkage and residual precisions (the latent data start at the normal scores
        # of the ranks through their support point), and each chain's loadings, intercepts,
        # factor scores (and, from a factor analysis, precisions) at its own start (see
        # _factor_analysis_copula_starts, _dispersed_copula_starts). Given at sampling time,
        # so the model itself stays transformable.
        start = {name: np.ones(tuple(model[name].shape.eval()))
                 for name in ("delta", "phi", "prec") if name in model.named_vars
                 and model[name] in model.free_RVs}
        given = kwargs.get("initvals")
        if chains is None:  # PyMC chooses the number of chains: one shared start
            if given is None or isinstance(given, dict):
                kwargs["initvals"] = {**start, **(given or {})}
        else:
            starting = (_factor_analysis_copula_starts if start_from == "factor_analysis"
                        else _dispersed_copula_starts)
            starts = [{**start, **d} for d in starting(model, chains, random_seed)]
            if given is None or isinstance(given, dict):
                kwargs["initvals"] = [{**d, **(given or {})} for d in starts]
            elif isinstance(given, list | tuple) and len(given) == chains:
                # the user's start per chain, over ours (a list of another length goes to
                # PyMC as given, which refuses it)
                kwargs["initvals"] = [{**d, **(g or {})} for d, g in zip(starts, given)]
    elif latent_class_spec(model) is not None:
        # Start the true counts at the noisy ones made feasible (given at sampling time, so
        # the model itself stays transformable).
        from bayesynth.models.latent_class_dp import _initial_counts

        spec = latent_class_spec(model)
        start = {f"M_t{i}": _initial_counts(noisy, spec.n) for i, noisy in enumerate(spec.noisy)
                 if f"M_t{i}" in model.named_vars and model[f"M_t{i}"] in model.free_RVs}
        given = kwargs.get("initvals")
        if start and (given is None or isinstance(given, dict)):
            kwargs["initvals"] = [{**start, **draw, **(given or {})}
                                  for draw in _dispersed_class_starts(model, chains,
                                                                      random_seed)]
    found.extend(extra)
    kwargs.setdefault("compute_convergence_checks", False)
    if found:  # no jitter: the latent data must start inside the constraint set
        kwargs.setdefault("init", "adapt_diag")
    kwargs["cores"] = cores if cores is not None else max(1, min(chains, os.cpu_count() or 1))
    if multiprocessing.current_process().daemon:
        kwargs["cores"] = 1  # inside a dask (or other daemonic) worker: no child processes
    limit = (threadpool_limits(limits=blas_threads, user_api="blas")
             if blas_threads is not None else contextlib.nullcontext())
    # a weighted-likelihood model that PyMC's own NUTS samples alone (the callback below keeps
    # each chain's final state; PyMC does not call it for the external NUTS samplers)
    weighted = (not copula and latent_class_spec(model) is None and not found
                and kwargs.get("nuts_sampler", "pymc") == "pymc"
                and _has_weighted_likelihood(model))
    extend = (copula or weighted) and max_extensions > 0 and chains is not None and chains >= 2
    last: dict[int, dict[str, np.ndarray]] = {}
    if extend:  # keep each chain's final state (every value variable) to continue from it
        user_callback = kwargs.pop("callback", None)

        def keep_last(trace: Any, draw: Any) -> None:
            last[draw.chain] = draw.point
            if user_callback is not None:
                user_callback(trace=trace, draw=draw)

        kwargs["callback"] = keep_last
    names = _trace_names(model, keep_latent)
    spec = latent_class_spec(model)
    with limit:
        idata = _run_pymc(model, draws, tune, chains, found or None, random_seed, names,
                          progressbar, kwargs)
    _annotate(idata, model, copula, spec)
    if extend:
        runs = [idata]
        for ext in range(1, max_extensions + 1):
            worst = (_worst_rhat(_judged(idata, categorical_margins, kwargs["cores"])) if copula
                     else _loglik_worst_rhat(model, idata))
            if worst is None or worst <= RHAT_WARN or worst > EXTEND_RHAT_MAX:
                break
            retune = _retune(tune)
            _log.warning(
                "Largest R-hat of the %s is %.3f after %d draws per "
                "chain; continuing each chain from where it ended for %d iterations (%d to "
                "re-tune the adaptive steps, then %d more kept draws; extension %d of %d).",
                "quantities synthesis uses" if copula else "records' log-likelihoods",
                worst, idata.posterior.sizes["draw"], retune + draws, retune, draws, ext,
                max_extensions)
            constrained = _constrained_point_fn(model)
            kwargs["initvals"] = [constrained(last[c]) for c in range(chains)]
            if weighted:  # start exactly where each chain ended: no jitter, no optimisation
                kwargs["init"] = _restart_init(kwargs.get("init", "auto"))
            fresh = steps(model, random_seed=random_seed, collapse_levels=collapse_levels,
                          ends_sweep=not extra)
            fresh.extend(extra)
            with limit:
                runs.append(_run_pymc(model, draws, retune, chains, fresh,
                                      _extension_seed(random_seed, ext, chains), names,
                                      progressbar, kwargs))
            idata = _joined(runs)
            _annotate(idata, model, copula, spec)
            idata.posterior.attrs["extensions"] = ext
    if not check_convergence:
        return idata
    if spec is not None:  # warn on the released tables' cells; the rest of the full table
        # is only as identified as the model's extrapolation from them
        _check_cell_probabilities(idata, [v for v in _declared(idata, spec)
                                          if v != "cell_prob"])
    elif copula:
        check_copula_convergence(idata, categorical_margins, stacklevel=3,
                                 cores=kwargs["cores"])
    elif _has_weighted_likelihood(model):
        check_loglik_convergence(model, idata, stacklevel=3)
    return idata


def _restart_init(init: str) -> str:
    """NUTS's initialisation for an extension: the same mass-matrix adaptation, no jitter.

    ``map`` and the ADVI initialisations would move the start away from the chain's final
    state, so they restart with the diagonal adaptation too.
    """
    return "adapt_full" if "adapt_full" in str(init) else "adapt_diag"


def _loglik_worst_rhat(model: pm.Model, idata: az.InferenceData) -> float | None:
    """Return the largest R-hat of a weighted-likelihood fit's records' log-likelihoods.

    None (do not extend) when NUTS diverged after tuning: more draws of the same kernel do
    not remove a divergence, so the final check warns about it as it is.
    """
    conv = _loglik_judgement(model, idata)[0]
    if conv.n_divergent or not np.isfinite(conv.max_rhat):
        return None
    return conv.max_rhat


def _run_pymc(model: pm.Model, draws: int, tune: int, chains: int, step: Any,
              random_seed: Any, names: list[str], progressbar: bool,
              kwargs: dict[str, Any]) -> az.InferenceData:
    """Run :func:`pymc.sample` once; refuse a run that Ctrl-C cut short."""
    idata = pm.sample(draws=draws, tune=tune, chains=chains, step=step,
                      random_seed=random_seed, var_names=names, progressbar=progressbar,
                      model=model, **kwargs)
    got = int(idata.posterior.sizes.get("draw", 0))
    if got < draws:  # PyMC ends quietly on Ctrl-C and returns what it has
        raise KeyboardInterrupt(
            f"Sampling was interrupted after {got} of {draws} draws; a truncated posterior is "
            "not returned (it would not be the posterior that was asked for).")
    return idata


def _declared(idata: az.InferenceData, spec: Any) -> list[str]:
    declared = [v for v in IDENTIFIED_VARS if v in idata.posterior]
    if spec is not None:  # label switching: only cell probabilities are identified
        declared = [f"P_t{i}" for i in range(len(spec.tables))]
        declared += ["cell_prob"] if "cell_prob" in idata.posterior else []
    return declared


def _annotate(idata: az.InferenceData, model: pm.Model, copula: bool, spec: Any) -> None:
    """Store what the diagnostics read: the copula's blocks and the identified variables."""
    if copula:
        import json

        from bayesynth.models.copula_quantities import BLOCKS_ATTR, CopulaBlocks

        idata.posterior.attrs[BLOCKS_ATTR] = json.dumps(CopulaBlocks.from_model(model).to_dict())
    declared = _declared(idata, spec)
    if declared:  # read by bayesynth.evaluation.diagnose
        idata.posterior.attrs["identified_vars"] = ",".join(declared)


def _retune(tune: int) -> int:
    """Return the iterations that re-tune the adaptive steps before an extension keeps draws."""
    return max(100, tune // 5)


def _start_seed(random_seed: Any) -> list[int]:
    """Return the entropy the chains' starts are drawn from: ``random_seed`` as a list of ints.

    A Generator gives one draw from a copy of itself (it is not consumed); None gives fresh
    entropy.
    """
    import copy

    if isinstance(random_seed, np.random.Generator):
        return [int(copy.deepcopy(random_seed).integers(2**63))]
    if random_seed is None:
        return [int(np.random.SeedSequence().entropy % 2**63)]
    return np.atleast_1d(random_seed).astype(np.int64).tolist()


def _dispersed_copula_starts(model: pm.Model, chains: int, random_seed: Any
                             ) -> list[dict[str, np.ndarray]]:
    """Each chain's own start of a copula's loadings, intercepts and factor scores.

    Loadings and factor scores are standard normal draws (their prior given the unit shrinkage
    the chains start with), the categorical intercepts their prior mean (the model's initial
    point) plus a standard normal draw. From one shared start two chains agree more than the
    posterior warrants while they have not left it, so R-hat would not see a region one of
    them has not reached; from dispersed starts it can (Gelman & Rubin 1992). A variable whose
    value is transformed (a prior a user replaced by one with bounded support) keeps PyMC's
    start. The draws derive from ``random_seed`` without consuming a Generator.
    """
    seq = _start_seed(random_seed)
    names = [name for name in ("Lambda", "alpha", "eta") if name in model.named_vars
             and model[name] in model.free_RVs
             and model.rvs_to_transforms.get(model[name]) is None]
    if not names:
        return [{} for _ in range(chains)]
    point = model.initial_point()
    out = []
    for c in range(chains):
        rng = np.random.default_rng([*seq, 104729, c])
        draw = {}
        for name in names:
            centre = np.asarray(point[model.rvs_to_values[model[name]].name], dtype=float)
            draw[name] = centre + rng.standard_normal(centre.shape)
        out.append(draw)
    return out


#: Size of each chain's bootstrap resample for its starting factor analysis, as a share of
#: the records (at least ``FA_START_MIN_PER_COLUMN`` per latent column, at most n).
FA_START_SHARE = 0.25
FA_START_MIN_PER_COLUMN = 10


def _fit_factor_analysis(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit scikit-learn's maximum-likelihood factor analysis to ``x`` through its covariance.

    The likelihood reads the rows only through their mean and (population) covariance S, so
    the fit is made on 2p rows ``sqrt(p) [R; -R]`` with ``R' R = S`` (mean zero, covariance
    S), with the stopping tolerance scaled by 2p / m so that the iterations stop where
    they would on the m rows: the same loadings and noise variances (to rounding), in
    time independent of m (21 s -> 3.5 s at m = 1,000, p = 90, k = 46, both cores busy;
    p^3 is still the cost).

    Returns
    -------
    loadings : numpy.ndarray
        p x k.
    noise : numpy.ndarray
        The p noise variances.
    mean : numpy.ndarray
        The p column means.
    """
    from sklearn.decomposition import FactorAnalysis
    from sklearn.exceptions import ConvergenceWarning

    m, p = x.shape
    mean = x.mean(axis=0)
    cov = np.cov(x, rowvar=False, bias=True).reshape(p, p)
    w, v = np.linalg.eigh(cov)
    half = (v * np.sqrt(np.maximum(w, 0.0))).T
    rows = np.sqrt(p) * np.vstack([half, -half])
    with warnings.catch_warnings():  # a start, not an estimate: its tolerance is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        fa = FactorAnalysis(n_components=k, svd_method="lapack",
                            tol=1e-2 * 2 * p / m).fit(rows)
    return fa.components_.T.copy(), fa.noise_variance_.copy(), mean


def _factor_analysis_copula_starts(model: pm.Model, chains: int, random_seed: Any
                                   ) -> list[dict[str, np.ndarray]]:
    """Each chain's start at a factor analysis of its own resample of the starting latent data.

    The latent data start at the layout's point of the constraint set (normal scores of the
    ranks; +-0.5 level indicators, see :meth:`~bayesynth.models.layout.LatentLayout.initial_z`).
    Each chain fits a maximum-likelihood factor analysis with the model's k factors
    (:class:`sklearn.decomposition.FactorAnalysis`) to its own bootstrap resample of
    ``FA_START_SHARE`` times the records (at least ``FA_START_MIN_PER_COLUMN`` per latent
    column, at most n) and starts from it: loadings (times a Haar-random rotation,
    which changes no identified quantity), residual precisions ``1 / psi`` on free-scale
    columns, and on fixed-scale columns (multinomial-probit utilities, sigma = 1) the column
    rescaled to unit residual variance, which keeps its communality; factor scores one draw
    from their conditional given that fit and every record's starting latent data. A level
    column's intercept puts its probit probability of a positive value at the level's share
    of the resample (``Phi^-1(f)`` times the latent column's standard deviation).

    A model with k >= p* starts from :func:`_dispersed_copula_starts`, as does one with the
    paper's level columns (``categorical_likelihood="rpl"``): one level column of each
    variable is positive in every record, so the level columns' starting values sum to a
    constant, and a factor analysis spends a factor on that collinearity (measured: start
    correlations of the other columns 0.38 off the truth).

    Why: from standard normal loadings the chains settle, in their first iterations, on which
    dependence the k factors carry, and where the data carry more dependence than k factors
    hold a sweep that moves each block given the others cannot carry a factor from one
    choice to another (at n = 20,000 the demo's chains stayed on different choices for 2,000
    iterations: R-hat 1.83; ``benchmarks/README.md``). A factor analysis starts every chain
    on the choice the data favour. Fitted to a resample of m of the n records, its
    identified quantities (C) vary between chains by about sqrt(n / m) times their posterior
    standard deviation about the whole data's fit (2 at the default share, 1 on small
    tables), so R-hat still compares chains from starts dispersed at least as widely as the
    posterior about that choice; it does not compare choices (what ``start_from="prior"``
    does, at the price of the traps).
    """
    from scipy.special import ndtri
    from scipy.stats import ortho_group

    from bayesynth.samplers.kernels import draw_eta
    from bayesynth.samplers.steps import copula_structure

    names = [name for name in ("Lambda", "eta", "alpha", "prec") if name in model.named_vars
             and model[name] in model.free_RVs]
    if "Lambda" not in names or "eta" not in names \
            or model.rvs_to_transforms.get(model["Lambda"]) is not None \
            or model.rvs_to_transforms.get(model["eta"]) is not None:
        return _dispersed_copula_starts(model, chains, random_seed)
    s = copula_structure(model)
    if len(s.layout.k_lvl_cols):  # the paper's level columns: collinear starting values
        return _dispersed_copula_starts(model, chains, random_seed)
    point = model.initial_point()
    z0 = np.asarray(point[model.rvs_to_values[model["z"]].name], dtype=float)
    n, p = z0.shape
    k = s.k
    if k >= p or n < k + 2:  # no factor analysis to fit: the prior draws
        return _dispersed_copula_starts(model, chains, random_seed)
    m = int(min(n, max(round(FA_START_SHARE * n), FA_START_MIN_PER_COLUMN * p, k + 2)))
    free = np.zeros(p, dtype=bool)
    free[np.asarray(s.free, dtype=np.int64)] = True
    levels = np.asarray(s.level_cols, dtype=np.int64)
    # a column constant in a resample has no residual variance there: floor it at a
    # thousandth of the column's variance in all records
    floor = 1e-3 * np.maximum(np.var(z0, axis=0), 1e-6)
    seq = _start_seed(random_seed)
    out = []
    for c in range(chains):
        rng = np.random.default_rng([*seq, 611953, c])
        resample = z0[np.sort(rng.choice(n, size=m, replace=True))]
        loadings, noise, centre = _fit_factor_analysis(resample, k)
        psi = np.maximum(noise, floor)
        scale = np.where(free, 1.0, 1.0 / np.sqrt(psi))
        rot = (ortho_group.rvs(k, random_state=rng) if k > 1
               else rng.choice([-1.0, 1.0], size=(1, 1)))
        Lam = (loadings * scale[:, None]) @ rot
        sd = np.where(free, np.sqrt(psi), 1.0)
        # a level column's intercept from its level's share f among the records it constrains
        # (z0 = +-0.5 there, 0 where missing): a probit with latent variance sd^2 + |Lam|^2
        # puts P(z > 0) at f
        sub = resample[:, levels]
        seen = np.maximum((sub != 0).sum(axis=0), 1)
        f = np.clip((sub > 0).sum(axis=0) / seen, 0.5 / seen, 1 - 0.5 / seen)
        alpha_full = np.zeros(p)
        alpha_full[levels] = ndtri(f) * np.sqrt(sd[levels] ** 2 + np.sum(Lam[levels] ** 2, 1))
        # the scores' conditional given the fit, in the fit's own units (it does not depend
        # on a column's scale), then rotated as Lam is
        eta = draw_eta(rng, z0, centre, loadings, 1.0 / psi) @ rot
        draw = {"Lambda": Lam, "eta": eta}
        if "alpha" in names and model.rvs_to_transforms.get(model["alpha"]) is None:
            draw["alpha"] = alpha_full[levels]
        if "prec" in names:
            draw["prec"] = 1.0 / psi[free]
        out.append(draw)
    return out


def _dispersed_class_starts(model: pm.Model, chains: int, random_seed: Any
                            ) -> list[dict[str, np.ndarray]]:
    """One prior draw of a latent class model's ``v`` and ``psi_<var>`` per chain.

    Chains that all start at the prior means (every class alike, a saddle of the mixture)
    would agree more than the posterior warrants: from dispersed starts R-hat can see the
    separate modes the composite likelihood has. Variables whose prior was replaced keep
    PyMC's start. The draws derive from ``random_seed`` without consuming a Generator.
    """
    from bayesynth.samplers.latent_class import _dirichlet_rows, conjugate_priors

    if isinstance(random_seed, np.random.Generator):
        rng = np.random.default_rng(_start_seed(random_seed))
    elif random_seed is None:
        rng = np.random.default_rng()
    else:
        rng = np.random.default_rng([*_start_seed(random_seed), 7919])
    params, _ = conjugate_priors(model)
    out = []
    for _ in range(chains):
        draw = {}
        for name, prior in params.items():
            if name == "v":
                draw[name] = np.clip(rng.beta(*prior), 1e-6, 1 - 1e-6)
            else:
                draw[name] = _dirichlet_rows(rng, prior[0])
        out.append(draw)
    return out


def _extension_seed(random_seed: Any, ext: int, chains: int) -> Any:
    """Derive extension ``ext``'s seed from the run's seed, so that a seeded run repeats.

    A Generator seeded with a list of integers: PyMC would build the same one from the list,
    but warns that a list no longer gives each chain its own seed (it never did here).
    """
    if random_seed is None:
        return None
    if isinstance(random_seed, np.random.Generator):
        return np.random.default_rng([int(s) for s in random_seed.integers(2**31, size=chains)])
    base = ([int(random_seed)] if np.ndim(random_seed) == 0
            else [int(s) for s in random_seed])
    state = np.random.SeedSequence([*base, 7919, ext]).generate_state(chains)
    return np.random.default_rng([int(s) for s in state])


def _constrained_point_fn(model: pm.Model):
    """Return a function turning a sampler state (value variables) into the RVs' initial values.

    The back-transforms are evaluated at the state itself, so a transform whose bounds depend
    on another variable uses that variable's value in the state, not a draw from its prior.
    Compiled once, applied to every chain's state.
    """
    names = {model.values_to_rvs[v].name for v in model.value_vars}
    outs = [v for v in model.unobserved_value_vars if v.name in names]
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore",
                          point_fn=True)

    def constrained(point: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {v.name: np.array(val, copy=True) for v, val in zip(outs, fn(point))}

    return constrained


def _joined(runs: list[az.InferenceData]) -> az.InferenceData:
    """Join the kept draws of consecutive runs of the same chains, in order."""
    groups = {}
    for group in runs[0].groups():
        if "warmup" in group:  # each run's own re-tuning: not one chain's warm-up
            continue
        parts = [getattr(r, group) for r in runs]
        if "draw" not in parts[0].dims:
            groups[group] = parts[-1]
            continue
        joined = xr.concat(parts, dim="draw", combine_attrs="override")
        groups[group] = joined.assign_coords(draw=np.arange(joined.sizes["draw"]))
    times = [r.posterior.attrs.get("sampling_time") for r in runs]
    if all(t is not None for t in times):
        groups["posterior"].attrs["sampling_time"] = float(sum(times))
    return az.InferenceData(**groups)


def _judged(idata: az.InferenceData, categorical_margins: str, cores: int | None = None
            ) -> pd.DataFrame | None:
    """Return a copula posterior's convergence table (kept for the final check).

    ``cores``: processes for the chains' quantities (the table does not depend on it).
    """
    from bayesynth.models.copula_quantities import BLOCKS_ATTR, synthesis_quantity_table

    post = idata.posterior
    if (BLOCKS_ATTR not in post.attrs or post.sizes.get("chain", 1) < 2
            or post.sizes.get("draw", 0) < 4):
        return None
    hit = _TABLES.get(id(idata))
    if hit is not None and hit[0] == categorical_margins and hit[1] is post:
        return hit[2].copy()
    table, _ = synthesis_quantity_table(idata, categorical_margins=categorical_margins,
                                        cores=cores)
    if id(idata) not in _TABLES:  # forget the table with the posterior (InferenceData is
        weakref.finalize(idata, _TABLES.pop, id(idata), None)  # not hashable)
    _TABLES[id(idata)] = (categorical_margins, post, table)
    return table.copy()


def _worst_rhat(table: pd.DataFrame | None) -> float | None:
    """Return the largest R-hat of a convergence table, or None where there is none.

    Read by :func:`~bayesynth.models.copula_quantities.effective_rhat`: an undefined R-hat
    counts as infinite (not converged), except for a constant quantity and one left
    unjudged for want of Monte Carlo points, which are left out.
    """
    if table is None or not len(table):
        return None
    rhat = effective_rhat(table)
    return float(np.nanmax(rhat)) if not np.isnan(rhat).all() else None


def _check_cell_probabilities(idata: az.InferenceData, names: list[str]) -> None:
    """Warn when R-hat of a latent class model's table probabilities exceeds 1.05."""
    post = idata.posterior
    if post.sizes.get("chain", 1) < 2 or post.sizes.get("draw", 0) < 4:
        return
    rhat = az.rhat(post[names])
    worst, where = 1.0, ""
    for name in names:
        vals = np.asarray(rhat[name].values, dtype=float).ravel()
        # NaN: a missing or infinite draw (cell probabilities are never constant)
        vals = np.where(np.isnan(vals), np.inf, vals)
        if np.nanmax(vals) > worst:
            j = int(np.nanargmax(vals))
            worst = float(vals[j])
            where = f"{name}[{post[name].coords[post[name].dims[2]].values[j]}]"
    if worst > RHAT_WARN_LATENT_CLASS:
        warnings.warn(
            f"Largest R-hat of the cell probabilities is {worst:.3f} ({where}), above "
            f"{RHAT_WARN_LATENT_CLASS}: the chains have not converged. Run longer (the "
            "composite likelihood makes the posterior concentrated and the class updates "
            "small); judge convergence on cell probabilities, not on pi or psi (label "
            "switching).",
            RuntimeWarning,
            stacklevel=3,
        )
