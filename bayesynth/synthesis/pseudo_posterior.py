"""Pseudo-posterior privacy mechanisms and the perturbed-histogram baseline.

Mechanisms (Savitsky, Williams & Hu 2022; Hu, Savitsky & Williams 2022), for any base model
factory ``factory(data, weights=None, censor=None, **kwargs) -> pm.Model`` whose likelihood is
built with :func:`bayesynth.models.pseudo_posterior.weighted_observed`:

``unweighted``
    alpha_i = 1: the ordinary posterior. No privacy guarantee.
``weighted``
    Fit the unweighted model; for each record s_i = sup over posterior draws of |f_theta(x_i)|;
    alpha_i decreasing in s_i, scaled into [0, 1] (see :func:`privacy_weights`), then
    ``clip(c1 * alpha_i + c2, 0, 1)``; refit. No epsilon is stated: the weights bound the
    Lipschitz constant locally to this dataset only.
``weighted_e``
    As ``weighted``, then every record with max over posterior draws of alpha_i |f_theta(x_i)|
    > c under the weighted fit gets alpha_i = 0 (truncation); refit. Local / asymptotic
    guarantee only, and only when no record of positive weight exceeds c on the final fit's
    draws (the refit moves the posterior, and often puts records above c again); otherwise the
    ledger entry states no epsilon.
``censor_uw``
    Each record's log-likelihood is censored into [-c, c] with c from
    :func:`bayesynth.privacy.censor_bound` (epsilon/4 under change-one neighbours, epsilon/2
    under add/remove): one posterior draw is strictly epsilon-DP.
``censor_w``
    Each weighted contribution alpha_i f_theta(x_i) is censored into [-c, c]. Strictly
    epsilon-DP only when the weights do not depend on the confidential data: a
    :class:`WeightCalibration` fitted on reference (public or historical) data, which turns
    each record's value into its weight, or weights the user supplies. With weights fitted on
    the confidential data itself (the paper's default), changing one record moves every other
    weight, and the guarantee is only local / asymptotic: the result says so.

What the guarantee assumes, and what it costs (all recorded in :attr:`ledger_`):

* the prior has fixed, public hyperparameters and the model releases nothing but draws from its
  posterior predictive (screened at ``fit``: the priors by rebuilding the model on two
  neighbouring datasets, a guard rather than a proof, skipped with ``check_priors=False``; the
  model by refusing parameters computed from per-record inputs);
* the exponential-mechanism argument holds for *exact* draws from the pseudo posterior; MCMC
  draws approximate them;
* each synthetic dataset comes from its own posterior draw, so m datasets cost m epsilon
  (sequential composition); ``m = 1`` is the default;
* under add/remove neighbours n is private: give ``n_rows``. Each of its records is then a
  fresh draw from the model's record distribution at the dataset's posterior draw, so the
  output depends on the data only through that draw (resampling the n records of one
  posterior-predictive draw would not do: a dataset could then hold at most n distinct
  values, which tells n). This needs records that share one distribution given the
  parameters: a model with per-record parameters refuses ``n_rows``.

What is *not* releasable: everything in :attr:`PseudoPosteriorSynthesizer.diagnostics_` (the
weights, the empirical Lipschitz bound, the empirical local epsilon and the number of censored
records are computed from the confidential data), and the posterior itself (``idata_``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm

from bayesynth.errors import (
    IncompatibleModelError,
    InvalidParameterError,
    NotFittedError,
    PrivacyGuaranteeError,
)
from bayesynth.models.pseudo_posterior import (
    data_dependent_priors,
    observed_info,
    observed_name,
    record_loglik,
)
from bayesynth.privacy import Ledger, LedgerEntry, censor_bound, check_epsilon, check_neighbours
from bayesynth.privacy.lipschitz import (  # re-exported
    censored_share,
    lipschitz_bound,
    local_epsilon,
    privacy_weights,
    record_bounds,
)
from bayesynth.privacy.neighbours import release_rng
from bayesynth.samplers.sampling import LoglikConvergence, check_loglik_convergence
from bayesynth.synthesis._pseudo_posterior_io import (
    factory_path,
    read_pseudo_posterior,
    write_pseudo_posterior,
)
from bayesynth.synthesis.base import Synthesizer, json_ready, select_draws
from bayesynth.synthesis.histogram import PerturbedHistogramSynthesizer  # re-exported
from bayesynth.synthesis.weight_calibration import (  # re-exported
    TARGET_ACCEPT,
    WeightCalibration,
    _sample,
    _stacklevel_outside,
    calibrate_weights,
)

__all__ = [
    "MECHANISMS",
    "fit_mechanisms",
    "privacy_weights",
    "lipschitz_bound",
    "local_epsilon",
    "PseudoPosteriorSynthesizer",
    "PseudoPosteriorDiagnostics",
    "WeightCalibration",
    "calibrate_weights",
    "PerturbedHistogramSynthesizer",
]

MECHANISMS = ("unweighted", "weighted", "weighted_e", "censor_uw", "censor_w")
_NEEDS_EPSILON = ("weighted_e", "censor_uw", "censor_w")
_ASSUMES = ("fixed public priors; the released data are draws from the posterior predictive; "
            "exact posterior draws assumed (MCMC approximates them)")


# ----------------------------------------------------------------------------- the synthesizer


@dataclass
class PseudoPosteriorDiagnostics:
    """What a pseudo-posterior fit reports. Computed from the confidential data: NOT releasable.

    Attributes
    ----------
    mechanism : str
    weights : numpy.ndarray
        The record weights used in the final fit.
    empirical_delta : float
        max over posterior draws and records of |alpha_i f_theta(x_i)| (censored where
        censoring applies): an after-the-fact statistic over the draws, not a bound over the
        parameter space (on a grid it can be far larger).
    empirical_local_epsilon : float
        :func:`local_epsilon` of ``empirical_delta``: 4 Delta under change-one neighbours, 2 Delta
        under add/remove (the paper's epsilon_x = 2 Delta is the add/remove figure). Not a
        guarantee.
    n_truncated : int
        Records given weight 0 by ``weighted_e``.
    n_censored : int
        Records whose contribution reaches the censoring bound at some draw.
    idata : arviz.InferenceData
    convergence : LoglikConvergence or None
        How far the fit converged, judged on the records' log-likelihoods
        (:func:`~bayesynth.samplers.check_loglik_convergence`; the fit, or
        :meth:`PseudoPosteriorSynthesizer.from_posterior`, warns when it has not). None for a
        synthesizer saved before its fits were judged.
    censored_share : float or None
        Censored fits: the share of the records whose term is at the censoring bound, averaged
        over the posterior draws (:func:`~bayesynth.privacy.lipschitz.censored_share`). Where a
        term is at the bound it is flat in the parameters, so the fit follows the bound, not
        that record; above :data:`CENSORED_SHARE_WARN` the fit warns. None for an uncensored
        fit and for a synthesizer saved before this was recorded.
    """

    mechanism: str
    weights: np.ndarray
    empirical_delta: float
    empirical_local_epsilon: float
    n_truncated: int
    n_censored: int
    idata: Any = field(repr=False)
    convergence: LoglikConvergence | None = None
    censored_share: float | None = None


#: A censored fit warns when, on average over its draws, more than this share of the records'
#: terms sit at the censoring bound (the fit then follows the bound for most of the data).
CENSORED_SHARE_WARN = 0.5


def _censored_share(L: np.ndarray, w: np.ndarray, censor: float | None, what: str
                    ) -> float | None:
    """Return a censored fit's :func:`censored_share`; warn when it exceeds the threshold.

    A count model is the clearest case: its log-probabilities are all below 0, so every
    record whose probability is below exp(-c) sits at the bound, and the fit is pushed toward
    the few values it can make more likely than that (on SD2011's numbers of friends, mean 6.9,
    epsilon 4 under change-one put 95-99% of the synthetic counts at 0).
    """
    if censor is None:
        return None
    share = censored_share(L, w, censor)
    if share > CENSORED_SHARE_WARN:
        warnings.warn(
            f"{what}: on average over {len(L)} posterior draws, {100 * share:.1f}% of the "
            f"records' terms are at the censoring bound c = {censor:g} (|alpha_i f(x_i)| > c, "
            "or f undefined), where they are locally flat in the parameters: the censored fit "
            "follows the bound rather than those records, and its synthetic data can be far "
            "from the real data. Compare the synthetic data's utility with the real data's "
            "before release; a larger epsilon censors less.",
            # _stacklevel_outside counts from a function this one calls: one level less
            RuntimeWarning, stacklevel=_stacklevel_outside() - 1)
    return share


def _truncation_checked(entry: LedgerEntry, w: np.ndarray, L: np.ndarray, eps: float,
                        nb: str) -> LedgerEntry:
    """Say in ``why`` whether the truncation of ``weighted_e`` holds on the final fit's draws.

    The records were truncated on the draws of the fit before the last, so on the final fit
    some records of positive weight can exceed c again. The target epsilon is then not even a
    local bound of this fit: the entry states no epsilon (``inf``, guarantee "none") and says
    why (the empirical local epsilon, in ``diagnostics_``, is confidential, not a bound).
    """
    bound = censor_bound(eps, nb)
    above = int(np.sum((w > 0) & (record_bounds(L) * w > bound)))
    note = (f"; checked on the final fit's posterior draws (a maximum over draws, not over all "
            f"parameter values): {above} record(s) of positive weight have weight x max "
            f"|log-likelihood| above c = {bound:.4g}")
    if above:
        return replace(entry, epsilon=math.inf, guarantee="none", sensitivity=None,
                       why=entry.why + note + f", so the target epsilon = {eps:g} does not "
                           "hold even locally for this fit and none is stated")
    return replace(entry, why=entry.why + note)


def _refuse_extra_terms(model: pm.Model, mech: str) -> None:
    """Refuse a model whose likelihood has terms outside :func:`weighted_observed`.

    The mechanisms bound (weight, censor) that likelihood only; a ``pm.Potential`` or a
    second observed variable would stay unbounded. ``"unweighted"`` states no guarantee.
    """
    if mech == "unweighted":
        return
    info = observed_info(model)
    extra = [v.name for v in model.observed_RVs if v.name != info.name]
    if model.potentials or extra:
        what = ", ".join([f"pm.Potential {p.name!r}" for p in model.potentials]
                         + [f"observed variable {e!r}" for e in extra])
        raise PrivacyGuaranteeError(
            f"mechanism '{mech}' bounds the likelihood built with weighted_observed only, "
            f"but the model adds {what}, which it leaves unbounded: no privacy statement "
            "would hold. Put every data-dependent term in the weighted_observed "
            "likelihood.", column="factory")


class PseudoPosteriorSynthesizer(Synthesizer):
    """Synthetic data from a record-weighted or censored pseudo posterior.

    Parameters
    ----------
    factory : callable
        ``factory(data, weights=None, censor=None, **factory_kwargs) -> pm.Model`` (for example
        :func:`~bayesynth.models.pseudo_posterior.beta_mixture`).
    mechanism : {"unweighted", "weighted", "weighted_e", "censor_uw", "censor_w"}
    epsilon : float, optional
        Privacy target (needed by ``weighted_e`` and the censored mechanisms): the loss of each
        synthetic dataset under ``neighbours``.
    neighbours : {"change_one", "add_remove"}, default "change_one"
        Sets the censoring bound c = epsilon/4 (change-one) or epsilon/2 (add/remove).
    c1, c2 : float
        Scale and shift of data-fitted weights (``weighted``, ``weighted_e``, ``censor_w``
        without calibration or weights).
    calibration : WeightCalibration, optional
        With ``censor_w``: weights from a function fitted on reference data (strict guarantee).
        Its epsilon and neighbours are used.
    weights : numpy.ndarray, optional
        With ``censor_w``: fixed weights in [0, 1], one per record, which the user states were
        set independently of the confidential data (strict guarantee under that assumption).
    draws, tune, chains : int
        Every fit is judged on its records' log-likelihoods and warns when it has not converged
        (:func:`~bayesynth.samplers.check_loglik_convergence`; the result is in
        ``diagnostics_.convergence``).
    target_accept : float, default 0.95
        NUTS's target acceptance rate (PyMC's default is 0.8, which left divergences in
        two-component ``beta_mixture`` fits).
    max_extensions : int, default 2
        A fit whose records' log-likelihoods have R-hat above 1.01 (but at most 1.1) and that
        did not diverge is continued from where its chains ended for ``draws`` more kept
        draws, at most this many times (``max_extensions`` of :func:`bayesynth.sample`); 0
        samples exactly ``tune + draws``. Of the 18 default fits of
        ``benchmarks/pseudo_posterior_convergence.py`` (``benchmarks/README.md``), one was
        continued once (R-hat 1.014, then 1.003) and all passed. How many extensions a
        fit took (the posterior's ``extensions`` attribute) depends on the confidential data:
        like ``diagnostics_``, it is not for release. The guarantees assume draws from the
        pseudo posterior itself, which a longer run approaches; they do not depend on the
        run's length.
    random_seed : int, optional
        Seeds the MCMC. For the privacy mechanisms a fixed seed warns (:class:`PrivacyWarning`);
        leave it None for a real release.
    factory_kwargs : dict, optional
    max_loglik_draws : int, default 500
        Posterior draws at which record log-likelihoods are evaluated (weights, diagnostics).
    progressbar : bool, default False
    check_priors : bool, default True
        Refuse a model whose priors move with the data (:func:`data_dependent_priors`) when
        the mechanism states a guarantee.

    Attributes
    ----------
    model_ : pymc.Model
    idata_ : arviz.InferenceData
        The final fit (confidential).
    guarantee_ : LedgerEntry
        What one synthetic dataset costs and why (epsilon ``inf`` when there is no guarantee).
    diagnostics_ : PseudoPosteriorDiagnostics
        Confidential diagnostics of the final fit.
    unweighted_diagnostics_ : PseudoPosteriorDiagnostics or None
        Of the unweighted fit, when one was made.
    ledger_ : Ledger
        One entry per released synthetic dataset.
    column_ : str
        Name of the synthetic column.

    Notes
    -----
    The protocol of :class:`~bayesynth.synthesis.Synthesizer`. :meth:`from_posterior` takes a
    model built with :func:`~bayesynth.models.pseudo_posterior.weighted_observed` and a
    posterior you sampled from it. :meth:`sample` draws each dataset from its own, distinct
    posterior draw (:func:`~bayesynth.synthesis.select_draws`). :meth:`save` writes
    ``posterior.nc`` (the final fit), ``pseudo_posterior.nc`` (the training records, the
    model's weights, the diagnostics' weights, fixed ``weights``), ``calibration.nc`` (a
    ``calibration``, when given) and ``pseudo_posterior.json`` (the factory's import path, its
    JSON-able keyword arguments and the defaults of those not given, the censoring bound, the
    diagnostics, the guarantee and the ledger of what was released so far). :meth:`load`
    rebuilds the model by calling the factory on the saved records with those arguments and
    recorded defaults (so a later change of a factory's default does not change the model a
    save rebuilds; the loaded ``factory_kwargs`` then name the defaults too; a save from
    before 2026-12-06 recorded none, and gets today's defaults, with a warning where
    bayesynth's default has changed), so the directory holds the confidential data: keep it as
    confidential as the data. A factory defined in bayesynth is found by its import path; any
    other must be passed again, ``load(path, factory=my_model)`` (loading never imports a
    module named in a file). The unweighted fit's posterior is not saved
    (``unweighted_diagnostics_.idata`` is None after loading).
    """

    _fitted_attribute = "diagnostics_"

    def __init__(self, factory: Callable[..., pm.Model], *, mechanism: str = "weighted",
                 epsilon: float | None = None, neighbours: str = "change_one",
                 c1: float = 1.0, c2: float = 0.0,
                 calibration: WeightCalibration | None = None,
                 weights: np.ndarray | None = None, draws: int = 1000,
                 tune: int = 1000, chains: int = 2, target_accept: float = TARGET_ACCEPT,
                 max_extensions: int = 2, random_seed: int | None = None,
                 factory_kwargs: dict[str, Any] | None = None, max_loglik_draws: int = 500,
                 progressbar: bool = False, check_priors: bool = True):
        self.factory = factory
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.neighbours = neighbours
        self.c1 = c1
        self.c2 = c2
        self.calibration = calibration
        self.weights = weights
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.target_accept = target_accept
        self.max_extensions = max_extensions
        self.random_seed = random_seed
        self.factory_kwargs = factory_kwargs
        self.max_loglik_draws = max_loglik_draws
        self.progressbar = progressbar
        self.check_priors = check_priors

    # ------------------------------------------------------------------------- settings

    def _settings(self) -> tuple[str, float | None, str]:
        mech = self.mechanism
        if mech not in MECHANISMS:
            raise InvalidParameterError(f"mechanism must be one of {MECHANISMS}; got {mech!r}.",
                                        column="mechanism")
        eps, nb = self.epsilon, self.neighbours
        if self.calibration is not None:
            if mech != "censor_w":
                raise InvalidParameterError(
                    f"A WeightCalibration sets the weights of mechanism='censor_w'; got "
                    f"mechanism={mech!r}.", column="calibration")
            if self.weights is not None:
                raise InvalidParameterError("Give calibration or weights, not both.",
                                            column="weights")
            if eps is not None and not math.isclose(eps, self.calibration.epsilon):
                raise InvalidParameterError(
                    f"epsilon = {eps!r} differs from the calibration's "
                    f"{self.calibration.epsilon!r}; leave epsilon unset or recalibrate.",
                    column="epsilon")
            eps, nb = self.calibration.epsilon, self.calibration.neighbours
            if self.neighbours != nb:
                raise InvalidParameterError(
                    f"neighbours = {self.neighbours!r} but the calibration was made for "
                    f"{nb!r}; recalibrate for {self.neighbours!r}.", column="neighbours")
        if self.weights is not None and mech != "censor_w":
            raise InvalidParameterError(f"Fixed weights are for mechanism='censor_w'; got "
                                        f"{mech!r}.", column="weights")
        check_neighbours(nb)
        if mech in _NEEDS_EPSILON:
            if eps is None:
                raise InvalidParameterError(f"mechanism '{mech}' needs epsilon (a positive "
                                            "finite number).", column="epsilon")
            eps = check_epsilon(eps)
        return mech, eps, nb

    def guarantee(self) -> LedgerEntry:
        """State what one synthetic dataset of this mechanism guarantees, and why (before fitting).

        Returns
        -------
        LedgerEntry
            ``guarantee`` is "strict", "local" or "none"; ``epsilon`` is ``inf`` for "none";
            ``why`` states the assumptions or the reason there is no guarantee.
        """
        mech, eps, nb = self._settings()
        c = None if eps is None else censor_bound(eps, nb)
        label = {"unweighted": "posterior (unweighted)", "weighted": "weighted pseudo posterior",
                 "weighted_e": "weighted pseudo posterior, truncated",
                 "censor_uw": "censored pseudo posterior (unweighted)",
                 "censor_w": "censored pseudo posterior (weighted)"}[mech]
        if mech == "unweighted":
            return LedgerEntry("", label, nb, math.inf, "none",
                               why="the ordinary posterior: the log-likelihood is unbounded")
        if mech == "weighted":
            return LedgerEntry("", label, nb, math.inf, "none",
                               why="weights fitted on the confidential data bound the Lipschitz "
                                   "constant locally to this dataset only; no epsilon is stated "
                                   "(the empirical local epsilon is confidential, not a bound)")
        if mech == "weighted_e":
            return LedgerEntry("", label, nb, eps, "local",
                               why=f"records above c = {c:.4g} truncated to weight 0, weights "
                                   "fitted on the confidential data: asymptotic DP (Savitsky et "
                                   "al. 2022), not strict")
        bound = f"each record's contribution censored into [-{c:.4g}, {c:.4g}]; {_ASSUMES}"
        sens = 2 * c if nb == "change_one" else c  # of the log pseudo likelihood, sum over records
        if mech == "censor_uw":
            return LedgerEntry("", label, nb, eps, "strict", sensitivity=sens, why=bound)
        if self.calibration is not None:
            return LedgerEntry("", label, nb, eps, "strict", sensitivity=sens,
                               why=f"{bound}; weights from a function calibrated on reference "
                                   "data (each depends on its own record only)")
        if self.weights is not None:
            return LedgerEntry("", label, nb, eps, "strict", sensitivity=sens,
                               why=f"{bound}; weights supplied by the user, assumed fixed "
                                   "independently of the confidential data"
                                   + ("" if nb == "change_one" else
                                      " and attached to the records (removing a record "
                                      "leaves every other record's weight unchanged)"))
        return LedgerEntry("", label, nb, eps, "local", sensitivity=sens,
                           why="weights fitted on the confidential data: changing one record "
                               "moves every other weight, so censoring alone does not give "
                               "epsilon-DP (local / asymptotic only); calibrate the weights on "
                               "reference data (calibrate_weights) or supply fixed weights for a "
                               "strict guarantee")

    def _check_model(self, model: pm.Model, data, mech: str) -> None:
        if mech not in _NEEDS_EPSILON:
            return
        info = observed_info(model)
        if info.dp_refusal:
            raise PrivacyGuaranteeError(
                f"mechanism '{mech}' cannot give a privacy guarantee with this model: "
                f"{info.dp_refusal}. Use a model whose synthetic records are drawn from its "
                "posterior predictive alone.", column="factory")
        if self.check_priors and self.factory is not None:
            moved = data_dependent_priors(self.factory, data, self.factory_kwargs)
            if moved:
                raise PrivacyGuaranteeError(
                    f"The prior of {moved} changes when one record changes: its "
                    "hyperparameters are computed from the data, which makes the privacy loss "
                    "unbounded (censoring bounds the likelihood only). Give fixed, public "
                    "hyperparameters (defaults that need no data, or values from a reference "
                    "dataset).", column="factory")

    def _check_built(self, model: pm.Model, weights, censor) -> None:
        """Check that the factory built what it was asked for, before the model is sampled.

        The guarantee is read from the synthesizer's settings, so a factory that drops the
        weights or the censoring it is given (or a model whose likelihood has terms outside
        :func:`weighted_observed`: a ``pm.Potential``, a second observed variable) would be
        fitted and released under a guarantee it does not have.
        """
        mech = self._settings()[0]
        info = observed_info(model)
        want = np.ones(len(info.weights)) if weights is None else np.asarray(weights, float)
        given = "none, all 1" if weights is None else "the mechanism's"

        def censoring(c):
            return "no censoring" if c is None else f"censoring at c = {c:.4g}"

        if info.censor != censor:
            raise PrivacyGuaranteeError(
                f"The factory was asked for {censoring(censor)} but built a model with "
                f"{censoring(info.censor)}: pass its censor argument on to "
                "weighted_observed(censor=...).", column="factory")
        if info.weights.shape != want.shape or not np.allclose(info.weights, want, rtol=0,
                                                                atol=1e-12):
            raise PrivacyGuaranteeError(
                "The factory built a model whose record weights are not the ones it was given "
                f"({given}): "
                "pass its weights argument on to weighted_observed(weights=...).",
                column="factory")
        _refuse_extra_terms(model, mech)

    def _fixed_weights(self, data_model: pm.Model) -> np.ndarray | None:
        if self.calibration is not None:
            return self.calibration.weights(data_model)
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=float)
            n = len(observed_info(data_model).weights)
            if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any((w < 0) | (w > 1)):
                raise InvalidParameterError(
                    f"weights must be {n} numbers in [0, 1] (one per record); got shape "
                    f"{w.shape}.", column="weights")
            return w
        return None

    # ------------------------------------------------------------------------- fitting

    def _fit_model(self, data, weights, censor, seed, what):
        model = self.factory(data, weights, censor, **(self.factory_kwargs or {}))
        self._check_built(model, weights, censor)
        idata, conv = _sample(model, self.draws, self.tune, self.chains, seed,
                              self.progressbar, what, self.target_accept, self.max_extensions)
        L = record_loglik(model, idata, max_draws=self.max_loglik_draws, random_seed=seed)
        return model, idata, L, conv

    def build_model(self, data) -> pm.Model:
        """Build the model the final fit samples (weights and censoring in place), for audits.

        Available before :meth:`fit` for mechanisms whose weights do not come from a fit to
        ``data`` (``unweighted``, ``censor_uw``, ``censor_w`` with a calibration or weights).

        Parameters
        ----------
        data : DataFrame or array

        Returns
        -------
        pymc.Model
        """
        mech, eps, nb = self._settings()
        c = censor_bound(eps, nb) if mech in ("censor_uw", "censor_w") else None
        kw = self.factory_kwargs or {}
        if mech in ("unweighted", "censor_uw"):
            return self.factory(data, None, c, **kw)
        if mech == "censor_w" and (self.calibration is not None or self.weights is not None):
            w = self._fixed_weights(self.factory(data, None, None, **kw))
            return self.factory(data, w, c, **kw)
        raise NotFittedError(f"mechanism '{mech}' fits its weights to the data: call fit(data) "
                             "and use model_.")

    def fit(self, data) -> PseudoPosteriorSynthesizer:
        """Fit the mechanism to ``data`` (the confidential records).

        Parameters
        ----------
        data : DataFrame or array

        Returns
        -------
        PseudoPosteriorSynthesizer
            ``self``.
        """
        mech, eps, nb = self._settings()
        data_model = self.factory(data, None, None, **(self.factory_kwargs or {}))
        self._check_model(data_model, data, mech)
        self._seeded = False
        if mech in _NEEDS_EPSILON:
            _, self._seeded = release_rng(self.random_seed, f"PseudoPosteriorSynthesizer({mech})")
        seeds = np.random.SeedSequence(self.random_seed).generate_state(3)
        shared: dict[str, Any] = {"data_model": data_model}
        return self._finish(data, shared, seeds)

    def _needs_unweighted(self, mech: str) -> bool:
        return mech in ("unweighted", "weighted", "weighted_e") or (
            mech == "censor_w" and self.calibration is None and self.weights is None)

    def _finish(self, data, shared: dict, seeds) -> PseudoPosteriorSynthesizer:
        """Complete a fit, reusing the unweighted and weighted fits in ``shared`` where present.

        :func:`fit_mechanisms` shares them between mechanisms.
        """
        mech, eps, nb = self._settings()
        c = censor_bound(eps, nb) if eps is not None else None
        self._data = data
        self._n = int(len(data))
        self.unweighted_diagnostics_ = None
        uw = None
        if self._needs_unweighted(mech):
            if "unweighted" not in shared:
                shared["unweighted"] = self._fit_model(
                    data, None, None, int(seeds[0]), "PseudoPosteriorSynthesizer: the "
                    "unweighted fit")
            uw = shared["unweighted"]
            ones = np.ones(uw[2].shape[1])
            d = lipschitz_bound(uw[2], ones)
            self.unweighted_diagnostics_ = PseudoPosteriorDiagnostics(
                "unweighted", ones, d, local_epsilon(d, nb), 0, 0, uw[1], uw[3])
        n_trunc = 0
        censor = c if mech in ("censor_uw", "censor_w") else None
        if mech == "unweighted":
            model, idata, L, conv = uw
            w = np.ones(L.shape[1])
        elif mech in ("weighted", "weighted_e"):
            w = privacy_weights(uw[2], self.c1, self.c2)
            key = ("weighted", self.c1, self.c2)
            if key not in shared:
                shared[key] = self._fit_model(
                    data, w, None, int(seeds[1]),
                    f"PseudoPosteriorSynthesizer: the weighted fit (c1 = {self.c1:g}, "
                    f"c2 = {self.c2:g})")
            model, idata, L, conv = shared[key]
            if mech == "weighted_e":
                # one truncation, as in the paper. Repeating it while the refit's draws put
                # records above c cascades: each refit widens the posterior (on 500 Beta
                # records at epsilon = 4, five rounds removed 499), so the refit is checked
                # instead (_truncation_checked)
                over = record_bounds(L) * w > c
                n_trunc = int(over.sum())
                w = np.where(over, 0.0, w)
                model, idata, L, conv = self._fit_model(
                    data, w, None, int(seeds[2]), f"PseudoPosteriorSynthesizer(weighted_e, "
                    f"epsilon = {eps:g}): the refit after truncation")
        elif mech == "censor_uw":
            w = np.ones(self._n)
            model, idata, L, conv = self._fit_model(
                data, None, censor, int(seeds[1]),
                f"PseudoPosteriorSynthesizer(censor_uw, epsilon = {eps:g}): the censored fit")
        else:  # censor_w
            data_model = shared.get("data_model")
            if data_model is None:
                data_model = self.factory(data, None, None, **(self.factory_kwargs or {}))
            w = self._fixed_weights(data_model)
            if w is None:
                w = privacy_weights(uw[2], self.c1, self.c2)
            model, idata, L, conv = self._fit_model(
                data, w, censor, int(seeds[1]),
                f"PseudoPosteriorSynthesizer(censor_w, epsilon = {eps:g}): the weighted, "
                "censored fit")
        delta = lipschitz_bound(L, w, censor)  # the model's own (_check_built)
        n_cens = int(np.sum(record_bounds(L) * w > censor)) if censor else 0
        share = _censored_share(L, w, censor, f"PseudoPosteriorSynthesizer({mech}, epsilon = "
                                f"{eps:g})" if censor else "")
        self.model_ = model
        self.idata_ = idata
        self.column_ = _name(data, observed_name(model))
        self.diagnostics_ = PseudoPosteriorDiagnostics(mech, w, delta, local_epsilon(delta, nb),
                                                       n_trunc, n_cens, idata, conv, share)
        self.guarantee_ = self.guarantee()
        if mech == "weighted_e":
            self.guarantee_ = _truncation_checked(self.guarantee_, w, L, eps, nb)
        self.ledger_ = Ledger(nb)
        self._seeded = getattr(self, "_seeded", False)
        return self

    # ------------------------------------------------------------------------- synthesis

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: int | None = None) -> list[pd.DataFrame]:
        """``m`` synthetic datasets, each from its own posterior draw of the final fit.

        Each dataset is one use of the mechanism: m datasets cost m epsilon (recorded in
        :attr:`ledger_`).

        Parameters
        ----------
        m : int, default 1
        n_rows : int, optional
            Records per dataset. Default: the number of training records, which is public under
            change-one neighbours; under add/remove it is private, so give ``n_rows``. Each
            record is then a fresh draw from the record distribution at the dataset's posterior
            draw (as many posterior-predictive passes at that draw as ``n_rows`` needs). Models
            whose records have their own parameters (the regression, whose records depend on
            covariates) support only the default.
        random_seed : int, optional
            Picks the draws and the records. For a privacy mechanism a fixed seed warns.

        Returns
        -------
        list of pandas.DataFrame

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit` (or :meth:`from_posterior`, :meth:`load`).
        bayesynth.errors.InvalidParameterError
            ``m`` or ``n_rows`` below 1, ``m`` above the number of posterior draws, or a bad
            ``random_seed``.
        bayesynth.errors.PrivacyGuaranteeError
            Under add/remove neighbours without ``n_rows``.
        bayesynth.errors.InvalidParameterError
            ``n_rows`` for a model whose records have their own parameters.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        g = self.guarantee_
        private = g.guarantee in ("strict", "local")
        if private:
            rng, seeded = release_rng(random_seed, "PseudoPosteriorSynthesizer.sample")
        else:
            rng, seeded = np.random.default_rng(random_seed), False
        if n_rows is None:
            if private and g.neighbours == "add_remove":
                raise PrivacyGuaranteeError(
                    "Under add/remove neighbours the number of records is private: pass n_rows "
                    "(a public number) to sample().", column="n_rows")
        name = observed_name(self.model_)
        if n_rows is not None and _per_record_parameters(self.model_, name):
            raise InvalidParameterError(
                "n_rows needs records that share one distribution given the parameters; this "
                "model gives each record its own (covariates or per-record effects), so it "
                "synthesises exactly its training records' count: leave n_rows unset.",
                column="n_rows")
        post = self.idata_.posterior.stack(sample=("chain", "draw"))
        picks = select_draws(post.sizes["sample"], m, rng, distinct="required")
        n_obs = _n_records(self.model_, name)
        passes = 1 if n_rows is None else -(-int(n_rows) // n_obs)
        # each picked draw repeated once per pass: one posterior-predictive call gives every
        # dataset passes x n fresh records at its own draw
        sub = post.isel(sample=np.repeat(picks, passes))
        sub = sub.drop_vars(["sample", "chain", "draw"]).rename(sample="draw").expand_dims(
            "chain")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp = pm.sample_posterior_predictive(sub, model=self.model_, var_names=[name],
                                                random_seed=rng, progressbar=False)
        y = pp.posterior_predictive[name].values[0].reshape(m, passes * n_obs)
        col = getattr(self, "column_", None) or _name(self._data, name)
        out = []
        for k in range(m):
            vals = y[k] if n_rows is None else y[k, :int(n_rows)]
            out.append(pd.DataFrame({col: vals}))
            self.ledger_.record(f"synthetic dataset ({len(vals)} records)", g.mechanism,
                                g.epsilon, neighbours=g.neighbours, guarantee=g.guarantee,
                                sensitivity=g.sensitivity, why=g.why,
                                seeded=seeded or self._seeded)
        return out


    # ------------------------------------------------------------------------- from a posterior

    @classmethod
    def from_posterior(cls, model: pm.Model, idata: Any, *,
                       factory: Callable[..., pm.Model] | None = None, data: Any = None,
                       column: str | None = None, neighbours: str = "change_one",
                       **params: Any) -> PseudoPosteriorSynthesizer:
        """Synthesize from a pseudo posterior you sampled and inspected yourself; no refit.

        Build the model with a factory (e.g. ``beta_mixture(x, weights, censor)``, any model
        whose likelihood comes from :func:`~bayesynth.models.pseudo_posterior.weighted_observed`),
        sample it (``bs.sample`` or ``pm.sample``), inspect it, then synthesize from that very
        posterior. The mechanism is read off the model: its censoring bound c and its record
        weights give ``"unweighted"`` (no bound, all weights 1), ``"weighted"`` (weights, no
        bound), ``"censor_uw"`` (bound, all weights 1) or ``"censor_w"`` (bound and weights),
        with epsilon = :func:`local_epsilon` (c) under ``neighbours``.

        Parameters
        ----------
        model : pymc.Model
            The model the posterior belongs to.
        idata : arviz.InferenceData
            Its posterior.
        factory : callable, optional
            The factory that built ``model``: needed by :meth:`save` (the model is rebuilt on
            load) and, for the DP mechanisms, to check that the priors do not move with the
            data (without it that assumption is stated in the guarantee but not checked).
        data : DataFrame or array, optional
            The records the model was built on, as the factory takes them (default: the
            observed values as a one-column DataFrame).
        column : str, optional
            Name of the synthetic column (default: the observed variable's name).
        neighbours : {"change_one", "add_remove"}, default "change_one"
        **params
            Other constructor settings (``max_loglik_draws``, ``check_priors``,
            ``factory_kwargs`` ...). ``mechanism`` and ``epsilon``, if given, must agree with
            the model (``"weighted_e"`` may be stated for a weighted model without a bound).

        Returns
        -------
        PseudoPosteriorSynthesizer
            Ready to :meth:`sample`, with ``diagnostics_`` computed on this posterior and a
            fresh ``ledger_``.

        Raises
        ------
        bayesynth.errors.IncompatibleModelError
            The model has no (single) ``weighted_observed`` variable, or the posterior lacks
            its free variables.
        bayesynth.errors.InvalidParameterError
            ``mechanism`` or ``epsilon`` contradicting the model.
        bayesynth.errors.PrivacyGuaranteeError
            A DP mechanism for a model that releases real values (or, with ``factory``, whose
            priors move with the data).

        Notes
        -----
        Weights in a censored model are treated as fitted on the confidential data: the
        release is recorded as "local", unless ``calibration=`` or ``weights=`` is given and
        reproduces the model's weights exactly (then "strict", under the same assumption as
        :meth:`fit`: the calibration or the weights do not depend on the confidential data).
        Either one that does not reproduce them is refused.

        Examples
        --------
        >>> import numpy as np, bayesynth as bs
        >>> from bayesynth.models.pseudo_posterior import beta_mixture
        >>> x = np.random.default_rng(0).beta(2, 5, 50)
        >>> model = beta_mixture(x, censor=1.0, n_components=1)
        >>> idata = bs.sample(model, draws=50, tune=50, chains=1, random_seed=1,
        ...                   progressbar=False)  # doctest: +SKIP
        >>> syn = bs.synthesis.PseudoPosteriorSynthesizer.from_posterior(
        ...     model, idata, factory=beta_mixture,
        ...     factory_kwargs={"n_components": 1})  # doctest: +SKIP
        >>> syn.guarantee_.epsilon  # doctest: +SKIP
        4.0
        """
        try:
            info = observed_info(model)
        except InvalidParameterError as err:
            raise IncompatibleModelError(
                "from_posterior needs a model whose likelihood is built with "
                f"bayesynth.models.pseudo_posterior.weighted_observed: {err}") from err
        post = getattr(idata, "posterior", None)
        absent = [v.name for v in model.free_RVs if post is None or v.name not in post]
        if absent:
            raise IncompatibleModelError(f"The posterior lacks {absent}: pass the InferenceData "
                                         "sampled from this model.")
        nb = check_neighbours(neighbours)
        w = np.asarray(info.weights, dtype=float)
        c = info.censor
        weighted = not np.all(w == 1.0)
        mech = {(False, False): "unweighted", (True, False): "weighted",
                (False, True): "censor_uw", (True, True): "censor_w"}[(weighted, c is not None)]
        eps = None if c is None else local_epsilon(c, nb)
        asked = params.pop("mechanism", None)
        if asked is not None and asked != mech:
            if not (asked == "weighted_e" and mech == "weighted"):
                raise InvalidParameterError(
                    f"mechanism = {asked!r} contradicts the model, which is {mech!r} (censoring "
                    f"bound {c!r}, {'weighted' if weighted else 'unit'} weights).",
                    column="mechanism")
            mech = asked
        asked_eps = params.pop("epsilon", None)
        if asked_eps is not None:
            if eps is not None and not math.isclose(asked_eps, eps):
                raise InvalidParameterError(
                    f"epsilon = {asked_eps!r} contradicts the model's censoring bound c = {c!r}, "
                    f"which gives epsilon = {eps!r} under {nb} neighbours.", column="epsilon")
            eps = asked_eps
        name = info.name
        values = _observed_values(model, name)
        column = column or name
        if data is None:
            data = pd.DataFrame({column: values})
        obj = cls(factory, mechanism=mech, epsilon=eps, neighbours=nb, **params)
        mech, eps, nb = obj._settings()
        if obj.weights is not None or obj.calibration is not None:
            # a strict label rests on these weights being the model's own
            given = obj._fixed_weights(model)
            if given.shape != w.shape or not np.allclose(given, w, rtol=0, atol=1e-12):
                what = "calibration" if obj.calibration is not None else "weights"
                raise InvalidParameterError(
                    f"{what} = ... does not give the weights the model uses (they differ on "
                    f"{int(np.sum(~np.isclose(given, w))) if given.shape == w.shape else 'all'} "
                    "record(s)); the guarantee of a censored model rests on its own weights. "
                    f"Drop {what}= (the release is then recorded as local) or rebuild the "
                    f"model with these weights.", column=what)
        _refuse_extra_terms(model, mech)
        obj._check_model(model, data, mech)
        L = record_loglik(model, idata, max_draws=obj.max_loglik_draws, random_seed=0)
        delta = lipschitz_bound(L, w, c)
        n_cens = int(np.sum(record_bounds(L) * w > c)) if c is not None else 0
        share = _censored_share(L, w, c, f"PseudoPosteriorSynthesizer.from_posterior({mech})")
        obj._data = data
        obj._n = int(len(values))
        obj._seeded = False
        obj.model_ = model
        obj.idata_ = idata
        obj.column_ = column
        obj.unweighted_diagnostics_ = None
        conv = check_loglik_convergence(
            model, idata, what=f"PseudoPosteriorSynthesizer.from_posterior({mech})",
            stacklevel=_stacklevel_outside())
        obj.diagnostics_ = PseudoPosteriorDiagnostics(
            mech, w, delta, local_epsilon(delta, nb), int(np.sum(w == 0)), n_cens, idata, conv,
            share)
        obj.guarantee_ = obj.guarantee()
        if mech == "weighted_e":  # the truncation was the caller's: check it on these draws
            obj.guarantee_ = _truncation_checked(obj.guarantee_, w, L, eps, nb)
        obj.ledger_ = Ledger(nb)
        return obj

    # ------------------------------------------------------------------------- save/load

    def _json_params(self) -> dict[str, Any]:
        params = self.get_params()
        params["factory"] = factory_path(self.factory)
        params["calibration"] = None if self.calibration is None else "calibration.nc"
        params["weights"] = None if self.weights is None else "pseudo_posterior.nc"
        try:
            params["factory_kwargs"] = json_ready(self.factory_kwargs, "factory_kwargs")
        except InvalidParameterError:
            params["factory_kwargs"] = None
        return {k: json_ready(v, k) for k, v in params.items()}

    def _write(self, directory: Path) -> None:
        """Write the files the class documents (netCDF and JSON)."""
        write_pseudo_posterior(self, directory)

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], *,
              factory: Callable[..., pm.Model] | None = None,
              factory_kwargs: dict[str, Any] | None = None,
              **kwargs: Any) -> PseudoPosteriorSynthesizer:
        """Rebuild the synthesizer; ``factory`` and ``factory_kwargs`` replace the saved ones."""
        return read_pseudo_posterior(cls, directory, meta, factory=factory,
                                     factory_kwargs=factory_kwargs)


def _observed_values(model: pm.Model, name: str) -> np.ndarray:
    """Return the observed records of the model's weighted variable."""
    value = model.rvs_to_values[model[name]]
    if hasattr(value, "get_value"):
        return np.asarray(value.get_value())
    if hasattr(value, "data"):
        return np.asarray(value.data)
    return np.asarray(value.eval())


def fit_mechanisms(
    data,
    factory: Callable[..., pm.Model],
    epsilons: tuple[float, ...] = (5.0, 4.0, 3.0),
    *,
    mechanisms: tuple[str, ...] = MECHANISMS,
    c1: float = 1.0,
    c2: float = 0.0,
    neighbours: str = "change_one",
    random_seed: int | None = None,
    **kwargs: Any,
) -> dict[tuple[str, float | None], PseudoPosteriorSynthesizer]:
    """Fit several mechanisms on one dataset, sharing the unweighted and the weighted fits.

    Parameters
    ----------
    data : DataFrame or array
    factory : callable
    epsilons : tuple of float
    mechanisms : tuple of str
    c1, c2 : float
    neighbours : {"change_one", "add_remove"}
    random_seed : int, optional
    **kwargs
        Passed to :class:`PseudoPosteriorSynthesizer`.

    Returns
    -------
    dict
        ``{(mechanism, epsilon): fitted synthesizer}``; epsilon is ``None`` for ``unweighted``
        and ``weighted``, which do not use it.
    """
    seeds = np.random.SeedSequence(random_seed).generate_state(3)
    shared: dict[str, Any] = {}
    out = {}
    checked = False
    for mech in mechanisms:
        for eps in ([None] if mech in ("unweighted", "weighted") else list(epsilons)):
            syn = PseudoPosteriorSynthesizer(factory, mechanism=mech, epsilon=eps, c1=c1, c2=c2,
                                             neighbours=neighbours, random_seed=random_seed,
                                             **kwargs)
            mech_, _, _ = syn._settings()
            if mech_ in _NEEDS_EPSILON and not checked:
                if "data_model" not in shared:
                    shared["data_model"] = factory(data, None, None,
                                                   **(syn.factory_kwargs or {}))
                syn._check_model(shared["data_model"], data, mech_)
                checked = True
            syn._seeded = False
            if mech_ in _NEEDS_EPSILON and random_seed is not None:
                _, syn._seeded = release_rng(random_seed, f"fit_mechanisms({mech_})")
            out[(mech, eps)] = syn._finish(data, shared, seeds)
    return out


def _name(data, default: str) -> str:
    if isinstance(data, pd.DataFrame) and data.shape[1] == 1:
        return str(data.columns[0])
    return default


def _n_records(model: pm.Model, name: str) -> int:
    """Return the number of records of the observed variable ``name``."""
    value = model.rvs_to_values[model[name]]
    data = value.data if hasattr(value, "data") else value.get_value()
    return int(np.shape(data)[0])


def _per_record_parameters(model: pm.Model, name: str) -> bool:
    """Whether a parameter of the observed variable ``name`` has one entry per record.

    The observed variable's inputs are its size, its parameters, its weights (``<name>_weights``)
    and random generators; a parameter whose leading dimension, at the model's initial point,
    is the number of records gives each record its own distribution.
    """
    rv = model[name]
    n = _n_records(model, name)
    if n < 2:
        return False
    params = [v for v in rv.owner.inputs[1:]
              if hasattr(v.type, "ndim") and not str(v.name or "").endswith("_weights")]
    if not params:
        return False
    shapes = model.compile_fn([v.shape for v in params], inputs=model.value_vars,
                              on_unused_input="ignore")(model.initial_point())
    return any(len(sh) >= 1 and int(sh[0]) == n for sh in shapes)
