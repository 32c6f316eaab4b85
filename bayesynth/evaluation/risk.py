"""Disclosure risk of synthetic data: identification, attribute disclosure, distance to records.

References
----------
Reiter, J. P. and Mitra, R. (2009). Estimating risks of identification disclosure in partially
synthetic data. *Journal of Privacy and Confidentiality*, 1(1).
Hornby, R. and Hu, J. (2021). Identification risks evaluation of partially synthetic data with
the IdentificationRiskCalculation R package. *Transactions on Data Privacy*, 14, 37-52.
Feldman, J. and Kowal, D. R. (2022), section 6.4 (attribute disclosure at outlying records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

__all__ = [
    "IdentificationRisk",
    "identification_risk",
    "identification_risk_sweep",
    "outlier_attribute_disclosure",
    "DistanceToClosestRecord",
    "distance_to_closest_record",
]


@numba.njit(cache=True)
def _match_counts(rg, rx, rad, sg, sx, order, gstart, gend, own_ok):  # pragma: no cover
    """c_i and T_i for every real record i.

    rg: group id of each real record (-1: no synthetic record has it); rx (n, d) real values;
    rad (n, d) half-widths; sg/sx synthetic groups and values; order: synthetic indices sorted by
    (group, first value); gstart/gend: slice of ``order`` per group; own_ok[i]: whether synthetic
    record i exists and shares record i's group.
    """
    n, d = rx.shape
    c = np.zeros(n, dtype=np.int64)
    T = np.zeros(n, dtype=np.int64)
    for i in range(n):
        g = rg[i]
        if g < 0:
            continue
        lo = gstart[g]
        hi = gend[g]
        if d == 0:
            c[i] = hi - lo
        else:
            # binary search for the first candidate with value >= x_i0 - r_i0
            left = rx[i, 0] - rad[i, 0]
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                if sx[order[mid], 0] < left:
                    a = mid + 1
                else:
                    b = mid
            right = rx[i, 0] + rad[i, 0]
            count = 0
            r = a
            while r < hi and sx[order[r], 0] <= right:
                j = order[r]
                ok = True
                for t in range(1, d):
                    if not abs(sx[j, t] - rx[i, t]) <= rad[i, t]:  # NaN never matches
                        ok = False
                        break
                if ok:
                    count += 1
                r += 1
            c[i] = count
        if own_ok[i]:
            ok = True
            for t in range(d):
                if not abs(sx[i, t] - rx[i, t]) <= rad[i, t]:
                    ok = False
                    break
            if ok:
                T[i] = 1
    return c, T


@dataclass
class IdentificationRisk:
    """Identification risk of real records against m synthetic datasets.

    Attributes
    ----------
    ir : numpy.ndarray, shape (m, n)
        Record-level risk IR_i = T_i / c_i (0 when c_i = 0), per synthetic dataset.
    c, T : numpy.ndarray, shape (m, n)
        Matches and true-match indicators.
    per_dataset : pandas.DataFrame
        One row per synthetic dataset: ``risk`` (file level, sum of IR_i), ``true_match_rate``
        and ``false_match_rate``.
    summary : pandas.DataFrame
        Mean, sd, min and max of those over the datasets.
    """

    ir: np.ndarray
    c: np.ndarray
    T: np.ndarray
    per_dataset: pd.DataFrame
    summary: pd.DataFrame

    @property
    def risk(self) -> float:
        """File-level risk averaged over the synthetic datasets."""
        return float(self.per_dataset["risk"].mean())


def _group_codes(real: pd.DataFrame, syn: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
    """One integer per record of ``real`` then ``syn``, equal when all ``cols`` are equal
    (missing values form their own level). Column-wise factorisation, no Python tuples."""
    n_total = len(real) + len(syn)
    combined = np.zeros(n_total, dtype=np.int64)
    for c in cols:
        both = pd.concat([real[c], syn[c]], ignore_index=True)
        codes, uniques = pd.factorize(both, use_na_sentinel=False)
        combined = combined * (len(uniques) + 1) + codes
        combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)  # stay small
    return combined


def _radii(real: pd.DataFrame, cont: Sequence[str], radius, radius_type: str) -> np.ndarray:
    n = len(real)
    out = np.empty((n, len(cont)))
    for t, col in enumerate(cont):
        r = radius[col] if isinstance(radius, Mapping) else radius
        x = real[col].to_numpy(float)
        out[:, t] = r * np.abs(x) if radius_type == "percent" else np.full(n, float(r))
    return out


def identification_risk(
    real: pd.DataFrame,
    synthetic: pd.DataFrame | Sequence[pd.DataFrame],
    *,
    known: Sequence[str] = (),
    synthesized: Sequence[str] = (),
    radius: float | Mapping[str, float] = 0.05,
    radius_type: str = "percent",
    schema=None,
) -> IdentificationRisk:
    """Identification disclosure risk of partially synthetic data (Hornby & Hu 2021).

    For each real record i and synthetic dataset: c_i is the number of synthetic records that
    equal record i on the ``known`` (unsynthesised) variables and on the synthesised categorical
    variables, and lie within the radius of i's real value on every synthesised continuous
    variable; T_i = 1 when record i's own synthetic version (same row position) is among them;
    ``IR_i = T_i / c_i`` (0 when c_i = 0). File-level risk is ``sum_i IR_i``; the true-match rate
    is the share of records with c_i = 1 and T_i = 1, the false-match rate the share of records
    with c_i = 1 that have T_i = 0 (Reiter & Mitra 2009).

    Parameters
    ----------
    real : pandas.DataFrame
    synthetic : DataFrame or list of DataFrame
        Partially synthetic versions, row i standing for real row i.
    known, synthesized : sequence of str
        Unsynthesised variables the intruder knows (matched exactly) and synthesised variables
        (categorical ones matched exactly, continuous ones within the radius).
    radius : float or mapping
        Half-width of the matching interval, one value or one per continuous variable.
    radius_type : {"percent", "absolute"}
        ``"percent"``: a share of the real value, ``[x_i (1 - r), x_i (1 + r)]`` (default, as the
        paper recommends); ``"absolute"``: ``[x_i - r, x_i + r]``.
    schema : bayesynth.Schema, optional
        Tells which synthesised variables are continuous (otherwise: numeric dtypes with more than
        two values).

    Returns
    -------
    IdentificationRisk

    Notes
    -----
    Records are grouped on their categorical key and sorted within groups on the first continuous
    variable; each record's candidates come from a binary search, so the work is n log n plus
    the number of candidates, not n^2.
    """
    from bayesynth.evaluation.utility import numeric_columns

    syns = [synthetic] if isinstance(synthetic, pd.DataFrame) else list(synthetic)
    if radius_type not in ("percent", "absolute"):
        raise ValueError(f"radius_type must be 'percent' or 'absolute'; got {radius_type!r}.")
    known, synthesized = list(known), list(synthesized)
    for col in known + synthesized:
        if col not in real.columns:
            raise KeyError(f"Column '{col}' is not in the real data.")
    num = set(numeric_columns(real[synthesized], schema)) if synthesized else set()
    cont = [c for c in synthesized if c in num]
    catkey = known + [c for c in synthesized if c not in num]
    rad = _radii(real, cont, radius, radius_type)
    rx = real[cont].to_numpy(float) if cont else np.zeros((len(real), 0))
    m, n = len(syns), len(real)
    IR, C, T = (np.zeros((m, n)) for _ in range(3))
    rows = []
    for k, s in enumerate(syns):
        codes = _group_codes(real, s, catkey)
        rg, sg = codes[:n].astype(np.int64), codes[n:].astype(np.int64)
        sx = s[cont].to_numpy(float) if cont else np.zeros((len(s), 0))
        first = sx[:, 0] if cont else np.zeros(len(s))
        order = np.lexsort((first, sg)).astype(np.int64)
        G = int(codes.max()) + 1 if len(codes) else 0
        gstart = np.searchsorted(sg[order], np.arange(G), side="left").astype(np.int64)
        gend = np.searchsorted(sg[order], np.arange(G), side="right").astype(np.int64)
        present = np.zeros(G, dtype=bool)
        present[np.unique(sg)] = True
        rg_eff = np.where(present[rg], rg, -1)
        own = np.zeros(n, dtype=bool)
        k_own = min(n, len(s))
        own[:k_own] = rg[:k_own] == sg[:k_own]
        c, t = _match_counts(rg_eff, rx, rad, sg, sx, order, gstart, gend, own)
        ir = np.where(c > 0, t / np.maximum(c, 1), 0.0)
        IR[k], C[k], T[k] = ir, c, t
        unique = c == 1
        rows.append({
            "dataset": k,
            "risk": float(ir.sum()),
            "true_match_rate": float(np.mean(unique & (t == 1))),
            "false_match_rate": float(np.mean(t[unique] == 0)) if unique.any() else 0.0,
        })
    per = pd.DataFrame(rows).set_index("dataset")
    summary = per.agg(["mean", "std", "min", "max"])
    return IdentificationRisk(ir=IR, c=C, T=T, per_dataset=per, summary=summary)


def identification_risk_sweep(
    real: pd.DataFrame,
    synthetic: pd.DataFrame | Sequence[pd.DataFrame],
    *,
    known: Sequence[str] = (),
    synthesized: Sequence[str] = (),
    radii: Sequence[float] = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3),
    radius_type: str = "percent",
    schema=None,
) -> tuple[pd.DataFrame, float]:
    """File-level identification risk over a grid of radii (the same radius for every variable).

    Hornby & Hu recommend reporting the risk at the radius that maximises it.

    Returns
    -------
    table : pandas.DataFrame
        One row per (radius, dataset) with ``risk``, ``true_match_rate``, ``false_match_rate``.
    best_radius : float
        The radius with the largest mean file-level risk.
    """
    parts = []
    for r in radii:
        res = identification_risk(real, synthetic, known=known, synthesized=synthesized,
                                  radius=r, radius_type=radius_type, schema=schema)
        parts.append(res.per_dataset.reset_index().assign(radius=r))
    table = pd.concat(parts, ignore_index=True)[
        ["radius", "dataset", "risk", "true_match_rate", "false_match_rate"]]
    best = float(table.groupby("radius")["risk"].mean().idxmax())
    return table, best


def outlier_attribute_disclosure(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    public: str,
    sensitive: str,
    k: int = 50,
) -> dict[str, float]:
    """Attribute disclosure at outlying values of a public variable (Feldman & Kowal 2022, 6.4).

    The records at the ``k`` lowest and ``k`` highest order statistics of ``public`` are taken in
    the real and in the synthetic data (ties broken by row order) and paired by rank. For a
    numeric ``sensitive`` variable the statistic is the R^2 of regressing the real sensitive
    values on the synthetic ones (the squared correlation); for a categorical one the accuracy of
    predicting each real value by its synthetic counterpart. Near 0 (numeric) or near the
    base rate (categorical) is safe.

    Returns
    -------
    dict
        ``{"statistic": ..., "kind": "r2" or "accuracy", "n_pairs": 2k}`` (plus ``"base_rate"``,
        the accuracy of always predicting the most frequent real value, for categorical).
    """
    def extremes(df: pd.DataFrame) -> pd.Series:
        d = df[[public, sensitive]].dropna()
        order = np.argsort(d[public].to_numpy(float), kind="stable")
        idx = np.r_[order[:k], order[-k:]] if len(order) >= 2 * k else order
        return d[sensitive].iloc[idx].reset_index(drop=True)

    r, s = extremes(real), extremes(synthetic)
    n = min(len(r), len(s))
    r, s = r.iloc[:n], s.iloc[:n]
    numeric = (pd.api.types.is_numeric_dtype(real[sensitive])
               and not pd.api.types.is_bool_dtype(real[sensitive])
               and real[sensitive].nunique() > 2)
    if numeric:
        rr, ss = r.to_numpy(float), s.to_numpy(float)
        stat = float(np.corrcoef(rr, ss)[0, 1] ** 2) if rr.std() > 0 and ss.std() > 0 else 0.0
        return {"statistic": stat, "kind": "r2", "n_pairs": n}
    acc = float(np.mean(r.astype(object).to_numpy() == s.astype(object).to_numpy()))
    base = float(r.astype(object).value_counts(normalize=True).iloc[0])
    return {"statistic": acc, "kind": "accuracy", "n_pairs": n, "base_rate": base}


@dataclass
class DistanceToClosestRecord:
    """Distances from each synthetic record to the nearest training and hold-out records.

    Attributes
    ----------
    to_train, to_holdout : numpy.ndarray
        Nearest-neighbour distances (standardised numeric columns; one unit per categorical
        mismatch).
    share_closer_to_train : float
        Share of synthetic records strictly closer to the training data than to the hold-out
        data; about n_train / (n_train + n_holdout) when the synthesizer does not memorise
        (0.5 for equal sizes), larger when it copies training records.
    n_identical : int
        Synthetic records equal to some training record on every column.
    """

    to_train: np.ndarray
    to_holdout: np.ndarray
    share_closer_to_train: float
    n_identical: int


def distance_to_closest_record(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    holdout: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    schema=None,
) -> DistanceToClosestRecord:
    """Distance to closest record against a hold-out sample.

    Numeric columns are standardised by the training data's standard deviation (missing values
    set to the training median, with a 0/1 missing indicator); categorical columns are one-hot
    coded and scaled by 1/sqrt(2), so a mismatch adds one unit of squared distance. Euclidean
    nearest neighbours (scikit-learn k-d trees).

    Parameters
    ----------
    train : pandas.DataFrame
        The real records the synthesizer was fitted to.
    synthetic : pandas.DataFrame
    holdout : pandas.DataFrame
        Real records from the same population that the synthesizer did not see.

    Returns
    -------
    DistanceToClosestRecord
    """
    from sklearn.neighbors import NearestNeighbors

    from bayesynth.evaluation.utility import numeric_columns

    cols = list(train.columns if columns is None else columns)
    num = set(numeric_columns(train[cols], schema))

    def encode(df: pd.DataFrame) -> np.ndarray:
        parts = []
        for c in cols:
            if c in num:
                x = df[c].astype(float)
                ref = train[c].astype(float)
                sd = ref.std() or 1.0
                parts.append(((x.fillna(ref.median()) - ref.mean()) / sd).to_numpy()[:, None])
                parts.append(x.isna().to_numpy(float)[:, None])
            else:
                levels = pd.Index(train[c].astype(object).fillna("<NA>").astype(str).unique())
                v = df[c].astype(object).fillna("<NA>").astype(str)
                onehot = (v.to_numpy()[:, None] == levels.to_numpy()[None, :]).astype(float)
                parts.append(onehot / np.sqrt(2.0))
        return np.hstack(parts)

    Xt, Xs, Xh = encode(train), encode(synthetic), encode(holdout)
    d_train = NearestNeighbors(n_neighbors=1).fit(Xt).kneighbors(Xs)[0][:, 0]
    d_hold = NearestNeighbors(n_neighbors=1).fit(Xh).kneighbors(Xs)[0][:, 0]
    key = lambda df: pd.MultiIndex.from_frame(df[cols].astype(object).fillna("<NA>"))  # noqa: E731
    n_ident = int(key(synthetic).isin(key(train)).sum())
    return DistanceToClosestRecord(d_train, d_hold, float(np.mean(d_train < d_hold)), n_ident)
