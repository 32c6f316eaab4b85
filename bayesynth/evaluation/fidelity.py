"""Marginal and cross-tabulation fidelity of synthetic data (pure functions over DataFrames).

These are the quick checks the command line prints after synthesis; the full utility suite
(ECDF averages, propensity scores, regression inference) builds on them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["ks_distance", "tv_distance", "marginal_fidelity", "crosstab_comparison"]


def ks_distance(real: np.ndarray | pd.Series, synthetic: np.ndarray | pd.Series) -> float:
    """Largest absolute difference between the two empirical CDFs (two-sample KS statistic).

    Missing values are ignored. Evaluated over the pooled values, so ties are handled exactly.
    """
    x = np.asarray(pd.Series(real).dropna(), dtype=float)
    y = np.asarray(pd.Series(synthetic).dropna(), dtype=float)
    if len(x) == 0 or len(y) == 0:
        return float("nan")
    grid = np.union1d(x, y)
    fx = np.searchsorted(np.sort(x), grid, side="right") / len(x)
    fy = np.searchsorted(np.sort(y), grid, side="right") / len(y)
    return float(np.max(np.abs(fx - fy)))


def tv_distance(real: pd.Series | np.ndarray, synthetic: pd.Series | np.ndarray) -> float:
    """Total variation distance between the level frequencies (missing counted as a level)."""
    p = pd.Series(real).astype(object).fillna("<NA>").value_counts(normalize=True)
    q = pd.Series(synthetic).astype(object).fillna("<NA>").value_counts(normalize=True)
    p, q = p.align(q, fill_value=0.0)
    return float(0.5 * np.abs(p - q).sum())


def marginal_fidelity(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema=None
) -> pd.DataFrame:
    """Per-column distance between real and synthetic marginals.

    Numeric columns (count, continuous; numbers when no schema is given) get the KS distance
    (max-ECDF), level columns the total variation distance; both get the difference in missing
    share.

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        Tables with the same columns.
    schema : bayesynth.Schema, optional
        Column types; without it, numeric dtypes are numeric and the rest levels.

    Returns
    -------
    pandas.DataFrame
        Indexed by column, with ``type``, ``metric`` ("ks" or "tv"), ``distance`` and
        ``missing_diff``.
    """
    rows = []
    for col in real.columns:
        if schema is not None:
            typ = schema[col].type
            numeric = typ in ("count", "continuous")
        else:
            typ = str(real[col].dtype)
            numeric = pd.api.types.is_numeric_dtype(real[col]) and not isinstance(
                real[col].dtype, pd.CategoricalDtype)
        if numeric:
            metric, dist = "ks", ks_distance(real[col], synthetic[col])
        else:
            metric, dist = "tv", tv_distance(real[col], synthetic[col])
        rows.append({
            "column": col,
            "type": typ,
            "metric": metric,
            "distance": dist,
            "missing_diff": float(synthetic[col].isna().mean() - real[col].isna().mean()),
        })
    return pd.DataFrame(rows).set_index("column")


def crosstab_comparison(
    real: pd.DataFrame, synthetic: pd.DataFrame, columns: Sequence[str]
) -> tuple[pd.DataFrame, float]:
    """Joint relative frequencies of two level columns, real beside synthetic.

    Returns
    -------
    table : pandas.DataFrame
        One row per cell with ``real``, ``synthetic`` and ``difference``.
    max_abs_diff : float
        The largest absolute cell difference.
    """
    if len(columns) != 2:
        raise ValueError(f"crosstab_comparison takes two columns; got {list(columns)}.")
    a, b = columns

    def freq(df: pd.DataFrame) -> pd.Series:
        keys = [df[a].astype(object).fillna("<NA>"), df[b].astype(object).fillna("<NA>")]
        return pd.Series(1.0, index=pd.MultiIndex.from_arrays(keys)).groupby(level=[0, 1]).sum(
        ) / len(df)

    r, s = freq(real).align(freq(synthetic), fill_value=0.0)
    table = pd.DataFrame({"real": r, "synthetic": s})
    table["difference"] = table["synthetic"] - table["real"]
    table.index.names = [a, b]
    return table, float(table["difference"].abs().max())
