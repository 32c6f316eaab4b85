"""Sparse contingency tables with structural zeros, and their conversion to and from records.

All variables are categorical, so the data are a contingency table of K cells. A
:class:`SparseTable` keeps only the non-zero cells (sorted linear indices and their counts), so a
table of 10^9 cells takes the memory of its occupied cells; :class:`StructuralZeros` describes
the impossible cells as blocks of levels, never as a dense mask. :func:`microdata_to_table` and
:func:`table_to_microdata` convert records (or cell counts) to a table and back, keeping the
category labels.

These are data types shared by every stage: the saturated count models
(:mod:`bayesynth.models.saturated_counts`), their samplers (:mod:`bayesynth.synthesis.saturated`)
and the tau risk and utility metrics (:mod:`bayesynth.evaluation.tau_risk`,
:mod:`bayesynth.evaluation.counts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesynth.errors import DataValidationError, InputTypeError, SchemaError
from bayesynth.schema import _sorted_levels

__all__ = [
    "SparseTable",
    "StructuralZeros",
    "microdata_to_table",
    "table_to_microdata",
]


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

    def to_frame(self, count: str = "count") -> pd.DataFrame:
        """One row per non-zero cell: the variables (categorical, all levels kept) and the count.

        :func:`microdata_to_table` with the same ``count`` turns it back into the table.

        Parameters
        ----------
        count : str, default "count"
            Name of the count column; it must not be a variable's name.

        Returns
        -------
        pandas.DataFrame

        Raises
        ------
        bayesynth.errors.SchemaError
            ``count`` names one of the table's variables.
        """
        if count in self.names:
            raise SchemaError(f"The table has a variable named '{count}', the name asked for "
                              "the count column; pass another name (to_frame(count=...)).")
        c = self.codes()
        data = {n: pd.Categorical.from_codes(c[:, j], categories=self.levels[n])
                for j, n in enumerate(self.names)}
        data[count] = self.counts
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
        """Refuse malformed tables.

        Negative counts, cells stored with a count of 0 (a stored zero would be taken for a
        non-zero cell: no pseudocount in synthesis, a wrong size class in the tau metrics),
        repeated, unsorted or out-of-range cell indices, and records in structural cells.
        """
        index = np.asarray(self.index)
        counts = np.asarray(self.counts)
        if index.shape != counts.shape or index.ndim != 1:
            raise DataValidationError(
                f"index and counts must be 1-d and of one length; got shapes {index.shape} and "
                f"{counts.shape}.")
        if np.any(counts < 0):
            raise DataValidationError("Counts must be non-negative.")
        if np.any(counts == 0):
            raise DataValidationError(
                f"{int(np.sum(counts == 0))} cell(s) are stored with a count of 0 (linear "
                f"indices {index[counts == 0][:5].tolist()}...): a SparseTable lists only its "
                "non-zero cells. Drop them; an empty cell is a random zero (or declare it a "
                "structural zero).")
        if len(index) and (index.min() < 0 or index.max() >= self.n_cells):
            raise DataValidationError(f"Cell indices must lie in 0..{self.n_cells - 1}.")
        if np.any(np.diff(index) <= 0):
            raise DataValidationError(
                "Cell indices must be sorted and distinct: add up the counts of repeated cells "
                "(microdata_to_table does).")
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
        raise DataValidationError(
            f"Columns {bad} have missing values; a saturated table needs a level for every "
            "record: write them as a level of their own (such as 'missing') in the file, or "
            "in Python df[col].cat.add_categories('missing').fillna('missing').")
    levels, codes = {}, []
    for v in variables:
        s = df[v]
        if isinstance(s.dtype, pd.CategoricalDtype):
            levels[v] = list(s.cat.categories)
            codes.append(s.cat.codes.to_numpy().astype(np.int64))
        else:
            uniq = pd.unique(s)
            try:
                uniq = np.sort(uniq)
                codes.append(np.searchsorted(uniq, s.to_numpy()).astype(np.int64))
            except TypeError:  # mixed types (1 and "p"): ordered by their text
                uniq = np.array(_sorted_levels(uniq), dtype=object)
                codes.append(pd.Index(uniq).get_indexer(s.to_numpy()).astype(np.int64))
            levels[v] = list(uniq)
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
