"""Finishing a synthetic table: dtypes restored, rules enforced, derived columns computed."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from bayesynth.rules import apply_rules, rule_mask
from bayesynth.schema import (
    ColumnSchema,
    Schema,
    evaluate_formula,
    from_days,
    is_datetime,
    not_modelled,
    round_values,
)

__all__ = ["not_modelled", "finish"]


def _round(values: pd.Series, col: ColumnSchema) -> np.ndarray:
    return round_values(pd.to_numeric(values, errors="coerce").to_numpy(float), col)


def finish(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Add the columns that were not modelled, enforce the rules, compute derived columns.

    Columns absent from ``frame`` start missing; columns whose real values were written with
    a number of significant digits (``ColumnSchema.digits``) are rounded to it; rules are
    applied, then formulas (rounded to each column's precision), then the rules again (a
    rule may name a derived column).

    Parameters
    ----------
    frame : pandas.DataFrame
        A synthetic table with the modelled columns.
    schema : Schema
        The source table's schema.

    Returns
    -------
    pandas.DataFrame
        A new table with every schema column, in schema order.
    """
    out = frame.copy()
    n = len(out)
    added = [c for c in schema.names if c not in out]
    for c in added:
        out[c] = _restore(np.full(n, None, dtype=object), schema[c])
    for c in schema.names:  # decimals and whole numbers are kept where values are drawn
        if schema[c].digits is not None and c not in added:
            out[c] = _restore(_round(out[c], schema[c]), schema[c])
    if schema.rules:
        out = apply_rules(out, schema.rules)
    for c in schema.derived:
        col = schema[c]
        out[c] = _restore(_round(evaluate_formula(out, col), col), col)
    if schema.rules and schema.derived:
        out = apply_rules(out, schema.rules)
    for c in added:
        if c in schema.derived:
            continue
        left = ~rule_mask(out, schema.rules, c) if schema.rules else np.ones(n, dtype=bool)
        if left.any():  # fixed by rules for every real record, but not for these
            warnings.warn(
                f"Column '{c}' is set by rules only (they cover every real record), but "
                f"{int(left.sum())} synthetic records meet none of its rules and are left "
                "missing: synthetic records can combine values the real ones do not. Add a "
                "rule for them, or drop its rules to let the model synthesize the column.",
                RuntimeWarning, stacklevel=2)
    for c in added:  # filled by rules or formulas: back to the source dtype when complete
        if out[c].notna().all() and schema[c].dtype and not is_datetime(schema[c].dtype):
            try:
                out[c] = out[c].astype(schema[c].dtype)
            except (TypeError, ValueError):
                pass
    return out[schema.names]


def _restore(values: np.ndarray, col: ColumnSchema) -> pd.Series:
    """Give synthetic values the dtype (and categories) of the source column."""
    dtype = col.dtype or "object"
    if is_datetime(dtype):
        return from_days(values, dtype, col.time_unit)
    if dtype == "category":
        return pd.Series(pd.Categorical(values, categories=list(col.levels),
                                        ordered=col.ordered))
    s = pd.Series(values)
    try:
        target = pd.api.types.pandas_dtype(dtype)
        if (pd.api.types.is_integer_dtype(target) and s.isna().any()
                and not isinstance(target, pd.api.extensions.ExtensionDtype)):
            # a numpy integer column cannot hold missing values: its nullable version
            # (int8 -> Int8); a nullable source dtype (Int8, UInt16) is kept as it is
            return s.astype(target.name.capitalize().replace("Uint", "UInt"))
        return s.astype(target)
    except (TypeError, ValueError):
        return s
