"""MCMC diagnostics on the identified quantities of the copula model."""

from __future__ import annotations

from typing import NamedTuple

import arviz as az
import numpy as np
import pandas as pd

from bayesynth.models.layout import same_variable_level_pairs

__all__ = ["copula_diagnostics", "ConvergenceSummary", "convergence_summary"]


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
        :func:`arviz.summary` (``mean``, ``sd``, HDI, ``ess_bulk``, ``ess_tail``, ``r_hat``...)
        and ``weak`` (bool).
    """
    post = idata.posterior
    parts = []
    if "C" in post:
        C = post["C"]
        names = list(C.coords[C.dims[2]].values)
        iu = np.triu_indices(len(names), k=1)
        flat = C.values[:, :, iu[0], iu[1]]
        labels = [f"C[{names[i]}, {names[j]}]" for i, j in zip(*iu)]
        ds = az.convert_to_dataset({"C": flat}, coords={"pair": labels}, dims={"C": ["pair"]})
        summ = az.summary(ds)
        summ.index = labels
        levels = [str(v) for v in post.coords["level"].values] if "level" in post.coords else []
        summ["weak"] = same_variable_level_pairs([str(n) for n in names], levels)[iu]
        parts.append(summ)
    if "alpha_scaled" in post:
        summ = az.summary(idata, var_names=["alpha_scaled"])
        summ["weak"] = True
        parts.append(summ)
    return pd.concat(parts) if parts else pd.DataFrame()


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
