"""Risk and utility of synthetic contingency tables (saturated count synthesis).

Empirical tau metrics and within-p% shares compare an original and a synthetic
:class:`~bayesynth.tables.SparseTable` cell by cell without materialising the table;
:func:`loglinear_utility` compares an all-two-way-interaction Poisson log-linear model fitted to
both (Jackson et al., section 4.4). Their expected values before synthesis are in
:mod:`bayesynth.evaluation.tau_risk`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bayesynth.errors import SchemaError
from bayesynth.evaluation.regression import combine_estimates, interval_overlap
from bayesynth.evaluation.tau_risk import expected_tau, expected_within
from bayesynth.tables import SparseTable, unique_sorted

__all__ = [
    "tau_metrics",
    "within_p_shares",
    "loglinear_utility",
    "collapse",
    "paired_counts",
    "tune_saturated",
    "SaturatedTuning",
]


def _paired(original: SparseTable, synthetic: SparseTable
            ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Pair the counts of both tables on the union of their non-zero cells.

    Returns the original and synthetic counts on the union, the number of non-structural cells
    zero in both, and the union's linear indices.
    """
    union = unique_sorted(np.concatenate([original.index, synthetic.index]))
    o = np.zeros(len(union), dtype=np.int64)
    s = np.zeros(len(union), dtype=np.int64)
    o[np.searchsorted(union, original.index)] = original.counts
    s[np.searchsorted(union, synthetic.index)] = synthetic.counts
    both_zero = original.n_cells - original.n_structural() - len(union)
    return o, s, both_zero, union


def paired_counts(original: SparseTable, synthetic: SparseTable) -> pd.DataFrame:
    """Tabulate original and synthetic counts of every cell non-zero in either table.

    Cells zero in both tables are left out.

    Parameters
    ----------
    original, synthetic : SparseTable
        Tables over the same variables and levels.

    Returns
    -------
    pandas.DataFrame
        One row per cell: its linear ``index``, ``original`` and ``synthetic`` counts.
    """
    o, s, _, union = _paired(original, synthetic)
    return pd.DataFrame({"index": union, "original": o, "synthetic": s})


def tau_metrics(original: SparseTable, synthetic: SparseTable,
                ks: Sequence[int] = (0, 1, 2, 3, 4, 5)) -> pd.DataFrame:
    """Compute the empirical tau metrics (Jackson et al.), structural zeros excluded.

    tau_1(k) share of synthetic cells of size k; tau_2(k) share of original cells of size k;
    tau_3(k) share of original size-k cells still of size k; tau_4(k) share of synthetic size-k
    cells that were of size k. For k = 0 the cells are random zeros.

    Parameters
    ----------
    original, synthetic : SparseTable
        Tables over the same variables and levels.
    ks : sequence of int, default (0, 1, 2, 3, 4, 5)
        Cell sizes k to report.

    Returns
    -------
    pandas.DataFrame
        Indexed by k, columns ``tau1`` .. ``tau4``.
    """
    o, s, zz, _ = _paired(original, synthetic)
    K = len(o) + zz
    rows = []
    for k in ks:
        n_o = np.sum(o == k) + (zz if k == 0 else 0)
        n_s = np.sum(s == k) + (zz if k == 0 else 0)
        same = np.sum((o == k) & (s == k)) + (zz if k == 0 else 0)
        rows.append({"k": k, "tau1": n_s / K, "tau2": n_o / K,
                     "tau3": same / n_o if n_o else np.nan,
                     "tau4": same / n_s if n_s else np.nan})
    return pd.DataFrame(rows).set_index("k")


def within_p_shares(original: SparseTable, synthetic: SparseTable,
                    ps: Sequence[float] = (0.5, 1, 5, 10, 50)) -> pd.DataFrame:
    """Compute the share of cells whose synthetic count is within p% of the original.

    As in Jackson et al., Table 3: over all non-structural cells (``all``), over the original
    non-zero cells (``nonzero``), and over the cells non-zero in either table (``either``: fake
    cells created from random zeros count as misses, so it also reflects the pseudocount).

    Parameters
    ----------
    original, synthetic : SparseTable
        Tables over the same variables and levels.
    ps : sequence of float, default (0.5, 1, 5, 10, 50)
        Tolerances p, in percent of the original count.

    Returns
    -------
    pandas.DataFrame
        Indexed by p, columns ``all``, ``nonzero`` and ``either``.
    """
    o, s, zz, _ = _paired(original, synthetic)
    rows = []
    for p in ps:
        hit = np.abs(s - o) <= o * p / 100 + 1e-12
        nz = o > 0
        rows.append({"p": p, "all": (hit.sum() + zz) / (len(o) + zz),
                     "nonzero": hit[nz].mean() if nz.any() else np.nan,
                     "either": hit[nz].sum() / len(o) if len(o) else np.nan})
    return pd.DataFrame(rows).set_index("p")


def collapse(table: SparseTable, variables: Sequence[str]) -> pd.DataFrame:
    """Collapse a table to its marginal table over ``variables``.

    Parameters
    ----------
    table : SparseTable
        The full table.
    variables : sequence of str
        Variables of ``table`` to keep, in the order of the output columns.

    Returns
    -------
    pandas.DataFrame
        One row per marginal cell (all cells, zeros included): a categorical column of labels
        per variable and ``count``.
    """
    pos = [table.names.index(v) for v in variables]
    shape = [table.shape[j] for j in pos]
    codes = table.codes()[:, pos]
    lin = np.ravel_multi_index(codes.T, shape) if len(codes) else np.zeros(0, dtype=np.int64)
    counts = np.bincount(lin, weights=table.counts, minlength=int(np.prod(shape)))
    grid = np.array(np.unravel_index(np.arange(int(np.prod(shape))), shape)).T
    data = {v: pd.Categorical.from_codes(grid[:, j], categories=[str(x) for x in
                                                                   table.levels[v]])
            for j, v in enumerate(variables)}
    data["count"] = counts
    return pd.DataFrame(data)


def loglinear_utility(original: SparseTable, synthetic: SparseTable | Sequence[SparseTable],
                      variables: Sequence[str], *, level: float = 0.95,
                      reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Confidence-interval overlap of an all-two-way-interaction Poisson log-linear model.

    The tables are collapsed to ``variables``; the model ``count ~ (a + b + ...)^2`` is fitted
    (statsmodels GLM, Poisson) to the original and to each synthetic table; the synthetic
    intervals use the Raab et al. (2016) variance for m synthetic tables,
    ``vbar (1/m + n_syn/n)`` (2v for one table of the original size).

    Parameters
    ----------
    original, synthetic
        The original table and one or more synthetic tables (combined).
    variables : list of str
        The model's variables.
    level : float
        Confidence level of the intervals.
    reference : pandas.DataFrame, optional
        The result of an earlier call with the same original table, variables and level: its
        original estimates and intervals are reused instead of refitting (the fit of a
        600-parameter model takes seconds).

    Returns
    -------
    pandas.DataFrame
        One row per parameter: ``original``, ``synthetic`` (mean over the tables), their
        intervals and ``cio`` (negative when the intervals do not meet). Its
        ``attrs["mean_cio"]`` is the mean overlap with negative values counted as 0, so that it
        lies in [0, 1] as on Jackson et al.'s risk-utility plot; ``attrs["mean_cio_raw"]`` is
        the plain mean.

    Notes
    -----
    A pseudocount alpha spreads records over every random zero of the full table, and the
    collapsed table gathers them: with many zeros, small marginal cells grow and their
    parameters move. Parameters that are minus infinity in the original (an empty marginal
    cell) come out near -20 with large standard errors, as in R.
    """
    import formulaic
    import statsmodels.api as sm

    syns = [synthetic] if isinstance(synthetic, SparseTable) else list(synthetic)
    formula = "count ~ (" + " + ".join(variables) + ")**2"

    def fit(table: SparseTable, spec=None):
        df = collapse(table, variables)
        if spec is None:
            mm = formulaic.model_matrix(formula, df)
            X, spec = mm.rhs, mm.rhs.model_spec
        else:
            X = spec.get_model_matrix(df)
        res = sm.GLM(df["count"].to_numpy(float), np.asarray(X, float),
                     family=sm.families.Poisson()).fit()
        return pd.Series(res.params, index=X.columns), pd.Series(res.bse, index=X.columns), spec

    z = stats.norm.ppf(0.5 + level / 2)
    if reference is None:
        b_o, se_o, spec = fit(original)
        lo_o, hi_o = b_o - z * se_o, b_o + z * se_o
    else:
        if reference.attrs.get("level", level) != level:
            raise SchemaError("The reference was computed at another confidence level.")
        b_o, lo_o, hi_o = (reference["original"], reference["orig_lower"],
                           reference["orig_upper"])
        spec = None
    fits = []
    for s in syns:
        b, se, spec = fit(s, spec)
        fits.append((b, se))
    if reference is not None and list(fits[0][0].index) != list(b_o.index):
        raise SchemaError("The reference has other parameters: was it fitted on other "
                          "variables?")
    rows = []
    n, n_syn = original.n_records, np.mean([s.n_records for s in syns])
    for name in b_o.index:
        comb = combine_estimates([f[0][name] for f in fits], [f[1][name] ** 2 for f in fits],
                                 rule="raab2016", n=n, n_syn=n_syn, level=level)
        lo, hi = lo_o[name], hi_o[name]
        rows.append({"parameter": name, "original": b_o[name], "synthetic": comb.estimate,
                     "orig_lower": lo, "orig_upper": hi, "syn_lower": comb.lower,
                     "syn_upper": comb.upper,
                     "cio": float(interval_overlap(lo, hi, comb.lower, comb.upper))})
    out = pd.DataFrame(rows).set_index("parameter")
    out.attrs["mean_cio"] = float(np.clip(out["cio"], 0.0, None).mean())
    out.attrs["mean_cio_raw"] = float(out["cio"].mean())
    out.attrs["level"] = level
    return out


@dataclass
class SaturatedTuning:
    """The result of :func:`tune_saturated`.

    Attributes
    ----------
    family, sigma, alpha
        The chosen setting (pass them to :func:`bayesynth.synthesis.saturated.synthesize_table`).
    risk : float
        Its expected tau_4(1).
    utility : float
        Its expected share of cells (non-zero in either table) kept within ``p`` percent.
    grid : pandas.DataFrame
        Every setting searched with its ``risk``, ``utility`` and ``feasible``.
    """

    family: str
    sigma: float
    alpha: float
    risk: float
    utility: float
    grid: pd.DataFrame

    def as_kwargs(self) -> dict:
        """Return ``family``, ``sigma`` and ``alpha`` as keyword arguments for ``synthesize_table``.

        Returns
        -------
        dict
            ``{"family": ..., "sigma": ..., "alpha": ...}``.
        """
        return {"family": self.family, "sigma": self.sigma, "alpha": self.alpha}


DEFAULT_SIGMAS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
DEFAULT_ALPHAS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1)


def tune_saturated(table: SparseTable, *, max_risk: float | None = None,
                   min_utility: float | None = None,
                   families: Sequence[str] = ("poisson", "nbi", "pig"),
                   sigmas: Sequence[float] = DEFAULT_SIGMAS,
                   alphas: Sequence[float] = DEFAULT_ALPHAS, p: float = 50.0
                   ) -> SaturatedTuning:
    """Choose the family, sigma and alpha of a saturated count synthesis before synthesising.

    Risk is the expected tau_4(1) (the share of synthetic ones that were ones) and utility the
    expected share of cells non-zero in either table whose synthetic count is within ``p``
    percent of the original (a ratio of expectations: the cells that were non-zero and stay
    within p%, over the non-zero cells plus the expected number of random zeros made non-zero;
    so both sigma and the pseudocount alpha cost utility). Both are computed analytically from
    the count distributions, so the search costs no synthesis. Give exactly one requirement:

    * ``max_risk``: among settings with risk <= max_risk, the one with the highest utility;
    * ``min_utility``: among settings with utility >= min_utility, the one with the lowest risk.

    Ties go to the smaller sigma, then the smaller alpha. The Poisson is searched with sigma = 0
    only. Mean confidence-interval overlap (:func:`loglinear_utility`) needs a synthesis, so
    check the chosen setting with it afterwards. Both requirements hold in expectation: one
    synthetic table's own tau_4(1) varies around the expected value and can exceed
    ``max_risk``, so measure the table you release (:func:`tau_metrics`).

    Parameters
    ----------
    table : SparseTable
        The original table.
    max_risk : float, optional
        Largest acceptable expected tau_4(1).
    min_utility : float, optional
        Smallest acceptable expected share of cells kept within ``p`` percent.
    families : sequence of str, default ("poisson", "nbi", "pig")
        Count families to search.
    sigmas : sequence of float
        Dispersions to search (positive ones only for families other than the Poisson).
    alphas : sequence of float
        Pseudocounts to search.
    p : float, default 50.0
        Tolerance of the utility, in percent of the original count.

    Returns
    -------
    SaturatedTuning
        The chosen setting, its risk and utility, and the whole searched grid.

    Raises
    ------
    bayesynth.errors.SchemaError
        If both or neither of ``max_risk`` and ``min_utility`` are given.
    ValueError
        If no setting in the grid meets the requirement (the message gives the best reachable
        value, also in the error's ``reachable`` attribute).
    """
    if (max_risk is None) == (min_utility is None):
        raise SchemaError("Give exactly one of max_risk or min_utility.")
    rows = []
    for family in families:
        for sigma in ([0.0] if family == "poisson" else [s for s in sigmas if s > 0]):
            for alpha in alphas:
                tau = expected_tau(table, family=family, sigma=sigma, alpha=alpha, ks=(1,))
                within = expected_within(table, family=family, sigma=sigma, alpha=alpha, ps=(p,))
                rows.append({"family": family, "sigma": float(sigma), "alpha": float(alpha),
                             "risk": float(tau.loc[1, "tau4"]),
                             "utility": float(within.loc[p, "either"])})
    grid = pd.DataFrame(rows)
    if max_risk is not None:
        grid["feasible"] = grid["risk"] <= max_risk
        order = ["utility", "sigma", "alpha"], [False, True, True]
        unmet = (f"No setting has expected tau_4(1) <= {max_risk}; the lowest in the grid is "
                 f"{grid['risk'].min():.4f}. Pass larger sigmas or alphas (tune_saturated's "
                 "sigmas= and alphas=), or allow more risk.")
        reachable = float(grid["risk"].min())
    else:
        grid["feasible"] = grid["utility"] >= min_utility
        order = ["risk", "sigma", "alpha"], [True, True, True]
        unmet = (f"No setting keeps {min_utility} of non-zero cells within {p}%; the highest in "
                 f"the grid is {grid['utility'].max():.4f}. Pass smaller sigmas or alphas "
                 "(tune_saturated's sigmas= and alphas=), or ask for less utility.")
        reachable = float(grid["utility"].max())
    feasible = grid[grid["feasible"]]
    if feasible.empty:
        err = ValueError(unmet)
        err.reachable = reachable  # the best the grid reaches (read by the CLI)
        raise err
    best = feasible.sort_values(order[0], ascending=order[1], kind="stable").iloc[0]
    return SaturatedTuning(str(best["family"]), float(best["sigma"]), float(best["alpha"]),
                           float(best["risk"]), float(best["utility"]), grid)
