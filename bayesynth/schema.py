"""Mixed-type data schema: what each column is, and validation of a table against it.

A :class:`Schema` records, for every column of a table, one of five types:

``categorical``
    unordered levels (strings, unordered pandas categoricals, codes a user declares).
``ordinal``
    ordered levels (ordered pandas categoricals, or a declared ordered code).
``binary``
    exactly two levels.
``count``
    non-negative integers.
``continuous``
    real numbers.

It also keeps the levels of the level-valued types and the pandas dtype of each column, so that a
synthesizer can hand back tables with the same columns, dtypes and category labels as its input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesynth.errors import (
    ColumnTypeError,
    ConstantColumnError,
    EmptyDataError,
    IdentifierColumnError,
    InputTypeError,
    MissingColumnError,
    NonFiniteValueError,
    SchemaError,
    TooFewRowsError,
    UnknownColumnTypeError,
    UnknownLevelError,
)

__all__ = ["COLUMN_TYPES", "ColumnSchema", "Schema", "infer_schema", "validate_data"]

COLUMN_TYPES: tuple[str, ...] = ("categorical", "ordinal", "binary", "count", "continuous")
LEVEL_TYPES: frozenset[str] = frozenset({"categorical", "ordinal", "binary"})
NUMERIC_TYPES: frozenset[str] = frozenset({"count", "continuous"})
SCHEMA_FORMAT_VERSION = 1
MIN_ROWS = 10


def _plain(value: Any) -> Any:
    """Convert a numpy scalar to the matching Python scalar, for JSON."""
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class ColumnSchema:
    """Type and levels of one column.

    Parameters
    ----------
    name : str
        Column name in the table.
    type : {"categorical", "ordinal", "binary", "count", "continuous"}
        How the column is modelled.
    levels : tuple, optional
        The levels of a categorical, ordinal or binary column, in order (the order matters only
        for ordinal and binary columns). ``None`` for count and continuous columns.
    dtype : str, optional
        The pandas dtype of the source column (``str(series.dtype)``), used to restore it.
    ordered : bool
        Whether a pandas categorical source column was ordered (restored on output).
    """

    name: str
    type: str
    levels: tuple | None = None
    dtype: str | None = None
    ordered: bool = False

    def __post_init__(self) -> None:
        if self.type not in COLUMN_TYPES:
            raise UnknownColumnTypeError(
                f"Column '{self.name}' has type {self.type!r}, which bayesynth does not know. "
                f"Use one of {', '.join(COLUMN_TYPES)}.",
                column=self.name,
            )
        if self.type in LEVEL_TYPES:
            if self.levels is None or len(self.levels) == 0:
                raise SchemaError(
                    f"Column '{self.name}' is {self.type} but the schema lists no levels. "
                    "Give its levels, or let infer_schema find them.",
                    column=self.name,
                )
            if len(set(self.levels)) != len(self.levels):
                raise SchemaError(
                    f"Column '{self.name}' lists a level more than once: {list(self.levels)}.",
                    column=self.name,
                )
            if self.type == "binary" and len(self.levels) != 2:
                raise SchemaError(
                    f"Column '{self.name}' is binary but has {len(self.levels)} levels "
                    f"({list(self.levels)}). Declare it categorical or ordinal instead.",
                    column=self.name,
                )
        elif self.levels is not None:
            raise SchemaError(
                f"Column '{self.name}' is {self.type}; only categorical, ordinal and binary "
                "columns take levels. Remove its levels.",
                column=self.name,
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description of the column."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.levels is not None:
            out["levels"] = [_plain(v) for v in self.levels]
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.ordered:
            out["ordered"] = True
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColumnSchema:
        """Inverse of :meth:`to_dict`."""
        if "name" not in d or "type" not in d:
            raise SchemaError(
                f"Every schema column needs a 'name' and a 'type'; got {dict(d)!r}."
            )
        levels = d.get("levels")
        return cls(
            name=str(d["name"]),
            type=str(d["type"]),
            levels=tuple(levels) if levels is not None else None,
            dtype=d.get("dtype"),
            ordered=bool(d.get("ordered", False)),
        )


class Schema(Mapping[str, ColumnSchema]):
    """An ordered mapping from column name to :class:`ColumnSchema`.

    Parameters
    ----------
    columns : iterable of ColumnSchema
        One entry per column, in table order.

    Examples
    --------
    >>> import pandas as pd
    >>> from bayesynth import infer_schema, Schema
    >>> df = pd.DataFrame({"sex": ["F", "M"] * 10, "age": range(20, 40)})
    >>> schema = infer_schema(df)
    >>> schema["age"].type
    'count'
    >>> Schema.from_json(schema.to_json()) == schema
    True
    """

    def __init__(self, columns: Iterable[ColumnSchema]):
        cols = list(columns)
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaError(f"The schema lists column(s) {dup} more than once.")
        self._columns: dict[str, ColumnSchema] = {c.name: c for c in cols}

    def __getitem__(self, name: str) -> ColumnSchema:
        try:
            return self._columns[name]
        except KeyError:
            raise MissingColumnError(
                f"The schema has no column '{name}'. Its columns are {list(self._columns)}.",
                column=name,
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return list(self._columns.values()) == list(other._columns.values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{c.name}: {c.type}" for c in self._columns.values())
        return f"Schema({inner})"

    @property
    def names(self) -> list[str]:
        """Column names in table order."""
        return list(self._columns)

    def of_type(self, *types: str) -> list[str]:
        """Names of the columns whose type is one of ``types``."""
        return [c.name for c in self._columns.values() if c.type in types]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description of the schema."""
        return {
            "format": "bayesynth-schema",
            "version": SCHEMA_FORMAT_VERSION,
            "columns": [c.to_dict() for c in self._columns.values()],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, Mapping) or "columns" not in d:
            raise SchemaError(
                "A schema is a JSON object with a 'columns' list, as written by Schema.to_json."
            )
        return cls(ColumnSchema.from_dict(c) for c in d["columns"])

    def to_json(self, path: str | os.PathLike | None = None, *, indent: int = 2) -> str:
        """Serialise to JSON, optionally writing it (atomically) to ``path``.

        Returns
        -------
        str
            The JSON text.
        """
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            from bayesynth._io import atomic_write_text

            atomic_write_text(Path(path), text + "\n")
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike) -> Schema:
        """Read a schema from JSON text or from a path to a JSON file."""
        if isinstance(source, os.PathLike) or (
            isinstance(source, str) and not source.lstrip().startswith("{")
        ):
            path = Path(source)
            if not path.exists():
                raise SchemaError(f"Schema file '{path}' does not exist.")
            text = path.read_text()
        else:
            text = str(source)
        try:
            d = json.loads(text)
        except json.JSONDecodeError as err:
            raise SchemaError(f"The schema is not valid JSON: {err}.") from None
        return cls.from_dict(d)


# ----------------------------------------------------------------------------------- inference


def _sorted_levels(values: Sequence[Any]) -> tuple:
    try:
        return tuple(sorted(values))
    except TypeError:  # mixed types: order by their text
        return tuple(sorted(values, key=str))


def _is_integral(x: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(x)) and np.all(x == np.round(x)))


def _check_informative(name: str, values: pd.Series) -> np.ndarray:
    """Distinct non-missing values; raise when there are none or only one."""
    if len(values) == 0:
        raise ConstantColumnError(
            f"Column '{name}' is entirely missing. Drop it before synthesis.", column=name
        )
    uniques = pd.unique(values)
    if len(uniques) == 1:
        raise ConstantColumnError(
            f"Column '{name}' takes the single value {_plain(uniques[0])!r}: it carries no "
            "information to model. Drop it (and add it back as a constant after synthesis).",
            column=name,
        )
    return uniques


def _check_supported_dtype(s: pd.Series) -> None:
    if (
        pd.api.types.is_datetime64_any_dtype(s.dtype)
        or pd.api.types.is_timedelta64_dtype(s.dtype)
        or isinstance(s.dtype, pd.PeriodDtype)
        or pd.api.types.is_complex_dtype(s.dtype)
    ):
        raise ColumnTypeError(
            f"Column '{s.name}' has dtype {s.dtype}, which bayesynth cannot model. Convert it to "
            "a number (for example a year, or days since a date) or drop it.",
            column=str(s.name),
        )


def _infer_one(s: pd.Series, declared: str | None) -> ColumnSchema:
    name = str(s.name)
    _check_supported_dtype(s)
    values = s.dropna()
    uniques = _check_informative(name, values)
    is_cat_dtype = isinstance(s.dtype, pd.CategoricalDtype)
    dtype = str(s.dtype)
    numeric = pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)

    if declared is None:
        if pd.api.types.is_bool_dtype(s.dtype) or len(uniques) == 2:
            declared = "binary"
        elif is_cat_dtype:
            declared = "ordinal" if s.cat.ordered else "categorical"
        elif numeric:
            x = values.to_numpy(dtype=float)
            if np.any(np.isinf(x)):
                raise NonFiniteValueError(
                    f"Column '{name}' holds infinite values. Replace them (for example by NaN, "
                    "which bayesynth imputes) before synthesis.",
                    column=name,
                )
            declared = "count" if _is_integral(x) and x.min() >= 0 else "continuous"
        else:
            if len(uniques) == len(values) and len(values) >= MIN_ROWS:
                raise IdentifierColumnError(
                    f"Column '{name}' has {len(uniques)} distinct values in {len(values)} rows: "
                    "it looks like an identifier. Drop it (identifiers must not be modelled or "
                    "released), or, if it really is a category, declare it with "
                    f"categorical=['{name}'].",
                    column=name,
                )
            declared = "categorical"

    if declared not in COLUMN_TYPES:
        raise UnknownColumnTypeError(
            f"Column '{name}' was declared {declared!r}; use one of {', '.join(COLUMN_TYPES)}.",
            column=name,
        )
    levels = None
    ordered = bool(is_cat_dtype and s.cat.ordered)
    if declared in LEVEL_TYPES:
        if is_cat_dtype:
            observed = set(uniques.tolist())
            cats = [c for c in s.cat.categories.tolist()]
            # Keep every declared category for the output dtype; the model drops unused ones.
            levels = tuple(_plain(c) for c in cats)
            if declared == "binary":
                levels = tuple(_plain(c) for c in cats if c in observed)
        else:
            levels = tuple(_plain(v) for v in _sorted_levels(uniques.tolist()))
        if declared == "binary" and len(levels) != 2:
            raise ColumnTypeError(
                f"Column '{name}' was declared binary but has {len(levels)} distinct values. "
                "Declare it categorical, ordinal or count instead.",
                column=name,
            )
    return ColumnSchema(name=name, type=declared, levels=levels, dtype=dtype, ordered=ordered)


def infer_schema(
    df: pd.DataFrame,
    *,
    categorical: Iterable[str] = (),
    ordinal: Iterable[str] = (),
    binary: Iterable[str] = (),
    count: Iterable[str] = (),
    continuous: Iterable[str] = (),
) -> Schema:
    """Infer the type of every column of ``df``.

    Rules, applied to each column's non-missing values unless a keyword list names the column:

    * a bool column, or any column with exactly two distinct values, is ``binary``;
    * an ordered pandas categorical is ``ordinal``; an unordered one is ``categorical``;
    * strings (object or string dtype) are ``categorical``; a string column whose values are all
      distinct raises :class:`~bayesynth.errors.IdentifierColumnError`;
    * numbers that are all non-negative integers are ``count``; other numbers are ``continuous``.

    Ordinal columns keep their type here; the copula model treats ordinal columns with few levels
    (fewer than 10 by default) as unordered categorical, as Feldman & Kowal recommend.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. It is not modified.
    categorical, ordinal, binary, count, continuous : iterable of str
        Column names forced to that type (overriding inference).

    Returns
    -------
    Schema

    Raises
    ------
    bayesynth.errors.MissingColumnError
        A keyword list names a column that ``df`` lacks.
    bayesynth.errors.SchemaError
        A column is named in two keyword lists.
    bayesynth.errors.ConstantColumnError, bayesynth.errors.IdentifierColumnError,
    bayesynth.errors.ColumnTypeError
        A column cannot be modelled.
    """
    _check_frame(df)
    declared: dict[str, str] = {}
    for typ, names in (
        ("categorical", categorical),
        ("ordinal", ordinal),
        ("binary", binary),
        ("count", count),
        ("continuous", continuous),
    ):
        if isinstance(names, str):
            names = [names]
        for n in names:
            if n not in df.columns:
                raise MissingColumnError(
                    f"{typ}=[...] names column '{n}', which the table does not have. "
                    f"Its columns are {list(df.columns)}.",
                    column=str(n),
                )
            if n in declared and declared[n] != typ:
                raise SchemaError(
                    f"Column '{n}' is declared both {declared[n]} and {typ}; choose one.",
                    column=str(n),
                )
            declared[n] = typ
    return Schema(_infer_one(df[c], declared.get(c)) for c in df.columns)


# ---------------------------------------------------------------------------------- validation


def _check_frame(df: Any, min_rows: int = 1) -> None:
    if not isinstance(df, pd.DataFrame):
        raise InputTypeError(
            f"Expected a pandas DataFrame, got {type(df).__name__}. Wrap your data with "
            "pandas.DataFrame(...) or read it with pandas.read_csv(...)."
        )
    if df.shape[0] == 0 or df.shape[1] == 0:
        raise EmptyDataError(
            f"The table is empty ({df.shape[0]} rows, {df.shape[1]} columns). "
            "bayesynth needs a table with rows and columns."
        )
    if df.shape[0] < min_rows:
        raise TooFewRowsError(
            f"The table has {df.shape[0]} rows; bayesynth needs at least {min_rows} to fit a "
            "model. Use more records."
        )
    dup = df.columns[df.columns.duplicated()].tolist()
    if dup:
        raise SchemaError(f"The table has duplicated column names {dup}. Rename them.")


def validate_data(df: Any, schema: Schema, *, min_rows: int = MIN_ROWS) -> None:
    """Check that ``df`` can be modelled under ``schema``.

    Nothing is modified. Every problem raises a :mod:`bayesynth.errors` exception that names the
    column and the fix.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    schema : Schema
        Its schema (for example from :func:`infer_schema`).
    min_rows : int, default 10
        Fewest rows accepted.

    Raises
    ------
    bayesynth.errors.DataValidationError
        Subclasses say what is wrong: not a DataFrame, empty, too few rows, constant column,
        infinite values, values that do not fit the declared type, unknown levels.
    bayesynth.errors.MissingColumnError
        The schema names a column the table lacks, or the table has a column the schema lacks.
    """
    _check_frame(df, min_rows)
    if not isinstance(schema, Schema):
        raise InputTypeError(
            f"Expected a bayesynth.Schema, got {type(schema).__name__}. Build one with "
            "bayesynth.infer_schema(df) or Schema.from_json(...)."
        )
    absent = [n for n in schema.names if n not in df.columns]
    if absent:
        raise MissingColumnError(
            f"The schema names column(s) {absent}, which the table does not have. "
            "Fix the schema or pass the right table.",
            column=absent[0],
        )
    extra = [str(c) for c in df.columns if c not in schema]
    if extra:
        raise MissingColumnError(
            f"The table has column(s) {extra} that the schema does not describe. Add them to "
            "the schema or drop them from the table.",
            column=extra[0],
        )
    for name in schema.names:
        _validate_column(df[name], schema[name])


def _validate_column(s: pd.Series, col: ColumnSchema) -> None:
    name = col.name
    _check_supported_dtype(s)
    values = s.dropna()
    if len(values) == 0:
        _check_informative(name, values)
    if col.type in NUMERIC_TYPES:
        if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            raise ColumnTypeError(
                f"Column '{name}' is declared {col.type} but holds {s.dtype} values "
                f"(for example {values.iloc[0]!r}). Convert it to numbers or declare it "
                "categorical.",
                column=name,
            )
        x = values.to_numpy(dtype=float)
        if np.any(np.isinf(x)):
            raise NonFiniteValueError(
                f"Column '{name}' holds {int(np.isinf(x).sum())} infinite value(s). Replace them "
                "(for example by NaN, which bayesynth imputes) before synthesis.",
                column=name,
            )
        if col.type == "count" and not (_is_integral(x) and x.min() >= 0):
            raise ColumnTypeError(
                f"Column '{name}' is declared count but holds negative or non-integer values "
                f"(minimum {x.min()!r}). Declare it continuous.",
                column=name,
            )
        _check_informative(name, values)
        return
    assert col.levels is not None
    uniques = _check_informative(name, values)
    known = set(col.levels)
    unknown = [_plain(v) for v in uniques if _plain(v) not in known]
    if unknown:
        raise UnknownLevelError(
            f"Column '{name}' holds value(s) {unknown[:5]} that its schema does not list "
            f"(levels {list(col.levels)[:10]}). Add them to the schema's levels.",
            column=name,
        )


def encode_levels(s: pd.Series, col: ColumnSchema) -> np.ndarray:
    """Integer codes of a level-valued column (index into ``col.levels``; -1 for missing)."""
    assert col.levels is not None
    lookup = {v: i for i, v in enumerate(col.levels)}
    out = np.full(len(s), -1, dtype=np.int64)
    mask = s.notna().to_numpy()
    vals = s.to_numpy(dtype=object)[mask]
    out[mask] = [lookup[_plain(v)] for v in vals]
    return out

