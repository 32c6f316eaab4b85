"""Saving and loading :class:`~bayesynth.synthesis.PseudoPosteriorSynthesizer` (netCDF + JSON).

The model itself cannot be written without pickle, so it is rebuilt on load by calling its
factory on the saved records with the saved weights and censoring bound. Factories defined in
bayesynth are found by import path; any other is passed again to ``load``.
"""

from __future__ import annotations

import importlib
import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from bayesynth.errors import InvalidParameterError, SchemaError
from bayesynth.models.pseudo_posterior import observed_info
from bayesynth.privacy import Ledger, LedgerEntry
from bayesynth.samplers.sampling import LoglikConvergence
from bayesynth.synthesis.base import json_ready, read_idata, read_json, read_netcdf, write_json
from bayesynth.synthesis.weight_calibration import _stacklevel_outside

if TYPE_CHECKING:
    from bayesynth.synthesis.pseudo_posterior import (
        PseudoPosteriorDiagnostics,
        PseudoPosteriorSynthesizer,
    )

__all__ = ["write_pseudo_posterior", "read_pseudo_posterior", "factory_path",
           "factory_defaults"]

#: Keyword defaults of bayesynth's factories that changed while saves did not record them:
#: factory path -> {keyword: (old default, what changed)}. A save without recorded defaults
#: rebuilds its model with today's default, and load says so.
_CHANGED_DEFAULTS: dict[str, dict[str, tuple[Any, str]]] = {
    "bayesynth.models.pseudo_posterior:beta_mixture": {
        "concentration": (1.0, "the Dirichlet concentration of the weights was 1 until "
                               "2026-12-05")},
}


def factory_defaults(factory: Callable[..., pm.Model],
                     factory_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Return the factory's keyword defaults that the call used, as JSON can store them.

    Every parameter after the first three (data, weights, censor) that has a default and is not
    in ``factory_kwargs``; defaults JSON cannot store are left out. A save records them so that
    a later change of a factory's default does not change the model that load rebuilds.

    Parameters
    ----------
    factory : callable
        The model factory.
    factory_kwargs : dict or None
        The keyword arguments the synthesizer passed.

    Returns
    -------
    dict
    """
    given = factory_kwargs or {}
    out: dict[str, Any] = {}
    try:
        params = list(inspect.signature(factory).parameters.values())[3:]
    except (TypeError, ValueError):  # a builtin or C callable: nothing to record
        return out
    for par in params:
        if (par.default is inspect.Parameter.empty or par.name in given
                or par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD)):
            continue
        try:
            out[par.name] = json_ready(par.default, par.name)
        except InvalidParameterError:
            continue
    return out


def _with_saved_defaults(factory: Callable[..., pm.Model], stored: str,
                         factory_kwargs: dict[str, Any] | None,
                         state: dict[str, Any]) -> dict[str, Any] | None:
    """Return ``factory_kwargs`` with the saved factory's recorded defaults under them.

    Applied when ``factory`` is the saved one: each recorded default the factory still accepts
    and the keyword arguments do not set. A save that recorded none (before 2026-12-06) of a
    bayesynth factory whose default has changed since gets today's default, with a warning.
    """
    if factory_path(factory) != stored:
        return factory_kwargs
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to add
        return factory_kwargs
    given = dict(factory_kwargs or {})
    recorded = state.get("factory_defaults")
    if recorded is None:
        changed = [(k, v) for k, v in _CHANGED_DEFAULTS.get(stored, {}).items()
                   if k not in given and k in accepted]
        for key, (old, why) in changed:
            warnings.warn(
                f"This save does not record the keyword defaults of {stored} (it predates "
                f"2026-12-06), and {why}: the model is rebuilt with today's default {key} = "
                f"{accepted[key].default!r}. The saved draws, and so the "
                f"synthetic data, are unaffected; if the fit was made with {key} = {old!r}, "
                f"load(path, factory_kwargs={{..., {key!r}: {old!r}}}) rebuilds its prior.",
                UserWarning, stacklevel=_stacklevel_outside() - 1)
        return factory_kwargs
    extra = {k: v for k, v in recorded.items() if k in accepted and k not in given}
    return {**extra, **given} if (extra or factory_kwargs is not None) else None


def write_pseudo_posterior(syn: PseudoPosteriorSynthesizer, directory: Path) -> None:
    """Write the files :class:`PseudoPosteriorSynthesizer` documents (netCDF and JSON).

    Parameters
    ----------
    syn : PseudoPosteriorSynthesizer
        Fitted (or made by ``from_posterior`` with a ``factory``).
    directory : pathlib.Path
        The (temporary) directory being written.
    """
    if syn.factory is None:
        raise InvalidParameterError(
            "save() rebuilds the model from its factory on load, and this synthesizer has "
            "none: pass factory= (the function that built the model) to from_posterior.",
            column="factory")
    info = observed_info(syn.model_)
    try:
        kwargs, kwargs_saved = json_ready(syn.factory_kwargs, "factory_kwargs"), True
    except InvalidParameterError:
        kwargs, kwargs_saved = None, False  # callables (priors): passed again to load
    defaults = factory_defaults(syn.factory, syn.factory_kwargs)
    arrays: dict[str, Any] = {"model_weights": ("record", np.asarray(info.weights, float)),
                              "diag_weights": ("record", np.asarray(
                                  syn.diagnostics_.weights, float))}
    if syn.weights is not None:
        arrays["weights"] = ("record", np.asarray(syn.weights, dtype=float))
    uw = syn.unweighted_diagnostics_
    if uw is not None:
        arrays["unweighted_weights"] = ("record", np.asarray(uw.weights, float))
    data = syn._data
    if isinstance(data, pd.DataFrame):
        kind, columns = "frame", [str(c) for c in data.columns]
        dtypes = [str(t) for t in data.dtypes]
        for i, c in enumerate(data.columns):
            arrays[f"data_{i}"] = ("data_record", data[c].to_numpy())
    else:
        kind, columns, dtypes = "array", [], []
        arr = np.asarray(data)
        arrays["data"] = (tuple(f"data_dim_{d}" for d in range(arr.ndim)), arr)
    syn.idata_.to_netcdf(str(directory / "posterior.nc"), engine="h5netcdf")
    xr.Dataset(arrays).to_netcdf(directory / "pseudo_posterior.nc", engine="h5netcdf")
    if syn.calibration is not None:
        syn.calibration.save(directory / "calibration.nc")

    def diag(d: PseudoPosteriorDiagnostics | None) -> dict | None:
        if d is None:
            return None
        return {"mechanism": d.mechanism, "empirical_delta": float(d.empirical_delta),
                "empirical_local_epsilon": float(d.empirical_local_epsilon),
                "n_truncated": int(d.n_truncated), "n_censored": int(d.n_censored),
                "convergence": None if d.convergence is None else asdict(d.convergence),
                "censored_share": d.censored_share}

    g = asdict(syn.guarantee_)
    g["epsilon"] = None if math.isinf(g["epsilon"]) else g["epsilon"]
    write_json(directory, "pseudo_posterior.json", {
        "factory": factory_path(syn.factory), "factory_kwargs": kwargs,
        "factory_kwargs_saved": kwargs_saved, "factory_defaults": defaults,
        "observed": info.name,
        "model_censor": info.censor, "column": syn.column_, "n": int(syn._n),
        "seeded": bool(syn._seeded), "data_kind": kind, "data_columns": columns,
        "data_dtypes": dtypes, "diagnostics": diag(syn.diagnostics_),
        "unweighted_diagnostics": diag(uw), "guarantee": g,
        "ledger": syn.ledger_.to_dict()})


def read_pseudo_posterior(cls: type[PseudoPosteriorSynthesizer], directory: Path,
                          meta: dict[str, Any], *,
                          factory: Callable[..., pm.Model] | None = None,
                          factory_kwargs: dict[str, Any] | None = None
                          ) -> PseudoPosteriorSynthesizer:
    """Rebuild a saved synthesizer; ``factory`` and ``factory_kwargs`` replace the saved ones.

    Parameters
    ----------
    cls : type
        :class:`PseudoPosteriorSynthesizer` (or a subclass).
    directory : pathlib.Path
        The saved directory.
    meta : dict
        Its ``meta.json``.
    factory : callable, optional
        Needed when the saved factory is not defined in bayesynth.
    factory_kwargs : dict, optional
        Needed when the saved keyword arguments held objects JSON cannot store.

    Returns
    -------
    PseudoPosteriorSynthesizer
    """
    state = read_json(directory, "pseudo_posterior.json")
    ds = read_netcdf(directory, "pseudo_posterior.nc")
    params = dict(meta["params"])
    params.setdefault("max_extensions", 0)  # saved before fits were continued
    stored = params.pop("factory")
    if factory is None:
        factory = _resolve_factory(stored)
    if factory_kwargs is None:
        if not state["factory_kwargs_saved"]:
            raise InvalidParameterError(
                "The factory's keyword arguments held objects JSON cannot store (callable "
                "priors?) and were not saved: pass them again, load(path, "
                "factory_kwargs={...}).", column="factory_kwargs")
        factory_kwargs = state["factory_kwargs"]
    factory_kwargs = _with_saved_defaults(factory, stored, factory_kwargs, state)
    params["factory_kwargs"] = factory_kwargs
    params["calibration"] = (_calibration(Path(directory) / "calibration.nc")
                             if params.get("calibration") else None)
    params["weights"] = ds["weights"].values if params.get("weights") else None
    obj = cls(factory, **params)
    if state["data_kind"] == "frame":
        data = pd.DataFrame({c: ds[f"data_{i}"].values.astype(t) for i, (c, t) in
                             enumerate(zip(state["data_columns"], state["data_dtypes"]))})
    else:
        data = ds["data"].values
    model = factory(data, ds["model_weights"].values, state["model_censor"],
                    **(factory_kwargs or {}))
    idata = read_idata(directory, "posterior.nc")
    info = observed_info(model)
    free = [v.name for v in model.free_RVs]
    if (info.name != state["observed"] or len(info.weights) != state["n"]
            or any(v not in idata.posterior for v in free)):
        raise SchemaError(
            f"The factory {factory_path(factory)} does not rebuild the saved model (observed "
            f"{info.name!r} with {len(info.weights)} records, free variables {free}; saved: "
            f"{state['observed']!r} with {state['n']} records). Pass the factory and "
            "factory_kwargs that built it.")
    obj.model_ = model
    obj.idata_ = idata
    obj._data = data
    obj._n = int(state["n"])
    obj._seeded = bool(state["seeded"])
    obj.column_ = state["column"]
    d = state["diagnostics"]
    obj.diagnostics_ = _diagnostics(
        d["mechanism"], ds["diag_weights"].values, d["empirical_delta"],
        d["empirical_local_epsilon"], d["n_truncated"], d["n_censored"], idata,
        _convergence(d.get("convergence")), d.get("censored_share"))
    u = state.get("unweighted_diagnostics")
    obj.unweighted_diagnostics_ = None if u is None else _diagnostics(
        u["mechanism"], ds["unweighted_weights"].values, u["empirical_delta"],
        u["empirical_local_epsilon"], u["n_truncated"], u["n_censored"], None,
        _convergence(u.get("convergence")), u.get("censored_share"))
    g = dict(state["guarantee"])
    g["epsilon"] = math.inf if g["epsilon"] is None else float(g["epsilon"])
    obj.guarantee_ = LedgerEntry(**g)
    obj.ledger_ = Ledger.from_dict(state["ledger"])
    return obj


def factory_path(factory: Callable[..., Any] | None) -> str | None:
    """Return ``module:qualname`` of a factory (None for None), as saved in the JSON."""
    if factory is None:
        return None
    return (f"{getattr(factory, '__module__', '?')}:"
            f"{getattr(factory, '__qualname__', type(factory).__name__)}")


def _resolve_factory(path: str | None) -> Callable[..., pm.Model]:
    """Find a factory saved by import path, within bayesynth only (never a module from a file)."""
    module, _, qualname = str(path).partition(":")
    if module == "bayesynth" or module.startswith("bayesynth."):
        obj: Any = importlib.import_module(module)
        try:
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            obj = None
        if callable(obj):
            return obj
    raise InvalidParameterError(
        f"The model factory was {path!r}, which load() does not import (only factories defined "
        "in bayesynth are found by name): pass it again, load(path, factory=...).",
        column="factory")


def _diagnostics(*args: Any) -> Any:
    from bayesynth.synthesis.pseudo_posterior import PseudoPosteriorDiagnostics

    return PseudoPosteriorDiagnostics(*args)


def _convergence(d: dict[str, Any] | None) -> LoglikConvergence | None:
    if d is None:  # saved before the fits were judged, or not judged
        return None
    return LoglikConvergence(**{k: (math.nan if v is None else v) for k, v in d.items()})


def _calibration(path: Path) -> Any:
    from bayesynth.synthesis.pseudo_posterior import WeightCalibration

    return WeightCalibration.load(path)
