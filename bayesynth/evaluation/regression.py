"""Specific utility: regression inference on real and synthetic data.

The combining rules for m synthetic datasets (:func:`combine_estimates`) are in
:mod:`bayesynth.evaluation.combining`; they are re-exported here, where they used to live.

References
----------
Feldman, J. and Kowal, D. R. (2022). A Bayesian framework for generation of fully synthetic mixed
datasets, section 6.2 (standardised squared error and interval overlap).
Karr, A. F., Kohnen, C. N., Oganian, A., Reiter, J. P. and Sanil, A. P. (2006). A framework for
evaluating the utility of data altered to protect confidentiality. *The American Statistician*,
60(3), 224-232 (interval overlap).
Carvalho, C. M., Polson, N. G. and Scott, J. G. (2010). The horseshoe estimator for sparse signals.
*Biometrika*, 97(2), 465-480.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bayesynth.evaluation.combining import CombinedEstimate, combine_estimates

__all__ = [
    "interval_overlap",
    "standardized_squared_error",
    "fit_regression",
    "RegressionComparison",
    "regression_inference",
    # re-exported from bayesynth.evaluation.combining
    "CombinedEstimate",
    "combine_estimates",
]


def interval_overlap(lo_obs, hi_obs, lo_syn, hi_syn):
    """Confidence/credible interval overlap (CIO), elementwise.

    ``CIO = 0.5 [(min(u_o, u_s) - max(l_o, l_s)) / (u_o - l_o) + (same) / (u_s - l_s)]``:
    1 for identical intervals, 0 for intervals that just touch, negative when they do not
    overlap (Karr et al. 2006; Feldman & Kowal 2022, section 6.2).

    Parameters
    ----------
    lo_obs, hi_obs : array_like
        Lower and upper bounds of the intervals from the real data.
    lo_syn, hi_syn : array_like
        Lower and upper bounds of the intervals from the synthetic data.

    Returns
    -------
    numpy.ndarray
        The overlap of each pair of intervals (NaN where an interval has zero or undefined
        width).
    """
    lo_obs, hi_obs, lo_syn, hi_syn = (np.asarray(v, float) for v in (lo_obs, hi_obs, lo_syn,
                                                                      hi_syn))
    inter = np.minimum(hi_obs, hi_syn) - np.maximum(lo_obs, lo_syn)
    w_obs, w_syn = hi_obs - lo_obs, hi_syn - lo_syn
    with np.errstate(divide="ignore", invalid="ignore"):  # NaN for an unestimable coefficient
        out = 0.5 * (inter / w_obs + inter / w_syn)
    # a zero-width interval (a coefficient the data cannot estimate, reported with sd 0) has
    # no overlap to speak of: NaN, which the means over coefficients skip, never -inf
    return np.where((w_obs > 0) & (w_syn > 0), out, np.nan)


def standardized_squared_error(beta_obs, sd_obs, beta_syn):
    """Compute ``(beta_obs - beta_syn)^2 / sd_obs^2`` elementwise.

    As in Feldman & Kowal 2022, section 6.2.

    Parameters
    ----------
    beta_obs, sd_obs : array_like
        Estimates and their standard deviations from the real data.
    beta_syn : array_like
        Estimates from the synthetic data.

    Returns
    -------
    numpy.ndarray
        The standardised squared errors.
    """
    beta_obs, sd_obs, beta_syn = (np.asarray(v, float) for v in (beta_obs, sd_obs, beta_syn))
    return (beta_obs - beta_syn) ** 2 / sd_obs**2


def _standardize(df: pd.DataFrame, response: str, like: pd.DataFrame | None = None
                 ) -> pd.DataFrame:
    """Standardise numeric predictors with the mean and sd of ``like`` (default ``df``).

    Other predictors (text, pandas ``string``, booleans, categories) become categoricals with
    the levels of ``like`` as text, so that a table and the one it is compared with get the
    same design whatever their dtypes; a level ``like`` lacks becomes missing (the record is
    left out), and ``out.attrs["unseen"]`` counts such records per column.
    """
    from bayesynth.evaluation._values import as_text

    like = df if like is None else like
    out = df.copy()
    unseen: dict[str, int] = {}
    for c in out.columns:
        if c == response:
            continue
        s = out[c]
        ref = like[c] if c in like.columns else s
        numeric_ref = (pd.api.types.is_numeric_dtype(ref)
                       and not pd.api.types.is_bool_dtype(ref))
        if numeric_ref and ref.nunique() > 2 and pd.api.types.is_numeric_dtype(s):
            sd = ref.std()
            out[c] = (s - ref.mean()) / (sd if sd > 0 else 1.0)
        elif not numeric_ref:
            text = as_text(s)
            levels = sorted(as_text(ref).dropna().unique(), key=str)
            known = text.isin(levels)
            out[c] = pd.Categorical(text.where(known), categories=levels)
            lost = int((text.notna() & ~known).sum())
            if lost:
                unseen[str(c)] = lost
    out.attrs["unseen"] = unseen
    return out


def fit_regression(
    data: pd.DataFrame,
    formula: str,
    *,
    method: str = "ols",
    level: float = 0.95,
    spec=None,
    scale_from: pd.DataFrame | None = None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    random_seed: int | None = None,
    progressbar: bool = False,
) -> tuple[pd.DataFrame, object]:
    """Fit a linear regression and return one row per coefficient.

    Numeric predictors with more than two values are standardised (mean 0, sd 1) before the
    design matrix is built, with the mean and sd of ``scale_from`` (default ``data``), so
    coefficients are per standard deviation and interactions are products of standardised
    variables. Synthetic tables compared with a real one must be standardised with the real
    table's mean and sd (:func:`regression_inference` does): with their own, noise in a
    predictor's sd would show as a coefficient disagreement.

    Parameters
    ----------
    data : pandas.DataFrame
    formula : str
        A formulaic/Wilkinson formula, e.g. ``"read ~ mage + m_race + pm25_1yr:ri_educ"``.
    method : {"ols", "bayes"}
        ``"ols"``: least squares (statsmodels), normal-theory intervals. ``"bayes"``: a Bayesian
        linear regression in PyMC with horseshoe priors on the coefficients, sampled by NUTS;
        estimates are posterior means and sds, intervals equal-tailed credible intervals.
    level : float, default 0.95
    spec : formulaic ModelSpec, optional
        Reuse the design of another fit (so that synthetic data get the real data's columns).
    scale_from : pandas.DataFrame, optional
        The table whose means and sds standardise the predictors (the real data, for a
        synthetic table); ``data`` itself by default.
    draws, tune, chains, random_seed, progressbar
        NUTS settings for ``method="bayes"``.

    Returns
    -------
    table : pandas.DataFrame
        Indexed by term (intercept excluded): ``estimate``, ``sd``, ``lower``, ``upper``.
    spec : formulaic ModelSpec
        The design, for reuse.
    """
    import formulaic

    response = formula.split("~")[0].strip()
    std = _standardize(data, response, scale_from)
    if spec is None:
        mm = formulaic.model_matrix(formula, std, na_action="drop")
        y = np.asarray(mm.lhs, float).ravel()
        X = mm.rhs
        spec = mm.rhs.model_spec
    else:
        unseen = std.attrs.get("unseen", {})
        if unseen:
            warnings.warn(
                "Records with levels the reference (real) data lack are left out of the "
                "regression: " + ", ".join(f"{n} in '{c}'" for c, n in unseen.items()) + ".",
                RuntimeWarning, stacklevel=2)
        # The stored design covers the predictors only: drop missing responses here.
        std = std[std[response].notna()]
        X = spec.get_model_matrix(std, na_action="drop")
        y = std.loc[X.index, response].to_numpy(float)
    names = list(X.columns)
    Xv = np.asarray(X, float)
    if method not in ("ols", "bayes"):
        raise ValueError(f"method must be 'ols' or 'bayes'; got {method!r}.")
    dead = _unidentified(Xv, names)
    keep = np.flatnonzero(~dead)
    est, sd, lower, upper = (np.full(len(names), np.nan) for _ in range(4))
    if len(y) <= len(keep):
        warnings.warn(f"Only {len(y)} complete records for {len(keep)} coefficients of "
                      f"'{formula}': nothing is estimated (NaN).", RuntimeWarning, stacklevel=2)
    elif method == "ols":
        import statsmodels.api as sm

        # the identified columns only: with an aliased column left in, least squares would
        # split its effect over the columns it is collinear with (R's lm drops it too)
        res = sm.OLS(y, Xv[:, keep]).fit()
        z = stats.t.ppf(0.5 + level / 2, res.df_resid)
        est[keep], sd[keep] = np.array(res.params, float), np.array(res.bse, float)
        lower, upper = est - z * sd, est + z * sd
    else:
        e, s_, lo, hi = _horseshoe(y, Xv[:, keep], [names[i] for i in keep], level, draws,
                                   tune, chains, random_seed, progressbar)
        est[keep], sd[keep], lower[keep], upper[keep] = e, s_, lo, hi
    table = pd.DataFrame({"estimate": est, "sd": sd, "lower": lower, "upper": upper},
                         index=pd.Index(names, name="term"))
    return table.drop(index=[n for n in names if n.lower() == "intercept"]), spec


def _unidentified(Xv: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """Mark the design columns that cannot be estimated, with a warning for aliased ones.

    A column of zeros (a level absent from these data) and, like R's lm (tolerance 1e-7), a
    column that the columns before it already span (its QR diagonal negligible against its
    norm: a constant predictor beside the intercept, collinear predictors).
    """
    dead = ~np.any(Xv != 0.0, axis=0)
    if Xv.shape[1] and not dead.all() and Xv.shape[0]:
        live = np.flatnonzero(~dead)
        R = np.linalg.qr(Xv[:, live], mode="r")
        d = np.abs(np.diag(R)) if R.shape[0] >= len(live) else np.r_[
            np.abs(np.diag(R)), np.zeros(len(live) - R.shape[0])]
        gone = d <= 1e-7 * np.linalg.norm(Xv[:, live], axis=0)
        if gone.any():
            aliased = live[gone]
            warnings.warn("The design is rank deficient: term(s) "
                          f"{[names[i] for i in aliased]} are not identified (NaN).",
                          RuntimeWarning, stacklevel=3)
            dead[aliased] = True
    return dead


def _horseshoe(y, X, names, level, draws, tune, chains, seed, progressbar):
    import pymc as pm

    has_int = [n.lower() == "intercept" for n in names]
    Xb = X[:, [i for i, h in enumerate(has_int) if not h]]
    sd_y = float(np.std(y)) or 1.0
    with pm.Model():
        intercept = pm.Normal("intercept", mu=float(np.mean(y)), sigma=10 * sd_y)
        sigma = pm.HalfNormal("sigma", sigma=sd_y)
        tau = pm.HalfCauchy("tau", beta=1.0)
        lam = pm.HalfCauchy("lam", beta=1.0, shape=Xb.shape[1])
        zb = pm.Normal("zb", 0.0, 1.0, shape=Xb.shape[1])
        beta = pm.Deterministic("beta", zb * lam * tau * sigma)
        pm.Normal("y", mu=intercept + pm.math.dot(Xb, beta), sigma=sigma, observed=y)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, random_seed=seed,
                          target_accept=0.95, progressbar=progressbar,
                          compute_convergence_checks=False, cores=1)
    b = idata.posterior["beta"].stack(s=("chain", "draw")).values  # (p, S)
    a = idata.posterior["intercept"].stack(s=("chain", "draw")).values[None, :]
    full = np.empty((len(names), b.shape[1]))
    j = 0
    for i, h in enumerate(has_int):
        if h:
            full[i] = a
        else:
            full[i] = b[j]
            j += 1
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    lo, hi = np.quantile(full, q, axis=1)
    return full.mean(1), full.std(1), lo, hi


@dataclass
class RegressionComparison:
    """Regression inference on real data beside each synthetic dataset.

    Attributes
    ----------
    real : pandas.DataFrame
        Coefficient table of the real data (``estimate``, ``sd``, ``lower``, ``upper``).
    synthetic : list of pandas.DataFrame
        The same for each synthetic dataset.
    per_coefficient : pandas.DataFrame
        One row per (dataset, term): ``std_sq_error`` and ``cio``.
    summary : pandas.DataFrame
        One row per synthetic dataset: ``mean_std_sq_error`` and ``mean_cio``.
    """

    real: pd.DataFrame
    synthetic: list[pd.DataFrame]
    per_coefficient: pd.DataFrame
    summary: pd.DataFrame

    @property
    def mean_cio(self) -> float:
        """Mean CIO over the synthetic datasets (the mean of ``summary["mean_cio"]``)."""
        return float(self.summary["mean_cio"].mean())

    @property
    def mean_std_sq_error(self) -> float:
        """Mean standardised squared error over the synthetic datasets."""
        return float(self.summary["mean_std_sq_error"].mean())


def regression_inference(
    real: pd.DataFrame,
    synthetic: pd.DataFrame | Sequence[pd.DataFrame],
    formula: str,
    *,
    method: str = "ols",
    level: float = 0.95,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    random_seed: int | None = None,
) -> RegressionComparison:
    """Fit the same regression to the real and to each synthetic dataset and compare.

    Per coefficient: the standardised squared error ``(b_obs - b_syn)^2 / sd_obs^2`` and the
    interval overlap (:func:`interval_overlap`); per dataset their averages (Feldman & Kowal
    2022, section 6.2, who use ``method="bayes"``, horseshoe priors, 95% intervals).

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        ``synthetic`` may be one table or a list.
    formula : str
        E.g. ``"read ~ mage + m_race + ndi_birth + pm25_1yr:ri_educ"`` (interactions with ``:``).
    method : {"ols", "bayes"}
        See :func:`fit_regression`.
    level : float, default 0.95
        Confidence (or credible) level of the intervals.
    draws, tune, chains : int
        NUTS settings for ``method="bayes"``.
    random_seed : int, optional
        Seeds one fit per table.

    Returns
    -------
    RegressionComparison
    """
    syns = [synthetic] if isinstance(synthetic, pd.DataFrame) else list(synthetic)
    seeds = np.random.SeedSequence(random_seed).generate_state(len(syns) + 1)
    kw = dict(method=method, level=level, draws=draws, tune=tune, chains=chains)
    obs, spec = fit_regression(real, formula, random_seed=int(seeds[0]), **kw)
    tables, rows, summary = [], [], []
    for i, s in enumerate(syns):
        t, _ = fit_regression(s, formula, spec=spec, scale_from=real,
                              random_seed=int(seeds[i + 1]), **kw)
        t = t.reindex(obs.index)
        tables.append(t)
        sse = standardized_squared_error(obs["estimate"], obs["sd"], t["estimate"])
        cio = interval_overlap(obs["lower"], obs["upper"], t["lower"], t["upper"])
        rows.append(pd.DataFrame({"dataset": i, "term": obs.index, "std_sq_error": sse,
                                  "cio": cio}))
        summary.append({"dataset": i, "mean_std_sq_error": float(np.nanmean(sse)),
                        "mean_cio": float(np.nanmean(cio))})
    return RegressionComparison(
        real=obs, synthetic=tables,
        per_coefficient=pd.concat(rows, ignore_index=True),
        summary=pd.DataFrame(summary).set_index("dataset"),
    )
