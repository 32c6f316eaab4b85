"""What synthesis from the rank-probit copula depends on, as functions of its parameters.

Synthesis draws latent records ``z = alpha + Lambda eta + eps`` and reads the categorical levels
off their categorical columns and the ordered values off ``z_j / sqrt(Omega_jj)``. So the
quantities that decide a synthetic table, and on which convergence should be judged, are

* the implied probability of every categorical level, ``P(y_v = h)``;
* the category-conditional means of every ordered column on the synthesis scale,
  ``E[z_j / sqrt(Omega_jj) | y_v = h]``;
* the copula correlations between variables, ``C`` (a deterministic of the model).

The first two depend only on the joint normal law of a variable's categorical columns u
(mean alpha_u, covariance Sigma_uu = Lambda_u Lambda_u' + diag(sigma_u^2)) and on its
covariance with the ordered column, Sigma_ut = Lambda_u lambda_t: with
beta = Sigma_uu^-1 Sigma_ut, ``E[z_t | y = h] = beta' (E[u | y = h] - alpha_u)``. They have no
closed form; :func:`implied_quantities` estimates ``P(y = h)`` and ``E[u | y = h]`` by Monte
Carlo with common random numbers pushed through the Cholesky factor of Sigma_uu (the same
standard normal draws for every posterior draw). Everything is then a smooth function of
rotation-invariant quantities: drawing the factor scores themselves would tie the Monte Carlo
error to the (unidentified) rotation of the loadings, which moves slowly and differs between
chains, and would show up as spurious R-hat.

Where a column is shown for only some records (it has missing values, special codes, or a
schema rule fixes it when a condition holds), synthesis reads its latent value only where it is
shown: a rule overwrites the value, a code or a missing indicator replaces it. The layout gives
the records outside that region no information about the latent value, so the model's law of
it there is not identified by the data, and chains may wander along it (a selection model
whose selection correlation only the normal tails inform). The quantities are therefore the
observable ones, those of a synthetic record: the levels are read off the latent columns,
the schema's rules applied in order (rules whose conditions name ordered columns cannot be
evaluated from the categorical part and are left out), then the missingness indicators (read
off their ranks among the points no rule fixes, as synthesis reads them) and special codes;
a conditional mean of an ordered column is taken over the points where it is shown
(standardised by its mean and spread there, where synthesis reads its ranks), its mean given
its own code level is dropped (always zero), and the correlation of two ordered columns either
of which is shown for only some records is ``C[a, b | shown]``, their correlation over the
points where both are shown: ``Sigma_ab|c + Cov(E[z_a | c], E[z_b | c])`` over those points,
exact in the latent residual and Monte Carlo in the categorical part ``c``.

By default synthesis takes the one-way frequencies of a categorical variable that shows a
level for every record from the data (``CopulaSynthesizer(categorical_margins="data")``): it
shifts each draw's intercepts so that the implied level probabilities equal them. The
quantities are then judged on the calibrated draw (``categorical_margins="data"``, the
default here too): the same shift is solved on the common Monte Carlo points, the level
probabilities of those variables are the data's in every draw (and are not judged), and what
remains random is the dependence, the pair associations and conditional means with the
calibrated margins. A chain whose intercepts drift together with the factor scores' law, or
that settles on a level probability the data do not support, is judged on what synthesis then
does with it. ``categorical_margins="model"`` judges the draw's own intercepts.

Under the multinomial probit the level probabilities sum to one by construction. Under the
paper's rank-probit likelihood (``"rpl"``) only points with exactly one positive level column
are valid; the probabilities are normalised over them and ``valid_share`` reports their mass.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import arviz as az
import numba
import numpy as np
import pandas as pd
from scipy.special import ndtri

from bayesynth.models.layout import MISSING_LEVEL, LatentLayout
from bayesynth.models.level_calibration import calibrate_block
from bayesynth.rules import _is_missing

__all__ = ["CopulaBlocks", "implied_quantities", "synthesis_quantity_table", "effective_rhat",
           "effective_ess", "judge_thinning", "not_judged", "data_margins",
           "N_MC", "BLOCKS_ATTR", "MAX_DRAWS", "CATEGORICAL_MARGINS",
           "check_categorical_margins", "PARALLEL_MIN_DRAWS", "draw_arrays"]

#: Attribute of ``idata.posterior`` holding the copula's blocks (JSON), written by
#: :func:`bayesynth.sample`.
BLOCKS_ATTR = "copula_blocks"

#: Default Monte Carlo size of :func:`implied_quantities`. The points are common to all draws,
#: so their error is a fixed function of the parameters, and it drifts with any parameter that
#: drifts: too few points and R-hat and ESS judge the estimator, not the posterior. Measured
#: (2026-12-05, ``benchmarks/quantity_estimator.py``) on a copula of six SD2011 columns
#: (placesize, region, age, weight, height, sex; 2 x 500 kept draws), over the 32 conditional
#: means of height and weight given the 16 regions, whose posterior sd is about 0.055: at 2,000
#: points their median bulk ESS was 37-43 and their posterior sd 0.067 (two seeds of the
#: points), at 8,000 149-176 and 0.058, at 100,000 244-259 and 0.055; the largest R-hat
#: 1.15-1.26, 1.10-1.11 and 1.07-1.10. On SD2011's whole table (k = 20, p* = 147; one
#: core, nothing else running, 40 draws) a draw then costs 0.094-0.099 s instead of
#: 0.063-0.065 s. (Integrating part of each utility's residual out of the level
#: indicators by quadrature was measured too: at equal cost, more points did better.)
N_MC = 8000

#: Default number of draws (all chains together) on which :func:`synthesis_quantity_table`
#: computes R-hat and ESS. R-hat of independent draws still fluctuates: over 580 quantities
#: (the demo table's) of 2 chains of iid normal draws, the largest R-hat has median 1.0097 and
#: exceeds 1.01 in 45% of replicates with 1,000 draws in all, median 1.0050 with 2,000 and
#: 1.0026 with 4,000 (20 replicates each). Fewer draws would make the 1.01 threshold flag
#: converged chains; the cost is linear in the draws (about 2 ms a draw on the demo table at
#: 2,000 Monte Carlo points; at 8,000, 10-11 ms against 3.6 on six SD2011 columns, p* = 24).
MAX_DRAWS = 4000

#: Fewest draws (all chains together) for which :func:`synthesis_quantity_table` computes the
#: chains in worker processes (forked, on Linux: see :func:`_forked_workers`), and then the
#: quantities' R-hat and ESS (the same threshold; not measured for them on its own): below it
#: their start and the transfer of the draws cost about what they save. Measured on
#: 2026-12-07 (two cores, two chains, one process against two): the demo table (559
#: quantities) 0.83 against 0.79 s for 50 draws, 1.2 against 1.0 s for 100, 1.9 against 1.5 s
#: for 200, 7.2 against 4.1 s for 1,000; SD2011 (2,353) 6.1 against 4.5 s for 100, 35.4
#: against 20.2 s for 400.
PARALLEL_MIN_DRAWS = 100

#: Smallest bulk ESS per chain of a quantity synthesis uses for a fit to count as converged,
#: beside R-hat at most 1.01: Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021) ask for a
#: bulk ESS above 100 per chain before R-hat and the posterior means are trusted. Read by
#: :func:`bayesynth.evaluation.synthesis_diagnostics` (its default ``ess_min``) and by the
#: closing check of :func:`bayesynth.sample`.
ESS_MIN_PER_CHAIN = 100

#: Values of ``categorical_margins``: ``"data"`` judges the quantities with each draw's
#: intercepts shifted to the data's level frequencies (what ``CopulaSynthesizer`` does by
#: default), ``"model"`` with the draw's own.
CATEGORICAL_MARGINS = ("data", "model")


def check_categorical_margins(value: str) -> None:
    """Raise an ``InvalidParameterError`` unless ``value`` is in :data:`CATEGORICAL_MARGINS`."""
    if value not in CATEGORICAL_MARGINS:
        from bayesynth.errors import InvalidParameterError

        raise InvalidParameterError(f"categorical_margins must be one of {CATEGORICAL_MARGINS}; "
                                    f"got {value!r}.", column="categorical_margins")


@dataclass(frozen=True)
class CopulaBlocks:
    """The part of a layout that :func:`implied_quantities` needs (JSON-friendly).

    Attributes
    ----------
    categorical : list of dict
        Per categorical variable: ``name``, ``latent`` (column indices), ``levels``,
        ``likelihood``, ``reference`` and, for a multinomial-probit variable that shows a
        level for every record, ``margins`` (the data's one-way level frequencies, to which
        synthesis calibrates the intercepts: :func:`data_margins`).
    ordered : list of dict
        Per ordered value column: ``name``, ``latent``, and where it is shown for only some
        records ``missing`` (the latent column of its missingness indicator),
        ``missing_share`` (the observed share missing) and ``code_block`` (the index of its
        special-code block in ``categorical``).
    rules : list of dict
        The schema's rules that can be evaluated on the categorical part and on which ordered
        columns are missing, in order: ``when`` (pairs of a categorical block index and the
        level indices that meet the condition), ``when_missing`` where present (indices in
        ``ordered`` of columns that must be missing too: "weight is missing if height is")
        and either ``block`` and ``level`` (a categorical variable fixed at a level; -1: at no
        modelled level) or ``ordered``, ``code_level`` (an ordered column fixed, and the
        level its code block then shows; -1: none) and ``missing`` (whether the rule's value
        is a missing value).
    """

    categorical: tuple
    ordered: tuple
    rules: tuple = ()

    @classmethod
    def from_layout(cls, layout: LatentLayout, rules: Sequence = ()) -> CopulaBlocks:
        """Extract the blocks of a :class:`~bayesynth.models.layout.LatentLayout`.

        Parameters
        ----------
        layout : LatentLayout
            Layout of a copula model (its categorical blocks and its ordered columns; only
            ordered columns of kind ``"value"`` are kept, with their missingness indicators
            and special-code blocks).
        rules : sequence of bayesynth.rules.Rule, optional
            The schema's rules. Those whose conditions all name categorical variables are
            kept; a rule conditioning on an ordered column, or fixing a column the layout does
            not model, is left out.

        Returns
        -------
        CopulaBlocks
        """
        margins = data_margins(layout)
        cats = tuple({"name": b.name, "latent": [int(j) for j in b.latent],
                      "levels": [str(v) for v in b.levels], "likelihood": b.likelihood,
                      "reference": int(b.reference),
                      **({"margins": margins[b.name]} if b.name in margins else {})}
                     for b in layout.categorical)
        cat_index = {b.name: i for i, b in enumerate(layout.categorical)}
        missing = {o.name: o for o in layout.ordered if o.kind == "missing"}
        ords = []
        for o in layout.ordered:
            if o.kind != "value":
                continue
            entry: dict = {"name": o.name, "latent": int(o.latent)}
            if o.name in missing:
                m = missing[o.name]
                entry["missing"] = int(m.latent)
                entry["missing_share"] = float(np.mean(m.codes[m.codes >= 0])) \
                    if np.any(m.codes >= 0) else 0.0
            if f"{o.name}[code]" in cat_index:
                entry["code_block"] = cat_index[f"{o.name}[code]"]
            ords.append(entry)
        ord_index = {o["name"]: i for i, o in enumerate(ords)}
        kept = []
        for r in rules:
            # conditions on levels, and on an ordered column being missing (its values
            # themselves are not levels: such a rule is left out)
            if not all(col in cat_index or (col in ord_index and levels
                                            and all(_is_missing(v) for v in levels))
                       for col, levels in r.when):
                continue
            when = [[cat_index[col], _level_indices(cats[cat_index[col]]["levels"], levels)]
                    for col, levels in r.when if col in cat_index]
            when_missing = [ord_index[col] for col, _ in r.when if col not in cat_index]
            extra = {"when_missing": when_missing} if when_missing else {}
            if r.column in cat_index:
                idx = _level_indices(cats[cat_index[r.column]]["levels"], [r.value])
                kept.append({"when": when, **extra, "block": cat_index[r.column],
                             "level": idx[0] if idx else -1})
            elif r.column in ord_index:
                cb = ords[ord_index[r.column]].get("code_block")
                idx = (_code_level(cats[cb]["levels"], r.value) if cb is not None else -1)
                kept.append({"when": when, **extra, "ordered": ord_index[r.column],
                             "code_level": idx, "missing": bool(_is_missing(r.value))})
        return cls(cats, tuple(ords), tuple(kept))

    @classmethod
    def from_model(cls, model) -> CopulaBlocks:
        """Extract the blocks of a model built by :func:`bayesynth.models.rank_probit_copula`.

        Parameters
        ----------
        model : pymc.Model
            The copula model (its layout, and its schema's rules when it carries its source).

        Returns
        -------
        CopulaBlocks
        """
        from bayesynth.models.metadata import model_metadata
        from bayesynth.models.rank_probit_copula import get_layout

        source = model_metadata(model, "copula_source") or {}
        schema = source.get("schema")
        return cls.from_layout(get_layout(model), schema.rules if schema is not None else ())

    @property
    def partial(self) -> list[bool]:
        """Per ordered value column, whether it is shown for only some records."""
        ruled = {r["ordered"] for r in self.rules if "ordered" in r}
        return [o.get("missing") is not None or o.get("code_block") is not None or i in ruled
                for i, o in enumerate(self.ordered)]

    def to_dict(self) -> dict:
        """JSON-ready form.

        Returns
        -------
        dict
            ``{"categorical": [...], "ordered": [...]}``, read back by :meth:`from_dict`.
        """
        return {"categorical": list(self.categorical), "ordered": list(self.ordered),
                "rules": list(self.rules)}

    @classmethod
    def from_dict(cls, d: dict) -> CopulaBlocks:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        d : dict
            With keys ``"categorical"``, ``"ordered"`` and (optional) ``"rules"``, as written
            by :meth:`to_dict`.

        Returns
        -------
        CopulaBlocks
        """
        return cls(tuple(d["categorical"]), tuple(d["ordered"]), tuple(d.get("rules", ())))

    @property
    def category_labels(self) -> list[str]:
        """``"variable=level"`` for every level of every categorical variable."""
        return [f"{b['name']}={lev}" for b in self.categorical for lev in b["levels"]]

    @property
    def ordered_names(self) -> list[str]:
        """Names of the ordered value columns."""
        return [o["name"] for o in self.ordered]

    @property
    def pair_labels(self) -> list[str]:
        """``"a ~ b"`` for every pair of categorical variables.

        In the order of the pairs in :func:`implied_quantities`.
        """
        names = [b["name"] for b in self.categorical]
        return [f"{a} ~ {b}" for i, a in enumerate(names) for b in names[i + 1:]]


def data_margins(layout: LatentLayout) -> dict[str, list[float]]:
    """One-way level frequencies of the categorical variables that synthesis calibrates.

    Parameters
    ----------
    layout : LatentLayout
        Layout of a copula model.

    Returns
    -------
    dict
        Per multinomial-probit variable whose every record shows one of its levels (no rule
        fixes it for some records), the share of records at each level, in ``levels`` order.
        The synthesizer's ``categorical_margins="data"`` shifts each posterior draw's
        intercepts of these variables to these shares
        (:func:`bayesynth.synthesis.level_margins.calibrated_intercepts`).
    """
    return {b.name: (np.bincount(b.codes, minlength=len(b.levels)) / len(b.codes)).tolist()
            for b in layout.categorical if b.likelihood == "mnp" and np.all(b.codes >= 0)}


def _level_indices(levels: Sequence[str], values: Sequence) -> list[int]:
    """Find the levels (strings) that a rule's values name (None: the missing level)."""
    wanted = {MISSING_LEVEL if _is_missing(v) else str(v) for v in values}
    return [h for h, lev in enumerate(levels) if lev in wanted]


def _missingness_order(rules: Sequence[dict], n_ord: int
                       ) -> tuple[list[int], dict[int, list[dict]], list[dict]]:
    """Order in which to decide which ordered columns are missing.

    A rule conditioned on some columns being missing ("weight is missing if height is") is
    applied once those columns' missingness is decided: the columns it conditions on come
    first (a cycle falls back to column order). Returns the order, the rules conditioned on
    missing values that fix each ordered column (in the schema's order), and those that fix a
    categorical variable (applied after every column's missingness).
    """
    deferred: dict[int, list[dict]] = {i: [] for i in range(n_ord)}
    late: list[dict] = []
    needs: dict[int, set[int]] = {i: set() for i in range(n_ord)}
    for r in rules:
        if not r.get("when_missing"):
            continue
        if "block" in r:
            late.append(r)
        else:
            deferred[r["ordered"]].append(r)
            needs[r["ordered"]] |= set(r["when_missing"]) - {r["ordered"]}
    order: list[int] = []
    left = list(range(n_ord))
    while left:
        ready = [i for i in left if needs[i] <= set(order)]
        take = ready[0] if ready else left[0]
        order.append(take)
        left.remove(take)
    return order, deferred, late


def _code_level(levels: Sequence[str], value) -> int:
    """Index of the special-code level equal to ``value`` in a code block (-1: none)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return -1
    for h, lev in enumerate(levels):
        if lev != "value" and float(lev) == x:
            return h
    return -1


@numba.njit(cache=True, nogil=True)
def _block_levels(u: np.ndarray, offsets: np.ndarray, col_level: np.ndarray,
                  reference: np.ndarray, mnp: np.ndarray) -> np.ndarray:
    """Level of every Monte Carlo point in every categorical block, in one pass.

    ``u`` (n, n_c) holds the blocks' latent columns side by side (block ``b`` in
    ``offsets[b]:offsets[b + 1]``); ``col_level[j]`` is the level that column ``j`` stands for.
    A multinomial-probit block takes the level of its largest utility if that is positive and
    its reference level otherwise (as :func:`~bayesynth.models.layout.mnp_levels`); an
    ``"rpl"`` block takes the level of its one positive column, -1 (invalid) where not exactly
    one is positive. (A NaN utility is passed over; the parameters of a draw are finite.)
    """
    n = u.shape[0]
    V = len(offsets) - 1
    out = np.empty((V, n), dtype=np.int64)
    for b in range(V):
        lo, hi = offsets[b], offsets[b + 1]
        for m in range(n):
            if hi == lo:  # no column: the reference level (mnp), no level (rpl)
                out[b, m] = reference[b] if mnp[b] else -1
            elif mnp[b]:
                best, arg = u[m, lo], lo
                for j in range(lo + 1, hi):
                    if u[m, j] > best:
                        best, arg = u[m, j], j
                out[b, m] = col_level[arg] if best > 0.0 else reference[b]
            else:
                count, arg = 0, -1
                for j in range(lo, hi):
                    if u[m, j] > 0.0:
                        count += 1
                        arg = j
                out[b, m] = col_level[arg] if count == 1 else -1
    return out


@numba.njit(cache=True, nogil=True)
def _level_sums(levels: np.ndarray, starts: np.ndarray, MW: np.ndarray, W: np.ndarray
                ) -> tuple:
    """Per level of every block: its count of points, and the sums of ``W`` and ``MW`` there.

    ``levels`` (V, n) as :func:`_block_levels` (-1: no level); block ``b``'s levels are rows
    ``starts[b]:`` of the sums. Returns ``count`` (n_cat,), ``w_sum`` and ``mw_sum``
    (n_cat, n_ord).
    """
    V, n = levels.shape
    n_cat = starts[V]
    n_ord = W.shape[1]
    count = np.zeros(n_cat)
    w_sum = np.zeros((n_cat, n_ord))
    mw_sum = np.zeros((n_cat, n_ord))
    for m in range(n):
        for b in range(V):
            h = levels[b, m]
            if h < 0:
                continue
            r = starts[b] + h
            count[r] += 1.0
            for j in range(n_ord):
                w_sum[r, j] += W[m, j]
                mw_sum[r, j] += MW[m, j]
    return count, w_sum, mw_sum


@numba.njit(cache=True, nogil=True)
def _pair_mi(levels: np.ndarray, n_levels: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Mutual information (nats) of the two-way table of each pair of blocks' levels.

    Over the points where both show a level (``levels`` >= 0); 0 for a pair with none.
    """
    n = levels.shape[1]
    out = np.zeros(len(pairs))
    for r in range(len(pairs)):
        a, b = pairs[r, 0], pairs[r, 1]
        Ka, Kb = n_levels[a], n_levels[b]
        tab = np.zeros((Ka, Kb))
        for m in range(n):
            la, lb = levels[a, m], levels[b, m]
            if la >= 0 and lb >= 0:
                tab[la, lb] += 1.0
        tot = tab.sum()
        if tot == 0.0:
            continue
        ra = tab.sum(axis=1) / tot
        cb = tab.sum(axis=0) / tot
        mi = 0.0
        for i in range(Ka):
            for j in range(Kb):
                if tab[i, j] > 0.0:
                    pj = tab[i, j] / tot
                    mi += pj * np.log(pj / (ra[i] * cb[j]))
        out[r] = mi
    return out


def implied_quantities(
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    sigma: np.ndarray,
    blocks: CopulaBlocks,
    *,
    n_mc: int = N_MC,
    random_seed: int = 0,
    pairs: bool = True,
    categorical_margins: str = "data",
) -> dict[str, np.ndarray]:
    """Compute the implied level probabilities, pair associations and conditional means.

    Implied level probabilities, pairwise associations, category-conditional means and the
    correlations of ordered columns shown for only some records, per posterior draw: the
    observable quantities of a synthetic record (see the module docstring).

    The categorical columns and the missingness indicators (``c``) are drawn jointly from
    their normal law N(alpha_c, Sigma_cc) by pushing common standard normal draws through the
    Cholesky factor of Sigma_cc; the level of each variable is read off its columns, then the
    rules, missing values and special codes are applied. An ordered column t enters
    through ``E[z_t | c] = beta_t' (c - alpha_c)``, ``beta_t = Sigma_cc^-1 Sigma_ct`` (its
    residual averaged out analytically).

    Parameters
    ----------
    alpha_full : numpy.ndarray, shape (S, p*)
        Intercepts of all latent columns (zero for a column without one), per posterior draw.
    Lambda : numpy.ndarray, shape (S, p*, k)
        Loadings, per posterior draw.
    sigma : numpy.ndarray, shape (S, p*)
        Residual standard deviations, per posterior draw.
    blocks : CopulaBlocks
        Which latent columns belong to which categorical variable and ordered column, and
        the rules.
    n_mc : int, default :data:`N_MC`
        Monte Carlo points (common to all draws).
    random_seed : int, default 0
        Seed of the common standard normal draws.
    pairs : bool, default True
        Also return the mutual information of every pair of categorical variables.
    categorical_margins : {"data", "model"}, default "data"
        ``"data"``: the intercepts of every block that carries ``margins`` are first shifted,
        per draw, so that its level shares over the Monte Carlo points equal those margins
        (:func:`~bayesynth.models.level_calibration.calibrate_block`, as the synthesizer does
        by default); the quantities are those of the calibrated draw. ``"model"``: the draw's
        own intercepts.

    Returns
    -------
    dict
        ``category_prob`` (S, n_categories), over the points where the variable shows a level;
        ``conditional_mean`` (S, n_categories, n_ordered), NaN where a level has no Monte Carlo
        point among those where the ordered column is shown (and for a column given its own
        code level); ``pair_mi`` (S, n_pairs), the mutual information (nats) of each pair's
        implied two-way table; ``ordered_corr`` (S, n_ordered, n_ordered), the correlation
        over the points where both columns are shown, for pairs of which one is shown for
        only some records (NaN elsewhere: there it is ``C``); ``shown_share`` (S, n_ordered),
        the share of points where each ordered column shows a value; ``valid_share`` (S,
        n_variables): the mass of points that are some level before missing values, codes and
        rules (1 for the multinomial probit; for ``"rpl"`` the probabilities are normalised
        over the valid points); ``calibrated`` (n_variables,) bool, whose intercepts were
        shifted to the data's margins.
    """
    check_categorical_margins(categorical_margins)
    S, p, k = Lambda.shape
    rng = np.random.default_rng(random_seed)
    cats, ords = blocks.categorical, blocks.ordered
    n_cat = sum(len(b["levels"]) for b in cats)
    n_ord = len(ords)
    ord_cols = np.array([o["latent"] for o in ords], dtype=np.int64)
    cat_cols = (np.concatenate([np.asarray(b["latent"]) for b in cats]).astype(np.int64)
                if cats else np.zeros(0, np.int64))
    miss = [(i, int(o["missing"]), float(o.get("missing_share", 0.0)))
            for i, o in enumerate(ords) if o.get("missing") is not None]
    c_cols = np.r_[cat_cols, [m[1] for m in miss]].astype(np.int64)
    miss_at = {i: (j, col, share) for j, (i, col, share) in enumerate(miss)}
    miss_order, deferred, late = _missingness_order(blocks.rules, n_ord)
    n_c = len(cat_cols)
    offsets = np.cumsum([0] + [len(b["latent"]) for b in cats])
    partial = np.array(blocks.partial, dtype=bool)
    value_level = [b["levels"].index("value") if "value" in b["levels"] else -1 for b in cats]
    # per block, the ordered columns it is the code block of (their mean given it: no quantity)
    own = [[i for i, o in enumerate(ords) if o.get("code_block") == b_i]
           for b_i in range(len(cats))]
    pair_list = [(a, b) for a in range(len(cats)) for b in range(a + 1, len(cats))] if pairs \
        else []
    opairs = [(a, b) for a in range(n_ord) for b in range(a + 1, n_ord)
              if partial[a] or partial[b]]
    any_partial = bool(partial.any())
    xi = rng.standard_normal((n_mc, len(c_cols)))
    prob = np.zeros((S, n_cat))
    cmean = np.full((S, n_cat, n_ord), np.nan)
    valid = np.ones((S, len(cats)))
    pmi = np.zeros((S, len(pair_list)))
    ocorr = np.full((S, n_ord, n_ord), np.nan)
    shown_share = np.ones((S, n_ord))
    calibrated = np.array([categorical_margins == "data" and b["likelihood"] == "mnp"
                           and b.get("margins") is not None for b in cats], dtype=bool)
    out = {"category_prob": prob, "conditional_mean": cmean, "valid_share": valid,
           "pair_mi": pmi, "ordered_corr": ocorr, "shown_share": shown_share,
           "calibrated": calibrated}
    if not len(c_cols):
        return out
    # Calibration targets and each block's last shift (consecutive draws are close, so the
    # previous draw's shift is a good start; the solution does not depend on the start).
    targets, shifts = {}, {}
    for b_i in np.flatnonzero(calibrated):
        b = cats[b_i]
        margin = np.asarray(b["margins"], dtype=float)
        targets[b_i] = margin[[h for h in range(len(b["levels"])) if h != b["reference"]]]
        shifts[b_i] = np.zeros(len(b["latent"]))
    # Per column of the categorical blocks, the level it stands for (multinomial probit: the
    # levels other than the reference, in order; "rpl": one column per level)
    col_level = np.array([h for b in cats for h in range(len(b["levels"]))
                          if b["likelihood"] != "mnp" or h != b["reference"]], dtype=np.int64)
    reference = np.array([b["reference"] for b in cats], dtype=np.int64)
    is_mnp = np.array([b["likelihood"] == "mnp" for b in cats], dtype=np.bool_)
    n_levels = np.array([len(b["levels"]) for b in cats], dtype=np.int64)
    starts = np.r_[0, np.cumsum(n_levels)].astype(np.int64)
    pair_arr = np.array(pair_list, dtype=np.int64).reshape(-1, 2)
    opair_arr = np.array(opairs, dtype=np.int64).reshape(-1, 2)
    for s in range(S):
        L, sig = Lambda[s], sigma[s]
        sd = np.sqrt((L**2).sum(axis=1) + sig**2)
        Lc = L[c_cols]
        Scc = Lc @ Lc.T + np.diag(sig[c_cols] ** 2)
        dev = xi @ np.linalg.cholesky(Scc).T  # c - alpha_c
        a_c = alpha_full[s, c_cols].copy()
        for b_i, target in targets.items():
            blk = slice(offsets[b_i], offsets[b_i + 1])
            a0 = alpha_full[s, c_cols[blk]]
            # tol: the hard shares over n_mc points resolve 1 / n_mc at best
            a = calibrate_block(a0 + shifts[b_i], dev[:, blk], target, tol=1e-6)
            shifts[b_i] = a - a0
            a_c[blk] = a
        u = a_c + dev
        level_mat = _block_levels(u, offsets, col_level, reference, is_mnp)
        valid[s] = (level_mat >= 0).mean(axis=1)
        levels = list(level_mat)  # rows, views: the rules below replace whole rows
        ruled = np.zeros((n_mc, n_ord), dtype=bool)
        absent = np.zeros((n_mc, n_ord), dtype=bool)  # missing: by a rule or its indicator

        def apply(r):
            cond = np.ones(n_mc, dtype=bool)
            for b_i, idx in r["when"]:
                cond &= np.isin(levels[b_i], idx)
            for i_m in r.get("when_missing", ()):
                cond &= absent[:, i_m]
            if "block" in r:
                levels[r["block"]] = np.where(cond, r["level"], levels[r["block"]])
                return
            i = r["ordered"]
            ruled[cond, i] = True
            if r.get("missing"):
                absent[cond, i] = True
            cb = ords[i].get("code_block")
            if cb is not None:
                levels[cb] = np.where(cond, r["code_level"], levels[cb])

        for r in blocks.rules:  # in order, on the observable levels, as synthesis does
            if not r.get("when_missing"):
                apply(r)
        for i in miss_order:
            # a rule on which columns are missing, once those are known (synthesis reads
            # them off its first decoding)
            for r in deferred[i]:
                apply(r)
            if i not in miss_at:
                continue
            j, col, share = miss_at[i]
            # Missing where the indicator is above its (1 - share) point; synthesis reads that
            # point off the ranks among the records no rule fixes, so here too.
            x = u[:, n_c + j] / sd[col]
            free = ~ruled[:, i]
            if not free.any():
                continue
            if free.all():
                thr = ndtri(1.0 - share) if 0.0 < share < 1.0 else (np.inf if share <= 0
                                                                    else -np.inf)
            else:
                thr = np.quantile(x[free], 1.0 - share)
            gone = free & (x > thr)
            absent[:, i] |= gone
            cb = ords[i].get("code_block")
            if cb is not None:  # a missing value shows no code either
                levels[cb] = np.where(gone, -1, levels[cb])
        for r in late:  # rules on missing values that fix a categorical variable
            apply(r)
        shown = ~ruled & ~absent  # (a rule's missing values are among its ruled points)
        for i, o in enumerate(ords):  # a special code replaces the value
            if o.get("code_block") is not None:
                shown[:, i] &= levels[o["code_block"]] == value_level[o["code_block"]]
        shown_share[s] = shown.mean(axis=0)
        if n_ord:
            Sco = Lc @ L[ord_cols].T
            beta = np.linalg.solve(Scc, Sco)
            M = dev @ beta  # E[z_t | c], (n_mc, n_ord)
            Lo = L[ord_cols]
            resid = Lo @ Lo.T + np.diag(sig[ord_cols] ** 2) - Sco.T @ beta  # Cov(z_o | c)
            W = shown.astype(float)
            MW = M * W  # once per draw, for every block below
            if any_partial:
                n_shown = np.maximum(W.sum(axis=0), 1.0)
                mu = np.where(partial, MW.sum(axis=0) / n_shown, 0.0)
                var = np.where(partial,
                               np.diag(resid) + (W * (M - mu) ** 2).sum(axis=0) / n_shown,
                               sd[ord_cols] ** 2)
            else:  # every ordered column shown everywhere: its own mean and spread
                mu, var = np.zeros(n_ord), sd[ord_cols] ** 2
        else:
            W = MW = np.zeros((n_mc, 0))
        level_mat = np.stack(levels) if levels else np.zeros((0, n_mc), dtype=np.int64)
        count, w_sum, mw_sum = _level_sums(level_mat, starts, MW, W)
        for b_i in range(len(cats)):
            blk = slice(starts[b_i], starts[b_i + 1])
            if count[blk].sum():
                prob[s, blk] = count[blk] / count[blk].sum()
        if n_ord:
            with np.errstate(invalid="ignore", divide="ignore"):
                cm = (mw_sum / w_sum - mu) / np.sqrt(var)
            cm[w_sum == 0] = np.nan
            for b_i in range(len(cats)):
                cm[starts[b_i]:starts[b_i + 1], own[b_i]] = np.nan
            cmean[s] = cm
        if len(opair_arr):
            # Over the points that show both columns of a pair: the counts, the sums of each
            # column and the cross products, for every pair at once
            both = W.T @ W
            first = MW.T @ W  # [a, b]: the sum of M_a where a and b are shown
            sq = (MW * M).T @ W
            cross = MW.T @ MW
            a_, b_ = opair_arr[:, 0], opair_arr[:, 1]
            nb = both[a_, b_]
            ok = nb >= 2
            with np.errstate(invalid="ignore", divide="ignore"):
                ma, mb = first[a_, b_] / nb, first[b_, a_] / nb
                cov = resid[a_, b_] + cross[a_, b_] / nb - ma * mb
                va = resid[a_, a_] + sq[a_, b_] / nb - ma ** 2
                vb = resid[b_, b_] + sq[b_, a_] / nb - mb ** 2
                r_ab = cov / np.sqrt(va * vb)
            ocorr[s, a_[ok], b_[ok]] = r_ab[ok]
            ocorr[s, b_[ok], a_[ok]] = r_ab[ok]
        if len(pair_arr):
            pmi[s] = _pair_mi(level_mat, n_levels, pair_arr)
    return out


def labels(blocks: CopulaBlocks) -> tuple[list[str], list[str], list[str]]:
    """Coordinate labels: categories, ordered columns, categorical variables."""
    return blocks.category_labels, blocks.ordered_names, [b["name"] for b in blocks.categorical]


def between_variable_pairs(latent_names: Sequence[str], level_names: Sequence[str]
                           ) -> np.ndarray:
    """Upper-triangle mask of the correlations between different variables."""
    from bayesynth.models.layout import same_variable_level_pairs

    same = same_variable_level_pairs(list(latent_names), list(level_names))
    p = len(latent_names)
    return np.triu(~same & ~np.eye(p, dtype=bool), 1)


def _stacked(post, name: str) -> np.ndarray:
    return post[name].transpose("chain", "draw", ...).values


def draw_arrays(post) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return a copula posterior's draws as :func:`implied_quantities` reads them, per chain.

    ``alpha_full`` (chain, draw, p*), the intercepts with zeros for the columns without one;
    ``Lambda`` (chain, draw, p*, k); ``sigma`` (chain, draw, p*).
    """
    latent = [str(v) for v in post.coords["latent"].values]
    af = np.zeros((post.sizes["chain"], post.sizes["draw"], len(latent)))
    if "alpha" in post:
        af[..., [latent.index(str(v)) for v in post.coords["level"].values]] = \
            _stacked(post, "alpha")
    return af, _stacked(post, "Lambda"), _stacked(post, "sigma")


def _chain_quantities(args: tuple) -> dict[str, np.ndarray]:
    """One chain's :func:`implied_quantities`, with one BLAS thread (a worker's task)."""
    from threadpoolctl import threadpool_limits

    af, Lam, sig, blocks, n_mc, categorical_margins = args
    with threadpool_limits(limits=1, user_api="blas"):
        return implied_quantities(af, Lam, sig, blocks, n_mc=n_mc,
                                  categorical_margins=categorical_margins)


def _forked_workers(tasks: int, cores: int | None, draws: int) -> int:
    """Worker processes for ``tasks`` independent tasks: 1 (this process) unless forking pays.

    More than one only on Linux, where the workers are forked (macOS's system libraries are
    not safe to fork), with at least :data:`PARALLEL_MIN_DRAWS` draws in all, and never inside
    a daemonic process (a dask worker), which cannot have children. A worker started as a
    fresh interpreter (``spawn``, the default on macOS and Windows) imports bayesynth, about
    3.5 s (measured on Linux with ``spawn``: the demo table's 1,000 draws took 6.9 s in one
    process, 7.0 s in two), and re-runs a script that lacks an ``if __name__ == "__main__"``
    guard.
    """
    import multiprocessing

    workers = min(tasks, cores if cores is not None else (os.cpu_count() or 1))
    if (workers > 1 and draws >= PARALLEL_MIN_DRAWS and sys.platform.startswith("linux")
            and not multiprocessing.current_process().daemon):
        return workers
    return 1


def _forked_map(fn, args: list, workers: int) -> list:
    """``[fn(a) for a in args]``, in ``workers`` forked processes where that is above one."""
    if workers <= 1:
        return [fn(a) for a in args]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(fn, args))


def _summaries(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ArviZ's bulk ESS, tail ESS and rank-normalised split R-hat of each quantity.

    ``arr`` is (chain, draw, quantity), every value finite; R-hat is NaN with one chain.
    """
    import xarray as xr

    ds = xr.Dataset({"x": (("chain", "draw", "quantity"), arr)})
    with warnings.catch_warnings():
        # a quantity constant within the chains: R-hat 0/0, NaN (see effective_rhat)
        warnings.simplefilter("ignore", RuntimeWarning)
        bulk = az.ess(ds, method="bulk")["x"].values
        tail = az.ess(ds, method="tail")["x"].values
        rhat = (az.rhat(ds)["x"].values if arr.shape[0] > 1
                else np.full(arr.shape[-1], np.nan))
    return bulk, tail, rhat


def _implied_by_chain(af: np.ndarray, Lam: np.ndarray, sig: np.ndarray, blocks: CopulaBlocks,
                      *, n_mc: int, categorical_margins: str, cores: int | None
                      ) -> dict[str, np.ndarray]:
    """Compute :func:`implied_quantities` chain by chain, in worker processes where worth it.

    Each chain is its own call (its calibration warm-starts from its own previous draw) with
    one BLAS thread, so the result does not depend on ``cores``. ``min(cores, chains)``
    worker processes, where :func:`_forked_workers` allows more than one.
    """
    nc = af.shape[0]
    workers = _forked_workers(nc, cores, nc * af.shape[1])
    # One BLAS thread, in the workers (more would oversubscribe the cores they share) and
    # here alike: the threads' summation order changes the quantities in their last bits, and
    # ArviZ's folded R-hat turns that into differences of up to 0.006 where the two middle
    # draws tie around the median (measured on SD2011, 100 draws); so the table does not
    # depend on ``cores``.
    args = [(af[c], Lam[c], sig[c], blocks, n_mc, categorical_margins) for c in range(nc)]
    parts = _forked_map(_chain_quantities, args, workers)
    out = {key: np.concatenate([q[key] for q in parts]) for key in parts[0]
           if key != "calibrated"}
    out["calibrated"] = parts[0]["calibrated"]
    return out


def synthesis_quantity_table(idata, *, max_draws: int = MAX_DRAWS, n_mc: int | None = None,
                             model=None, categorical_margins: str = "data",
                             cores: int | None = None) -> tuple[pd.DataFrame, int]:
    """Compute R-hat and ESS of every quantity synthesis uses.

    See :func:`bayesynth.evaluation.synthesis_diagnostics`.

    Parameters
    ----------
    idata : arviz.InferenceData
        With the blocks in ``posterior.attrs[BLOCKS_ATTR]`` (:func:`bayesynth.sample` puts them
        there), or give ``model``.
    max_draws : int, default :data:`MAX_DRAWS` (4000)
        Draws used in all (evenly thinned per chain above this).
    n_mc : int, optional
        Monte Carlo points of :func:`implied_quantities` (default :data:`N_MC`).
    model : pymc.Model, optional
        The copula model, for a posterior from :func:`pymc.sample`.
    categorical_margins : {"data", "model"}, default "data"
        As the synthesizer's option of that name: ``"data"`` judges every quantity with the
        categorical margins calibrated to the data (see :func:`implied_quantities`), and leaves
        out the level probabilities of the calibrated variables (equal to the data's shares in
        every draw, up to the Monte Carlo points' resolution).
    cores : int, optional
        Processes over which the chains' quantities are computed (one chain each; default:
        as many as the chains and the machine's cores allow), and then their R-hat and ESS
        (a share of the quantities each; default: as many as the machine's cores). Fewer than
        :data:`PARALLEL_MIN_DRAWS` draws in all, and every draw where processes cannot be
        forked, are computed in this process. The table does not depend on it: each chain is
        computed on its own either way, with one BLAS thread, and each quantity's summaries
        on their own.

    Returns
    -------
    (pandas.DataFrame, int)
        The table (index: quantity; columns kind, mean, sd, ess_bulk, ess_tail, r_hat) and
        the thinning factor.
    """
    post = idata.posterior
    if model is not None:
        blocks = CopulaBlocks.from_model(model)
    elif BLOCKS_ATTR in post.attrs:
        blocks = CopulaBlocks.from_dict(json.loads(post.attrs[BLOCKS_ATTR]))
    else:
        raise KeyError("The posterior carries no copula blocks: pass model= (or sample the "
                       "model with bayesynth.sample).")
    nc, nd = post.sizes["chain"], post.sizes["draw"]
    thin = judge_thinning(nc, nd, max_draws)
    sub = post.isel(draw=slice(None, None, thin))
    nd2 = sub.sizes["draw"]
    latent = [str(v) for v in post.coords["latent"].values]
    q = _implied_by_chain(*draw_arrays(sub), blocks, n_mc=n_mc or N_MC,
                          categorical_margins=categorical_margins, cores=cores)
    parts: list[tuple[str, str, np.ndarray]] = []
    ords = blocks.ordered_names
    oidx = [latent.index(o) for o in ords]
    C = _stacked(sub, "C")
    partial = blocks.partial
    for a in range(len(oidx)):
        for b in range(a + 1, len(oidx)):
            if partial[a] or partial[b]:  # over the records that show both
                x = q["ordered_corr"][:, a, b].reshape(nc, nd2)
                if np.isfinite(x).any():  # (a draw without two such points: not judged)
                    parts.append(("C (ordered)", f"C[{ords[a]}, {ords[b]} | shown]", x))
            else:
                parts.append(("C (ordered)", f"C[{ords[a]}, {ords[b]}]",
                              C[:, :, oidx[a], oidx[b]]))
    cats = blocks.category_labels
    fixed = np.repeat(q["calibrated"], [len(b["levels"]) for b in blocks.categorical])
    for h, lab in enumerate(cats):
        if not fixed[h]:
            parts.append(("level probability", lab, q["category_prob"][:, h].reshape(nc, nd2)))
    for r, lab in enumerate(blocks.pair_labels):
        parts.append(("pair association", f"MI[{lab}]", q["pair_mi"][:, r].reshape(nc, nd2)))
    for h, lab in enumerate(cats):
        for j, o in enumerate(ords):
            x = q["conditional_mean"][:, h, j].reshape(nc, nd2)
            # NaN in every draw: no such quantity (a column given its own code level, a level
            # the column is never shown with); in some draws only: not judged (see below)
            if np.isfinite(x).any():
                parts.append(("conditional mean", f"E[{o} | {lab}]", x))
    cols = ["kind", "mean", "sd", "ess_bulk", "ess_tail", "r_hat", "undefined_share"]
    if not parts:
        return pd.DataFrame(columns=cols), thin
    arr = np.stack([x for _, _, x in parts], axis=-1)  # (chain, draw, quantity)
    # A conditional mean (or a correlation over the points that show both columns) is
    # undefined in a draw where its level got no Monte Carlo point: a rare level at n_mc
    # points. Its R-hat and ESS are then NaN and it is not judged (its mean and sd are over
    # the draws where it is defined); ``undefined_share`` says in how many draws.
    undefined = np.mean(~np.isfinite(arr), axis=(0, 1))
    # ArviZ is given only the quantities defined in every draw (it gives NaN for the others
    # too, but logs a bare "Array contains NaN-value." that a command-line user saw above
    # the warning naming them)
    whole = undefined == 0
    ess_bulk, ess_tail, r_hat = (np.full(arr.shape[-1], np.nan) for _ in range(3))
    if whole.any():
        # Each quantity's summaries are computed on their own (ArviZ loops over them), so
        # they are split among the worker processes as they come, the same to the bit.
        judged = np.flatnonzero(whole)
        workers = _forked_workers(len(judged), cores, nc * nd2)
        groups = np.array_split(judged, workers)
        done = _forked_map(_summaries, [arr[..., g] for g in groups], workers)
        for g, (bulk, tail, rhat) in zip(groups, done):
            ess_bulk[g], ess_tail[g], r_hat[g] = bulk, tail, rhat
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN quantities' mean and sd
        table = pd.DataFrame({
            "kind": [kd for kd, _, _ in parts],
            "mean": np.nanmean(arr, axis=(0, 1)),
            "sd": np.nanstd(arr, axis=(0, 1)),
            "ess_bulk": ess_bulk,
            "ess_tail": ess_tail,
            "r_hat": r_hat,
            "undefined_share": undefined,
        }, index=pd.Index([lab for _, lab, _ in parts], name="quantity"))
    return table, thin


def effective_rhat(table: pd.DataFrame) -> np.ndarray:
    """Return each quantity's R-hat as convergence checks read it.

    The R-hat where it is finite; NaN (not judged) for a constant quantity (sd 0: nothing to
    converge) and for one that is undefined in some draws for want of Monte Carlo points
    (``undefined_share`` above 0, see :func:`synthesis_quantity_table`); infinite (not
    converged) where it is undefined for another reason: a draw missing or infinite.
    """
    rhat = table["r_hat"].to_numpy(dtype=float)
    sd = table["sd"].to_numpy(dtype=float) if "sd" in table else np.full(len(rhat), np.nan)
    skipped = np.isfinite(sd) & (sd == 0)
    if "undefined_share" in table:
        skipped |= table["undefined_share"].to_numpy(dtype=float) > 0
    return np.where(np.isfinite(rhat), rhat, np.where(skipped, np.nan, np.inf))


def judge_thinning(chains: int, draws: int, max_draws: int = MAX_DRAWS) -> int:
    """Return the step by which the convergence judge thins each chain's draws.

    The smallest step that leaves at most ``max_draws`` draws in all (every step-th draw of
    each chain, from the first): :func:`synthesis_quantity_table` judges those, and the
    run-length hint of :func:`bayesynth.sample`'s warning says so.
    """
    return max(1, int(np.ceil(chains * draws / max_draws)))


def effective_ess(table: pd.DataFrame) -> np.ndarray:
    """Return each quantity's bulk ESS as convergence checks read it.

    NaN for the quantities :func:`effective_rhat` leaves unjudged; 0 (no effective draws)
    where the ESS is undefined for a quantity that is judged; the ESS otherwise.
    """
    judged = ~np.isnan(effective_rhat(table))
    ess = table["ess_bulk"].to_numpy(dtype=float)
    return np.where(judged, np.where(np.isfinite(ess), ess, 0.0), np.nan)


def not_judged(table: pd.DataFrame) -> list[str]:
    """Return the quantities left unjudged because some draws put no Monte Carlo point there."""
    if "undefined_share" not in table:
        return []
    return [str(q) for q in table.index[table["undefined_share"].to_numpy(dtype=float) > 0]]

