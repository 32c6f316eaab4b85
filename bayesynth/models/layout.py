"""Latent layout of the extended rank-probit likelihood: from a typed table to latent columns.

Every variable of a table becomes one or more columns of the latent Gaussian matrix ``z``
(n records by p* latent columns):

* an unordered categorical variable with k observed levels becomes k *level* columns, one per
  level and no reference level; record i must have ``z > 0`` in the column of its level and
  ``z < 0`` in the others (Feldman & Kowal 2022, eq. 6 and 11). Ordinal variables with fewer than
  ``ordinal_threshold`` levels are treated this way too (the paper's recommendation);
* every other variable (binary, ordinal with many levels, count, continuous) becomes one *ordered*
  column under the rank likelihood (Hoff 2007): ``z`` must follow the ordering of the observed
  values, ties sharing a level, i.e. ``max z`` of lower values ``< z_ij <`` ``min z`` of higher
  values.

Missing values (an extension of the paper, which has none): a missing categorical value is an
extra level ``<NA>`` of its variable; an ordered column with missing values leaves those ``z``
unconstrained (imputed by the model) and gains a binary ordered *missing* column (1 = missing), so
that the missingness is modelled jointly with everything else and a synthesizer reproduces it.

The layout also holds the flat index arrays that the compiled z-step kernel walks.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import ndtri

from bayesynth.errors import TooManyLevelsError
from bayesynth.schema import Schema, encode_levels

__all__ = [
    "CategoricalBlock",
    "OrderedColumn",
    "LatentLayout",
    "MISSING_LEVEL",
    "same_variable_level_pairs",
    "register_layout",
    "registered_layout",
]

MISSING_LEVEL = "<NA>"


@dataclass(frozen=True)
class CategoricalBlock:
    """A variable modelled with one latent column per level.

    Attributes
    ----------
    name : str
        Source column.
    latent : numpy.ndarray
        Indices of its latent columns, one per modelled level.
    levels : tuple
        The schema levels the latent columns stand for, in the same order; the missing level,
        if any, is :data:`MISSING_LEVEL` and last.
    codes : numpy.ndarray
        Per record, the index (into ``levels``) of its level.
    """

    name: str
    latent: np.ndarray
    levels: tuple
    codes: np.ndarray

    @property
    def has_missing_level(self) -> bool:
        return len(self.levels) > 0 and self.levels[-1] == MISSING_LEVEL


@dataclass(frozen=True)
class OrderedColumn:
    """A variable modelled by one latent column under the rank likelihood.

    Attributes
    ----------
    name : str
        Source column (for a missingness indicator, the column whose missingness it records).
    latent : int
        Its latent column index.
    kind : {"value", "missing"}
        The variable itself, or the indicator of its missing values.
    codes : numpy.ndarray
        Per record, the rank group (0 .. n_groups-1) of its value; -1 where missing.
    n_groups : int
        Number of distinct observed values.
    """

    name: str
    latent: int
    kind: str
    codes: np.ndarray
    n_groups: int


@dataclass
class LatentLayout:
    """How a table maps onto the latent matrix ``z`` of the rank-probit copula.

    Build it with :meth:`from_data`. The arrays prefixed ``k_`` are the flat index structures that
    :func:`bayesynth.samplers.kernels.draw_z` walks.
    """

    n: int
    latent_names: list[str]
    categorical: list[CategoricalBlock]
    ordered: list[OrderedColumn]
    # kernel arrays ------------------------------------------------------------------------
    k_lvl_cols: np.ndarray = field(repr=False)
    k_lvl_sign: np.ndarray = field(repr=False)
    k_lvl_order: np.ndarray = field(repr=False)
    k_lvl_npos: np.ndarray = field(repr=False)
    k_ord_cols: np.ndarray = field(repr=False)
    k_ord_idx: np.ndarray = field(repr=False)
    k_grp_start: np.ndarray = field(repr=False)
    k_grp_off: np.ndarray = field(repr=False)
    k_mis_idx: np.ndarray = field(repr=False)
    k_mis_off: np.ndarray = field(repr=False)

    @property
    def p_latent(self) -> int:
        """Number of latent columns p*."""
        return len(self.latent_names)

    @property
    def level_columns(self) -> np.ndarray:
        """Latent indices of all categorical level columns (where the intercept alpha lives)."""
        return self.k_lvl_cols

    @property
    def level_names(self) -> list[str]:
        return [self.latent_names[j] for j in self.k_lvl_cols]

    @property
    def ordered_columns(self) -> np.ndarray:
        return self.k_ord_cols

    # ------------------------------------------------------------------------------ building

    @classmethod
    def from_data(
        cls,
        df: pd.DataFrame,
        schema: Schema,
        *,
        ordinal_threshold: int = 10,
        max_levels: int = 50,
    ) -> LatentLayout:
        """Encode a validated table.

        Parameters
        ----------
        df : pandas.DataFrame
            The table (already checked by :func:`bayesynth.schema.validate_data`); not modified.
        schema : Schema
            Its schema.
        ordinal_threshold : int, default 10
            Ordinal columns with fewer observed levels than this are modelled as unordered
            categorical (Feldman & Kowal, section 6.1). Set to 0 to keep every ordinal ordered.
        max_levels : int, default 50
            Largest number of levels accepted for a categorical variable (each level is a latent
            column).

        Returns
        -------
        LatentLayout
        """
        n = len(df)
        names: list[str] = []
        cats: list[CategoricalBlock] = []
        ords: list[OrderedColumn] = []
        missing_cols: list[OrderedColumn] = []
        for name in schema.names:
            col = schema[name]
            s = df[name]
            as_categorical = col.type == "categorical" or (
                col.type == "ordinal" and _n_observed(s) < ordinal_threshold
            )
            if as_categorical:
                codes_full = encode_levels(s, col)
                observed = np.unique(codes_full[codes_full >= 0])
                levels = [col.levels[c] for c in observed]
                remap = np.full(len(col.levels), -1, dtype=np.int64)
                remap[observed] = np.arange(len(observed))
                codes = np.where(codes_full >= 0, remap[np.maximum(codes_full, 0)], -1)
                if np.any(codes < 0):
                    levels.append(MISSING_LEVEL)
                    codes = np.where(codes < 0, len(levels) - 1, codes)
                if len(levels) > max_levels:
                    raise TooManyLevelsError(
                        f"Column '{name}' has {len(levels)} levels; the copula gives each level a "
                        f"latent column and accepts at most max_levels={max_levels}. Group rare "
                        "levels, declare the column ordinal or count if it is ordered, or raise "
                        "max_levels.",
                        column=name,
                    )
                start = len(names)
                names.extend(f"{name}[{lev}]" for lev in levels)
                cats.append(
                    CategoricalBlock(
                        name=name,
                        latent=np.arange(start, len(names)),
                        levels=tuple(levels),
                        codes=codes.astype(np.int64),
                    )
                )
                continue
            if col.type in ("binary", "ordinal"):
                raw = encode_levels(s, col).astype(float)
                raw[raw < 0] = np.nan
            else:
                raw = s.to_numpy(dtype=float, na_value=np.nan)
            miss = np.isnan(raw)
            codes = np.full(n, -1, dtype=np.int64)
            uniq, inv = np.unique(raw[~miss], return_inverse=True)
            codes[~miss] = inv
            names.append(name)
            ords.append(
                OrderedColumn(name=name, latent=len(names) - 1, kind="value", codes=codes,
                              n_groups=len(uniq))
            )
            if miss.any():
                missing_cols.append(
                    OrderedColumn(name=name, latent=-1, kind="missing",
                                  codes=miss.astype(np.int64), n_groups=2)
                )
        # Missingness indicators go last, after every variable's own columns.
        for mc in missing_cols:
            names.append(f"{mc.name}[missing]")
            ords.append(
                OrderedColumn(name=mc.name, latent=len(names) - 1, kind="missing",
                              codes=mc.codes, n_groups=2)
            )
        return cls._with_kernel_arrays(n, names, cats, ords)

    @classmethod
    def _with_kernel_arrays(
        cls, n: int, names: list[str], cats: list[CategoricalBlock], ords: list[OrderedColumn]
    ) -> LatentLayout:
        lvl_cols = (
            np.concatenate([b.latent for b in cats]).astype(np.int64)
            if cats else np.zeros(0, dtype=np.int64)
        )
        sign = np.empty((len(lvl_cols), n), dtype=np.int8)
        row = 0
        for b in cats:
            for h in range(len(b.levels)):
                sign[row] = np.where(b.codes == h, 1, -1)
                row += 1
        # Per level column, the records with that level first (z > 0), then the others.
        lvl_order = np.argsort(-sign, axis=1, kind="stable").astype(np.int64)
        lvl_npos = (sign > 0).sum(axis=1).astype(np.int64)
        ord_cols = np.array([o.latent for o in ords], dtype=np.int64)
        ord_idx, grp_start, grp_off, mis_idx, mis_off = [], [], [0], [], [0]
        pos = 0
        for o in ords:
            obs = np.flatnonzero(o.codes >= 0)
            order = obs[np.argsort(o.codes[obs], kind="stable")]
            counts = np.bincount(o.codes[obs], minlength=o.n_groups)
            starts = pos + np.concatenate([[0], np.cumsum(counts)])
            ord_idx.append(order)
            grp_start.append(starts)
            grp_off.append(grp_off[-1] + len(starts))
            pos += len(order)
            m = np.flatnonzero(o.codes < 0)
            mis_idx.append(m)
            mis_off.append(mis_off[-1] + len(m))

        def cat(parts: list[np.ndarray]) -> np.ndarray:
            return (np.concatenate(parts) if parts else np.zeros(0)).astype(np.int64)

        return cls(
            n=n,
            latent_names=names,
            categorical=cats,
            ordered=ords,
            k_lvl_cols=lvl_cols,
            k_lvl_sign=sign,
            k_lvl_order=lvl_order,
            k_lvl_npos=lvl_npos,
            k_ord_cols=ord_cols,
            k_ord_idx=cat(ord_idx),
            k_grp_start=cat(grp_start),
            k_grp_off=np.asarray(grp_off, dtype=np.int64),
            k_mis_idx=cat(mis_idx),
            k_mis_off=np.asarray(mis_off, dtype=np.int64),
        )

    # ---------------------------------------------------------------------------- constraints

    def bounds_satisfied(self, z: np.ndarray) -> bool:
        """Whether ``z`` (n x p*) lies in the rank-probit event E (strict inequalities)."""
        z = np.asarray(z)
        if z.shape != (self.n, self.p_latent) or not np.all(np.isfinite(z)):
            return False
        if len(self.k_lvl_cols):
            zl = z[:, self.k_lvl_cols].T
            if not np.all(zl * self.k_lvl_sign > 0):
                return False
        for c, j in enumerate(self.k_ord_cols):
            starts = self.k_grp_start[self.k_grp_off[c]:self.k_grp_off[c + 1]]
            seg = z[self.k_ord_idx[starts[0]:starts[-1]], j]
            rel = starts[:-1] - starts[0]
            gmax = np.maximum.reduceat(seg, rel)
            gmin = np.minimum.reduceat(seg, rel)
            if not np.all(gmax[:-1] < gmin[1:]):
                return False
        return True

    def initial_z(self) -> np.ndarray:
        """A point of the constraint set: normal scores of the ranks, +-0.5 for level columns.

        For ordered columns each tie group gets ``Phi^-1(midrank / (m + 1))`` (m observed
        records), strictly increasing in the group; missing entries get 0.
        """
        z = np.zeros((self.n, self.p_latent), order="F")
        if len(self.k_lvl_cols):
            z[:, self.k_lvl_cols] = 0.5 * self.k_lvl_sign.T
        for c, j in enumerate(self.k_ord_cols):
            starts = self.k_grp_start[self.k_grp_off[c]:self.k_grp_off[c + 1]]
            m = starts[-1] - starts[0]
            mid = 0.5 * (starts[:-1] + starts[1:] - 2 * starts[0] + 1)
            scores = ndtri(mid / (m + 1.0))
            sizes = np.diff(starts)
            z[self.k_ord_idx[starts[0]:starts[-1]], j] = np.repeat(scores, sizes)
        return z


def _n_observed(s: pd.Series) -> int:
    return int(s.dropna().nunique())


def same_variable_level_pairs(latent_names: list[str], level_names: list[str]) -> np.ndarray:
    """Boolean matrix: True where two latent columns are levels of the same categorical variable.

    The rank-probit likelihood observes each categorical variable only through which one of its
    level columns is positive, so the correlations among the level columns of one variable (and,
    through them, the scaled intercepts) are weakly identified: they mix slowly and lean on the
    prior, while the quantities synthesis depends on (correlations between variables, level
    probabilities) are pinned down by the data.
    """
    levels = set(level_names)
    owner = [name.rsplit("[", 1)[0] if name in levels else None for name in latent_names]
    p = len(latent_names)
    out = np.zeros((p, p), dtype=bool)
    for i in range(p):
        for j in range(p):
            out[i, j] = i != j and owner[i] is not None and owner[i] == owner[j]
    return out


_REGISTERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_layout(model, layout: LatentLayout) -> None:
    """Attach a layout to a model whose latent data are not a free variable (see
    :func:`bayesynth.models.bart_rank_regression`)."""
    _REGISTERED[model] = layout


def registered_layout(model) -> LatentLayout | None:
    """The layout attached by :func:`register_layout`, if any."""
    return _REGISTERED.get(model)
