"""Values written one way, whatever their dtype, for comparing records across tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["as_text"]


def number_text(v: float) -> str:
    """Write a number one way whatever its dtype: 1, 1.0 and True as "1", 2.5 as "2.5".

    Whole numbers below 2**53 without a decimal point (above it a float is not exact, so it
    keeps its float form); others in Python's shortest round-trip form.
    """
    x = float(v)
    return str(int(x)) if x.is_integer() and abs(x) < 2.0**53 else repr(x)


def as_text(s: pd.Series) -> pd.Series:
    """Return a column's values as text, numbers written one way whatever their dtype.

    1, 1.0, np.int64(1) and True all become "1" (and 2.5 "2.5"), so a record matches its copy
    stored with another numeric dtype (an integer column written back as float, a categorical
    of numbers); missing values become "<NA>".

    Parameters
    ----------
    s : pandas.Series
        Any column.

    Returns
    -------
    pandas.Series
        Object dtype, same index.
    """
    def one(v: Any) -> str:
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            return "<NA>"
        if isinstance(v, (bool, np.bool_, int, np.integer, float, np.floating)):
            return number_text(v)
        return str(v)

    return pd.Series([one(v) for v in s.astype(object).to_numpy()], index=s.index,
                     dtype=object)
