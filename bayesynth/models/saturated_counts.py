"""Saturated count models for very large categorical tables (Jackson et al.): the PyMC factory.

All variables are categorical, so the data are a contingency table of K cells, and each cell's
synthetic count is drawn from a count distribution centred on its observed count (Poisson,
negative binomial, Poisson-inverse-Gaussian or double Poisson;
:mod:`bayesynth.models.count_families`). :func:`saturated_count_model` is that synthesis as a
PyMC model whose prior-predictive draws are synthetic tables; :mod:`bayesynth.synthesis.saturated`
has the fast direct samplers, including a sparse one for tables too big to hold.

The table types live in :mod:`bayesynth.tables` and the count distributions in
:mod:`bayesynth.models.count_families`; their names are re-exported here so that older imports
keep working. The analytic tau metrics (``expected_tau``, ``expected_within``, ``transition``)
are risk measures and live in :mod:`bayesynth.evaluation.tau_risk` (models never import
evaluation).

References
----------
Jackson, J., Mitra, R., Francis, B. and Dove, I. (2022). Using saturated count models for
user-friendly synthesis of large confidential administrative databases. *JRSS A*, 185(4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayesynth.errors import DataValidationError, SchemaError
from bayesynth.models.count_families import (
    FAMILIES,
    _acts_as_poisson,
    _draw_by_pmf,
    cell_means,
    count_pmf,
    draw_counts,
    validate_parameters,
)
from bayesynth.models.priors import PriorFactory, Priors
from bayesynth.tables import (
    SparseTable,
    StructuralZeros,
    microdata_to_table,
    table_to_microdata,
    unique_sorted,  # noqa: F401  (re-exported: older imports read it from here)
)

__all__ = [
    "saturated_count_model",
    # re-exported from bayesynth.tables and bayesynth.models.count_families
    "FAMILIES",
    "SparseTable",
    "StructuralZeros",
    "microdata_to_table",
    "table_to_microdata",
    "count_pmf",
    "draw_counts",
    "validate_parameters",
]

MAX_DENSE_CELLS = 20_000_000
"""Largest table :func:`saturated_count_model` builds densely."""


def saturated_count_model(
    table: SparseTable | np.ndarray,
    *,
    family: str = "poisson",
    sigma: float = 0.0,
    alpha: float = 0.0,
    names: Sequence[str] | None = None,
    levels: Mapping[str, Sequence] | None = None,
    structural: StructuralZeros | np.ndarray | None = None,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    """Build a PyMC model whose prior-predictive draws are synthetic tables.

    Named dims, one per variable. The observed table enters as data ``f`` (with the pseudocount
    alpha on random zeros and 0 on structural zeros); ``counts`` is the synthetic table:
    ``pm.sample_prior_predictive(model=model, draws=m)`` returns m synthetic tables. For
    ``pig`` a latent inverse-Gaussian multiplier ``nu`` (mean 1, variance sigma) per cell; for
    ``dpo`` a :class:`pymc.CustomDist` with Efron's density.

    Parameters
    ----------
    table : SparseTable or numpy.ndarray
        The observed table, held densely (for big sparse tables use
        :func:`bayesynth.synthesis.saturated.synthesize_table`).
    family : {"poisson", "nbi", "pig", "dpo"}
    sigma : float
        Dispersion (nbi, pig) or precision theta (dpo).
    alpha : float
        Pseudocount of random zeros.
    names, levels
        For a plain array: variable names and labels (default ``v0, v1, ...`` and ``0..l-1``).
    structural : StructuralZeros or boolean array, optional
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`); swappable names:
        none: the model has no parameter with a prior (its cell means are the observed counts).

    Returns
    -------
    pymc.Model
    """
    Priors("saturated_count_model", priors, {})
    validate_parameters(family, sigma, alpha)
    n_cells = table.n_cells if isinstance(table, SparseTable) else np.size(table)
    if n_cells > MAX_DENSE_CELLS:
        raise SchemaError(
            f"The table has {n_cells:,} cells, too many for a dense PyMC model (limit "
            f"{MAX_DENSE_CELLS:,}); use bayesynth.synthesis.synthesize_table, which keeps only "
            "the non-zero cells.")
    if isinstance(table, SparseTable):
        dense = table.to_dense()
        names, levels = table.names, table.levels
        mask = table.structural_mask()
    else:
        dense = np.asarray(table, dtype=np.int64)
        names = list(names) if names is not None else [f"v{j}" for j in range(dense.ndim)]
        levels = dict(levels) if levels is not None else {
            n: list(range(s)) for n, s in zip(names, dense.shape)}
        if isinstance(structural, StructuralZeros):
            sp = SparseTable.from_dense(dense, names, levels, structural)
            mask = sp.structural_mask()
        elif structural is not None:
            mask = np.asarray(structural, dtype=bool)
        else:
            mask = np.zeros(dense.shape, dtype=bool)
    if np.any(dense < 0):
        raise DataValidationError("Counts must be non-negative.")
    if np.any(dense[mask] > 0):
        raise DataValidationError("Some structural-zero cells hold records.")
    f = cell_means(dense, mask, alpha)
    coords = {n: list(levels[n]) for n in names}
    dims = tuple(names)
    with pm.Model(coords=coords) as model:
        fd = pm.Data("f", f, dims=dims)
        if _acts_as_poisson(family, sigma):  # the rule the synthesizer and risk use
            pm.Poisson("counts", mu=fd, dims=dims)
        elif family == "nbi":
            # alpha_NB = 1/sigma: variance mu + sigma mu^2; a zero mean gives a point mass at 0
            pm.NegativeBinomial("counts", mu=pt.maximum(fd, 1e-12), alpha=1.0 / sigma, dims=dims)
        elif family == "pig":
            nu = pm.Wald("nu", mu=1.0, lam=1.0 / sigma, dims=dims)
            pm.Poisson("counts", mu=fd * nu, dims=dims)
        else:
            theta = float(sigma)

            def random(f, rng=None, size=None):
                f = np.broadcast_to(f, size if size is not None else np.shape(f))
                return _draw_by_pmf(rng, "dpo", theta, f.ravel()).reshape(f.shape)

            def logp(value, f):
                lp = (0.5 * pt.log(theta) - theta * f - value + value * pt.log(pt.maximum(value, 1))
                      - pt.gammaln(value + 1)
                      + theta * value * (1 + pt.log(pt.maximum(f, 1e-300))
                                         - pt.log(pt.maximum(value, 1))))
                return lp  # unnormalised: Efron's constant is not 1 (1.36 at f = 0.02, theta = 2)

            pm.CustomDist("counts", fd, random=random, logp=logp, dtype="int64", dims=dims)
    return model
