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
import shlex
import warnings
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
from bayesynth.rules import Rule, check_rules, refuse_unknown_keys, rule_mask, suggest_rules

__all__ = ["COLUMN_TYPES", "ColumnSchema", "Schema", "infer_schema", "validate_data",
           "value_part", "as_numbers", "from_days", "is_datetime", "evaluate_formula",
           "check_formula", "not_modelled", "modelled_schema"]

COLUMN_TYPES: tuple[str, ...] = ("categorical", "ordinal", "binary", "count", "continuous")
LEVEL_TYPES: frozenset[str] = frozenset({"categorical", "ordinal", "binary"})
NUMERIC_TYPES: frozenset[str] = frozenset({"count", "continuous"})
SCHEMA_FORMAT_VERSION = 1
MIN_ROWS = 10
#: A numeric column with at most this many distinct non-integer values is ordinal (discrete).
FEW_VALUES = 10

#: Resolutions of a timestamp column (``ColumnSchema.time_unit``), in seconds.
TIME_UNITS = {"h": 3600, "min": 60, "s": 1}
#: A numeric column is read as having special codes when it has at most this many distinct
#: negative integer values, all other values being non-negative.
MAX_SPECIAL_CODES = 3
#: ... and when at least one of them is held by this many records (fewer: the values are read
#: as numbers, with a warning that says how to declare them as codes).
MIN_CODE_RECORDS = 5


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
    special_codes : tuple of numbers
        Values of a count or continuous column that are codes, not quantities (such as -8 for
        "not applicable"). They are modelled as levels of their own, in the dependence model too,
        and reproduced exactly.
    integer : bool
        The column's values (codes aside) are whole numbers; synthetic values are too.
    decimals : int, optional
        Decimal places of the source values (a money column written with 2); synthetic values
        are rounded to as many.
    digits : int, optional
        Significant digits of the source values, where they carry more than six decimal places
        and at most 15 significant digits (a double can need 17; R's ``write.csv`` writes 15: a
        body-mass index as ``21.1552942020151``); synthetic values are rounded to as many, so
        that their written form is no longer than the real values' (a classifier told SD2011's
        real body-mass indices from synthetic ones computed at full precision with AUC 0.64 on
        that column alone; 0.51 once rounded).
    formula : str, optional
        A derived column (synthpop's "passive" synthesis): a pandas expression of other columns,
        such as ``"weight / (height / 100) ** 2"`` for a body-mass index. It is not modelled;
        synthesizers compute it from the synthetic values of the columns it names, so that the
        identity holds in every synthetic record. :func:`validate_data` checks that it holds in
        the real data.
    time_unit : {"h", "min", "s"}, optional
        A timestamp column's resolution: the coarsest of hours, minutes and seconds in which
        every real time is whole (times written to the minute come back to the minute). Whole
        days are ``integer`` instead; without either, times come back to the second.
    """

    name: str
    type: str
    levels: tuple | None = None
    dtype: str | None = None
    ordered: bool = False
    special_codes: tuple = ()
    integer: bool = False
    decimals: int | None = None
    digits: int | None = None
    formula: str | None = None
    time_unit: str | None = None

    def __post_init__(self) -> None:
        if self.time_unit is not None and self.time_unit not in TIME_UNITS:
            raise SchemaError(
                f"Column '{self.name}' has time_unit {self.time_unit!r}; use one of "
                f"{list(TIME_UNITS)} (or none: whole days are 'integer').", column=self.name)
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
        if self.special_codes and self.type not in NUMERIC_TYPES:
            raise SchemaError(
                f"Column '{self.name}' is {self.type} but lists special codes "
                f"{list(self.special_codes)}: special codes belong to count and continuous "
                "columns. Make the code a level of the column instead.",
                column=self.name,
            )

    def to_dict(self) -> dict[str, Any]:
        """Describe the column in JSON-ready form (read back by :meth:`from_dict`).

        Returns
        -------
        dict
            ``name`` and ``type``, and each other field that differs from its default.
        """
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.levels is not None:
            out["levels"] = [_plain(v) for v in self.levels]
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.ordered:
            out["ordered"] = True
        if self.special_codes:
            out["special_codes"] = [_plain(v) for v in self.special_codes]
        if self.integer:
            out["integer"] = True
        if self.decimals is not None:
            out["decimals"] = int(self.decimals)
        if self.digits is not None:
            out["digits"] = int(self.digits)
        if self.formula is not None:
            out["formula"] = self.formula
        if self.time_unit is not None:
            out["time_unit"] = self.time_unit
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColumnSchema:
        """Rebuild a column from :meth:`to_dict`'s form (the inverse of :meth:`to_dict`).

        Parameters
        ----------
        d : mapping
            Needs ``name`` and ``type``; the other fields are optional.

        Returns
        -------
        ColumnSchema

        Raises
        ------
        bayesynth.errors.SchemaError
            If ``name`` or ``type`` is absent (or the column is invalid).
        """
        if "name" not in d or "type" not in d:
            raise SchemaError(
                f"Every schema column needs a 'name' and a 'type'; got {dict(d)!r}."
            )
        refuse_unknown_keys(d, _COLUMN_KEYS, f"column '{d['name']}'")
        levels = d.get("levels")
        return cls(
            name=str(d["name"]),
            type=str(d["type"]),
            levels=tuple(levels) if levels is not None else None,
            dtype=d.get("dtype"),
            ordered=bool(d.get("ordered", False)),
            special_codes=tuple(d.get("special_codes", ())),
            integer=bool(d.get("integer", False)),
            decimals=None if d.get("decimals") is None else int(d["decimals"]),
            digits=None if d.get("digits") is None else int(d["digits"]),
            formula=d.get("formula"),
            time_unit=d.get("time_unit"),
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

    def __init__(self, columns: Iterable[ColumnSchema], rules: Iterable[Rule] = (),
                 suggested_rules: Iterable[Rule] = ()):
        cols = list(columns)
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaError(f"The schema lists column(s) {dup} more than once.")
        self._columns: dict[str, ColumnSchema] = {c.name: c for c in cols}
        self.rules: tuple[Rule, ...] = tuple(
            r if isinstance(r, Rule) else Rule.from_dict(r) for r in rules)
        self.suggested_rules: tuple[Rule, ...] = tuple(
            r if isinstance(r, Rule) else Rule.from_dict(r) for r in suggested_rules)
        for r in self.rules:
            unknown = [c for c in [r.column] + [c for c, _ in r.when] if c not in names]
            if unknown:
                raise MissingColumnError(f"The rule {r!r} names column(s) {unknown}, which the "
                                         f"schema does not have.", column=unknown[0])
            self._check_rule_levels(r)

    def _check_rule_levels(self, r: Rule) -> None:
        """Check that a rule's value and condition levels are values its columns can take."""
        target = self._columns[r.column]
        v = r.value
        if v is not None and not (isinstance(v, float) and np.isnan(v)):
            if target.levels is not None and _plain(v) not in set(target.levels):
                raise UnknownLevelError(
                    f"The rule {r!r} sets '{r.column}' to {v!r}, which is not one of its levels "
                    f"{list(target.levels)[:10]}.", column=r.column)
            if target.levels is None and not isinstance(v, int | float | np.number):
                raise SchemaError(
                    f"The rule {r!r} sets the {target.type} column '{r.column}' to {v!r}, which "
                    "is not a number.", column=r.column)
        for c, levels in r.when:
            col = self._columns[c]
            if col.levels is None:
                continue
            known = set(col.levels)
            bad = [x for x in levels if x is not None and _plain(x) not in known]
            if bad:
                raise UnknownLevelError(
                    f"The rule {r!r} conditions on level(s) {bad} of '{c}', which are not among "
                    f"its levels {list(col.levels)[:10]}.", column=c)

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
        return (list(self._columns.values()) == list(other._columns.values())
                and self.rules == other.rules)

    def with_rules(self, rules: Iterable[Rule]) -> Schema:
        """Return a copy of the schema with these rules (for example some of ``suggested_rules``).

        Parameters
        ----------
        rules : iterable of Rule
            The rules; they replace the schema's current rules.

        Returns
        -------
        Schema
        """
        return Schema(self._columns.values(), rules, self.suggested_rules)

    def with_formulas(self, formulas: Mapping[str, str]) -> Schema:
        """Return a copy of the schema in which these columns are derived by pandas expressions.

        Parameters
        ----------
        formulas : mapping
            Column name -> expression for :meth:`pandas.DataFrame.eval`; other columns keep
            their formulas.

        Returns
        -------
        Schema

        Raises
        ------
        bayesynth.errors.MissingColumnError
            If a name is not a column of the schema.

        Examples
        --------
        >>> import pandas as pd
        >>> from bayesynth import infer_schema
        >>> df = pd.DataFrame({"h": [150.0, 160, 170, 180] * 5, "w": [50.0, 60, 70, 80] * 5})
        >>> df["bmi"] = df.eval("w / (h / 100) ** 2")
        >>> s = infer_schema(df, suggest=False).with_formulas({"bmi": "w / (h / 100) ** 2"})
        >>> s.derived
        ['bmi']
        """
        from dataclasses import replace

        unknown = [c for c in formulas if c not in self._columns]
        if unknown:
            raise MissingColumnError(f"with_formulas names column(s) {unknown}, which the schema "
                                     "does not have.", column=unknown[0])
        cols = [replace(c, formula=formulas.get(c.name, c.formula))
                for c in self._columns.values()]
        return Schema(cols, self.rules, self.suggested_rules)

    @property
    def derived(self) -> list[str]:
        """Names of the columns computed by a formula (not modelled)."""
        return [c.name for c in self._columns.values() if c.formula is not None]

    def __repr__(self) -> str:
        inner = ", ".join(f"{c.name}: {c.type}" for c in self._columns.values())
        return f"Schema({inner})"

    @property
    def names(self) -> list[str]:
        """Column names in table order."""
        return list(self._columns)

    def of_type(self, *types: str) -> list[str]:
        """List the names of the columns whose type is one of ``types``.

        Parameters
        ----------
        *types : str
            Column types, e.g. ``"count"``, ``"continuous"``.

        Returns
        -------
        list of str
            In table order.
        """
        return [c.name for c in self._columns.values() if c.type in types]

    def to_dict(self) -> dict[str, Any]:
        """Describe the schema in JSON-ready form (read back by :meth:`from_dict`).

        Returns
        -------
        dict
            ``format``, ``version``, ``columns`` and ``rules`` (and ``suggested_rules`` when
            there are any).
        """
        out = {
            "format": "bayesynth-schema",
            "version": SCHEMA_FORMAT_VERSION,
            "columns": [c.to_dict() for c in self._columns.values()],
            "rules": [r.to_dict() for r in self.rules],
        }
        if self.suggested_rules:
            out["suggested_rules"] = [r.to_dict() for r in self.suggested_rules]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        """Rebuild a schema from :meth:`to_dict`'s form (the inverse of :meth:`to_dict`).

        Parameters
        ----------
        d : mapping
            Needs a ``columns`` list; ``rules`` and ``suggested_rules`` are optional.

        Returns
        -------
        Schema

        Raises
        ------
        bayesynth.errors.SchemaError
            If ``d`` is not a mapping with ``columns``.
        """
        if not isinstance(d, Mapping) or "columns" not in d:
            raise SchemaError(
                "A schema is a JSON object with a 'columns' list, as written by Schema.to_json."
            )
        refuse_unknown_keys(d, _SCHEMA_KEYS, "the schema")
        if d.get("format", "bayesynth-schema") != "bayesynth-schema":
            raise SchemaError(f"The schema's format is {d['format']!r}, not 'bayesynth-schema'.")
        return cls((ColumnSchema.from_dict(c) for c in d["columns"]),
                   [Rule.from_dict(r) for r in d.get("rules", [])],
                   [Rule.from_dict(r) for r in d.get("suggested_rules", [])])

    def to_json(self, path: str | os.PathLike | None = None, *, indent: int = 2) -> str:
        """Serialise to JSON, optionally writing it (atomically) to ``path``.

        Parameters
        ----------
        path : path-like, optional
            File to write (with a final newline).
        indent : int, default 2
            JSON indentation.

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
        """Read a schema from JSON text or from a path to a JSON file.

        Parameters
        ----------
        source : str or path-like
            JSON text (a string starting with ``{``) or a path.

        Returns
        -------
        Schema

        Raises
        ------
        bayesynth.errors.SchemaError
            If the file does not exist or the text is not a valid schema.
        """
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


def _code_candidates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the negative values of ``x`` shaped like codes, and how many records hold each.

    Shaped like codes: at most :data:`MAX_SPECIAL_CODES` distinct negative integers from -999
    to -1, in a column whose other values are non-negative and take at least two values.
    Empty where the column's negative values are not shaped so.
    """
    neg, counts = np.unique(x[x < 0], return_counts=True)
    rest = x[x >= 0]
    if (0 < len(neg) <= MAX_SPECIAL_CODES and _is_integral(neg) and neg.min() >= -999
            and len(np.unique(rest)) >= 2):
        return neg, counts
    return np.zeros(0), np.zeros(0, dtype=np.int64)


def _special_codes(x: np.ndarray) -> np.ndarray:
    """Find the negative integer values that mark codes ("not applicable" -8, "refused" -9 ...).

    The values :func:`_code_candidates` finds, when at least one of them is held by
    :data:`MIN_CODE_RECORDS` records (then a rarer one beside it, -9 "refused" in three records
    beside -8 "not applicable" in 600, is a code of the same survey too). A few scattered
    negative amounts with no such code beside them, such as a loss of -3 (or -3000, out of a
    code's range whatever the company), are values, not codes.
    """
    neg, counts = _code_candidates(x)
    if len(neg) and counts.max() >= MIN_CODE_RECORDS:
        return neg
    return np.zeros(0)


def _warn_rare_codes(name: str, neg: np.ndarray, counts: np.ndarray) -> None:
    """Warn that code-shaped negative values are too rare to be read as codes.

    ``neg`` and ``counts`` are what :func:`_code_candidates` returns, none held by
    :data:`MIN_CODE_RECORDS` records.

    A sample of a survey file can hold its "not applicable" code in one or two records. Read
    as a number, the code types the column continuous instead of count, and the copula takes
    it for the column's lowest value: the records that hold it are modelled as those with the
    fewest friends, not as a group of their own whose relations to the other columns the model
    learns.
    """
    vals = [int(v) for v in neg]
    held = ", ".join(f"{v} ({c} record{'s' if c > 1 else ''})" for v, c in zip(vals, counts))
    warnings.warn(
        f"Column {name!r} has the negative values {held} beside non-negative ones: they are "
        f"read as numbers, since a special code needs at least {MIN_CODE_RECORDS} records. If "
        f"they are codes (such as -8 \"not applicable\"), declare them: "
        f"infer_schema(df, special_codes={{{name!r}: {vals}}}), on the command line bayesynth "
        f"schema FILE --special-codes {shlex.quote(name + '=' + ','.join(map(str, vals)))}, or "
        f"in the schema JSON give the column \"special_codes\": {vals} (and the type "
        "\"count\" if its other values are whole numbers).",
        UserWarning, stacklevel=4)


def _decimals(x: np.ndarray, most: int = 6) -> int | None:
    """Decimal places of the values as written (None: more than ``most``).

    Read from each distinct value's shortest round-trip decimal form, so the count does not
    depend on the values' size: 1e-7 has 7 places (not 0, which would round every value to
    0) and 1234567890.12 has 2 (not 3).
    """
    x = np.asarray(x, dtype=float)
    x = np.unique(x[np.isfinite(x)])
    places = 0
    for v in x:
        text = np.format_float_positional(v, unique=True, trim="-")
        if "." in text:
            places = max(places, len(text.split(".", 1)[1]))
            if places > most:
                return None
    return places


def _significant(x: np.ndarray, most: int = 15) -> int | None:
    """Significant digits of the values as written (None: more than ``most``, full precision).

    Read from each distinct value's shortest round-trip form, as :func:`_decimals` reads
    decimal places: ``21.1552942020151`` has 15.
    """
    x = np.asarray(x, dtype=float)
    x = np.unique(x[np.isfinite(x) & (x != 0)])
    digits = 0
    for v in x:
        mantissa = np.format_float_scientific(v, unique=True, trim="-").split("e")[0]
        digits = max(digits, sum(ch.isdigit() for ch in mantissa))
        if digits > most:
            return None
    return digits or None


def round_values(x: np.ndarray, col: ColumnSchema) -> np.ndarray:
    """Round synthetic values to the precision of the column's real values.

    Whole numbers for ``integer`` columns, ``decimals`` places, or ``digits`` significant
    digits (each value becomes the double nearest its decimal form, as reading the real
    values' text gives); otherwise the values are returned as they are.

    Parameters
    ----------
    x : numpy.ndarray
        Values (missing values stay missing).
    col : ColumnSchema
        The column's schema.

    Returns
    -------
    numpy.ndarray
        A new float array.
    """
    return round_to(x, integer=bool(col.integer), decimals=col.decimals, digits=col.digits)


def round_to(x: np.ndarray, *, integer: bool = False, decimals: int | None = None,
             digits: int | None = None) -> np.ndarray:
    """Round values to a precision: whole numbers, decimal places or significant digits.

    The first that is set applies. With ``digits`` each value becomes the double nearest its
    ``digits``-significant-digit decimal form (what reading that text back gives), so values
    rounded here compare equal to the real values read from the same text.

    Parameters
    ----------
    x : numpy.ndarray
        Values (missing values stay missing).
    integer : bool, default False
        Round to whole numbers.
    decimals : int, optional
        Decimal places kept.
    digits : int, optional
        Significant digits kept, at least 1.

    Returns
    -------
    numpy.ndarray
        A new float array (unchanged values when nothing is set).
    """
    x = np.array(x, dtype=float)
    if integer:
        return np.round(x)
    if decimals is not None:
        return np.round(x, decimals)
    if digits is not None:
        ok = np.flatnonzero(np.isfinite(x))
        x[ok] = [float(f"{v:.{int(digits)}g}") for v in x[ok].tolist()]
    return x


def value_part(s: pd.Series, col: ColumnSchema) -> pd.Series:
    """Return the values of a numeric column with its special codes set to missing.

    Parameters
    ----------
    s : pandas.Series
        The column's values.
    col : ColumnSchema
        Its schema (with ``special_codes``).

    Returns
    -------
    pandas.Series
        ``s`` itself when the column has no special codes, else a copy with them missing.
    """
    if not col.special_codes:
        return s
    return s.where(~s.isin(list(col.special_codes)))


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


def is_datetime(dtype: Any) -> bool:
    """Tell whether a column of this dtype (or dtype text) holds dates or timestamps.

    Parameters
    ----------
    dtype : dtype or str
        A pandas/NumPy dtype or its text (e.g. ``"datetime64[ns]"``).

    Returns
    -------
    bool
        True for timezone-naive datetime64 dtypes.
    """
    if isinstance(dtype, str):
        return dtype.startswith("datetime64")
    return pd.api.types.is_datetime64_any_dtype(dtype) and not isinstance(
        dtype, pd.DatetimeTZDtype)


def days_since_epoch(s: pd.Series) -> pd.Series:
    """Convert a datetime column to float days since 1970-01-01 (missing stays missing)."""
    return (s - pd.Timestamp("1970-01-01")) / pd.Timedelta(days=1)


def as_numbers(df: pd.DataFrame) -> pd.DataFrame:
    """Return ``df`` with its date and timestamp columns as float days since 1970-01-01.

    The models work on numbers; :func:`from_days` turns synthetic values back. ``df`` itself
    is not modified (a copy is returned when there is something to convert).

    Parameters
    ----------
    df : pandas.DataFrame
        The table.

    Returns
    -------
    pandas.DataFrame
        ``df`` itself when it has no date column, else the converted copy.
    """
    dates = [c for c in df.columns if is_datetime(df[c].dtype)]
    if not dates:
        return df
    out = df.copy()
    for c in dates:
        out[c] = days_since_epoch(df[c])
    return out


def _time_unit(days: np.ndarray) -> str | None:
    """Return the coarsest of hours, minutes and seconds in which every time is whole.

    None when some time has a fraction of a second (they are kept to the second).
    """
    exact = np.asarray(days, dtype=float) * 86400.0
    seconds = np.round(exact)
    if not np.allclose(seconds, exact, rtol=0, atol=1e-3):
        return None
    for unit in ("h", "min", "s"):
        if np.all(seconds % TIME_UNITS[unit] == 0):
            return unit
    return None


def from_days(values: np.ndarray, dtype: str, unit: str | None = None) -> pd.Series:
    """Convert float days since 1970-01-01 back to datetimes of ``dtype``.

    Parameters
    ----------
    values : numpy.ndarray
        Days since 1970-01-01; rounded to the second, or to ``unit``.
    dtype : str
        The datetime dtype to return, e.g. ``"datetime64[ns]"``.
    unit : {"h", "min", "s"}, optional
        The column's resolution (its schema's ``time_unit``): times written to the minute
        come back to the minute.

    Returns
    -------
    pandas.Series
        The datetimes (NaN gives NaT); left in :func:`pandas.to_datetime`'s dtype if the
        conversion to ``dtype`` fails.
    """
    x = np.asarray(values, dtype=float)
    step = TIME_UNITS.get(unit or "s", 1)
    out = pd.Series(pd.to_datetime(np.round(x * 86400.0 / step) * step, unit="s", origin="unix",
                                   errors="coerce"))
    try:
        return out.astype(dtype)
    except (TypeError, ValueError):
        return out


def _check_supported_dtype(s: pd.Series) -> None:
    if is_datetime(s.dtype):
        return  # dates: an ordered variable, modelled as days since 1970-01-01
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


def _refuse_numeric_identifier(name: str, values: pd.Series, x: np.ndarray) -> None:
    """Refuse a whole-number column that numbers the records (1..n, or sorted, all distinct).

    A record number is not a quantity: modelled, it would be released (and its ranks tie
    synthetic records to real ones). Quantities whose every value is distinct (amounts,
    weights) are rarely consecutive whole numbers or sorted in the file's order.
    """
    if len(x) < MIN_ROWS or not _is_integral(x) or len(np.unique(x)) != len(x):
        return
    consecutive = x.max() - x.min() + 1 == len(x)
    if consecutive or values.is_monotonic_increasing or values.is_monotonic_decreasing:
        how = "runs through consecutive whole numbers" if consecutive else \
            "is sorted in the file's order"
        raise IdentifierColumnError(
            f"Column '{name}' has {len(x)} distinct whole numbers in {len(x)} rows and {how}: "
            "it looks like a record number or identifier. Drop it (identifiers must not be "
            "modelled or released), or, if it really is a quantity, declare its type "
            f"(\"type\": \"count\" in the schema JSON, or infer_schema(df, count=['{name}'])).",
            column=name,
        )


def _warn_numbers_with_markers(name: str, values: pd.Series) -> None:
    """Warn when a text column is numbers save a few markers ("NA", ".", "-", "n/a" ...).

    Such a column is read as categorical, one level per distinct number, which is rarely
    what its author meant: the markers usually stand for missing values.
    """
    text = values.astype(str).str.strip()
    number = pd.to_numeric(text, errors="coerce")
    is_num = number.notna()
    markers = sorted(set(text[~is_num]))
    if (is_num.mean() >= 0.5 and 0 < len(markers) <= 5
            and number[is_num].nunique() > FEW_VALUES):
        warnings.warn(
            f"Column '{name}' holds numbers written as text except for {markers} "
            f"({int((~is_num).sum())} records): it is read as categorical, one level per "
            f"distinct number ({number[is_num].nunique()}). If {markers} mark missing values, "
            "leave those cells blank in the file (in Python: pandas.read_csv(..., "
            f"na_values={markers})); if they are codes, write them as numbers (such as -8).",
            UserWarning, stacklevel=4)


def _infer_one(s: pd.Series, declared: str | None,
               declared_codes: Sequence[float] | None = None) -> ColumnSchema:
    name = str(s.name)
    _check_supported_dtype(s)
    values = s.dropna()
    said_count = declared == "count"  # by the caller: a count has no negative values
    uniques = _check_informative(name, values)
    is_cat_dtype = isinstance(s.dtype, pd.CategoricalDtype)
    dtype = str(s.dtype)
    if is_datetime(s.dtype) and declared in (None, "continuous", "count"):
        # dates are ordered values: days since 1970-01-01
        days = days_since_epoch(values).to_numpy(dtype=float)
        whole = _is_integral(days)
        return ColumnSchema(name=name, type=declared or "continuous", dtype=dtype,
                            integer=whole, decimals=0 if whole else None,
                            time_unit=None if whole else _time_unit(days))
    numeric = pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)
    if numeric:  # before the type is decided: 0.5 and inf alone would make it "binary"
        _refuse_infinite(name, values)

    if declared is None:
        declares_more = is_cat_dtype and len(s.cat.categories) > 2  # keep them in the output
        if pd.api.types.is_bool_dtype(s.dtype) or (len(uniques) == 2 and not declares_more):
            declared = "binary"
        elif is_cat_dtype:
            declared = "ordinal" if s.cat.ordered else "categorical"
        elif numeric:
            x = values.to_numpy(dtype=float)
            _refuse_numeric_identifier(name, values, x)
            codes = _special_codes(x) if declared_codes is None else declared_codes
            rest = x[~np.isin(x, codes)]
            n_rest = len(np.unique(rest))
            if not _is_integral(rest) and n_rest <= FEW_VALUES:
                declared = "ordinal"  # a float column with few distinct values is discrete
            elif _is_integral(rest) and len(rest) and rest.min() >= 0:
                declared = "count"
            else:
                declared = "continuous"
        else:
            if len(uniques) == len(values) and len(values) >= MIN_ROWS:
                raise IdentifierColumnError(
                    f"Column '{name}' has {len(uniques)} distinct values in {len(values)} rows: "
                    "it looks like an identifier. Drop it (identifiers must not be modelled or "
                    "released), or, if it really is a category, declare it with "
                    f"categorical=['{name}'].",
                    column=name,
                )
            _warn_numbers_with_markers(name, values)
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
    codes: tuple = ()
    integer = False
    decimals = digits = None
    if declared in NUMERIC_TYPES and numeric:
        x = values.to_numpy(dtype=float)
        if declared_codes is None:
            found, counts = _code_candidates(x)
            # declared a count, the column cannot hold negative numbers: codes however rare
            if len(found) and counts.max() < MIN_CODE_RECORDS and not said_count:
                _warn_rare_codes(name, found, counts)
                found = found[:0]
        else:
            found = np.asarray(declared_codes, dtype=float)
        codes = tuple(int(c) if float(c).is_integer() else float(c) for c in found)
        rest = x[~np.isin(x, codes)]
        integer = bool(len(rest) and _is_integral(rest))
        decimals = 0 if integer else _decimals(rest)
        digits = _significant(rest) if decimals is None else None
    if declared == "ordinal" and numeric and not is_cat_dtype:
        ordered = True
    return ColumnSchema(name=name, type=declared, levels=levels, dtype=dtype, ordered=ordered,
                        special_codes=codes, integer=integer, decimals=decimals,
                        digits=digits)


def infer_schema(
    df: pd.DataFrame,
    *,
    categorical: Iterable[str] = (),
    ordinal: Iterable[str] = (),
    binary: Iterable[str] = (),
    count: Iterable[str] = (),
    continuous: Iterable[str] = (),
    special_codes: Mapping[str, Iterable[float]] | None = None,
    suggest: bool = True,
) -> Schema:
    """Infer the type of every column of ``df``, read survey codes, and suggest rules.

    Rules, applied to each column's non-missing values unless a keyword list names the column:

    * a bool column, or any column with exactly two distinct values, is ``binary``;
    * an ordered pandas categorical is ``ordinal``; an unordered one is ``categorical``;
    * strings (object or string dtype) are ``categorical``; a string column whose values are all
      distinct raises :class:`~bayesynth.errors.IdentifierColumnError`, and so does a column of
      distinct whole numbers that are consecutive or sorted in the file's order (a record
      number, such as the index ``to_csv`` writes); a string column of numbers save a few
      markers (``"NA"``, ``"."``) is ``categorical`` with a warning that names the markers;
    * numbers that are all non-negative integers are ``count``; other numbers are
      ``continuous``; but a non-integer numeric column with at most 10 distinct values is
      ``ordinal`` (discrete: its values come back exactly);
    * in a numeric column, up to three distinct negative integers (from -999 to -1) beside
      otherwise non-negative values are read as *special codes* (-8 "not applicable", -9
      "refused" ...) when at least one of them is held by five records or more: they are
      recorded in ``special_codes``, modelled as levels of their own and not as numbers, and
      the column's type follows from its other values (so a count with the code -8 is a count).
      Where all are rarer (a sample of a survey file with -8 in two records, or a lone loss
      of -3), they are read as numbers, with a warning that names them and says how to
      declare them (``special_codes=``), except in a column declared ``count``, which cannot
      hold negative numbers: there they are codes. A column read as ordinal (above) keeps
      negative values as its lowest levels, codes or not;
    * a numeric column records whether its values (codes aside) are whole numbers
      (``integer``) and how many decimal places they carry (``decimals``; beyond six, how
      many significant digits: ``digits``), which synthetic values keep.

    With ``suggest=True`` near-deterministic patterns between columns (a level of one column
    after which another takes one value in at least 99% of the records, such as a cigarette
    count of -8 for every non-smoker) are listed in ``schema.suggested_rules``. They are not
    applied: move the ones you accept into the schema's rules (``schema.with_rules(...)`` or
    the ``"rules"`` list of its JSON).

    Ordinal columns keep their type here; the copula model treats ordinal columns with few levels
    (fewer than 10 by default) as unordered categorical, as Feldman & Kowal recommend.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. It is not modified.
    categorical, ordinal, binary, count, continuous : iterable of str
        Column names forced to that type (overriding inference).
    special_codes : mapping of str to iterable of numbers, optional
        The special codes of numeric columns, overriding their detection: ``{"nofriend": [-8]}``
        reads -8 as a code however few records hold it (a declared code that no record holds
        is kept: the schema describes the file, not this sample); an empty list reads the
        column's negative values as numbers. Declared codes replace the column's detection
        (and its warning) altogether. The column's type follows from its other values,
        unless a keyword list above declares it; a column read or declared as binary,
        categorical or ordinal (two distinct values, a code among them) keeps the code as one
        of its levels.
    suggest : bool, default True
        Look for rules to suggest (:func:`bayesynth.rules.suggest_rules`).

    Returns
    -------
    Schema

    Raises
    ------
    bayesynth.errors.MissingColumnError
        A keyword list or ``special_codes`` names a column that ``df`` lacks.
    bayesynth.errors.SchemaError
        A column is named in two keyword lists, or ``special_codes`` names a column that is
        not numeric or gives a code that is not a finite number.
    bayesynth.errors.ConstantColumnError, bayesynth.errors.IdentifierColumnError,
    bayesynth.errors.ColumnTypeError
        A column cannot be modelled.
    """
    _check_frame(df, min_rows=2)  # one record: every column would read as constant
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
    codes = _declared_codes(df, special_codes or {})
    columns = []
    for c in df.columns:  # a loop, not a comprehension: warnings point at the caller's line
        columns.append(_infer_one(df[c], declared.get(c), codes.get(c)))
    suggested = suggest_rules(df) if suggest else []
    return Schema(columns, (), suggested)


def _declared_codes(df: pd.DataFrame, special_codes: Mapping[str, Iterable[float]]
                    ) -> dict[Any, tuple[float, ...]]:
    """Check ``infer_schema``'s ``special_codes`` against ``df`` and return them as floats."""
    if not isinstance(special_codes, Mapping):
        raise SchemaError("special_codes must map column names to lists of codes, such as "
                          f"{{'nofriend': [-8]}}; got {type(special_codes).__name__}.")
    out: dict[Any, tuple[float, ...]] = {}
    for name, codes in special_codes.items():
        if name not in df.columns:
            raise MissingColumnError(
                f"special_codes names column '{name}', which the table does not have. Its "
                f"columns are {list(df.columns)}.", column=str(name))
        s = df[name]
        if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            raise SchemaError(
                f"special_codes names column '{name}', which is not numeric ({s.dtype}): "
                "special codes belong to count and continuous columns. In a text column a "
                "code is a level already.", column=str(name))
        if isinstance(codes, (str, bytes)) or not isinstance(codes, Iterable):
            codes = [codes]
        vals = []
        for c in codes:
            try:
                v = float(c)
            except (TypeError, ValueError):
                v = np.nan
            if isinstance(c, (bool, np.bool_, str, bytes)) or not np.isfinite(v):
                raise SchemaError(
                    f"special_codes gives column '{name}' the code {c!r}; a code is a finite "
                    "number, such as -8.", column=str(name))
            vals.append(v)
        out[name] = tuple(sorted(set(vals)))
    return out


# ---------------------------------------------------------------------------------- validation


def _refuse_infinite(name: str, values: pd.Series) -> None:
    """Raise when a numeric column's observed values include +-inf."""
    n_inf = int(np.isinf(values.to_numpy(dtype=float)).sum())
    if n_inf:
        raise NonFiniteValueError(
            f"Column '{name}' holds {n_inf} infinite value(s). Replace them (for example by "
            "NaN, which bayesynth imputes) before synthesis.",
            column=name,
        )


_COLUMN_KEYS = frozenset({"name", "type", "levels", "dtype", "ordered", "special_codes",
                          "integer", "decimals", "digits", "formula", "time_unit"})
_SCHEMA_KEYS = frozenset({"format", "version", "columns", "rules", "suggested_rules"})


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
    odd = [c for c in df.columns if not isinstance(c, str)]
    if odd:
        raise SchemaError(
            f"Column names must be text; got {odd[:5]} (a frame built from an array has numbered "
            "columns). Name them, e.g. df.columns = df.columns.astype(str).")
    for c in df.columns:
        col = df[c]
        if col.dtype != object:
            continue
        kinds = set(col.dropna().map(type).unique())  # unique() itself would merge 1 and True
        has_bool = bool(kinds & {bool, np.bool_})
        if has_bool and any(issubclass(k, (int, float, np.number)) and k not in (bool, np.bool_)
                            for k in kinds):
            raise SchemaError(
                f"Column '{c}' mixes True/False with numbers; Python counts True as 1 and False "
                "as 0, so they would merge into one level. Make it one type, e.g. "
                f"df['{c}'] = df['{c}'].astype(str).", column=str(c))


def validate_data(df: Any, schema: Schema, *, min_rows: int = MIN_ROWS,
                  rule_max_broken: float = 0.01) -> None:
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
    rule_max_broken : float, default 0.01
        Largest share of the records meeting a rule's condition that may break the rule
        (:func:`bayesynth.rules.check_rules`).

    Raises
    ------
    bayesynth.errors.DataValidationError
        Subclasses say what is wrong: not a DataFrame, empty, too few rows, constant column,
        infinite values, values that do not fit the declared type, unknown levels.
    bayesynth.errors.MissingColumnError
        The schema names a column the table lacks, or the table has a column the schema lacks.
    bayesynth.errors.SchemaError
        The data break one of the schema's rules for more than ``rule_max_broken`` of the
        records it covers.
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
    for name in schema.derived:
        check_formula(df, schema[name])
    if schema.rules:
        check_rules(df, schema.rules, max_broken=rule_max_broken)


def _validate_column(s: pd.Series, col: ColumnSchema) -> None:
    name = col.name
    _check_supported_dtype(s)
    values = s.dropna()
    if len(values) == 0:
        _check_informative(name, values)
    if col.type in NUMERIC_TYPES and is_datetime(s.dtype):
        _check_informative(name, values)
        return
    if col.type in NUMERIC_TYPES:
        if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            raise ColumnTypeError(
                f"Column '{name}' is declared {col.type} but holds {s.dtype} values "
                f"(for example {values.iloc[0]!r}). Convert it to numbers or declare it "
                "categorical.",
                column=name,
            )
        _refuse_infinite(name, values)
        x = values.to_numpy(dtype=float)
        x = x[~np.isin(x, list(col.special_codes))] if col.special_codes else x
        inside = [c for c in col.special_codes if len(x) and x.min() < float(c) < x.max()]
        if inside:
            warnings.warn(
                f"Column '{name}': special code(s) {[_plain(c) for c in inside]} lie inside the "
                f"range of its values ({_plain(x.min())} to {_plain(x.max())}). Every record "
                "holding such a value is read as the code, never as that amount, and synthetic "
                "amounts may come out next to it; if it is also a real amount, recode the "
                "special code to a value outside the range.", UserWarning, stacklevel=4)
        if col.type == "count" and len(x) and not (_is_integral(x) and x.min() >= 0):
            raise ColumnTypeError(
                f"Column '{name}' is declared count but holds negative or non-integer values "
                f"(minimum {x.min()!r}). Declare it continuous.",
                column=name,
            )
        _check_informative(name, values)
        return
    assert col.levels is not None
    if pd.api.types.is_float_dtype(s.dtype):
        _refuse_infinite(name, values)
    uniques = _check_informative(name, values)
    known = set(col.levels)
    unknown = [_plain(v) for v in uniques if _plain(v) not in known]
    if unknown:
        raise UnknownLevelError(
            f"Column '{name}' holds value(s) {unknown[:5]} that its schema does not list "
            f"(levels {list(col.levels)[:10]}). Add them to the schema's levels.",
            column=name,
        )


def not_modelled(df: pd.DataFrame, schema: Schema) -> list[str]:
    """List the columns a model of the table leaves out.

    These are the columns derived by a formula, and those fixed by rules for every record of
    the data: the synthesizers fill them after synthesis (the rules, then the formulas), so a
    model that also fitted them would count the deterministic relation as data.

    Parameters
    ----------
    df : pandas.DataFrame
        The data.
    schema : Schema
        Its schema, with the rules and formulas.

    Returns
    -------
    list of str
        The derived columns, then the rule-fixed ones in schema order.
    """
    out = list(schema.derived)
    for c in schema.names:
        if c not in out and schema.rules and rule_mask(df, schema.rules, c).all():
            out.append(c)
    return out


def modelled_schema(df: pd.DataFrame, schema: Schema, *, exclude: Sequence[str] = ()
                    ) -> Schema:
    """Return the part of ``schema`` a joint model of the table fits.

    The columns of :func:`not_modelled` and those in ``exclude`` (for example the BART targets
    of :class:`~bayesynth.synthesis.CopulaSynthesizer`, modelled apart) are left out, with the
    rules that name them.

    Parameters
    ----------
    df : pandas.DataFrame
        The data.
    schema : Schema
        Its full schema.
    exclude : sequence of str, optional
        More columns to leave out.

    Returns
    -------
    Schema
        The modelled columns in schema order, and the rules among them.

    Raises
    ------
    bayesynth.errors.SchemaError
        A rule fixes a modelled column on a condition that reads a column left out: the model
        would fit the rule's records as observed while synthesis sets them by the rule, so the
        fixed value would be counted twice (state the condition on the modelled columns it
        comes from, e.g. age instead of an age group); or no column is left.
    """
    skipped = set(not_modelled(df, schema)) | set(exclude)
    keep = [c for c in schema.names if c not in skipped]
    if not keep:
        raise SchemaError("No column is left to model: every column is derived by a formula, "
                          "fixed by rules or modelled apart.")
    for r in schema.rules:
        outside = [c for c, _ in r.when if c not in keep]
        if r.column in keep and outside:
            # the model would fit the rule's records as observed, while synthesis sets them
            # by the rule: the fixed value would be counted twice (a rule on a rule-derived
            # age group raised a zero-income share of 0.14 to 0.25)
            raise SchemaError(
                f"The rule {r!r} reads '{outside[0]}', which the copula does not model "
                "(derived by a formula, fixed by rules, or a BART target), for a column it "
                "does model. State the condition on the modelled columns it comes from "
                "(e.g. age instead of an age group).", column=outside[0])
    return Schema([schema[c] for c in keep],
                  [r for r in schema.rules if {r.column, *(c for c, _ in r.when)} <= set(keep)])


def evaluate_formula(df: pd.DataFrame, col: ColumnSchema) -> pd.Series:
    """Compute the values of a derived column from the other columns of ``df``.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    col : ColumnSchema
        The derived column (with ``formula``, a :meth:`pandas.DataFrame.eval` expression).

    Returns
    -------
    pandas.Series
        One value per record.

    Raises
    ------
    bayesynth.errors.SchemaError
        The expression cannot be evaluated (it names an unknown column, or is not valid).
    """
    try:
        out = df.eval(col.formula)
    except Exception as err:  # noqa: BLE001 - pandas raises many kinds
        raise SchemaError(f"The formula of column '{col.name}' ({col.formula!r}) cannot be "
                          f"evaluated: {err}.", column=col.name) from None
    if not isinstance(out, pd.Series) or len(out) != len(df):
        raise SchemaError(f"The formula of column '{col.name}' ({col.formula!r}) does not give "
                          "one value per record.", column=col.name)
    return out


def check_formula(df: pd.DataFrame, col: ColumnSchema, *, max_broken: float = 0.01) -> None:
    """Check that a derived column's formula reproduces the column in ``df``.

    Values agree when both are missing or when they differ by at most half a unit of the
    column's last decimal place (relative 1e-9 when its decimals are not known).

    Parameters
    ----------
    df : pandas.DataFrame
        The table, with ``col`` and the columns its formula uses.
    col : ColumnSchema
        The derived column.
    max_broken : float, default 0.01
        Largest share of the records that may disagree.

    Raises
    ------
    bayesynth.errors.SchemaError
        More than ``max_broken`` of the records disagree, the column is not count or
        continuous, or the formula cannot be evaluated.
    """
    if col.type not in NUMERIC_TYPES:
        raise SchemaError(f"Column '{col.name}' has a formula but is {col.type}; formulas "
                          "derive count and continuous columns.", column=col.name)
    got = pd.to_numeric(evaluate_formula(df, col), errors="coerce").to_numpy(float)
    real = pd.to_numeric(df[col.name], errors="coerce").to_numpy(float)
    tol = 0.5 * 10.0 ** -col.decimals if col.decimals is not None else 1e-9 * np.abs(real)
    same = (np.isnan(got) & np.isnan(real)) | (np.abs(got - real) <= tol + 1e-12)
    bad = int((~same).sum())
    if bad > max_broken * len(df):
        raise SchemaError(
            f"The formula of column '{col.name}' ({col.formula!r}) does not reproduce it for "
            f"{bad} of {len(df)} records. Fix the formula or remove it.", column=col.name)


def encode_levels(s: pd.Series, col: ColumnSchema) -> np.ndarray:
    """Integer codes of a level-valued column (index into ``col.levels``; -1 for missing)."""
    assert col.levels is not None
    lookup = {v: i for i, v in enumerate(col.levels)}
    out = np.full(len(s), -1, dtype=np.int64)
    mask = s.notna().to_numpy()
    vals = s.to_numpy(dtype=object)[mask]
    out[mask] = [lookup[_plain(v)] for v in vals]
    return out

