"""MCMC diagnostics on the identified quantities a model declares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import arviz as az
import numpy as np
import pandas as pd

from bayesynth.models.layout import same_variable_level_pairs

__all__ = [
    "Diagnosis",
    "diagnose",
    "copula_diagnostics",
    "ConvergenceSummary",
    "convergence_summary",
]

#: Attribute of ``idata.posterior`` in which :func:`bayesynth.sample` records the identified
#: quantities of the model it sampled.
IDENTIFIED_ATTR = "identified_vars"


def _matrix_rows(post, name: str) -> pd.DataFrame:
    """Summary of a symmetric matrix variable over its upper triangle (diagonal excluded)."""
    da = post[name]
    names = [str(v) for v in da.coords[da.dims[2]].values]
    iu = np.triu_indices(len(names), k=1)
    flat = da.values[:, :, iu[0], iu[1]]
    labels = [f"{name}[{names[i]}, {names[j]}]" for i, j in zip(*iu)]
    ds = az.convert_to_dataset({name: flat}, coords={"pair": labels}, dims={name: ["pair"]})
    summ = az.summary(ds)
    summ.index = labels
    levels = [str(v) for v in post.coords["level"].values] if "level" in post.coords else []
    summ["weak"] = same_variable_level_pairs(names, levels)[iu]
    return summ


def _is_symmetric_matrix(da) -> bool:
    if da.ndim != 4:
        return False
    a, b = da.dims[2], da.dims[3]
    return (da.sizes[a] == da.sizes[b] and a != b
            and list(da.coords[a].values) == list(da.coords[b].values))


class Diagnosis(NamedTuple):
    """Result of :func:`diagnose`.

    Attributes
    ----------
    table : pandas.DataFrame
        :func:`arviz.summary` rows (``mean``, ``sd``, HDI, ``ess_bulk``, ``ess_tail``,
        ``r_hat`` ...) plus ``weak`` (weakly identified quantities, not warned about).
    warnings : list of str
        Plain-language problems, worst first; empty when all is well.
    """

    table: pd.DataFrame
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return not self.warnings


def diagnose(
    idata: az.InferenceData,
    var_names: Sequence[str] | None = None,
    *,
    rhat_max: float = 1.01,
    ess_min: float | None = None,
    max_warnings: int = 10,
) -> Diagnosis:
    """R-hat and bulk/tail ESS of the identifiable quantities, with warnings in plain words.

    Parameters
    ----------
    idata : arviz.InferenceData
    var_names : sequence of str, optional
        Quantities to check. By default those the model declared (``bayesynth.sample`` records
        them in ``idata.posterior.attrs["identified_vars"]``; for the copula ``C`` and
        ``alpha_scaled``), else every posterior variable. Symmetric matrices such as ``C`` are
        summarised over their upper triangle.
    rhat_max : float, default 1.01
        Largest acceptable R-hat (Vehtari et al. 2021).
    ess_min : float, optional
        Smallest acceptable bulk and tail ESS; default 100 per chain.
    max_warnings : int, default 10
        Warnings listed individually; the rest are counted in a final line.

    Returns
    -------
    Diagnosis

    Examples
    --------
    >>> d = diagnose(idata)                                    # doctest: +SKIP
    >>> d.warnings[:1]                                         # doctest: +SKIP
    ['R-hat 1.08 for C[age, income]: run more draws']
    """
    post = idata.posterior
    if var_names is None:
        declared = post.attrs.get(IDENTIFIED_ATTR)
        if isinstance(declared, str):
            declared = [v for v in declared.split(",") if v]
        var_names = [v for v in (declared or list(post.data_vars)) if v in post]
    parts = []
    for name in var_names:
        if name not in post:
            raise KeyError(f"'{name}' is not in the posterior; it has {list(post.data_vars)}.")
        if _is_symmetric_matrix(post[name]):
            parts.append(_matrix_rows(post, name))
        else:
            summ = az.summary(idata, var_names=[name])
            summ["weak"] = name == "alpha_scaled"
            parts.append(summ)
    table = pd.concat(parts) if parts else pd.DataFrame()
    n_chains = post.sizes.get("chain", 1)
    ess_min = 100.0 * n_chains if ess_min is None else float(ess_min)
    problems: list[tuple[tuple[int, float], str]] = []  # (sort key, message)
    if len(table):
        strong = table[~table["weak"].astype(bool)]
        for label, row in strong.iterrows():
            r = row.get("r_hat", np.nan)
            if n_chains > 1 and np.isfinite(r) and r > rhat_max:
                problems.append(((0, -r), f"R-hat {r:.2f} for {label}: run more draws"))
            for kind in ("bulk", "tail"):
                e = row.get(f"ess_{kind}", np.nan)
                if np.isfinite(e) and e < ess_min:
                    problems.append(((1, e), f"{kind} ESS {e:.0f} for {label} "
                                             f"(want {ess_min:.0f}): run more draws"))
    problems.sort(key=lambda t: t[0])
    msgs = [m for _, m in problems[:max_warnings]]
    if len(problems) > max_warnings:
        msgs.append(f"... and {len(problems) - max_warnings} more quantities below the "
                    "thresholds")
    return Diagnosis(table=table, warnings=msgs)


def copula_diagnostics(idata: az.InferenceData) -> pd.DataFrame:
    """ArviZ summary of the copula correlations ``C`` (upper triangle) and ``alpha_scaled``.

    Loadings ``Lambda`` are not identified (rotations, sign flips and the multiplicative gamma
    process's factor order leave the likelihood unchanged), so their R-hat and ESS are
    meaningless; these quantities are invariant to all of that.

    Correlations among the level columns of one categorical variable, and the scaled
    intercepts, are only weakly identified by the rank-probit likelihood (it sees which level
    column is positive, never two at once), so they lean on the prior and mix slowly; the column
    ``weak`` marks them. Synthesis depends on the others: correlations between variables.

    Returns
    -------
    pandas.DataFrame
        One row per quantity (``C[a, b]`` for a before b, ``alpha_scaled[level]``), columns of
        :func:`arviz.summary` and ``weak`` (bool).
    """
    names = [v for v in ("C", "alpha_scaled") if v in idata.posterior]
    return diagnose(idata, names).table


class ConvergenceSummary(NamedTuple):
    """Worst-case diagnostics over the well-identified quantities (``weak`` rows excluded)."""

    max_rhat: float
    min_ess_bulk: float
    median_ess_bulk: float
    share_rhat_above_1_05: float


def convergence_summary(idata: az.InferenceData) -> ConvergenceSummary:
    """Summarise :func:`copula_diagnostics` in four numbers."""
    d = copula_diagnostics(idata)
    if "weak" in d and (~d["weak"].astype(bool)).any():
        d = d[~d["weak"].astype(bool)]
    rhat = d["r_hat"].to_numpy(dtype=float)
    ess = d["ess_bulk"].to_numpy(dtype=float)
    return ConvergenceSummary(
        max_rhat=float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan"),
        min_ess_bulk=float(np.nanmin(ess)),
        median_ess_bulk=float(np.nanmedian(ess)),
        share_rhat_above_1_05=float(np.nanmean(rhat > 1.05)) if np.isfinite(rhat).any()
        else float("nan"),
    )
