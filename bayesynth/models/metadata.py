"""Metadata that travels with a PyMC model through its transforms.

bayesynth's factories need to leave information with the model they return (the latent layout
of the copula, the training design of a BART regression, the noisy tables of a latent class
model, the records of a pseudo posterior) for the samplers and synthesizers that read it later.
A side table keyed by the model object loses it as soon as PyMC copies the model
(``clone_model``, ``pm.observe``, ``pm.do``). Here the metadata is attached to a data container
of the model itself, ``bayesynth_<name>`` (an empty array, so it costs nothing in the trace's
``constant_data``): PyMC's model transforms keep data containers, and with them the metadata.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm

__all__ = ["attach_metadata", "model_metadata", "metadata_names", "PREFIX"]

PREFIX = "bayesynth_"


def attach_metadata(name: str, payload: Any, model: pm.Model | None = None) -> None:
    """Attach ``payload`` to ``model`` (default: the model in context) under ``name``.

    Parameters
    ----------
    name : str
        Key of the payload; the model gains a data container ``bayesynth_<name>``.
    payload : object
        Any Python object (not None: a None payload reads back as absent).
    model : pymc.Model, optional
        The model; the one in context when omitted.
    """
    model = pm.modelcontext(model)
    with model:
        holder = pm.Data(PREFIX + name, np.zeros(0))
    holder.tag.bayesynth_metadata = payload


def model_metadata(model: pm.Model, name: str, default: Any = None) -> Any:
    """Return the payload attached under ``name``, or ``default`` when there is none.

    Parameters
    ----------
    model : pymc.Model
        The model.
    name : str
        Key given to :func:`attach_metadata`.
    default : object, optional
        Returned when nothing is attached under ``name``.

    Returns
    -------
    object
        The payload or ``default``.
    """
    key = PREFIX + name
    for var in getattr(model, "data_vars", []):
        if getattr(var, "name", None) == key:
            payload = getattr(var.tag, "bayesynth_metadata", None)
            if payload is not None:
                return payload
    return default


def metadata_names(model: pm.Model, prefix: str = "") -> list[str]:
    """List the names of the metadata attached to ``model`` that start with ``prefix``.

    Parameters
    ----------
    model : pymc.Model
        The model.
    prefix : str, default ""
        Keep only names starting with this.

    Returns
    -------
    list of str
        The names without :data:`PREFIX`, in the order of the model's data containers.
    """
    out = []
    for var in getattr(model, "data_vars", []):
        name = getattr(var, "name", None) or ""
        if (name.startswith(PREFIX + prefix)
                and getattr(var.tag, "bayesynth_metadata", None) is not None):
            out.append(name[len(PREFIX):])
    return out
