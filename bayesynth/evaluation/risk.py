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
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import pandas as pd

from bayesynth.errors import InvalidParameterError
from bayesynth.evaluation._values import as_text

__all__ = [
    "IdentificationRisk",
    "identification_risk",
    "identification_risk_sweep",
    "outlier_attribute_disclosure",
    "DistanceToClosestRecord",
    "distance_to_closest_record",
    "AttributeInference",
    "attribute_inference_risk",
    "SinglingOut",
    "SinglingOutNullTest",
    "singling_out_risk",
    "synthetic_kind",
    "kept_columns",
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
                    if not abs(sx[j, t] - rx[i, t]) <= rad[i, t]:  # missing values read 0, radius 0
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
    """Return one integer per record of ``real`` then ``syn``, equal when all ``cols`` are equal.

    Missing values form their own level. Column-wise factorisation, no Python tuples.
    """
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
        if not (np.isfinite(float(r)) and float(r) >= 0):
            raise InvalidParameterError(
                f"The matching radius of '{col}' must be a finite number at least 0 (0: exact "
                f"match); got {r!r}.", column=str(col))
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
    equal record i on the ``known`` (unsynthesized) variables and on the synthesized categorical
    variables, and lie within the radius of i's real value on every synthesized continuous
    variable (a missing value matches only a missing value, on every variable); T_i = 1 when
    record i's own synthetic version (same row position) is among them;
    ``IR_i = T_i / c_i`` (0 when c_i = 0). File-level risk is ``sum_i IR_i``; the true-match rate
    is the share of records with c_i = 1 and T_i = 1, the false-match rate the share of records
    with c_i = 1 that have T_i = 0 (Reiter & Mitra 2009).

    Parameters
    ----------
    real : pandas.DataFrame
    synthetic : DataFrame or list of DataFrame
        Partially synthetic versions, row i standing for real row i.
    known, synthesized : sequence of str
        Unsynthesized variables the intruder knows (matched exactly) and synthesized variables
        (categorical ones matched exactly, continuous ones within the radius).
    radius : float or mapping
        Half-width of the matching interval, one value or one per continuous variable.
    radius_type : {"percent", "absolute"}
        ``"percent"``: a share of the real value, ``[x_i - r |x_i|, x_i + r |x_i|]`` (default, as
        the paper recommends); ``"absolute"``: ``[x_i - r, x_i + r]``.
    schema : bayesynth.Schema, optional
        Tells which synthesized variables are continuous (otherwise: numeric dtypes with more than
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
    # a missing value matches only a missing value: missingness of each continuous variable
    # joins the exact key, and a missing value then reads 0 with radius 0
    miss = [f"\0missing {c}" for c in cont]

    def keyed(df: pd.DataFrame) -> pd.DataFrame:
        flags = pd.DataFrame({f: df[c].isna().to_numpy() for f, c in zip(miss, cont)},
                             index=df.index)
        return pd.concat([df[catkey], flags], axis=1)

    rx = real[cont].to_numpy(float) if cont else np.zeros((len(real), 0))
    rad = np.where(np.isnan(rx), 0.0, rad)
    rx = np.nan_to_num(rx, nan=0.0)
    real_key = keyed(real)
    m, n = len(syns), len(real)
    IR, C, T = (np.zeros((m, n)) for _ in range(3))
    rows = []
    for k, s in enumerate(syns):
        codes = _group_codes(real_key, keyed(s), catkey + miss)
        rg, sg = codes[:n].astype(np.int64), codes[n:].astype(np.int64)
        sx = s[cont].to_numpy(float) if cont else np.zeros((len(s), 0))
        sx = np.nan_to_num(sx, nan=0.0)
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

    Parameters
    ----------
    real : pandas.DataFrame
    synthetic : DataFrame or list of DataFrame
        Partially synthetic versions, row i standing for real row i.
    known, synthesized : sequence of str
        As in :func:`identification_risk`.
    radii : sequence of float, default (0.01, 0.025, 0.05, 0.1, 0.2, 0.3)
        The radii to try, each used for every continuous synthesized variable.
    radius_type : {"percent", "absolute"}
        As in :func:`identification_risk`.
    schema : bayesynth.Schema, optional
        Tells which synthesized variables are continuous.

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

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        The real and one synthetic table.
    public : str
        The public variable whose extreme values are examined.
    sensitive : str
        The sensitive variable an intruder would try to learn.
    k : int, default 50
        Number of records taken at each end of ``public``.

    Returns
    -------
    dict
        ``{"statistic": ..., "kind": "r2" or "accuracy", "n_pairs": ...}``, where ``n_pairs`` is
        the number of extreme records paired (2k, or fewer when either table has fewer than 2k
        complete records: then the same number of lowest and highest on both sides); plus
        ``"base_rate"``, the accuracy of always predicting the most frequent real value, for
        categorical; ``"exact_share"``, the share of pairs with equal values, for numeric).
        With no complete pair (``public`` or ``sensitive`` missing everywhere), or a numeric
        side constant over its extremes (R^2 undefined), the statistic is NaN.
    """
    def complete(df: pd.DataFrame) -> pd.DataFrame:
        return df[[public, sensitive]].dropna()

    def extremes(d: pd.DataFrame, kk: int) -> pd.Series:
        order = np.argsort(d[public].to_numpy(float), kind="stable")
        idx = np.r_[order[:kk], order[len(order) - kk:]]
        return d[sensitive].iloc[idx].reset_index(drop=True)

    # the same number of lowest and of highest records on both sides, paired rank to rank
    cr, cs = complete(real), complete(synthetic)
    kk = min(int(k), len(cr) // 2, len(cs) // 2)
    r, s = extremes(cr, kk), extremes(cs, kk)
    n = len(r)
    numeric = (pd.api.types.is_numeric_dtype(real[sensitive])
               and not pd.api.types.is_bool_dtype(real[sensitive])
               and real[sensitive].nunique() > 2)
    if n == 0:  # no complete pairs: nothing measured (not "safe")
        out = {"statistic": float("nan"), "kind": "r2" if numeric else "accuracy",
               "n_pairs": 0}
        return {**out, "exact_share": float("nan")} if numeric else {
            **out, "base_rate": float("nan")}
    if numeric:
        rr, ss = r.to_numpy(float), s.to_numpy(float)
        # R^2 is undefined when either side is constant (identical values at the extremes
        # may even be copied exactly): NaN, with the share of exact matches beside it
        stat = float(np.corrcoef(rr, ss)[0, 1] ** 2) if rr.std() > 0 and ss.std() > 0 \
            else float("nan")
        return {"statistic": stat, "kind": "r2", "n_pairs": n,
                "exact_share": float(np.mean(rr == ss))}
    acc = float(np.mean(r.astype(object).to_numpy() == s.astype(object).to_numpy()))
    base = float(r.astype(object).value_counts(normalize=True).iloc[0])
    return {"statistic": acc, "kind": "accuracy", "n_pairs": n, "base_rate": base}


def _mixed_encoder(train: pd.DataFrame, cols: Sequence[str], num: set):
    """Encode records for nearest-neighbour distances, scaled on the training data.

    Numeric columns: standardised by the training standard deviation, missing values at the
    training median plus a 0/1 missing indicator. Other columns: one-hot (missing a level of
    its own, and one column for every level the training data lack) scaled by 1/sqrt(2), so
    one mismatch adds one unit of squared distance.
    """
    stats = {}
    for c in cols:
        if c in num:
            ref = pd.to_numeric(train[c], errors="coerce").astype(float)
            stats[c] = (ref.mean(), ref.std() or 1.0, ref.median())
        else:
            stats[c] = pd.Index(as_text(train[c]).unique())

    def encode(df: pd.DataFrame) -> np.ndarray:
        parts = []
        for c in cols:
            if c in num:
                mean, sd, med = stats[c]
                x = pd.to_numeric(df[c], errors="coerce").astype(float)
                parts.append(((x.fillna(med) - mean) / sd).to_numpy()[:, None])
                parts.append(x.isna().to_numpy(float)[:, None])
            else:
                v = as_text(df[c]).to_numpy()
                onehot = (v[:, None] == stats[c].to_numpy()[None, :]).astype(float)
                unseen = (onehot.sum(axis=1) == 0).astype(float)[:, None]  # a level of its own
                parts.append(np.hstack([onehot, unseen]) / np.sqrt(2.0))
        return np.hstack(parts)

    return encode


def _record_keys(df: pd.DataFrame, cols: Sequence[str]) -> pd.MultiIndex:
    return pd.MultiIndex.from_frame(pd.DataFrame({c: as_text(df[c]) for c in cols}))


@dataclass
class DistanceToClosestRecord:
    """Distances from synthetic records to the training data, against a hold-out sample.

    Attributes
    ----------
    to_train, to_holdout : numpy.ndarray
        Nearest-neighbour distance of each synthetic record to the training records and to the
        hold-out records (standardised numeric columns; one unit per categorical mismatch).
    share_closer_to_train : float
        Share of synthetic records strictly closer to the training data than to the hold-out
        data; about n_train / (n_train + n_holdout) when the synthesizer does not memorise
        (0.5 for equal sizes), larger when it copies training records.
    n_identical : int
        Synthetic records equal to some training record on every column.
    holdout_to_train : numpy.ndarray
        Distance of each hold-out record to its nearest training record: how close *new* real
        records come to the training data.
    ratio : float
        ``median(to_train) / median(holdout_to_train)``, the DCR ratio: at least 1 when synthetic
        records are no closer to the training records than new real records are; below 1 when
        the synthesizer reproduces training records.
    exact_copy_share : float
        ``n_identical`` over the number of synthetic records.
    """

    to_train: np.ndarray
    to_holdout: np.ndarray
    share_closer_to_train: float
    n_identical: int
    holdout_to_train: np.ndarray | None = None
    ratio: float = float("nan")
    exact_copy_share: float = float("nan")

    def ratio_interval(self, level: float = 0.95, n_boot: int = 400,
                       random_seed: int | None = 0) -> tuple[float, float]:
        """Bootstrap interval of the DCR ratio (records of both samples resampled).

        A ratio a little below 1 can be sampling noise: an independent draw from the real
        law scored 0.99. Read "closer" only when the whole interval is below 1.

        Parameters
        ----------
        level : float, default 0.95
        n_boot : int, default 400
        random_seed : int, optional

        Returns
        -------
        tuple of float
            Lower and upper bounds (NaN without a hold-out).
        """
        if self.holdout_to_train is None or len(self.holdout_to_train) == 0:
            return float("nan"), float("nan")
        rng = np.random.default_rng(random_seed)
        a, b = np.asarray(self.to_train), np.asarray(self.holdout_to_train)
        num = np.median(a[rng.integers(0, len(a), (n_boot, len(a)))], axis=1)
        den = np.median(b[rng.integers(0, len(b), (n_boot, len(b)))], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(den > 0, num / den, np.where(num > 0, np.inf, 1.0))
        tail = (1 - level) / 2
        return float(np.quantile(r, tail)), float(np.quantile(r, 1 - tail))


def distance_to_closest_record(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    holdout: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    schema=None,
) -> DistanceToClosestRecord:
    """Distance to closest record (DCR), relative to a hold-out sample of real records.

    Numeric columns are standardised by the training data's standard deviation (missing values
    set to the training median, with a 0/1 missing indicator); categorical columns are one-hot
    coded and scaled by 1/sqrt(2), so a mismatch adds one unit of squared distance. Euclidean
    nearest neighbours (scikit-learn). The hold-out records must be real records of the same
    population that the synthesizer did not see; their distances to the training data are the
    yardstick (:attr:`DistanceToClosestRecord.ratio`).

    Parameters
    ----------
    train : pandas.DataFrame
        The real records the synthesizer was fitted to.
    synthetic : pandas.DataFrame
    holdout : pandas.DataFrame
        Real records from the same population that the synthesizer did not see.
    columns : sequence of str, optional
        Columns compared (default: all of ``train``).
    schema : bayesynth.Schema, optional
        Says which columns are numeric.

    Returns
    -------
    DistanceToClosestRecord
    """
    from sklearn.neighbors import NearestNeighbors

    from bayesynth.evaluation.utility import numeric_columns

    cols = list(train.columns if columns is None else columns)
    num = set(numeric_columns(train[cols], schema))
    encode = _mixed_encoder(train, cols, num)
    Xt, Xs, Xh = encode(train), encode(synthetic), encode(holdout)
    nn_train = NearestNeighbors(n_neighbors=1).fit(Xt)
    d_train = nn_train.kneighbors(Xs)[0][:, 0]
    d_hold = NearestNeighbors(n_neighbors=1).fit(Xh).kneighbors(Xs)[0][:, 0]
    h_train = nn_train.kneighbors(Xh)[0][:, 0]
    n_ident = int(_record_keys(synthetic, cols).isin(_record_keys(train, cols)).sum())
    med_h = float(np.median(h_train))
    ratio = float(np.median(d_train) / med_h) if med_h > 0 else (
        float("inf") if np.median(d_train) > 0 else 1.0)
    return DistanceToClosestRecord(d_train, d_hold, float(np.mean(d_train < d_hold)), n_ident,
                                   h_train, ratio, n_ident / max(len(synthetic), 1))


def _binned(train: pd.DataFrame, frames: Sequence[pd.DataFrame], cols: Sequence[str],
            num: set, n_bins: int) -> list[pd.DataFrame]:
    """Numeric columns cut at the training quantiles (at most ``n_bins`` bins); others as text.

    A numeric column with at most ``2 n_bins`` distinct training values (integer codes,
    small counts) is taken value by value: quantile edges would merge its tied values (an
    integer-coded race with 85% in one code fell into a single bin, that is, was not known).
    """
    out = [pd.DataFrame(index=f.index) for f in frames]
    for c in cols:
        if c in num:
            ref = pd.to_numeric(train[c], errors="coerce").dropna().to_numpy(float)
            few = len(np.unique(ref)) <= 2 * n_bins
            edges = np.unique(np.quantile(ref, np.linspace(0, 1, n_bins + 1)[1:-1])) \
                if len(ref) else np.zeros(0)
            for o, f in zip(out, frames):
                x = pd.to_numeric(f[c], errors="coerce").to_numpy(float)
                b = (x.astype(str) if few else
                     np.searchsorted(edges, x, side="right")).astype(object)
                b[np.isnan(x)] = "<NA>"
                o[c] = b.astype(str)
        else:
            for o, f in zip(out, frames):
                o[c] = as_text(f[c])
    return out


@dataclass
class AttributeInference:
    """Correct attribution probability of a sensitive column (Taub et al. 2018).

    Attributes
    ----------
    cap : float
        Mean, over the training records with at least one synthetic record of the same key (NaN
        when none has), of
        the share of those synthetic records that carry the record's sensitive value (the
        intruder guesses the sensitive value from synthetic records that match on the key).
    coverage : float
        Share of training records with a matching synthetic record.
    baseline : float
        The same score when the intruder guesses from the sensitive column's marginal
        distribution alone: mean, over the same training records as ``cap`` (those with a
        match), of the real share of their value. NaN when no record has a match.
    holdout_cap : float
        ``cap`` computed for hold-out records (real people not in the training data), NaN
        without a hold-out. What the synthetic data teach about *anyone* with a given key;
        ``cap`` well above it points at the training records themselves.
    keys : list of str
    sensitive : str
    """

    cap: float
    coverage: float
    baseline: float
    holdout_cap: float
    keys: list
    sensitive: str


def _cap(records: pd.DataFrame, syn: pd.DataFrame, keys: list,
         target: str) -> tuple[float, float, np.ndarray]:
    """Return CAP, coverage and which records have a synthetic record of their key."""
    n = len(records)
    # keys compared column by column (joining them as text let ("x|y", "z") match ("x", "y|z"))
    codes = _group_codes(records, syn, keys) if keys else np.zeros(n + len(syn), dtype=np.int64)
    rk, sk = codes[:n], codes[n:]
    table = pd.crosstab(pd.Series(sk, name="key"), pd.Series(syn[target].to_numpy(), name="s"))
    shares = table.div(table.sum(axis=1), axis=0)
    stacked = shares.stack()
    pairs = pd.MultiIndex.from_arrays([rk, records[target].to_numpy()])
    got = stacked.reindex(pairs).to_numpy(dtype=float)
    matched = np.isin(rk, shares.index.to_numpy())
    got = np.where(matched, np.nan_to_num(got, nan=0.0), np.nan)
    cap = float(np.nanmean(got)) if matched.any() else float("nan")
    return cap, float(matched.mean()), matched


def attribute_inference_risk(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    keys: Sequence[str],
    sensitive: str,
    holdout: pd.DataFrame | None = None,
    schema=None,
    n_bins: int = 5,
) -> AttributeInference:
    """Attribute-inference risk of fully synthetic data: the correct attribution probability.

    The intruder knows a real person's ``keys`` (quasi-identifiers) and guesses the
    ``sensitive`` value from the synthetic records with the same keys, choosing each value with
    its share among them. CAP is the mean probability of a correct guess over the training
    records that have a match (Taub, Elliot, Pampaka and Smith 2018, "differential correct
    attribution probability"). Numeric keys and a numeric sensitive column are cut at the
    training data's quantiles into at most ``n_bins`` bins (fewer where values tie; an
    intruder guesses a range, not a value); one with at most ``2 n_bins`` distinct training
    values (integer codes, small counts) is taken value by value.

    Parameters
    ----------
    train : pandas.DataFrame
        The real records the synthesizer was fitted to.
    synthetic : pandas.DataFrame
    keys : sequence of str
        What the intruder knows.
    sensitive : str
        What the intruder wants to learn.
    holdout : pandas.DataFrame, optional
        Real records not used for synthesis; gives :attr:`AttributeInference.holdout_cap`.
    schema : bayesynth.Schema, optional
    n_bins : int, default 5

    Returns
    -------
    AttributeInference
    """
    from bayesynth.evaluation.utility import numeric_columns

    keys = list(keys)
    for c in keys + [sensitive]:
        if c not in train.columns or c not in synthetic.columns:
            raise KeyError(f"Column '{c}' is not in both the real and the synthetic data.")
    if sensitive in keys:
        raise InvalidParameterError(f"The sensitive column '{sensitive}' is also a key; drop "
                                    "it from the keys (--known).", column=str(sensitive))
    cols = keys + [sensitive]
    num = set(numeric_columns(train[cols], schema))
    frames = [train, synthetic] + ([holdout] if holdout is not None else [])
    binned = _binned(train, frames, cols, num, n_bins)
    if holdout is not None and len(holdout) == 0:
        raise InvalidParameterError("The hold-out data have no rows; pass real records the "
                                    "synthesizer did not see, or no hold-out.",
                                    column="holdout")
    cap, coverage, matched = _cap(binned[0], binned[1], keys, sensitive)
    base = binned[0][sensitive].map(binned[0][sensitive].value_counts(normalize=True))
    # over the same (matched) records as CAP: otherwise which records find a match alone
    # could open a gap between the two
    baseline = float(base.to_numpy(float)[matched].mean()) if matched.any() else float("nan")
    hold = _cap(binned[2], binned[1], keys, sensitive)[0] if holdout is not None \
        else float("nan")
    return AttributeInference(cap, coverage, baseline, hold, keys, sensitive)


@dataclass
class SinglingOut:
    """Singling-out risk of fully synthetic data (in the spirit of Giomi et al. 2023).

    Attributes
    ----------
    rate_train : float
        Share of the predicates (each read off one synthetic record, and true of exactly one
        synthetic record) that are true of exactly one training record.
    rate_control : float
        The same share on hold-out records (the rate expected by chance for people who are not
        in the training data).
    risk : float
        ``excess`` floored at 0: how much more often the synthetic data single out training
        records than people the synthesizer never saw. A floored estimate is biased upwards
        (noise around 0 only ever adds): average ``excess`` over datasets, and compare it
        with :meth:`null_band`.
    n_attacks : int
        Predicates counted. When none counted (no predicate was true of exactly one synthetic
        record, as when every synthetic record is duplicated), the rates, ``risk`` and
        ``excess`` are NaN: nothing was measured.
    n_records : int
        Training and hold-out records compared (the larger set is subsampled to the smaller).
    excess : float
        ``(rate_train - rate_control) / (1 - rate_control)``, not floored (negative when the
        hold-out people were singled out more often, as chance allows).
    """

    rate_train: float
    rate_control: float
    risk: float
    n_attacks: int
    n_records: int
    excess: float = 0.0
    #: predicate-by-record membership over the training then the hold-out records (only
    #: predicates true of at most ``_MAX_POOLED`` of them: see :meth:`null_band`)
    members: Any = field(default=None, repr=False)

    def null_band(self, level: float = 0.95, n_perm: int = 400,
                  random_seed: int | None = 0) -> tuple[float, float]:
        """Return what ``excess`` looks like when training and hold-out people are exchangeable.

        The ``level`` quantile of ``excess`` over ``n_perm`` random splits and the one-sided
        permutation p-value, both from a fixed number of splits; :meth:`null_test` adds
        splits until the p-value is clearly on one side of a threshold and is what
        ``bayesynth.evaluation.report`` uses.

        Parameters
        ----------
        level : float, default 0.95
            Quantile of the permutation distribution returned.
        n_perm : int, default 400
        random_seed : int, optional

        Returns
        -------
        tuple of float
            The ``level`` quantile of ``excess`` over random splits (an observed ``excess``
            above it is more singling out than chance gives) and the one-sided permutation
            p-value of the observed ``excess``. NaN when no predicate counted.
        """
        test = self.null_test(level=level, n_perm=n_perm, decide_at=None,
                              random_seed=random_seed)
        return test.band, test.p

    def null_test(self, level: float = 0.95, n_perm: int = 400, *,
                  decide_at: float | None = 0.05, max_perm: int = 25_600,
                  random_seed: int | None = 0) -> SinglingOutNullTest:
        """Permutation test of ``excess`` against training and hold-out people exchanged.

        The same predicates are scored on random splits of the pooled training and hold-out
        records into two halves of the original sizes (a permutation test: were the synthetic
        records no more tied to the training people than to the hold-out people, the observed
        split would be one of these). The variation comes from which people sit on which side,
        which a bootstrap over attacks would miss (predicates share their records).

        The p-value is itself a Monte Carlo estimate: with 400 splits its standard error at
        p = 0.05 is 0.011, so a verdict "p < 0.05" would flip between seeds where p is near
        0.05 (on 3,000 records of adult: 0.057 at 400 splits, 0.047 at 20,000). With
        ``decide_at`` the splits are doubled, from ``n_perm`` up to ``max_perm``, until the
        99.9% Clopper-Pearson interval of the exceedance probability excludes ``decide_at``.
        With the defaults there are at most seven looks (400, 800, ..., 25,600 splits), so
        the chance that Monte Carlo error alone leaves the p-value on the wrong side of
        ``decide_at`` is at most 0.7% (Bonferroni over the looks). Where the interval still
        holds ``decide_at`` at ``max_perm`` splits, ``decided`` is False; at the default
        25,600 the p-value is then within 0.005 of ``decide_at`` = 0.05.

        Parameters
        ----------
        level : float, default 0.95
            Quantile of the permutation distribution returned as ``band``.
        n_perm : int, default 400
            Splits to start with (all of them when ``decide_at`` is None).
        decide_at : float or None, default 0.05
            Threshold the p-value is compared with; None: exactly ``n_perm`` splits.
        max_perm : int, default 25,600
            Most splits.
        random_seed : int, optional

        Returns
        -------
        SinglingOutNullTest
            NaN band and p-value when no predicate counted.

        Notes
        -----
        A predicate true of more than ``_MAX_POOLED`` (64) pooled records is scored 0 on
        both sides of every split: the chance that exactly one of m such records falls on a
        side is below m / 2^(m-1) < 1e-17.
        """
        from scipy.stats import beta

        if self.n_attacks == 0 or self.members is None:
            return SinglingOutNullTest(float("nan"), float("nan"), 0, True,
                                       (float("nan"), float("nan")))
        rng = np.random.default_rng(random_seed)
        M = self.members
        n = self.n_records
        total = np.asarray(M.sum(axis=1)).ravel()
        ex = np.empty(0)

        def more(count: int) -> np.ndarray:
            out = np.empty(count)
            for lo in range(0, count, 50):
                b = min(50, count - lo)
                Z = np.zeros((2 * n, b), dtype=np.float32)
                for j in range(b):
                    Z[rng.permutation(2 * n)[:n], j] = 1.0
                on_a = np.rint(M @ Z)
                rt = (on_a == 1).sum(0) / self.n_attacks
                rc = ((total[:, None] - on_a) == 1).sum(0) / self.n_attacks
                with np.errstate(divide="ignore", invalid="ignore"):
                    out[lo:lo + b] = np.where(rc < 1, (rt - rc) / (1.0 - rc), 0.0)
            return out

        target = int(n_perm)
        while True:
            ex = np.r_[ex, more(target - len(ex))]
            hits = int(np.sum(ex >= self.excess - 1e-12))
            m = len(ex)
            # 99.9% Clopper-Pearson interval of P(excess under the null >= observed)
            lo_q = float(beta.ppf(0.0005, hits, m - hits + 1)) if hits > 0 else 0.0
            hi_q = float(beta.ppf(0.9995, hits + 1, m - hits)) if hits < m else 1.0
            decided = decide_at is None or not (lo_q <= decide_at <= hi_q)
            if decided or 2 * m > max_perm:
                break
            target = 2 * m
        p = (1 + hits) / (m + 1)
        return SinglingOutNullTest(float(np.quantile(ex, level)), float(p), m, bool(decided),
                                   (lo_q, hi_q))


@dataclass(frozen=True)
class SinglingOutNullTest:
    """The permutation test of :meth:`SinglingOut.null_test`.

    Attributes
    ----------
    band : float
        The requested quantile (default 95%) of ``excess`` over random splits of the pooled
        training and hold-out people: an observed ``excess`` above it is more singling out
        than chance gives.
    p : float
        One-sided permutation p-value of the observed ``excess``, ``(1 + hits) / (1 + splits)``.
    n_perm : int
        Random splits used.
    decided : bool
        Whether the 99.9% Monte Carlo interval of the p-value excludes the threshold it was
        compared with (always True for a fixed number of splits).
    p_interval : tuple of float
        That 99.9% Clopper-Pearson interval of the exceedance probability.
    """

    band: float
    p: float
    n_perm: int
    decided: bool
    p_interval: tuple[float, float]


_MAX_POOLED = 64


def singling_out_risk(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    holdout: pd.DataFrame,
    *,
    n_attacks: int = 1000,
    n_columns: int = 3,
    columns: Sequence[str] | None = None,
    schema=None,
    random_seed: int | np.random.Generator | None = None,
) -> SinglingOut:
    """Singling-out risk: predicates read off synthetic records that isolate a real person.

    Each attack picks a synthetic record and ``n_columns`` random columns and forms the
    predicate "equal on every categorical column; on a numeric column at most the record's
    value when it is below the synthetic data's median, else at least it" (so predicates built
    at the tails isolate few people, as an intruder would aim; the intruder sees only the
    synthetic data, and the predicates depend on nothing else). A predicate counts when it is
    true of exactly one synthetic record. The score is the share of counted predicates that
    are true of exactly one training record, set against the same share on hold-out records;
    training and hold-out are compared at equal size. Attacks run until ``n_attacks``
    predicates count or ``20 n_attacks`` were tried. :meth:`SinglingOut.null_band` says how
    large the score gets by chance.

    Parameters
    ----------
    train : pandas.DataFrame
    synthetic : pandas.DataFrame
    holdout : pandas.DataFrame
        Real records the synthesizer did not see.
    n_attacks : int, default 1000
    n_columns : int, default 3
    columns : sequence of str, optional
    schema : bayesynth.Schema, optional
    random_seed : int or numpy.random.Generator, optional

    Returns
    -------
    SinglingOut
    """
    from scipy import sparse

    from bayesynth.evaluation.utility import numeric_columns

    rng = np.random.default_rng(random_seed)
    cols = list(train.columns if columns is None else columns)
    num = set(numeric_columns(train[cols], schema))
    n = min(len(train), len(holdout))
    tr = train.iloc[rng.choice(len(train), n, replace=False)] if len(train) > n else train
    ho = holdout.iloc[rng.choice(len(holdout), n, replace=False)] if len(holdout) > n \
        else holdout

    def as_arrays(df):
        out = {}
        for c in cols:
            if c in num:
                out[c] = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
            else:
                out[c] = as_text(df[c]).to_numpy()
        return out

    S, T, H = as_arrays(synthetic), as_arrays(tr), as_arrays(ho)
    med = {c: np.nanmedian(S[c]) if np.isfinite(S[c]).any() else 0.0 for c in num}
    q = min(int(n_columns), len(cols))
    hits_t = hits_h = counted = tried = 0
    rows: list[np.ndarray] = []
    while counted < n_attacks and tried < 20 * n_attacks:
        tried += 1
        i = int(rng.integers(len(synthetic)))
        chosen = rng.choice(len(cols), q, replace=False)

        def holds(A, length):
            m = np.ones(length, dtype=bool)
            for j in chosen:
                c = cols[j]
                v = S[c][i]
                if c in num:
                    if np.isnan(v):
                        m &= np.isnan(A[c])
                    elif v < med[c]:
                        m &= A[c] <= v
                    else:
                        m &= A[c] >= v
                else:
                    m &= A[c] == v
            return m

        if holds(S, len(synthetic)).sum() != 1:
            continue
        counted += 1
        mt, mh = holds(T, n), holds(H, n)
        hits_t += int(mt.sum() == 1)
        hits_h += int(mh.sum() == 1)
        idx = np.concatenate([np.flatnonzero(mt), n + np.flatnonzero(mh)])
        rows.append(idx if len(idx) <= _MAX_POOLED else idx[:0])
    if counted == 0:  # nothing was measured: not "no risk"
        nan = float("nan")
        return SinglingOut(nan, nan, nan, 0, n, nan)
    rt, rc = hits_t / counted, hits_h / counted
    excess = (rt - rc) / (1.0 - rc) if rc < 1 else 0.0
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    cols_idx = np.concatenate(rows) if indptr[-1] else np.zeros(0, dtype=np.int64)
    members = sparse.csr_matrix((np.ones(len(cols_idx), dtype=np.float32), cols_idx, indptr),
                                shape=(counted, 2 * n))
    return SinglingOut(rt, rc, max(0.0, excess), counted, n, float(excess), members)


def _ordered_by(col: pd.Series) -> bool:
    """Whether a table's rows look sorted by ``col`` (so equal order says nothing of rows kept).

    True when its numbers never decrease or never increase down the rows (a row number, a
    sorted measurement), or when it has repeated values and each value fills one contiguous
    run of rows (sorted by a category, in any order of its levels).
    """
    x = pd.to_numeric(col, errors="coerce")
    if len(x) > 1 and x.notna().all():
        d = np.diff(x.to_numpy(float))
        if (d >= 0).all() or (d <= 0).all():
            return True
    t = as_text(col).to_numpy()
    n_distinct = len(pd.unique(t))
    if n_distinct == len(t):
        return False
    runs = 1 + int(np.count_nonzero(t[1:] != t[:-1]))
    return runs == n_distinct


def kept_columns(real: pd.DataFrame, synthetic: pd.DataFrame, *,
                 threshold: float = 0.9) -> dict[str, float]:
    """Return the columns that ``synthetic`` keeps row by row from ``real``, with agreement.

    A column counts as kept when the tables have the same number of rows and the column equals
    the real one in at least ``threshold`` of the rows, and in more rows than two tables of
    independent records would share by chance (the chance agreement sum_v p_real(v) p_syn(v)
    plus four of its binomial standard deviations; a two-level column kept row by row counts
    too). A column by which both tables are sorted (a row number, or a category in contiguous
    runs of rows) is left out: sorting alone makes it agree.

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        The real and the synthetic table.
    threshold : float, default 0.9
        Share of rows in which a column must equal the real one to count as kept.

    Returns
    -------
    dict
        Column name -> share of rows equal to the real table's (empty when none is kept).
    """
    out: dict[str, float] = {}
    if len(real) != len(synthetic):
        return out
    for c in real.columns:
        if c not in synthetic.columns:
            continue
        a = as_text(real[c]).to_numpy()
        b = as_text(synthetic[c]).reset_index(drop=True)
        pa = pd.Series(a).value_counts(normalize=True)
        pb = b.value_counts(normalize=True)
        chance = float((pa * pb.reindex(pa.index, fill_value=0.0)).sum())
        agree = float(np.mean(a == b.to_numpy()))
        margin = 4.0 * np.sqrt(chance * (1.0 - chance) / len(a))
        if agree >= threshold and agree > chance + margin and not (
                _ordered_by(real[c]) and _ordered_by(synthetic[c])):
            out[str(c)] = agree
    return out


def synthetic_kind(real: pd.DataFrame, synthetic: pd.DataFrame, *,
                   threshold: float = 0.9) -> str:
    """Whether ``synthetic`` looks fully or partially synthetic.

    Partially synthetic data keep the real records, row by row, with some columns replaced:
    "partially" when at least one column is kept (:func:`kept_columns`: equal to the real
    column in at least ``threshold`` of the rows, beyond chance, and not merely because both
    tables are sorted by it). Anything else is treated as fully synthetic. This is an
    inference: state the kind (``report(kind=)``, ``bayesynth evaluate --kind``) when known.

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        The real and the synthetic table.
    threshold : float, default 0.9
        Share of rows in which a column must equal the real one to count as kept.

    Returns
    -------
    {"fully", "partially"}
    """
    return "partially" if kept_columns(real, synthetic, threshold=threshold) else "fully"

