"""Latent class model for differentially private marginal counts (Pistner, Slavkovic & Vilhuber).

A truncated Dirichlet-process mixture of product multinomials (Dunson & Xing 2009) with k
classes: weights ``pi`` by stick-breaking (``v_h ~ Beta(1, alpha)``), per-class level
probabilities ``psi_<var>[h] ~ Dirichlet(a)``. Only noisy marginal tables are observed. Each
table's true counts ``M_<t>`` are latent integers with the composite likelihood
``M_t ~ Multinomial(n, P_t(pi, psi))`` (tables independent) and the noisy counts follow the
two-sided geometric mechanism around them:
``P(noisy | M) = prod ((1 - q) / (1 + q)) q^|noisy - M|``.

:func:`bayesynth.sample` runs the custom steps of :mod:`bayesynth.samplers.latent_class`
(Metropolis moves on the true counts that keep each total at n, and a data-augmentation Gibbs
step for pi and psi). Label switching makes pi and psi uninterpretable across draws: monitor the
cell probabilities ``P_<t>`` (stored) and the full-table probabilities
(:func:`full_table_probabilities`), never pi or psi.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayesynth.errors import DataValidationError, InputTypeError, SchemaError
from bayesynth.models.metadata import attach_metadata, model_metadata
from bayesynth.models.priors import PriorFactory, Priors
from bayesynth.privacy import NoisyMarginal, PrivateMarginals

__all__ = ["latent_class_dp_model", "LatentClassSpec", "latent_class_spec", "cell_labels",
           "stick_breaking", "FULL_TABLE_LIMIT", "SWAPPABLE_PRIORS"]

#: Names whose prior a user may replace through ``priors=`` (see :func:`latent_class_dp_model`),
#: with their defaults.
SWAPPABLE_PRIORS: dict[str, str] = {
    "v": "Beta(1, alpha) stick-breaking fractions of the class weights, dims stick (k > 1)",
    "psi": "Dirichlet(psi_prior) level probabilities of each class, one variable psi_<var> "
           "per variable, dims (class, <var>)",
}

FULL_TABLE_LIMIT = 4096
"""Tables with at most this many cells get a ``cell_prob`` deterministic in the trace."""


@dataclass(frozen=True)
class LatentClassSpec:
    """What the custom steps need to know about a latent class model."""

    variables: tuple[str, ...]
    levels: dict[str, list]
    tables: tuple[tuple[str, ...], ...]
    noisy: tuple[np.ndarray, ...]          # flattened noisy counts per table
    log_q: tuple[float, ...]               # log of each table's geometric parameter
    n: int
    k: int
    alpha: float | None                    # None when the prior of v was swapped
    psi_prior: float | None                # None when the prior of psi was swapped

    def table_name(self, t: int) -> str:
        """Return the name suffix of table ``t`` in the model's variables (``"t0"``, ``"t1"``...).

        Parameters
        ----------
        t : int
            Position of the table in ``tables``.

        Returns
        -------
        str
            ``f"t{t}"``, as in ``M_t0`` and ``P_t0``.
        """
        return f"t{t}"


def latent_class_spec(model: pm.Model) -> LatentClassSpec | None:
    """Return the spec of a model built by :func:`latent_class_dp_model`.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model.

    Returns
    -------
    LatentClassSpec or None
        The spec, or None for models not built by :func:`latent_class_dp_model`.
    """
    return model_metadata(model, "latent_class")


def cell_labels(variables: Sequence[str], levels: Mapping[str, Sequence]) -> list[str]:
    """Label a table's cells in C order, e.g. ``"sex=F|age=old"``.

    Parameters
    ----------
    variables : sequence of str
        The table's variables, in order.
    levels : mapping
        Levels of each variable.

    Returns
    -------
    list of str
        One label per cell, the last variable varying fastest.
    """
    grids = [[f"{v}={lev}" for lev in levels[v]] for v in variables]
    out = [""]
    for g in grids:
        out = [f"{a}|{b}" if a else b for a in out for b in g]
    return out


def stick_breaking(v: pt.TensorVariable) -> pt.TensorVariable:
    """Turn stick-breaking fractions into weights: pi_h = v_h prod_{l<h} (1 - v_l).

    The last weight takes the remainder, so the weights add up to 1.

    Parameters
    ----------
    v : pytensor.tensor.TensorVariable
        The k - 1 break fractions, each in (0, 1).

    Returns
    -------
    pytensor.tensor.TensorVariable
        The k weights.
    """
    rest = pt.concatenate([pt.ones((1,)), pt.cumprod(1 - v)])
    return pt.concatenate([v, pt.ones((1,))]) * rest


def _table_probabilities(pi: pt.TensorVariable, psis: Sequence) -> pt.TensorVariable:
    """P(cells of a table) = sum_h pi_h prod_j psi_j[h, c_j], flattened in C order."""
    joint = psis[0]  # (k, d0)
    for psi in psis[1:]:
        joint = (joint[:, :, None] * psi[:, None, :]).reshape((joint.shape[0], -1))
    return pt.dot(pi, joint)


def _initial_counts(noisy: np.ndarray, n: int) -> np.ndarray:
    """Noisy counts clipped at 0 and rescaled to add up to n (largest remainders)."""
    base = np.clip(noisy, 0, None).astype(float)
    base = base / base.sum() * n if base.sum() > 0 else np.full(len(noisy), n / len(noisy))
    out = np.floor(base).astype(np.int64)
    short = n - out.sum()
    out[np.argsort(out - base)[:short]] += 1
    return out


def latent_class_dp_model(
    marginals: PrivateMarginals | Sequence[NoisyMarginal],
    *,
    domain: Mapping[str, Sequence] | None = None,
    n: int | None = None,
    k: int = 10,
    alpha: float = 1.0,
    psi_prior: float = 1.0,
    full_table: bool | None = None,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    """Build a PyMC model of the latent class composite likelihood for noisy marginal tables.

    Parameters
    ----------
    marginals : PrivateMarginals or list of NoisyMarginal
        The release (:func:`bayesynth.privacy.privatize_marginals`); with a plain list, give
        ``domain`` and ``n``.
    domain : dict, optional
        Levels of every variable (any number of levels).
    n : int, optional
        Number of records: public under change-one neighbours; under add/remove pass the
        release's noisy estimate (``PrivateMarginals.n``).
    k : int, default 10
        Classes of the truncated stick-breaking prior.
    alpha : float, default 1
        Concentration of the stick-breaking prior: ``v_h ~ Beta(1, alpha)``.
    psi_prior : float, default 1
        Symmetric Dirichlet parameter of each class's level probabilities.
    full_table : bool, optional
        Store the full-table cell probabilities ``cell_prob`` in the trace (default: when the
        table has at most :data:`FULL_TABLE_LIMIT` cells; otherwise compute any table from the
        posterior with :func:`bayesynth.synthesis.latent_class.full_table_probabilities`).
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`). Swappable names:
        ``"v"``, the stick-breaking fractions (default ``Beta(1, alpha)``, dims ``stick``; only
        with ``k > 1``), and ``"psi"``, each class's level probabilities (default
        ``Dirichlet(psi_prior)``): one replacement for every variable, called with the actual
        name ``psi_<var>`` and dims ``("class", <var>)``. A replacement that is a Beta
        (for ``v``) or a Dirichlet (for ``psi``) with fixed parameters keeps the conjugate
        Gibbs step, which reads its parameters from the model; any other prior takes that
        variable out of :class:`~bayesynth.samplers.latent_class.LatentClassGibbs`, and
        PyMC's own step (NUTS) samples it while the count moves still apply
        (:func:`bayesynth.steps` warns).

    Returns
    -------
    pymc.Model
        Free variables ``v`` (dims ``stick``), ``psi_<var>`` (dims ``class``, ``<var>``) and
        ``M_t<i>`` (dims ``cell_t<i>``); observed ``noisy_t<i>``; deterministics ``pi`` and
        ``P_t<i>`` (and ``cell_prob``).
    """
    priors = Priors("latent_class_dp_model", priors, SWAPPABLE_PRIORS)
    if isinstance(marginals, PrivateMarginals):
        domain = marginals.domain if domain is None else domain
        n = marginals.n if n is None else n
        tables = list(marginals.tables)
    else:
        tables = list(marginals)
    if domain is None or n is None:
        raise SchemaError("Give domain and n with a plain list of marginals.")
    if not tables or not all(isinstance(t, NoisyMarginal) for t in tables):
        raise InputTypeError("marginals must be PrivateMarginals or a list of NoisyMarginal.")
    if int(n) != n or n < 1:
        raise SchemaError(f"n must be a positive integer; got {n!r}.")
    if int(k) != k or k < 1:
        raise SchemaError(f"k must be a positive integer; got {k!r}.")
    if alpha <= 0 or psi_prior <= 0:
        raise SchemaError("alpha and psi_prior must be positive.")
    domain = {v: list(levels) for v, levels in domain.items()}
    for t in tables:
        unknown = [v for v in t.variables if v not in domain]
        if unknown:
            raise SchemaError(f"Table {t.variables} names {unknown}, not in the domain.")
        shape = tuple(len(domain[v]) for v in t.variables)
        if np.shape(t.counts) != shape:
            raise DataValidationError(f"Table {t.variables} has shape {np.shape(t.counts)}; "
                                      f"the domain says {shape}.")
        if np.any(np.asarray(t.counts) != np.round(t.counts)):
            raise DataValidationError(f"Table {t.variables} holds non-integer counts.")
    variables = tuple(domain)  # every variable gets psi; unused ones stay at their prior
    n_cells = int(np.prod([len(domain[v]) for v in variables], dtype=float))
    if full_table is None:
        full_table = n_cells <= FULL_TABLE_LIMIT
    coords = {"class": list(range(k)), "stick": list(range(k - 1))}
    for v in variables:
        coords[v] = list(domain[v])
    for i, t in enumerate(tables):
        coords[f"cell_t{i}"] = cell_labels(t.variables, domain)
    if full_table:
        coords["cell"] = cell_labels(variables, domain)
    with pm.Model(coords=coords) as model:
        if k > 1:
            v = priors.get("v", "v", "stick", lambda: pm.Beta("v", 1.0, alpha, dims="stick"))
            pi = pm.Deterministic("pi", stick_breaking(v), dims="class")
        else:
            pi = pm.Deterministic("pi", pt.ones((1,)), dims="class")
        psi = {}
        for var in variables:
            def default_psi(var=var):
                return pm.Dirichlet(f"psi_{var}", a=np.full((k, len(domain[var])), psi_prior),
                                    dims=("class", var))

            psi[var] = priors.get("psi", f"psi_{var}", ("class", var), default_psi)
        for i, t in enumerate(tables):
            P = _table_probabilities(pi, [psi[var] for var in t.variables])
            P = pm.Deterministic(f"P_t{i}", P, dims=f"cell_t{i}")
            noisy = np.asarray(t.counts, dtype=np.int64).reshape(-1)
            M = pm.Multinomial(f"M_t{i}", n=int(n), p=P, dims=f"cell_t{i}")
            log_q = -t.epsilon / t.sensitivity

            def logp(value, m, log_q=log_q):
                return (pt.log1p(-pt.exp(log_q)) - pt.log1p(pt.exp(log_q))
                        + pt.abs(value - m) * log_q)

            def random(m, rng=None, size=None, q=float(np.exp(log_q))):
                m = np.asarray(m)
                shape = size if size is not None else m.shape
                return (m + rng.geometric(1 - q, size=shape) - rng.geometric(1 - q, size=shape))

            pm.CustomDist(f"noisy_t{i}", M, logp=logp, random=random, observed=noisy,
                          dims=f"cell_t{i}", dtype="int64")
        if full_table:
            pm.Deterministic("cell_prob", _table_probabilities(pi, [psi[v] for v in variables]),
                             dims="cell")
    attach_metadata("latent_class", LatentClassSpec(
        variables=variables, levels=domain, tables=tuple(t.variables for t in tables),
        noisy=tuple(np.asarray(t.counts, np.int64).reshape(-1) for t in tables),
        log_q=tuple(-t.epsilon / t.sensitivity for t in tables), n=int(n), k=int(k),
        alpha=None if "v" in priors.given else float(alpha),
        psi_prior=None if "psi" in priors.given else float(psi_prior)), model)
    return model
