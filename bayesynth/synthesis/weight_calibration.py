"""Record-level weight functions fitted on reference data, for strict censor_w releases.

Hu, Savitsky & Williams (2022) recommend fitting the weights on a historical database: the
weight of a confidential record then depends on that record alone, so censoring each weighted
contribution at c makes every posterior draw strictly epsilon-DP (under the neighbour relation
the bound c was set for: c = epsilon/4 change-one, epsilon/2 add/remove). :func:`calibrate_weights`
fits the weight function, :class:`WeightCalibration` holds it (saved as netCDF) and
:class:`~bayesynth.synthesis.PseudoPosteriorSynthesizer` uses it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymc as pm
import xarray as xr

from bayesynth._io import atomic_write
from bayesynth.errors import InvalidParameterError
from bayesynth.models.pseudo_posterior import record_loglik
from bayesynth.privacy import check_epsilon, check_neighbours
from bayesynth.privacy.lipschitz import (
    lipschitz_bound,
    local_epsilon,
    record_bounds,
    weights_from_bounds,
)
from bayesynth.samplers.sampling import check_loglik_convergence
from bayesynth.samplers.sampling import sample as bs_sample

__all__ = ["WeightCalibration", "calibrate_weights"]

#: NUTS's target acceptance rate in the pseudo-posterior fits (PyMC's default is 0.8). With
#: 0.8 a two-component ``beta_mixture`` fitted to 2,000 Beta(0.5, 3) records diverged 17-147
#: times per fit (three seeds), and with 0.95 not once (benchmarks/README.md).
TARGET_ACCEPT = 0.95



@dataclass(eq=False)
class WeightCalibration:
    """A weight function fitted on reference data, for strict censor_w releases.

    The weight of a record depends on that record alone: ``s(x) = max |f_theta(x)|`` over the
    posterior draws of an unweighted fit to the *reference* data (public, or a historical
    release), then ``alpha(x) = clip(c1 clip((s_high - s(x)) / (s_high - s_low), 0, 1) + c2,
    0, 1)`` with ``s_low``, ``s_high`` the range of s over the reference records. Because no
    other confidential record enters alpha(x), censoring at c makes each draw strictly
    epsilon-DP (Hu, Savitsky & Williams 2022 recommend a historical database for this step).

    Attributes
    ----------
    c1, c2 : float
        Scale and shift of the weights (c1 chosen on the reference data).
    epsilon : float
        The privacy target; later fits censor at it.
    neighbours : str
    s_low, s_high : float
    reference_draws : xarray.Dataset
        Posterior draws of the reference fit (dim ``sample``).
    reference_local_epsilon : float
        :func:`local_epsilon` of the weighted fit on the reference data.
    n_reference : int
    """

    c1: float
    c2: float
    epsilon: float
    neighbours: str
    s_low: float
    s_high: float
    reference_draws: xr.Dataset = field(repr=False)
    reference_local_epsilon: float = math.nan
    n_reference: int = 0

    def weights(self, model: pm.Model) -> np.ndarray:
        """Compute the weights of the records a model was built on (one per record).

        Parameters
        ----------
        model : pymc.Model
            Built by the same factory as the reference fit.

        Returns
        -------
        numpy.ndarray
        """
        loglik = record_loglik(model, self.reference_draws)
        return weights_from_bounds(record_bounds(loglik), self.s_low, self.s_high, self.c1,
                                    self.c2)

    def save(self, path) -> None:
        """Write the calibration as netCDF (draws) with its settings as attributes.

        Parameters
        ----------
        path : path-like
            The netCDF file, written atomically.
        """
        ds = self.reference_draws.copy()
        ds.attrs = {"c1": self.c1, "c2": self.c2, "epsilon": self.epsilon,
                    "neighbours": self.neighbours, "s_low": self.s_low, "s_high": self.s_high,
                    "reference_local_epsilon": self.reference_local_epsilon,
                    "n_reference": self.n_reference, "bayesynth_object": "WeightCalibration"}
        atomic_write(path, lambda p: ds.to_netcdf(p, engine="h5netcdf"))

    @classmethod
    def load(cls, path) -> WeightCalibration:
        """Read a calibration written by :meth:`save`.

        Parameters
        ----------
        path : path-like
            The netCDF file.

        Returns
        -------
        WeightCalibration
        """
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            ds = ds.load()
        a = dict(ds.attrs)
        ds.attrs = {}
        return cls(float(a["c1"]), float(a["c2"]), float(a["epsilon"]), str(a["neighbours"]),
                   float(a["s_low"]), float(a["s_high"]), ds,
                   float(a["reference_local_epsilon"]), int(a["n_reference"]))


def _draw_subset(idata, max_draws: int | None, seed) -> xr.Dataset:
    post = idata.posterior.stack(sample=("chain", "draw"))
    S = post.sizes["sample"]
    idx = np.arange(S)
    if max_draws is not None and max_draws < S:
        idx = np.sort(np.random.default_rng(seed).choice(S, max_draws, replace=False))
    sub = post.isel(sample=idx).drop_vars(["sample", "chain", "draw"])
    return sub.assign_coords(sample=np.arange(len(idx)))


def calibrate_weights(
    reference_data,
    factory: Callable[..., pm.Model],
    epsilon: float,
    *,
    neighbours: str = "change_one",
    c2: float = 0.0,
    c1_grid: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3),
    draws: int = 500,
    tune: int = 500,
    chains: int = 2,
    target_accept: float = TARGET_ACCEPT,
    max_extensions: int = 2,
    random_seed: int | None = None,
    factory_kwargs: dict[str, Any] | None = None,
    max_loglik_draws: int = 500,
) -> WeightCalibration:
    """Fit a record-level weight function on reference data (the periodic-release recipe).

    The unweighted model is fitted to ``reference_data``; its draws define each record's bound
    s(x) and the range (s_low, s_high). The weighted mechanism is then fitted on the reference
    data for each c1 in ``c1_grid`` (sorted, largest first), and the first c1 whose
    :func:`local_epsilon` is at most ``epsilon`` is kept (the smallest tried if none is), so
    that censoring rarely binds on data like the reference. Use the result with
    ``PseudoPosteriorSynthesizer(mechanism="censor_w", calibration=...)`` on confidential data:
    the weights then depend on each record alone and the release is strictly epsilon-DP under
    ``neighbours``.

    Parameters
    ----------
    reference_data : DataFrame or array
        Public or historical data (not the confidential data to be released).
    factory : callable
    epsilon : float
    neighbours : {"change_one", "add_remove"}, default "change_one"
    c2 : float, default 0
    c1_grid : tuple of float
    draws, tune, chains : int
        Each reference fit is judged on its records' log-likelihoods and warns when it has
        not converged (:func:`~bayesynth.samplers.check_loglik_convergence`).
    target_accept : float, default 0.95
        NUTS's target acceptance rate.
    max_extensions : int, default 2
        How many times a reference fit whose R-hat exceeds 1.01 (at most 1.1) and that did
        not diverge is continued for ``draws`` more draws (see
        :class:`PseudoPosteriorSynthesizer`).
    random_seed : int, optional
        Seeds the reference fits (the reference data are not confidential).
    factory_kwargs : dict, optional
    max_loglik_draws : int, default 500
        Reference draws kept to evaluate s(x).

    Returns
    -------
    WeightCalibration
    """
    epsilon = check_epsilon(epsilon)
    check_neighbours(neighbours)
    _check_target_accept(target_accept)
    if not c1_grid:
        raise InvalidParameterError("c1_grid is empty; give at least one scale.",
                                    column="c1_grid")
    kw = dict(factory_kwargs or {})
    seeds = np.random.SeedSequence(random_seed).generate_state(len(c1_grid) + 1)
    model = factory(reference_data, None, None, **kw)
    idata, _ = _sample(model, draws, tune, chains, int(seeds[0]), False,
                       "calibrate_weights: the unweighted fit to the reference data",
                       target_accept, max_extensions)
    ref_draws = _draw_subset(idata, max_loglik_draws, int(seeds[0]))
    s = record_bounds(record_loglik(model, ref_draws))
    finite = s[np.isfinite(s)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    best = None
    for c1, seed in zip(sorted(c1_grid, reverse=True), seeds[1:]):
        w = weights_from_bounds(s, lo, hi, c1, c2)
        wmodel = factory(reference_data, w, None, **kw)
        widata, _ = _sample(wmodel, draws, tune, chains, int(seed), False,
                            f"calibrate_weights: the weighted fit at c1 = {c1:g} to the "
                            "reference data", target_accept, max_extensions)
        L = record_loglik(wmodel, widata, max_draws=max_loglik_draws, random_seed=int(seed))
        loc = local_epsilon(lipschitz_bound(L, w), neighbours)
        best = WeightCalibration(float(c1), float(c2), epsilon, neighbours, lo, hi, ref_draws,
                                 loc, int(len(s)))
        if loc <= epsilon:
            break
    return best


def _stacklevel_outside() -> int:
    """Give the ``stacklevel`` that points at the first frame outside bayesynth (the user's).

    For a warning issued by a function that the caller of this one calls directly.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    return level


def _check_target_accept(value: float) -> float:
    if not (isinstance(value, int | float) and 0 < value < 1):
        raise InvalidParameterError(f"target_accept must lie strictly between 0 and 1; got "
                                    f"{value!r}.", column="target_accept")
    return float(value)


def _sample(model, draws, tune, chains, seed, progressbar, what: str,
            target_accept: float = TARGET_ACCEPT, max_extensions: int = 2):
    """Sample a pseudo-posterior fit and judge it (:func:`check_loglik_convergence`).

    A fit just short of convergence is continued up to ``max_extensions`` times (see
    :func:`bayesynth.sample`). Returns the posterior and its
    :class:`~bayesynth.samplers.sampling.LoglikConvergence`; an unconverged fit warns, the
    warning starting with ``what`` (which fit it is).
    """
    idata = bs_sample(model, draws=draws, tune=tune, chains=chains, random_seed=seed,
                      progressbar=progressbar, check_convergence=False,
                      target_accept=_check_target_accept(target_accept),
                      max_extensions=max_extensions)
    conv = check_loglik_convergence(model, idata, what=what,
                                    stacklevel=_stacklevel_outside())
    return idata, conv
