"""MCMC diagnostics on the quantities that matter.

For the copula, these are what synthesis uses; for other models, the identified quantities
they declare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import arviz as az
import numpy as np
import pandas as pd

from bayesynth.models.copula_quantities import effective_ess, effective_rhat, not_judged
from bayesynth.models.layout import same_variable_level_pairs

__all__ = [
    "Diagnosis",
    "diagnose",
    "SynthesisDiagnosis",
    "synthesis_diagnostics",
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
    summ = az.summary(ds, round_to="none")  # rounded, 1.0149 would pass 1.01
    summ.index = labels
    levels = [str(v) for v in post.coords["level"].values] if "level" in post.coords else []
    summ["weak"] = same_variable_level_pairs(names, levels)[iu]
    return summ


def _undefined(row: pd.Series, column: str) -> bool:
    """Whether a summary row's R-hat or ESS is undefined for a quantity that varies.

    ArviZ returns NaN when a draw is NaN (or infinite); only a constant quantity (sd 0) has a
    legitimately undefined R-hat, and such a quantity is not a convergence problem.
    """
    v = row.get(column, np.nan)
    sd = row.get("sd", np.nan)
    return not np.isfinite(v) and not (np.isfinite(sd) and sd == 0)


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
        """Whether all is well: ``True`` when ``warnings`` is empty."""
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
        Quantities to check. By default, for a copula fit, the quantities synthesis uses (see
        :func:`synthesis_diagnostics`); for other models those the model declared
        (``bayesynth.sample`` records them in ``idata.posterior.attrs["identified_vars"]``),
        else every posterior variable. Symmetric matrices such as ``C`` are summarised over
        their upper triangle.
    rhat_max : float, default 1.01
        Largest acceptable R-hat (Vehtari et al. 2021).
    ess_min : float, optional
        Smallest acceptable bulk and tail ESS; default 100 per chain. For a copula fit
        (:func:`synthesis_diagnostics`) only R-hat and the bulk ESS are judged; the table
        shows the tail ESS too.
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
    from bayesynth.models.copula_quantities import BLOCKS_ATTR

    if var_names is None and BLOCKS_ATTR in post.attrs:
        sd = synthesis_diagnostics(idata, rhat_max=rhat_max, ess_min=ess_min,
                                   max_warnings=max_warnings)
        table = sd.table.assign(weak=False)
        return Diagnosis(table=table, warnings=sd.warnings)
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
            summ = az.summary(idata, var_names=[name], round_to="none")
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
            if _undefined(row, "r_hat") and n_chains > 1:
                problems.append(((0, -np.inf), f"R-hat undefined for {label}: some draws are "
                                               "missing or infinite"))
                continue
            if n_chains > 1 and np.isfinite(r) and r > rhat_max:
                problems.append(((0, -r), f"R-hat {r:.3f} for {label}: run more draws"))
            for kind in ("bulk", "tail"):
                e = row.get(f"ess_{kind}", np.nan)
                if _undefined(row, f"ess_{kind}"):
                    problems.append(((1, -np.inf), f"{kind} ESS undefined for {label}: some "
                                                   "draws are missing or infinite"))
                elif np.isfinite(e) and e < ess_min:
                    problems.append(((1, e), f"{kind} ESS {e:.0f} for {label} "
                                             f"(want {ess_min:.0f}): run more draws"))
    problems.sort(key=lambda t: t[0])
    msgs = [m for _, m in problems[:max_warnings]]
    if len(problems) > max_warnings:
        msgs.append(f"... and {len(problems) - max_warnings} more warnings")
    return Diagnosis(table=table, warnings=msgs)


def copula_diagnostics(idata: az.InferenceData, *, categorical_margins: str = "data"
                       ) -> pd.DataFrame:
    """ArviZ-style summary of every quantity synthesis from a copula fit depends on.

    The table of :func:`synthesis_diagnostics`: correlations between ordered variables,
    implied level probabilities, pairwise associations of categorical variables and
    category-conditional means, each with ``mean``, ``sd``, ``ess_bulk``, ``ess_tail`` and
    ``r_hat``. Loadings are not identified (rotations, sign flips, the factor order of the
    multiplicative gamma process), and a categorical variable's latent columns are a
    parameterisation of its level probabilities, so neither is summarised.

    Parameters
    ----------
    idata : arviz.InferenceData
    categorical_margins : {"data", "model"}, default "data"
        As ``CopulaSynthesizer(categorical_margins=...)``: ``"data"`` judges the quantities with
        each draw's categorical intercepts calibrated to the data's level frequencies (the
        synthesizer's default), ``"model"`` with the draw's own.

    Returns
    -------
    pandas.DataFrame
    """
    return synthesis_diagnostics(idata, categorical_margins=categorical_margins).table


class ConvergenceSummary(NamedTuple):
    """Worst-case diagnostics over the quantities synthesis uses."""

    max_rhat: float
    min_ess_bulk: float
    median_ess_bulk: float
    share_rhat_above_1_01: float
    #: Quantities left out because they are undefined in some draws (a rare level with no
    #: Monte Carlo point there; see :func:`synthesis_diagnostics`).
    not_judged: int = 0

    @classmethod
    def from_table(cls, table: pd.DataFrame) -> ConvergenceSummary:
        """Summarise a quantity table in four numbers.

        The table is :func:`copula_diagnostics`'s, or the one ``CopulaSynthesizer.fit`` keeps
        as ``convergence_table_``.
        """
        rhat = effective_rhat(table)  # inf where undefined for a quantity that varies
        ess = effective_ess(table)  # undefined ESS of a judged quantity: none
        judged = ~np.isnan(rhat)
        return cls(
            max_rhat=float(np.max(rhat[judged])) if judged.any() else float("nan"),
            min_ess_bulk=float(np.nanmin(ess)) if judged.any() else float("nan"),
            median_ess_bulk=float(np.nanmedian(ess)) if judged.any() else float("nan"),
            # over the quantities judged
            share_rhat_above_1_01=(float(np.mean(rhat[judged] > 1.01)) if judged.any()
                                   else float("nan")),
            not_judged=len(not_judged(table)),
        )


def convergence_summary(idata: az.InferenceData, *, categorical_margins: str = "data"
                        ) -> ConvergenceSummary:
    """Summarise :func:`copula_diagnostics` in four numbers.

    Parameters
    ----------
    idata : arviz.InferenceData
    categorical_margins : {"data", "model"}, default "data"
        As ``CopulaSynthesizer(categorical_margins=...)``: ``"data"`` judges the quantities with
        each draw's categorical intercepts calibrated to the data's level frequencies (the
        synthesizer's default), ``"model"`` with the draw's own.

    Returns
    -------
    ConvergenceSummary
    """
    return ConvergenceSummary.from_table(
        copula_diagnostics(idata, categorical_margins=categorical_margins))


class SynthesisDiagnosis(NamedTuple):
    """Result of :func:`synthesis_diagnostics`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per quantity: ``kind`` (``"C (ordered)"``, ``"level probability"``,
        ``"pair association"``, ``"conditional mean"``), ``mean``, ``sd``, ``ess_bulk``,
        ``ess_tail``, ``r_hat``.
    warnings : list of str
    thin : int
        Draws were thinned by this factor before the diagnostics (ESS is then of the thinned
        chains: a lower bound of the full chains' for positively autocorrelated draws).
    """

    table: pd.DataFrame
    warnings: list[str]
    thin: int = 1

    @property
    def ok(self) -> bool:
        """Whether all is well: ``True`` when ``warnings`` is empty."""
        return not self.warnings

    def total_variation(self, data: pd.DataFrame) -> pd.Series:
        """Compute the total variation between implied and observed level probabilities.

        Per categorical variable: the total variation between the posterior-mean implied level
        probabilities and the level frequencies of ``data``.

        Parameters
        ----------
        data : pandas.DataFrame
            Data whose level frequencies are compared (missing values count as level
            ``"<NA>"``); variables not in ``data`` are skipped.

        Returns
        -------
        pandas.Series
            Total variation distance per categorical variable, indexed by variable name.
        """
        rows = self.table[self.table["kind"] == "level probability"]
        out: dict = {}
        for label, row in rows.iterrows():
            var, level = label.split("=", 1)
            out.setdefault(var, {})[level] = row["mean"]
        tv = {}
        for var, probs in out.items():
            if var not in data:
                continue
            col = data[var].astype(object).where(data[var].notna(), "<NA>").astype(str)
            freq = col.value_counts(normalize=True)
            keys = set(probs) | set(freq.index)
            tv[var] = 0.5 * sum(abs(probs.get(k, 0.0) - freq.get(k, 0.0)) for k in keys)
        return pd.Series(tv, dtype=float)


def synthesis_diagnostics(
    idata: az.InferenceData,
    *,
    max_draws: int | None = None,
    n_mc: int | None = None,
    rhat_max: float = 1.01,
    ess_min: float | None = None,
    max_warnings: int = 10,
    model=None,
    categorical_margins: str = "data",
    cores: int | None = None,
) -> SynthesisDiagnosis:
    """Convergence of a rank-probit copula fit, judged on what synthesis uses.

    Synthetic records from the copula follow (i) the correlations ``C`` between ordered
    variables, (ii) each categorical variable's implied level probabilities and (iii) their
    joint law with every other categorical variable (summarised by the mutual information of
    each pair's implied two-way table), and (iv) the category-conditional means of the ordered
    columns. Those are computed for every kept draw
    (:func:`bayesynth.models.copula_quantities.implied_quantities`) and summarised with
    :func:`arviz.rhat` and :func:`arviz.ess`. The latent columns of a categorical variable are a
    parameterisation of (ii)-(iv), and their own correlations are not checked.

    A column shown for only some records (missing values, special codes, a schema rule that
    fixes it) is judged where it is shown, as synthesis uses it: its levels after missing
    values, codes and rules; its conditional means over the records that show it; and, for
    its pairs with ordered columns, ``C[a, b | shown]`` over the records that show both. The
    model's law of the latent values elsewhere is not identified by the data (the layout gives
    those records no information) and synthesis never reads it.

    By default synthesis takes the one-way frequencies of the categorical variables that show
    a level for every record from the data, shifting each draw's intercepts to them; the
    quantities are judged likewise (``categorical_margins="data"``), so (ii) is then fixed for
    those variables and (iii)-(iv) are judged with the calibrated intercepts.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`bayesynth.sample` on a :func:`~bayesynth.models.rank_probit_copula` model.
    max_draws : int, optional
        Draws used in all (evenly thinned per chain above this); default
        :data:`bayesynth.models.copula_quantities.MAX_DRAWS` (4000: with fewer, R-hat of
        independent draws over hundreds of quantities reaches 1.01 by chance).
    n_mc : int, optional
        Monte Carlo points of the implied quantities (default
        :data:`bayesynth.models.copula_quantities.N_MC`).
    rhat_max : float, default 1.01
    ess_min : float, optional
        Default :data:`~bayesynth.models.copula_quantities.ESS_MIN_PER_CHAIN` (100) per
        chain (of the thinned draws), as the closing check of :func:`bayesynth.sample` judges.
    max_warnings : int, default 10
    model : pymc.Model, optional
        The copula model; needed for a posterior from :func:`pymc.sample` (one from
        :func:`bayesynth.sample` carries what is needed).
    categorical_margins : {"data", "model"}, default "data"
        As ``CopulaSynthesizer(categorical_margins=...)``: ``"data"`` judges the quantities
        with each draw's categorical intercepts calibrated to the data's level frequencies
        (the synthesizer's default) and leaves out the level probabilities of the calibrated
        variables (the data's in every draw); ``"model"`` judges the draw's own.
    cores : int, optional
        Processes over which the chains' quantities are computed; default: as many as the
        chains and the machine's cores allow (see
        :func:`~bayesynth.models.copula_quantities.synthesis_quantity_table`; the result does
        not depend on it).

    Returns
    -------
    SynthesisDiagnosis
    """
    from bayesynth.models import copula_quantities as cq

    table, thin = cq.synthesis_quantity_table(idata, max_draws=max_draws or cq.MAX_DRAWS,
                                              n_mc=n_mc, model=model,
                                              categorical_margins=categorical_margins,
                                              cores=cores)
    nc = idata.posterior.sizes["chain"]
    ess_min = float(cq.ESS_MIN_PER_CHAIN * nc if ess_min is None else ess_min)
    # R-hat and ESS as the closing check of bayesynth.sample reads them (the same functions):
    # NaN for a constant quantity and for one left unjudged, infinite or 0 where undefined
    rhat, ess = cq.effective_rhat(table), cq.effective_ess(table)
    raw_ess = table["ess_bulk"].to_numpy(dtype=float)
    gone = (table["undefined_share"].to_numpy(dtype=float) if "undefined_share" in table
            else np.zeros(len(table)))
    problems = []
    for i, (label, kind) in enumerate(zip(table.index, table["kind"])):
        if gone[i] > 0:
            problems.append(((1, -np.inf), f"{label} ({kind}) not judged: undefined in "
                                           f"{100 * gone[i]:.1f}% of the draws, where its level "
                                           "got no Monte Carlo point; pass a larger n_mc"))
            continue
        if np.isnan(rhat[i]):  # constant: nothing to converge
            continue
        if not np.isfinite(rhat[i]) or not np.isfinite(raw_ess[i]):
            problems.append(((0, -np.inf), f"R-hat and ESS undefined for {label} "
                                           f"({kind}): some draws are missing or infinite"))
            continue
        if rhat[i] > rhat_max:
            problems.append(((0, -rhat[i]), f"R-hat {rhat[i]:.3f} for {label} ({kind}): run "
                                            "more draws"))
        if ess[i] < ess_min:
            problems.append(((1, ess[i]), f"bulk ESS {ess[i]:.0f} for {label} ({kind}; want "
                                          f"{ess_min:.0f}): run more draws"))
    problems.sort(key=lambda t: t[0])
    msgs = [m for _, m in problems[:max_warnings]]
    if len(problems) > max_warnings:
        msgs.append(f"... and {len(problems) - max_warnings} more warnings")
    return SynthesisDiagnosis(table, msgs, thin)

