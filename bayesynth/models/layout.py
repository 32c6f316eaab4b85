"""Latent layout of the rank-probit copula likelihoods: from a typed table to latent columns.

Every variable of a table becomes one or more columns of the latent Gaussian matrix ``z``
(n records by p* latent columns). An unordered categorical variable with K observed levels is
modelled by one of two likelihoods (``categorical_likelihood``):

``"mnp"`` (the default): a multinomial probit
    K - 1 *utility* columns, one per level other than a reference level whose utility is fixed
    at 0 (the most frequent level). The observed level is the argmax of the utilities: a record
    of level h has ``z_h > max(0, z_l)`` for every other column l; a record of the reference
    level has every ``z_l < 0``. The K regions partition the latent space, so the implied level
    probabilities sum to one by construction. The columns' residual scale is fixed at 1
    (probit scale identification); the likelihood is invariant to scaling all utilities of a
    variable together, which the samplers exploit.
``"rpl"``: the extended rank-probit likelihood of Feldman & Kowal (2022, eq. 6 and 11)
    K *level* columns, no reference; record i must have ``z > 0`` in the column of its level
    and ``z < 0`` in the others. Points with several or no positive columns are outside every
    level's region, so the implied probabilities of the valid regions sum to less than one;
    kept so that the paper can be reproduced.

Ordinal variables with fewer than ``ordinal_threshold`` levels are treated as categorical (the
paper's recommendation). Under ``"mnp"`` a binary variable is a two-level multinomial probit, i.e.
a probit with an intercept (one utility column), which lets the samplers integrate its latent
values out; under ``"rpl"`` it is an ordered column as in the paper. Every other variable
(ordinal with many levels, count, continuous) becomes one *ordered* column under the rank
likelihood (Hoff 2007): ``z`` must follow the ordering of the observed values, ties sharing a
level, i.e. ``max z`` of lower values ``< z_ij <`` ``min z`` of higher values.

Continuous columns (``continuous="normal_scores"``, the default): for a column whose values are
(nearly) all distinct the rank likelihood pins each latent value between its neighbours, to
within O(1/n), and a Gibbs sampler moves that whole column only by such steps, so it cannot
explore the O(1/sqrt(n)) posterior uncertainty of the column's transform in any feasible run.
Such columns (at least ``continuous_share`` of their observed values distinct) instead have
their latent values fixed at the normal scores of their ranks, a plug-in (pseudo-likelihood)
step as in the semiparametric copula estimator of Genest, Ghoudi & Rivest (1995): the posterior
then treats those scores as data and its intervals for correlations involving them omit the
(small) uncertainty of the margins. ``continuous="rank"`` keeps the rank likelihood everywhere.

Missing values (an extension of the paper, which has none): a missing categorical value is an
extra level ``<NA>`` of its variable; an ordered column with missing values leaves those ``z``
unconstrained (imputed by the model) and gains a binary ordered *missing* column (1 = missing), so
that the missingness is modelled jointly with everything else and a synthesizer reproduces it.
(Internally a categorical code of -1 means "no information": the record's utilities are
unconstrained; the samplers' prior-recovery tests use it.)

The layout also holds the flat index arrays that the compiled z-step kernel walks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from scipy.special import ndtri

from bayesynth.errors import SchemaError, TooManyLevelsError
from bayesynth.rules import rule_mask
from bayesynth.schema import Schema, as_numbers, encode_levels

__all__ = [
    "CATEGORICAL_LIKELIHOODS",
    "CategoricalBlock",
    "OrderedColumn",
    "LatentLayout",
    "MISSING_LEVEL",
    "same_variable_level_pairs",
    "mnp_levels",
    "register_layout",
    "registered_layout",
]

MISSING_LEVEL = "<NA>"
#: The likelihoods of an unordered categorical variable (see the module docstring).
CATEGORICAL_LIKELIHOODS = ("mnp", "rpl")


@dataclass(frozen=True)
class CategoricalBlock:
    """A categorical variable and its latent columns.

    Attributes
    ----------
    name : str
        Source column.
    latent : numpy.ndarray
        Indices of its latent columns: one per non-reference level (``"mnp"``) or one per level
        (``"rpl"``).
    levels : tuple
        The schema levels of the variable as modelled (observed levels only); the missing
        level, if any, is :data:`MISSING_LEVEL` and last.
    codes : numpy.ndarray
        Per record, the index (into ``levels``) of its level (-1: no information).
    likelihood : {"mnp", "rpl"}
    reference : int
        Index (into ``levels``) of the reference level of a ``"mnp"`` block; -1 for ``"rpl"``.
    """

    name: str
    latent: np.ndarray
    levels: tuple
    codes: np.ndarray
    likelihood: str = "rpl"
    reference: int = -1

    @property
    def has_missing_level(self) -> bool:
        """Whether the last level is :data:`MISSING_LEVEL` (missing values modelled as a level)."""
        return len(self.levels) > 0 and self.levels[-1] == MISSING_LEVEL

    @property
    def column_levels(self) -> np.ndarray:
        """Index (into ``levels``) of the level each latent column stands for."""
        idx = np.arange(len(self.levels))
        return idx[idx != self.reference] if self.likelihood == "mnp" else idx

    @property
    def level_columns(self) -> np.ndarray:
        """Per level, the position (0 .. len(latent) - 1) of its column; -1 for the reference."""
        out = np.full(len(self.levels), -1, dtype=np.int64)
        out[self.column_levels] = np.arange(len(self.latent))
        return out


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
    fixed : bool
        The observed latent values are fixed at the normal scores of the ranks (a continuous
        column under ``continuous="normal_scores"``); only missing entries are latent.
    """

    name: str
    latent: int
    kind: str
    codes: np.ndarray
    n_groups: int
    fixed: bool = False

    @property
    def normal_scores(self) -> np.ndarray:
        """Phi^-1(midrank / (m + 1)) of each record's value (m observed records).

        Records whose value is missing get 0.
        """
        obs = self.codes >= 0
        m = int(obs.sum())
        counts = np.bincount(self.codes[obs], minlength=self.n_groups)
        ends = np.cumsum(counts)
        mid = ends - 0.5 * (counts - 1)  # midrank of each tie group, 1-based
        out = np.zeros(len(self.codes))
        out[obs] = ndtri(mid[self.codes[obs]] / (m + 1.0))
        return out


@dataclass
class LatentLayout:
    """How a table maps onto the latent matrix ``z`` of the rank-probit copula.

    Build it with :meth:`from_data`. The arrays prefixed ``k_`` are the flat index structures that
    :func:`bayesynth.samplers.kernels.draw_z` walks: ``k_lvl_*`` for ``"rpl"`` level columns,
    ``k_mnp_*`` for ``"mnp"`` utility columns, ``k_ord_*`` / ``k_grp_*`` / ``k_mis_*`` for ordered
    columns.
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
    k_mnp_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    k_mnp_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64), repr=False)
    k_mnp_codes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64),
                                    repr=False)

    @property
    def p_latent(self) -> int:
        """Number of latent columns p*."""
        return len(self.latent_names)

    @property
    def level_columns(self) -> np.ndarray:
        """Latent indices of all categorical columns, in block order (where alpha lives)."""
        if not self.categorical:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([b.latent for b in self.categorical]).astype(np.int64)

    @property
    def level_names(self) -> list[str]:
        """Names of the categorical latent columns, in the order of :attr:`level_columns`."""
        return [self.latent_names[j] for j in self.level_columns]

    @property
    def rpl_columns(self) -> np.ndarray:
        """Latent indices of the ``"rpl"`` level columns (sign constraints)."""
        return self.k_lvl_cols

    @property
    def mnp_columns(self) -> np.ndarray:
        """Latent indices of the ``"mnp"`` utility columns (residual scale fixed at 1)."""
        return self.k_mnp_cols

    @property
    def free_scale_columns(self) -> np.ndarray:
        """Latent indices whose residual standard deviation is a parameter (all but mnp)."""
        keep = np.ones(self.p_latent, dtype=bool)
        keep[self.k_mnp_cols] = False
        return np.flatnonzero(keep).astype(np.int64)

    @property
    def ordered_columns(self) -> np.ndarray:
        """Latent indices of the ordered columns (rank likelihood or fixed normal scores)."""
        return self.k_ord_cols

    @property
    def fixed_columns(self) -> np.ndarray:
        """Ordered columns whose observed latent values are fixed at their normal scores."""
        return np.array([o.latent for o in self.ordered if o.fixed], dtype=np.int64)

    @property
    def rank_columns(self) -> np.ndarray:
        """Ordered columns under the rank likelihood (invariant to increasing maps)."""
        return np.array([o.latent for o in self.ordered if not o.fixed], dtype=np.int64)

    @property
    def rescalable_columns(self) -> np.ndarray:
        """Columns whose likelihood does not change when they are rescaled alone.

        These are the rank columns and the ``"rpl"`` level columns, sorted.
        """
        return np.sort(np.r_[self.rank_columns, self.k_lvl_cols]).astype(np.int64)

    @cached_property
    def unconstrained_records(self) -> list[tuple[int, np.ndarray]]:
        """Per latent column, the records whose latent value the data leave unconstrained.

        Computed once per layout (the sweep reads it every iteration); do not modify it.

        An ordered column's missing values, special codes and rule-fixed records, and the
        records of a multinomial-probit variable that show no level of it (fixed by a rule):
        there ``z_ij ~ N(alpha_j + lambda_j' eta_i, sigma_j^2)`` with no truncation. Only
        columns with at least one such record are listed, as ``(latent index, sorted record
        indices)``. (``"rpl"`` level columns treat an unknown level as "not this level", a
        constraint, so they are never listed.)
        """
        out = []
        for r in range(len(self.k_mnp_off) - 1):
            free = np.flatnonzero(self.k_mnp_codes[r] == -2)
            if len(free):
                out.extend((int(j), free) for j in
                           self.k_mnp_cols[self.k_mnp_off[r]:self.k_mnp_off[r + 1]])
        for c, j in enumerate(self.k_ord_cols):
            free = np.sort(self.k_mis_idx[self.k_mis_off[c]:self.k_mis_off[c + 1]])
            if len(free):
                out.append((int(j), free))
        return sorted(out, key=lambda t: t[0])

    @property
    def categorical_likelihood(self) -> str | None:
        """The likelihood of the categorical blocks (None without categorical variables)."""
        kinds = {b.likelihood for b in self.categorical}
        return kinds.pop() if len(kinds) == 1 else (None if not kinds else "mixed")

    # ------------------------------------------------------------------------------ building

    @classmethod
    def from_data(
        cls,
        df: pd.DataFrame,
        schema: Schema,
        *,
        ordinal_threshold: int = 10,
        max_levels: int = 50,
        categorical_likelihood: str = "mnp",
        continuous: str = "normal_scores",
        continuous_share: float = 0.5,
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
            Largest number of levels accepted for a categorical variable.
        categorical_likelihood : {"mnp", "rpl"}, default "mnp"
            The multinomial probit (K - 1 utility columns, a proper probability model) or the
            paper's extended rank-probit likelihood (K level columns).
        continuous : {"normal_scores", "rank"}, default "normal_scores"
            How columns with mostly distinct values are modelled (see the module docstring).
        continuous_share : float, default 0.5
            Share of distinct observed values from which a column counts as continuous.

        Returns
        -------
        LatentLayout
        """
        if categorical_likelihood not in CATEGORICAL_LIKELIHOODS:
            from bayesynth.errors import InvalidParameterError

            raise InvalidParameterError(
                f"categorical_likelihood must be one of {CATEGORICAL_LIKELIHOODS}; got "
                f"{categorical_likelihood!r}.", column="categorical_likelihood")
        if continuous not in ("normal_scores", "rank"):
            from bayesynth.errors import InvalidParameterError

            raise InvalidParameterError(
                f"continuous must be 'normal_scores' or 'rank'; got {continuous!r}.",
                column="continuous")
        df = as_numbers(df)  # dates as days since 1970-01-01
        n = len(df)
        names: list[str] = []
        cats: list[CategoricalBlock] = []
        ords: list[OrderedColumn] = []
        missing_cols: list[OrderedColumn] = []
        code_blocks: list[tuple] = []
        for name in schema.names:
            col = schema[name]
            s = df[name]
            as_categorical = (
                col.type == "categorical"
                or (col.type == "ordinal" and _n_observed(s) < ordinal_threshold)
                or (col.type == "binary" and categorical_likelihood == "mnp")
            )
            if as_categorical:
                codes_full = encode_levels(s, col)
                observed = np.unique(codes_full[codes_full >= 0])
                levels = [col.levels[c] for c in observed]
                if any(isinstance(lv, str) and lv == MISSING_LEVEL for lv in levels):
                    raise SchemaError(
                        f"Column '{name}' has a level spelled {MISSING_LEVEL!r}, the label "
                        "bayesynth keeps for missing values; rename that level (or make it "
                        "missing).", column=name)
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
                codes = codes.astype(np.int64)
                structural = rule_mask(df, schema.rules, name)
                if structural.any():  # fixed by a rule: no information about the variable
                    codes = np.where(structural, -1, codes)
                if categorical_likelihood == "mnp":
                    counts = np.bincount(codes[codes >= 0], minlength=len(levels))
                    ref = int(np.argmax(counts))  # the most frequent level
                    col_levels = [h for h in range(len(levels)) if h != ref]
                else:
                    ref = -1
                    col_levels = list(range(len(levels)))
                start = len(names)
                names.extend(f"{name}[{levels[h]}]" for h in col_levels)
                cats.append(
                    CategoricalBlock(
                        name=name,
                        latent=np.arange(start, len(names)),
                        levels=tuple(levels),
                        codes=codes,
                        likelihood=categorical_likelihood,
                        reference=ref,
                    )
                )
                continue
            if col.type in ("binary", "ordinal"):
                raw = encode_levels(s, col).astype(float)
                raw[raw < 0] = np.nan
            else:
                raw = s.to_numpy(dtype=float, na_value=np.nan)
            miss = np.isnan(raw)
            structural = rule_mask(df, schema.rules, name)
            is_code = np.isin(raw, np.asarray(col.special_codes, dtype=float)) \
                if col.special_codes else np.zeros(n, dtype=bool)
            unobserved = miss | is_code | structural
            codes = np.full(n, -1, dtype=np.int64)
            uniq, inv = np.unique(raw[~unobserved], return_inverse=True)
            codes[~unobserved] = inv
            names.append(name)
            n_obs = int((~unobserved).sum())
            fixed = (continuous == "normal_scores" and n_obs > 0
                     and len(uniq) >= continuous_share * n_obs and len(uniq) > 2)
            ords.append(
                OrderedColumn(name=name, latent=len(names) - 1, kind="value", codes=codes,
                              n_groups=len(uniq), fixed=bool(fixed))
            )
            if col.special_codes:  # value or which code: a categorical variable of its own
                levels = ["value"] + [str(c) for c in col.special_codes]
                ccodes = np.zeros(n, dtype=np.int64)
                for h, c in enumerate(col.special_codes):
                    ccodes[raw == float(c)] = h + 1
                ccodes[miss | structural] = -1  # missing or fixed by a rule: no information
                counts = np.bincount(ccodes[ccodes >= 0], minlength=len(levels))
                if (counts > 0).sum() >= 2:
                    keep = np.flatnonzero(counts > 0)
                    remap = np.full(len(levels), -1)
                    remap[keep] = np.arange(len(keep))
                    ccodes = np.where(ccodes >= 0, remap[np.maximum(ccodes, 0)], -1)
                    levels = [levels[h] for h in keep]
                    if categorical_likelihood == "mnp":
                        ref = int(np.argmax(np.bincount(ccodes[ccodes >= 0],
                                                        minlength=len(levels))))
                        col_levels = [h for h in range(len(levels)) if h != ref]
                    else:
                        ref, col_levels = -1, list(range(len(levels)))
                    code_blocks.append((f"{name}[code]", tuple(levels), ccodes, ref,
                                        col_levels))
            if miss.any():
                mcodes = miss.astype(np.int64)
                mcodes[structural] = -1
                missing_cols.append(
                    OrderedColumn(name=name, latent=-1, kind="missing",
                                  codes=mcodes, n_groups=2)
                )
        # Special-code variables, then missingness indicators, after every variable's columns.
        for cname, levels, ccodes, ref, col_levels in code_blocks:
            start = len(names)
            names.extend(f"{cname}{{{levels[h]}}}" for h in col_levels)
            cats.append(CategoricalBlock(name=cname, latent=np.arange(start, len(names)),
                                         levels=levels, codes=ccodes,
                                         likelihood=categorical_likelihood, reference=ref))
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
        rpl = [b for b in cats if b.likelihood == "rpl"]
        mnp = [b for b in cats if b.likelihood == "mnp"]
        lvl_cols = (
            np.concatenate([b.latent for b in rpl]).astype(np.int64)
            if rpl else np.zeros(0, dtype=np.int64)
        )
        sign = np.empty((len(lvl_cols), n), dtype=np.int8)
        row = 0
        for b in rpl:
            for h in range(len(b.levels)):
                sign[row] = np.where(b.codes == h, 1, -1)
                row += 1
        # Per level column, the records with that level first (z > 0), then the others.
        lvl_order = np.argsort(-sign, axis=1, kind="stable").astype(np.int64)
        lvl_npos = (sign > 0).sum(axis=1).astype(np.int64)
        mnp_cols = (np.concatenate([b.latent for b in mnp]).astype(np.int64)
                    if mnp else np.zeros(0, dtype=np.int64))
        mnp_off = np.cumsum([0] + [len(b.latent) for b in mnp]).astype(np.int64)
        mnp_codes = np.empty((len(mnp), n), dtype=np.int64)
        for r, b in enumerate(mnp):
            local = b.level_columns  # level -> column position, -1 for the reference
            mnp_codes[r] = np.where(b.codes >= 0, local[np.maximum(b.codes, 0)], -2)
        ord_cols = np.array([o.latent for o in ords], dtype=np.int64)
        ord_idx, grp_start, grp_off, mis_idx, mis_off = [], [], [0], [], [0]
        pos = 0
        for o in ords:
            obs = np.flatnonzero(o.codes >= 0)
            if o.fixed:  # observed values are data: no constraint to walk, only missing ones
                obs = obs[:0]
            order = obs[np.argsort(o.codes[obs], kind="stable")]
            counts = (np.bincount(o.codes[obs], minlength=o.n_groups) if len(obs)
                      else np.zeros(0, dtype=np.int64))
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
            k_mnp_cols=mnp_cols,
            k_mnp_off=mnp_off,
            k_mnp_codes=mnp_codes,
        )

    # ---------------------------------------------------------------------------- constraints

    def bounds_satisfied(self, z: np.ndarray) -> bool:
        """Check whether ``z`` (n x p*) lies in the rank-probit event E (strict inequalities).

        Parameters
        ----------
        z : numpy.ndarray
            A latent matrix.

        Returns
        -------
        bool
            True when ``z`` has shape (n, p*), is finite, and meets every level, utility,
            fixed-score and rank constraint of the layout.
        """
        z = np.asarray(z)
        if z.shape != (self.n, self.p_latent) or not np.all(np.isfinite(z)):
            return False
        if len(self.k_lvl_cols):
            zl = z[:, self.k_lvl_cols].T
            if not np.all(zl * self.k_lvl_sign > 0):
                return False
        for b in range(len(self.k_mnp_off) - 1):
            u = z[:, self.k_mnp_cols[self.k_mnp_off[b]:self.k_mnp_off[b + 1]]]
            codes = self.k_mnp_codes[b]
            known = codes >= -1
            found = mnp_levels(u)
            if np.any(found[known] != codes[known]):
                return False
            # strict: the winning utility beats every other and 0 strictly
            top = np.sort(np.column_stack([u, np.zeros(len(u))]), axis=1)
            if np.any(top[known, -1] == top[known, -2]):
                return False
        for o in self.ordered:
            if o.fixed:
                obs = o.codes >= 0
                if not np.array_equal(z[obs, o.latent], o.normal_scores[obs]):
                    return False
        for c, j in enumerate(self.k_ord_cols):
            starts = self.k_grp_start[self.k_grp_off[c]:self.k_grp_off[c + 1]]
            if starts[-1] == starts[0]:
                continue
            seg = z[self.k_ord_idx[starts[0]:starts[-1]], j]
            rel = starts[:-1] - starts[0]
            gmax = np.maximum.reduceat(seg, rel)
            gmin = np.minimum.reduceat(seg, rel)
            if not np.all(gmax[:-1] < gmin[1:]):
                return False
        return True

    def initial_z(self) -> np.ndarray:
        """Return a point of the constraint set, to start the sampler from.

        Normal scores of the ranks for ordered columns; +-0.5 for ``"rpl"`` level columns; 0.5
        for a record's own ``"mnp"`` utility and -0.5 for the others (all -0.5 at the reference
        level, 0 without information).

        For ordered columns each tie group gets ``Phi^-1(midrank / (m + 1))`` (m observed
        records), strictly increasing in the group; missing entries get 0.

        Returns
        -------
        numpy.ndarray
            The n x p* matrix, Fortran-ordered.
        """
        z = np.zeros((self.n, self.p_latent), order="F")
        if len(self.k_lvl_cols):
            z[:, self.k_lvl_cols] = 0.5 * self.k_lvl_sign.T
        for b in range(len(self.k_mnp_off) - 1):
            cols = self.k_mnp_cols[self.k_mnp_off[b]:self.k_mnp_off[b + 1]]
            codes = self.k_mnp_codes[b]
            block = np.where(codes[:, None] == -2, 0.0, -0.5) * np.ones((1, len(cols)))
            own = codes >= 0
            block[np.flatnonzero(own), codes[own]] = 0.5
            z[:, cols] = block
        for o in self.ordered:
            if o.fixed:
                z[:, o.latent] = o.normal_scores
        for c, j in enumerate(self.k_ord_cols):
            starts = self.k_grp_start[self.k_grp_off[c]:self.k_grp_off[c + 1]]
            m = starts[-1] - starts[0]
            if m == 0:
                continue
            mid = 0.5 * (starts[:-1] + starts[1:] - 2 * starts[0] + 1)
            scores = ndtri(mid / (m + 1.0))
            sizes = np.diff(starts)
            z[self.k_ord_idx[starts[0]:starts[-1]], j] = np.repeat(scores, sizes)
        return z


def mnp_levels(u: np.ndarray) -> np.ndarray:
    """Return the multinomial-probit level of each row of utilities ``u``.

    Parameters
    ----------
    u : numpy.ndarray
        Utilities, n x (K - 1).

    Returns
    -------
    numpy.ndarray of int64
        Per row, the position of the largest positive utility, or -1 (the reference level)
        when none is positive.
    """
    u = np.asarray(u)
    if u.shape[1] == 0:
        return np.full(len(u), -1, dtype=np.int64)
    if u.shape[1] == 1:  # two levels: the sign of the one utility (no argmax to take)
        return np.where(u[:, 0] > 0, 0, -1).astype(np.int64)
    arg = np.argmax(u, axis=1)
    return np.where(u[np.arange(len(u)), arg] > 0, arg, -1).astype(np.int64)


def _n_observed(s: pd.Series) -> int:
    return int(s.dropna().nunique())


def same_variable_level_pairs(latent_names: list[str], level_names: list[str]) -> np.ndarray:
    """Boolean matrix: True where two latent columns are levels of the same categorical variable.

    The rank-probit likelihood observes each categorical variable only through which one of its
    level columns is positive, so the correlations among the level columns of one variable (and,
    through them, the scaled intercepts) are weakly identified: they mix slowly and lean on the
    prior, while the quantities synthesis depends on (correlations between variables, level
    probabilities) are pinned down by the data.

    Parameters
    ----------
    latent_names : list of str
        Names of all latent columns; a level column's variable is the part of its name before
        the last ``[`` (as in ``"<variable>[<level>]"``).
    level_names : list of str
        Names of the categorical level columns among them.

    Returns
    -------
    numpy.ndarray of bool
        p* x p*, False on the diagonal.
    """
    levels = set(level_names)
    owner = [name.rsplit("[", 1)[0] if name in levels else None for name in latent_names]
    p = len(latent_names)
    out = np.zeros((p, p), dtype=bool)
    for i in range(p):
        for j in range(p):
            out[i, j] = i != j and owner[i] is not None and owner[i] == owner[j]
    return out


def register_layout(model, layout: LatentLayout) -> None:
    """Attach a layout to a model whose latent data are not a free variable.

    For example :func:`bayesynth.models.bart_rank_regression`. The layout travels with the
    model through PyMC's model transforms (:mod:`bayesynth.models.metadata`).

    Parameters
    ----------
    model : pymc.Model
        The model.
    layout : LatentLayout
        Its latent layout.
    """
    from bayesynth.models.metadata import attach_metadata

    attach_metadata("layout", layout, model)


def registered_layout(model) -> LatentLayout | None:
    """Return the layout attached by :func:`register_layout`, if any.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model.

    Returns
    -------
    LatentLayout or None
        The registered layout, or None when none was attached.
    """
    from bayesynth.models.metadata import model_metadata

    return model_metadata(model, "layout")
