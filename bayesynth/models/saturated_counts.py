"""Saturated count models for very large categorical tables (Jackson et al.).

All variables are categorical, so the data are a contingency table of K cells. Each cell's
synthetic count is drawn from a count distribution centred on its observed count f:

* ``poisson``: mean f;
* ``nbi``: negative binomial, mean f, variance f + sigma f^2;
* ``pig``: Poisson-inverse-Gaussian, mean f, variance f + sigma f^2 (a Poisson whose rate is f times
  an inverse-Gaussian variable of mean 1 and variance sigma);
* ``dpo``: Efron's (1986) double Poisson, mean about f and variance about f / theta; with
  ``theta > 1`` it is *under*-dispersed, which Jackson et al. name as future work.

Random zeros (empty cells that could hold records) get the pseudocount alpha > 0 as their mean;
structural zeros (impossible cells) stay zero. This module holds the table types, the
distributions' probability functions (used for the analytic tau metrics) and a PyMC model factory
whose prior-predictive draws are synthetic tables; :mod:`bayesynth.synthesis.saturated` has the
fast direct samplers, including a sparse one for tables too big to hold.

References
----------
Jackson, J., Mitra, R., Francis, B. and Dove, I. (2022). Using saturated count models for
user-friendly synthesis of large confidential administrative databases. *JRSS A*, 185(4).
Efron, B. (1986). Double exponential families and their use in generalized linear regression.
*JASA*, 81(395), 709-721.
Willmot, G. E. (1987). The Poisson-inverse Gaussian distribution as an alternative to the negative
binomial. *Scandinavian Actuarial Journal*, 1987(3-4), 113-127.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numba
import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from scipy import stats
from scipy.special import gammaln

from bayesynth.errors import DataValidationError, InputTypeError, SchemaError
from bayesynth.models.priors import PriorFactory, Priors

__all__ = [
    "FAMILIES",
    "SparseTable",
    "StructuralZeros",
    "microdata_to_table",
    "table_to_microdata",
    "count_pmf",
    "draw_counts",
    "validate_parameters",
    "saturated_count_model",
    "transition",
    "expected_tau",
    "expected_within",
]

FAMILIES = ("poisson", "nbi", "pig", "dpo")
"""Synthesis distributions: Poisson, negative binomial (NBI), Poisson-inverse-Gaussian, double
Poisson."""

MAX_DENSE_CELLS = 20_000_000
"""Largest table :func:`saturated_count_model` builds densely."""


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """Return the sorted distinct values, found by sorting.

    NumPy 2.4's hash-based ``np.unique`` is about 15 times slower on tens of millions of cell
    indices.
    """
    values = np.sort(np.asarray(values), kind="stable")
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


@dataclass
class StructuralZeros:
    """Cells that cannot hold records.

    A cell is structural when it matches any *block*: a mapping from variable names to sets of
    level codes, the cell's code of every named variable being in its set (a rule such as
    "age under 16 and a degree" is one block). Variables a block does not name are free, so a
    block covers a product set and is never materialised over the whole table.
    """

    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)

    @classmethod
    def from_rule(cls, levels: Mapping[str, Sequence], *rules: Mapping[str, Sequence]
                  ) -> StructuralZeros:
        """Build the blocks from rules given as level *labels*.

        Example: ``StructuralZeros.from_rule(levels, {"age": [14, 15], "degree": ["yes"]})``.

        Parameters
        ----------
        levels : mapping
            Each variable's level labels, in code order.
        *rules : mapping
            One block each: variable name -> the labels of its structural levels.

        Returns
        -------
        StructuralZeros

        Raises
        ------
        bayesynth.errors.SchemaError
            If a rule names an unknown variable or level.
        """
        blocks = []
        for rule in rules:
            block = {}
            for var, labs in rule.items():
                if var not in levels:
                    raise SchemaError(f"Structural-zero rule names unknown variable '{var}'.")
                lookup = {v: i for i, v in enumerate(levels[var])}
                missing = [v for v in labs if v not in lookup]
                if missing:
                    raise SchemaError(f"Rule levels {missing} are not levels of '{var}'.")
                block[var] = np.array(sorted(lookup[v] for v in labs), dtype=np.int64)
            blocks.append(block)
        return cls(blocks)

    def mask_codes(self, names: Sequence[str], codes: np.ndarray) -> np.ndarray:
        """Tell whether each cell (rows of per-variable ``codes``) is structural.

        Parameters
        ----------
        names : sequence of str
            The variables, in the order of the columns of ``codes``; must include every
            variable the blocks name.
        codes : numpy.ndarray
            One row per cell, one column of level codes per variable.

        Returns
        -------
        numpy.ndarray of bool
            One entry per row of ``codes``.
        """
        out = np.zeros(len(codes), dtype=bool)
        pos = {n: j for j, n in enumerate(names)}
        for block in self.blocks:
            hit = np.ones(len(codes), dtype=bool)
            for var, allowed in block.items():
                hit &= np.isin(codes[:, pos[var]], allowed)
            out |= hit
        return out

    def count(self, names: Sequence[str], shape: Sequence[int]) -> int:
        """Count the structural cells (exact; enumerates only the variables the blocks name).

        Parameters
        ----------
        names : sequence of str
            The table's variables, in order.
        shape : sequence of int
            Number of levels of each variable.

        Returns
        -------
        int
            Number of cells of the table that match some block.
        """
        if not self.blocks:
            return 0
        used = sorted({v for b in self.blocks for v in b}, key=list(names).index)
        sub_shape = [shape[list(names).index(v)] for v in used]
        grid = np.array(np.unravel_index(np.arange(int(np.prod(sub_shape))), sub_shape)).T
        hits = StructuralZeros(self.blocks).mask_codes(used, grid).sum()
        rest = int(np.prod([s for n, s in zip(names, shape) if n not in used]))
        return int(hits) * rest


@dataclass
class SparseTable:
    """A contingency table stored by its non-zero cells.

    Attributes
    ----------
    names : list of str
        Variables, in table order.
    levels : dict
        Each variable's level labels; a cell's code for a variable indexes them.
    index : numpy.ndarray of int64
        Sorted linear (C-order) indices of the non-zero cells.
    counts : numpy.ndarray of int64
        Their counts.
    structural : StructuralZeros
    """

    names: list[str]
    levels: dict[str, list]
    index: np.ndarray
    counts: np.ndarray
    structural: StructuralZeros = field(default_factory=StructuralZeros)

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of levels of each variable, in table order."""
        return tuple(len(self.levels[n]) for n in self.names)

    @property
    def n_cells(self) -> int:
        """Number of cells of the full table (structural ones included)."""
        return int(np.prod(self.shape, dtype=np.float64))

    @property
    def n_records(self) -> int:
        """Number of records: the sum of the counts."""
        return int(self.counts.sum())

    def codes(self, index: np.ndarray | None = None) -> np.ndarray:
        """Return the per-variable codes of cells (rows), by default the non-zero ones.

        Parameters
        ----------
        index : numpy.ndarray, optional
            Linear (C-order) cell indices; ``self.index`` by default.

        Returns
        -------
        numpy.ndarray of int64
            One row per cell, one column per variable.
        """
        idx = self.index if index is None else index
        return np.array(np.unravel_index(idx, self.shape)).T.astype(np.int64)

    def n_structural(self) -> int:
        """Count the structural cells of the table.

        Returns
        -------
        int
        """
        return self.structural.count(self.names, self.shape)

    def n_random_zeros(self) -> int:
        """Count the random zeros: empty cells that are not structural.

        Returns
        -------
        int
        """
        return self.n_cells - len(self.index) - self.n_structural()

    def to_dense(self) -> np.ndarray:
        """Return the full table as an array (only for tables that fit in memory).

        Returns
        -------
        numpy.ndarray of int64
            Shape :attr:`shape`.
        """
        out = np.zeros(self.shape, dtype=np.int64)
        out.reshape(-1)[self.index] = self.counts
        return out

    def structural_mask(self) -> np.ndarray:
        """Return the dense boolean mask of structural cells.

        Returns
        -------
        numpy.ndarray of bool
            Shape :attr:`shape`.
        """
        grid = np.array(np.unravel_index(np.arange(self.n_cells), self.shape)).T
        return self.structural.mask_codes(self.names, grid).reshape(self.shape)

    def to_frame(self) -> pd.DataFrame:
        """One row per non-zero cell: the variables (categorical, all levels kept) and ``count``.

        :func:`microdata_to_table` with ``count="count"`` turns it back into the table.

        Returns
        -------
        pandas.DataFrame
        """
        c = self.codes()
        data = {n: pd.Categorical.from_codes(c[:, j], categories=self.levels[n])
                for j, n in enumerate(self.names)}
        data["count"] = self.counts
        return pd.DataFrame(data)

    @classmethod
    def from_dense(cls, table: np.ndarray, names: Sequence[str], levels: Mapping[str, Sequence],
                   structural: StructuralZeros | None = None) -> SparseTable:
        """Build a sparse table from a dense array of counts.

        Parameters
        ----------
        table : numpy.ndarray
            Counts, one axis per variable.
        names : sequence of str
            The variables, in axis order.
        levels : mapping
            Each variable's level labels.
        structural : StructuralZeros, optional
            Structural zeros (none by default).

        Returns
        -------
        SparseTable
        """
        flat = np.asarray(table).reshape(-1)
        idx = np.flatnonzero(flat).astype(np.int64)
        return cls(list(names), {n: list(levels[n]) for n in names}, idx,
                   flat[idx].astype(np.int64), structural or StructuralZeros())

    def check(self) -> None:
        """Refuse negative counts or records in structural cells."""
        if np.any(self.counts < 0):
            raise DataValidationError("Counts must be non-negative.")
        if self.structural.blocks and self.structural.mask_codes(self.names,
                                                                 self.codes()).any():
            raise DataValidationError(
                "Some structural-zero cells hold records; fix the rule or the data.")


def microdata_to_table(df: pd.DataFrame, variables: Sequence[str] | None = None, *,
                       count: str | None = None,
                       structural: StructuralZeros | Sequence[Mapping[str, Sequence]] | None
                       = None) -> SparseTable:
    """Cross-tabulate records into a :class:`SparseTable`, keeping category labels.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per record, or (with ``count``) one row per cell with its count; a frame from
        :meth:`SparseTable.to_frame` round-trips.
    variables : list of str, optional
        The table's variables, in order (default: every column but ``count``).
    count : str, optional
        Column of non-negative integer counts to add up instead of counting rows.
    structural : StructuralZeros or list of rules, optional
        Structural zeros; rules are given by level labels (see
        :meth:`StructuralZeros.from_rule`).

    Returns
    -------
    SparseTable
        The table, checked (no negative counts, no records in structural cells).

    Notes
    -----
    Levels are the categories of categorical columns (all of them, used or not, so that empty
    categories become random zeros) or the sorted distinct values of other columns. Missing
    values are refused: recode them as a level.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputTypeError(f"Expected a pandas DataFrame; got {type(df).__name__}.")
    variables = list(df.columns if variables is None else variables)
    if count is not None:
        if count not in df.columns:
            raise SchemaError(f"Count column '{count}' is not in the frame.")
        variables = [v for v in variables if v != count]
        w = df[count].to_numpy()
        if (not np.issubdtype(w.dtype, np.number) or np.any(w < 0)
                or np.any(w != np.round(w))):
            raise DataValidationError(
                f"Column '{count}' must hold non-negative whole numbers.")
    missing = [v for v in variables if v not in df.columns]
    if missing:
        raise SchemaError(f"Columns {missing} are not in the frame.")
    if not variables:
        raise SchemaError("A table needs at least one variable.")
    bad = [c for c in variables if df[c].isna().any()]
    if bad:
        raise DataValidationError(f"Columns {bad} have missing values; recode them as a level "
                                  "(e.g. df[col].cat.add_categories('missing').fillna(...)).")
    levels, codes = {}, []
    for v in variables:
        s = df[v]
        if isinstance(s.dtype, pd.CategoricalDtype):
            levels[v] = list(s.cat.categories)
            codes.append(s.cat.codes.to_numpy().astype(np.int64))
        else:
            uniq = np.sort(pd.unique(s))
            levels[v] = list(uniq)
            codes.append(np.searchsorted(uniq, s.to_numpy()).astype(np.int64))
    shape = tuple(len(levels[v]) for v in variables)
    if np.prod(shape, dtype=np.float64) >= 2.0**62:
        raise SchemaError(f"A table of shape {shape} has too many cells to index.")
    lin = np.ravel_multi_index(codes, shape) if len(df) else np.zeros(0, dtype=np.int64)
    if count is None:
        idx, counts = np.unique(lin, return_counts=True)
    else:
        idx, inv = np.unique(lin, return_inverse=True)
        counts = np.bincount(inv, weights=w.astype(float), minlength=len(idx))
        idx, counts = idx[counts > 0], counts[counts > 0]
    if structural is not None and not isinstance(structural, StructuralZeros):
        structural = StructuralZeros.from_rule(levels, *structural)
    table = SparseTable(variables, levels, idx.astype(np.int64), counts.astype(np.int64),
                        structural or StructuralZeros())
    table.check()
    return table


def table_to_microdata(table: SparseTable, *, shuffle: bool = True,
                       random_seed: int | None = None) -> pd.DataFrame:
    """Expand a table into records: one per unit of count.

    Parameters
    ----------
    table : SparseTable
        The table.
    shuffle : bool, default True
        Shuffle the records; otherwise they come in cell order.
    random_seed : int, optional
        Seed of the shuffle.

    Returns
    -------
    pandas.DataFrame
        One row per record, one categorical column per variable carrying the table's labels.
    """
    rep = np.repeat(np.arange(len(table.index)), table.counts)
    if shuffle:
        np.random.default_rng(random_seed).shuffle(rep)
    c = table.codes()[rep]
    return pd.DataFrame({n: pd.Categorical.from_codes(c[:, j], categories=table.levels[n])
                         for j, n in enumerate(table.names)})


# ----------------------------------------------------------------------------- distributions


@numba.njit(cache=True)
def _pig_recursion(mu: float, sigma: float, kmax: int) -> np.ndarray:
    """Return the PIG pmf by Willmot's recursion, carried out on a rescaled scale.

    p_0 underflows for large mu; rescaling keeps every p_k accurate however small.
    """
    t = 1.0 + 2.0 * sigma * mu
    log_p0 = (1.0 - np.sqrt(t)) / sigma
    logp = np.full(kmax + 1, -np.inf)
    logp[0] = log_p0
    a = 2.0 * sigma * mu / t
    b = mu * mu / t
    prev2, prev1, offset = 1.0, mu / np.sqrt(t), 0.0  # p_{k-2}, p_{k-1} divided by p_0 e^offset
    if kmax >= 1:
        logp[1] = log_p0 + np.log(prev1)
    for k in range(2, kmax + 1):
        cur = a * (1.0 - 1.5 / k) * prev1 + b / (k * (k - 1.0)) * prev2
        if cur > 1e250 or (cur < 1e-250 and cur > 0.0):
            scale = np.log(cur)
            prev1 /= cur
            cur = 1.0
            prev2 = prev2 / np.exp(scale) if prev2 > 0.0 else 0.0
            offset += scale
        logp[k] = log_p0 + offset + np.log(cur) if cur > 0.0 else -np.inf
        prev2, prev1 = prev1, cur
    return np.exp(logp)


def _pig_pmf(mu: float, sigma: float, kmax: int | None) -> np.ndarray:
    """Return the PIG pmf by the recursion of Willmot (1987).

    With t = 1 + 2 sigma mu, p0 = exp((1 - sqrt t) / sigma), p1 = mu / sqrt(t) p0,
    p_k = (2 sigma mu / t)(1 - 3/(2k)) p_{k-1} + mu^2 / (t k (k - 1)) p_{k-2}.

    Without ``kmax`` the support is extended until the tail mass left out is below 1e-10 (the
    PIG's tail is heavy when sigma mu is large).
    """
    if kmax is not None:
        return _pig_recursion(float(mu), float(sigma), int(kmax))
    kmax = int(np.ceil(mu + 12 * np.sqrt(mu + sigma * mu**2) + 20))
    while True:
        p = _pig_recursion(float(mu), float(sigma), kmax)
        if 1.0 - p.sum() < 1e-10 or kmax > 50_000_000:
            return p
        kmax *= 2


def _dpo_pmf(mu: float, theta: float, kmax: int) -> np.ndarray:
    """Efron's double Poisson, normalised numerically over 0..kmax."""
    y = np.arange(kmax + 1, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logy = np.where(y > 0, np.log(np.maximum(y, 1e-300)), 0.0)
        lp = (0.5 * np.log(theta) - theta * mu - y + y * logy - gammaln(y + 1)
              + theta * y * (1 + np.log(max(mu, 1e-300)) - logy))
    if mu == 0:
        lp = np.where(y == 0, 0.0, -np.inf)
    p = np.exp(lp - lp.max())
    return p / p.sum()


def count_pmf(family: str, mu: float, sigma: float = 0.0, kmax: int | None = None
              ) -> np.ndarray:
    """P(Y = k) for k = 0..kmax of a synthesis distribution with mean ``mu``.

    ``sigma`` is the dispersion (``nbi``, ``pig``: variance mu + sigma mu^2) or, for ``dpo``, the
    precision theta (variance about mu / theta). ``sigma = 0`` gives the Poisson. ``kmax``
    defaults to a value beyond which the tail is negligible.

    Efron's double Poisson has mean and variance close to mu and mu / theta only when mu is not
    small (for mu = 0.2 and theta = 3 the mean is well below 0.2); its pmf is normalised
    numerically.

    Parameters
    ----------
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    mu : float
        Its mean.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    kmax : int, optional
        Largest k; by default one beyond which the tail is negligible.

    Returns
    -------
    numpy.ndarray
        ``P(Y = k)`` for k = 0..kmax.
    """
    validate_parameters(family, sigma)
    var = mu / sigma if family == "dpo" and sigma > 0 else mu + (
        sigma * mu**2 if family != "dpo" else 0.0)
    if family == "pig" and sigma > 0:
        return _pig_pmf(mu, sigma, kmax)
    dist = _scipy_family(family, mu, sigma)
    if kmax is None:
        # beyond the point whose upper tail is below 1e-12 (NBI tails are long when sigma is big)
        kmax = (int(dist.isf(1e-12)) + 1 if dist is not None and mu > 0
                else int(np.ceil(mu + 12 * np.sqrt(var) + 20)))
    k = np.arange(kmax + 1)
    if dist is not None:
        return dist.pmf(k)
    return _dpo_pmf(mu, sigma, kmax)


def _draw_by_pmf(rng: np.random.Generator, family: str, sigma: float,
                 f: np.ndarray) -> np.ndarray:
    """Draw counts by inverting each distinct mean's CDF.

    Used for the double Poisson, which has no native sampler.
    """
    f = np.asarray(f, dtype=float)
    out = np.zeros(len(f), dtype=np.int64)
    values, inverse = np.unique(f, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(inverse, minlength=len(values)))]
    u = rng.random(len(f))
    for j, mu in enumerate(values):
        if mu <= 0:
            continue
        sel = order[bounds[j]:bounds[j + 1]]
        cdf = np.cumsum(count_pmf(family, float(mu), sigma))
        out[sel] = np.minimum(np.searchsorted(cdf, u[sel] * cdf[-1], side="right"),
                              len(cdf) - 1)
    return out


def validate_parameters(family: str, sigma: float, alpha: float = 0.0) -> None:
    """Refuse an unknown family or a negative, infinite or (for ``dpo``) zero parameter.

    Parameters
    ----------
    family : str
        Must be one of :data:`FAMILIES`.
    sigma : float
        Dispersion (precision theta for ``dpo``); finite and non-negative (positive for
        ``dpo``).
    alpha : float, default 0.0
        Pseudocount; finite and non-negative.

    Raises
    ------
    bayesynth.errors.SchemaError
        If a parameter is invalid.
    """
    if family not in FAMILIES:
        raise SchemaError(f"family must be one of {FAMILIES}; got {family!r}.")
    if not np.isfinite(sigma) or sigma < 0:
        raise SchemaError(f"sigma must be a finite non-negative number; got {sigma!r}.")
    if family == "dpo" and sigma <= 0:
        raise SchemaError("For the double Poisson ('dpo') sigma is the precision theta and must "
                          "be positive (theta > 1 gives less variance than Poisson).")
    if not np.isfinite(alpha) or alpha < 0:
        raise SchemaError(f"alpha must be a finite non-negative pseudocount; got {alpha!r}.")


def draw_counts(rng: np.random.Generator, family: str, sigma: float, f: np.ndarray
                ) -> np.ndarray:
    """Draw counts independently from the synthesis distribution, one per mean in ``f``.

    NumPy's samplers are used; the PIG is drawn as a Poisson mixed over an inverse-Gaussian
    rate, the double Poisson by inversion of its pmf.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    f : numpy.ndarray
        The means.

    Returns
    -------
    numpy.ndarray of int64
        One count per mean.
    """
    validate_parameters(family, sigma)
    f = np.asarray(f, dtype=float)
    if family == "poisson" or (sigma == 0 and family != "dpo"):
        return rng.poisson(f).astype(np.int64)
    if family == "nbi":
        r = 1.0 / sigma
        return rng.negative_binomial(r, r / (r + f)).astype(np.int64)
    if family == "pig":
        nu = rng.wald(1.0, 1.0 / sigma, size=len(f))  # inverse Gaussian, mean 1, variance sigma
        return rng.poisson(f * nu).astype(np.int64)
    return _draw_by_pmf(rng, "dpo", sigma, f)



# ------------------------------------------------------------------------------ PyMC model


def cell_means(dense: np.ndarray, structural: np.ndarray, alpha: float) -> np.ndarray:
    """Return the mean of each cell's synthetic count.

    That is its count, alpha for a random zero, and 0 for a structural zero.
    """
    return np.where(structural, 0.0, np.where(dense == 0, alpha, dense)).astype(float)


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
        if family == "poisson" or (sigma == 0 and family != "dpo"):
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
                return lp  # unnormalised (Efron's constant is near 1)

            pm.CustomDist("counts", fd, random=random, logp=logp, dtype="int64", dims=dims)
    return model


# ------------------------------------------------------------------- analytic expectations


def _size_distribution(table: SparseTable) -> tuple[np.ndarray, np.ndarray]:
    """Distinct original cell sizes j (0 = random zeros) and how many cells have each."""
    sizes, n_j = np.unique(table.counts, return_counts=True)
    z = table.n_random_zeros()
    return np.r_[0, sizes], np.r_[z, n_j].astype(float)


def _scipy_family(family: str, mu: np.ndarray, sigma: float):
    """Return the SciPy distribution (frozen over an array of means), or None if SciPy lacks it."""
    if family == "poisson" or (sigma == 0 and family != "dpo"):
        return stats.poisson(mu)
    if family == "nbi":
        r = 1.0 / sigma
        return stats.nbinom(r, r / (r + mu))
    return None


def transition(family: str, sigma: float, alpha: float, j: int, k: np.ndarray) -> np.ndarray:
    """Compute P(synthetic = k | original = j); a random zero (j = 0) has mean alpha.

    Parameters
    ----------
    family : {"poisson", "nbi", "pig", "dpo"}
        The synthesis distribution.
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    alpha : float
        Pseudocount of random zeros.
    j : int
        Original count.
    k : numpy.ndarray
        Synthetic counts.

    Returns
    -------
    numpy.ndarray
        One probability per entry of ``k``.
    """
    return _transition_matrix(family, sigma, alpha, np.array([j]), np.asarray(k))[0]


def _means(sizes: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(np.asarray(sizes) == 0, alpha, np.asarray(sizes, dtype=float))


def _transition_matrix(family: str, sigma: float, alpha: float, sizes: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    """P(synthetic = k | original = j) for every original size j (rows) and k (columns)."""
    mu = _means(sizes, alpha)
    k = np.asarray(k)
    out = np.zeros((len(mu), k.size))
    live = mu > 0
    out[~live] = (k.ravel() == 0)
    dist = _scipy_family(family, mu[live][:, None], sigma)
    if dist is not None:
        out[live] = dist.pmf(k.ravel()[None, :])
        return out
    kk = k.ravel()
    for row in np.flatnonzero(live):
        pmf = count_pmf(family, float(mu[row]), sigma,
                        kmax=int(max(kk.max(), 0)) + 1 if family == "pig" else None)
        inside = (kk < len(pmf)) & (kk >= 0)
        out[row, inside] = pmf[kk[inside]]
    return out


def _interval_probabilities(family: str, sigma: float, alpha: float, sizes: np.ndarray,
                            lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(lo_j <= synthetic <= hi_j | original = j) for each size j."""
    mu = _means(sizes, alpha)
    out = ((lo <= 0) & (hi >= 0)).astype(float)
    live = mu > 0
    dist = _scipy_family(family, mu[live], sigma)
    if dist is not None:
        out[live] = dist.cdf(hi[live]) - dist.cdf(lo[live] - 1)
        return out
    for row in np.flatnonzero(live):
        ks = np.arange(max(lo[row], 0), hi[row] + 1)
        out[row] = _transition_matrix(family, sigma, alpha, sizes[row:row + 1], ks).sum()
    return out


def expected_tau(table: SparseTable, *, family: str = "poisson", sigma: float = 0.0,
                 alpha: float = 0.0, ks: Sequence[int] = (0, 1, 2, 3, 4, 5)) -> pd.DataFrame:
    """Compute the expected tau metrics of a synthesis before synthesising (Jackson et al.).

    With N_j original cells of size j (j = 0: random zeros; structural zeros excluded) and
    P(k | j) the synthesis distribution:

    * E tau_1(k) = sum_j N_j P(k | j) / K (K: non-structural cells);
    * tau_2(k) = N_k / K;
    * E tau_3(k) = P(k | k) (for k = 0, the probability that a random zero stays 0);
    * E tau_4(k) = N_k P(k | k) / sum_j N_j P(k | j) (a ratio of expectations).

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}, default "poisson"
        The synthesis distribution.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    alpha : float, default 0.0
        Pseudocount of random zeros.
    ks : sequence of int, default (0, 1, 2, 3, 4, 5)
        Cell sizes k to report.

    Returns
    -------
    pandas.DataFrame
        Indexed by k with columns ``tau1`` .. ``tau4``.
    """
    validate_parameters(family, sigma, alpha)
    sizes, n_j = _size_distribution(table)
    K = n_j.sum()
    ks = np.asarray(ks)
    P = _transition_matrix(family, sigma, alpha, sizes, ks)  # (J, len(ks))
    expected_k = (n_j[:, None] * P).sum(0)
    lookup = dict(zip(sizes.tolist(), n_j.tolist()))
    n_k = np.array([lookup.get(int(k), 0.0) for k in ks])
    stay = np.array([_transition_matrix(family, sigma, alpha, np.array([k]), np.array([k]))[0, 0]
                     for k in ks])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau4 = np.where(expected_k > 0, n_k * stay / expected_k, np.nan)
    return pd.DataFrame({"tau1": expected_k / K, "tau2": n_k / K, "tau3": stay, "tau4": tau4},
                        index=pd.Index(ks, name="k"))


def expected_within(table: SparseTable, *, family: str = "poisson", sigma: float = 0.0,
                    alpha: float = 0.0, ps: Sequence[float] = (0.5, 1, 5, 10, 50)
                    ) -> pd.DataFrame:
    """Compute the expected share of cells whose synthetic count is within p% of the original.

    Over all non-structural cells (``all``; a zero is "within" only if it stays 0), over the
    original non-zero cells (``nonzero``) and over the cells non-zero in either table
    (``either``, a ratio of expectations: random zeros made non-zero count as misses).

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}, default "poisson"
        The synthesis distribution.
    sigma : float, default 0.0
        Dispersion, or precision theta for ``dpo``.
    alpha : float, default 0.0
        Pseudocount of random zeros.
    ps : sequence of float, default (0.5, 1, 5, 10, 50)
        Tolerances p, in percent of the original count.

    Returns
    -------
    pandas.DataFrame
        Indexed by p, columns ``all``, ``nonzero`` and ``either``.
    """
    validate_parameters(family, sigma, alpha)
    sizes, n_j = _size_distribution(table)
    rows = []
    for p in ps:
        lo = np.ceil(sizes * (1 - p / 100) - 1e-9).astype(np.int64)
        hi = np.floor(sizes * (1 + p / 100) + 1e-9).astype(np.int64)
        hit = _interval_probabilities(family, sigma, alpha, sizes, lo, hi)
        kept = (n_j[1:] * hit[1:]).sum()
        fake = n_j[0] * (1.0 - hit[0])  # random zeros that become non-zero
        rows.append({"p": p, "all": float((n_j * hit).sum() / n_j.sum()),
                     "nonzero": float(kept / n_j[1:].sum()),
                     "either": float(kept / (n_j[1:].sum() + fake))})
    return pd.DataFrame(rows).set_index("p")
