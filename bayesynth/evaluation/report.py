"""A self-contained HTML report (and a JSON file of every number) on synthetic data.

:func:`report` runs the utility and risk measures that the inputs allow, draws their plots, and
writes ``report.html`` (plots embedded as PNG, no external files) beside ``report.json``.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesynth._io import atomic_write_text
from bayesynth.errors import (
    ColumnTypeError,
    InvalidParameterError,
    MissingColumnError,
    TooFewRowsError,
)
from bayesynth.evaluation import plots
from bayesynth.evaluation.regression import regression_inference
from bayesynth.evaluation.risk import (
    _record_keys,
    attribute_inference_risk,
    distance_to_closest_record,
    identification_risk,
    identification_risk_sweep,
    kept_columns,
    outlier_attribute_disclosure,
    singling_out_risk,
)
from bayesynth.evaluation.utility import (
    crosstab_comparison,
    marginal_utility,
    numeric_columns,
    propensity_auc,
    propensity_score_utility,
)

__all__ = ["report", "KINDS"]

MAX_CROSSTABS = 3
KINDS = ("auto", "fully", "partially")
#: Keys of the attribute-inference attack when ``known`` is not given: this many columns.
DEFAULT_KEYS = 4


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, pd.DataFrame):
        plain = obj.index.name is None and isinstance(obj.index, pd.RangeIndex)
        return _jsonable(obj.reset_index(drop=plain).to_dict(orient="records"))
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _table_html(df: pd.DataFrame, digits: int = 4) -> str:
    # in a scrolling box: a wide table (the risk measures' columns) would run off the page
    return ("<div class='wide'>"
            + df.to_html(float_format=lambda v: f"{v:.{digits}g}", border=0, classes="t",
                         na_rep="")
            + "</div>")


def report(
    real: pd.DataFrame,
    synthetic: pd.DataFrame | Sequence[pd.DataFrame],
    output: str | os.PathLike = "report.html",
    *,
    schema=None,
    known: Sequence[str] = (),
    synthesized: Sequence[str] = (),
    sensitive: str | None = None,
    public: str | None = None,
    radius: float = 0.05,
    radii: Sequence[float] = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3),
    regression: str | None = None,
    regression_method: str = "ols",
    title: str = "bayesynth: utility and disclosure risk",
    random_seed: int | None = 0,
    ledger=None,
    kind: str = "auto",
    holdout: pd.DataFrame | None = None,
    random_state: int | None = None,
    synthesised: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Evaluate synthetic data against the real data and write an HTML report and its JSON.

    The report opens with an at-a-glance summary (how distinguishable the synthetic records
    are, how well a regression survives, how risky the release is), then the sections, each
    when its inputs are given: marginals (max/avg ECDF, quantiles, total variation; overlays),
    cross-tabulations of up to three pairs of categorical columns (heat maps),
    propensity-score utility (logistic pMSE and S_pMSE, and the out-of-fold AUC of a
    gradient-boosting classifier), regression inference (CIO, standardised squared error;
    coefficient plot), and disclosure risk measured the way the kind of release calls for:

    * **fully synthetic** data (new records; no row corresponds to a real person): exact copies
      of training records; with a ``holdout`` of real records the synthesizer did not see, the
      distance to closest record relative to the hold-out's (DCR ratio) and the singling-out
      risk; with ``sensitive``, the correct attribution probability of the sensitive column
      given ``known`` keys (default: the first four other columns; against its marginal
      baseline and, with a hold-out, against people outside the training data);
    * **partially synthetic** data (the real records with some columns replaced): the
      identification risk of row-by-row matching (at ``radius`` and swept over ``radii``;
      needs ``known`` and/or ``synthesized``) and attribute disclosure at outliers of
      ``public`` for ``sensitive``.

    With several synthetic datasets a risk-utility scatter with the 2D boxplot follows. With a
    privacy ledger, the report opens with what was released under differential privacy, at
    what cost, and under which guarantee.

    Parameters
    ----------
    real : pandas.DataFrame
    synthetic : DataFrame or list of DataFrame
    output : path-like, default "report.html"
        HTML file; the JSON goes to the same path with suffix ``.json``. Both written atomically.
    schema : bayesynth.Schema, optional
    known, synthesized : sequence of str
        Identification risk variables (see :func:`~bayesynth.evaluation.identification_risk`).
    sensitive, public : str, optional
        Attribute disclosure (see :func:`~bayesynth.evaluation.outlier_attribute_disclosure`).
    radius : float, default 0.05
    radii : sequence of float
    regression : str, optional
        Formula for :func:`~bayesynth.evaluation.regression_inference`.
    regression_method : {"ols", "bayes"}, default "ols"
    title : str
    random_seed : int, optional
        Seed for the permutation and sampling steps (``random_state`` is its deprecated
        spelling).
    ledger : bayesynth.privacy.Ledger or path-like, optional
        The privacy ledger of the release (or its JSON file, as written by
        :meth:`~bayesynth.privacy.Ledger.to_json`).
    kind : {"auto", "fully", "partially"}, default "auto"
        Fully or partially synthetic data; ``"auto"`` infers it
        (:func:`~bayesynth.evaluation.synthetic_kind`), and takes ``synthesized`` (the
        replaced columns) with tables of the real table's length as partially synthetic.
    holdout : pandas.DataFrame, optional
        Real records from the same population that the synthesizer did not see (for example a
        random 20% kept aside before fitting). Needed for the DCR ratio and the singling-out
        risk of fully synthetic data.
    random_state : int, optional
        Deprecated spelling of ``random_seed`` (FutureWarning).
    synthesised : sequence of str, optional
        Deprecated spelling of ``synthesized`` (FutureWarning).

    Returns
    -------
    dict
        Every number in the report (what the JSON file holds).
    """
    syns = [synthetic] if isinstance(synthetic, pd.DataFrame) else list(synthetic)
    if not syns:
        raise ValueError("report needs at least one synthetic dataset.")
    for label, t in [("The real data", real)] + [(f"Synthetic dataset {i + 1}", x)
                                                 for i, x in enumerate(syns)] + (
            [("The hold-out data", holdout)] if holdout is not None else []):
        if len(t) < 2:
            raise TooFewRowsError(f"{label} has {len(t)} record(s); the report compares tables "
                                  "of at least 2 records.")
    missing = [c for c in real.columns if any(c not in s.columns for s in syns)]
    if missing:
        raise MissingColumnError(f"Synthetic data lack column(s) {missing} of the real data.",
                                 column=str(missing[0]))
    _check_names(real, known=known, synthesized=synthesized, synthesised=synthesised,
                 sensitive=sensitive, public=public, regression=regression)
    from bayesynth.evaluation.utility import _seed_alias
    from bayesynth.schema import as_numbers

    random_seed = _seed_alias(random_seed, random_state, "report")
    if synthesised is not None:  # the deprecated spelling
        import warnings

        warnings.warn("report(synthesised=) is deprecated; use synthesized=.", FutureWarning,
                      stacklevel=2)
        synthesized = synthesized or synthesised

    real, syns = as_numbers(real), [as_numbers(s) for s in syns]  # dates as days
    holdout = None if holdout is None else as_numbers(holdout)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}.")
    if holdout is not None:
        absent = [c for c in real.columns if c not in holdout.columns]
        if absent:
            raise MissingColumnError(f"The hold-out data lack column(s) {absent} of the real "
                                     "data; give a hold-out with the real table's columns.",
                                     column=str(absent[0]))
    output = Path(output)
    m = len(syns)
    kind_note = f"stated (kind={kind!r})"
    if kind == "auto":
        kept = [kept_columns(real, s) for s in syns]
        kinds = {"partially" if k else "fully" for k in kept}
        if synthesized and all(len(s) == len(real) for s in syns):
            kinds = {"partially"}  # the caller names the replaced columns: row by row data
            kind_note = "inferred: synthesized= names the replaced columns"
        elif kinds == {"partially"}:
            shown = ", ".join(f"'{c}' ({v:.0%} of rows)" for c, v in list(kept[0].items())[:5])
            kind_note = (f"inferred: column(s) {shown} equal the real table's row by row")
        else:
            kind_note = "inferred: no column equals the real table's row by row"
        kind = "partially" if kinds == {"partially"} else "fully"
    if kind == "partially" and sensitive and not public:
        import warnings

        warnings.warn(f"Partially synthetic data: the sensitive column '{sensitive}' is measured "
                      "at the outliers of a public column; name it (public=, --public), or "
                      "nothing is reported for it.", UserWarning, stacklevel=2)
    num = numeric_columns(real, schema)
    _check_numeric(num, syns, holdout)
    cat = [c for c in real.columns if c not in num]
    results: dict[str, Any] = {"n_real": len(real), "n_synthetic": [len(s) for s in syns],
                               "m": m, "columns": list(real.columns), "kind": kind,
                               "kind_note": kind_note,
                               "n_holdout": None if holdout is None else len(holdout)}
    sections: list[str] = []

    # Privacy ledger
    if ledger is not None:
        from bayesynth.privacy import Ledger

        if not isinstance(ledger, Ledger):
            ledger = Ledger.from_json(ledger)
        results["privacy_ledger"] = ledger.to_dict()
        table = ledger.to_frame()[["release", "mechanism", "neighbours", "epsilon", "guarantee",
                                   "sensitivity", "seeded", "why"]]
        sections.append(_section("Privacy ledger", html.escape(ledger.summary()),
                                 [_table_html(table)], []))

    # Marginals
    mu = [marginal_utility(real, s, schema) for s in syns]
    mean_mu = pd.concat(mu).groupby(level=0, sort=False).mean(numeric_only=True)
    mean_mu.insert(0, "kind", mu[0]["kind"])
    results["marginals"] = mean_mu
    fig = plots.plot_marginals(real, syns, numeric=num)
    sections.append(_section(
        "Marginal distributions",
        f"Averages over {m} synthetic dataset(s). max_ecdf: the largest gap between the real "
        "and synthetic empirical CDFs (the Kolmogorov-Smirnov statistic); avg_ecdf: the mean "
        "<i>squared</i> gap over the pooled values (both Woo et al. 2009); tv: total "
        "variation distance of the level shares; missing_diff: synthetic minus real share "
        "missing.", [_table_html(mean_mu)], [_png(fig)]))

    # Cross-tabs
    pairs = [(a, b) for i, a in enumerate(cat) for b in cat[i + 1:]][:MAX_CROSSTABS]
    ct_results, figs, tables = [], [], []
    for a, b in pairs:
        table, diff = crosstab_comparison(real, syns[0], [a, b])
        ct_results.append({"columns": [a, b], "max_abs_diff": diff})
        figs.append(_png(plots.plot_crosstab(table)))
    if pairs:
        results["crosstabs"] = ct_results
        tables.append(_table_html(pd.DataFrame(ct_results)))
        sections.append(_section("Cross-tabulations",
                                 "Shares in the real and the first synthetic dataset.", tables,
                                 figs))

    # Propensity scores
    prop = [propensity_score_utility(real, s, schema=schema, random_seed=random_seed)
            for s in syns]
    prop_df = pd.DataFrame([p._asdict() for p in prop])
    prop_df["auc_gbm"] = [propensity_auc(real, s, schema=schema, random_seed=random_seed)
                          for s in syns]
    _number_datasets(prop_df)
    results["propensity"] = prop_df
    sections.append(_section(
        "Propensity-score utility",
        "Logistic regression on main effects; pMSE = mean (p - c)^2; S_pMSE = pMSE / its null "
        "expectation (about 1 when real and synthetic are indistinguishable). auc_gbm: "
        "out-of-fold AUC of a gradient-boosting classifier (0.5: indistinguishable, 1: every "
        "record told apart).",
        [_table_html(prop_df)], []))

    # Regression
    if regression:
        comp = regression_inference(real, syns, regression, method=regression_method,
                                    random_seed=random_seed)
        reg_summary = comp.summary.copy()
        _number_datasets(reg_summary)
        results["regression"] = {"formula": regression, "method": regression_method,
                                 "real": comp.real, "summary": reg_summary,
                                 "per_coefficient": comp.per_coefficient}
        sections.append(_section(
            "Regression inference",
            f"<code>{html.escape(regression)}</code> ({regression_method}); CIO = interval "
            "overlap (1 identical, negative disjoint); standardised squared error = "
            "(b_real - b_syn)^2 / sd_real^2. The table has one row per synthetic dataset; "
            + ("the plot shows the first of them." if m > 1 else "the plot shows it."),
            [_table_html(reg_summary)], [_png(plots.plot_coefficients(comp))]))

    risk_values = None
    if kind == "partially":
        risk_values = _partially_synthetic_risk(real, syns, results, sections, schema=schema,
                                                known=known, synthesized=synthesized,
                                                sensitive=sensitive, public=public,
                                                radius=radius, radii=radii, holdout=holdout)
    else:
        risk_values = _fully_synthetic_risk(real, syns, results, sections, schema=schema,
                                            known=known, sensitive=sensitive, holdout=holdout,
                                            random_seed=random_seed)

    # Risk-utility
    if risk_values is not None:
        fig = plots.plot_risk_utility(
            prop_df["pmse"].to_numpy(), risk_values,
            risk_label="identification risk" if kind == "partially" else "singling-out risk")
        sections.append(_section(
            "Risk and utility",
            "One point per synthetic dataset" + (
                "; the rectangle spans the quartiles on both axes and the whiskers run from the "
                "medians to the minima and maxima (Hornby & Hu's 2D boxplot)." if m > 1 else "."),
            [], [_png(fig)]))

    results["at_a_glance"] = _at_a_glance(results)
    sections.insert(1 if ledger is not None else 0, _glance_html(results["at_a_glance"]))
    page = _page(title, results, sections)
    atomic_write_text(output, page)
    payload = json.dumps(_jsonable(results), indent=1)
    atomic_write_text(output.with_suffix(".json"), payload + "\n")
    return json.loads(payload)


def _partially_synthetic_risk(real, syns, results, sections, *, schema, known, synthesized,
                              sensitive, public, radius, radii, holdout):
    """Identification risk by row-by-row matching and attribute disclosure at outliers."""
    risk_values = None
    cols = list(real.columns)
    rk = _record_keys(real, cols)
    keys = [_record_keys(s[cols], cols) for s in syns]
    copies = pd.DataFrame([{
        "own_record_share": float(np.mean(sk.to_numpy() == rk.to_numpy())),
        "exact_copy_share": float(sk.isin(rk).mean())} for sk in keys])
    _number_datasets(copies)
    results["partially_synthetic_copies"] = copies
    note = html.escape(results.get("kind_note", "stated"))
    text = (f"Treated as partially synthetic data ({note}; "
            "state kind/--kind if this is wrong). own_record_share: records whose every value "
            "equals the real record in the same row (nothing replaced); exact_copy_share: "
            "records equal to any real record on every column.")
    if holdout is not None:
        text += (" The hold-out data are not used: the DCR ratio and singling-out risk are "
                 "measures for fully synthetic data.")
    sections.append(_section("Records kept whole (partially synthetic data)", text,
                             [_table_html(copies)], []))
    if known or synthesized:
        ir = identification_risk(real, syns, known=known, synthesized=synthesized,
                                 radius=radius, schema=schema)
        sweep, best = identification_risk_sweep(real, syns, known=known,
                                                synthesized=synthesized, radii=radii,
                                                schema=schema)
        risk_values = ir.per_dataset["risk"].to_numpy()
        ir_table = ir.per_dataset.copy()
        _number_datasets(ir_table)
        sweep = sweep.assign(dataset=sweep["dataset"] + 1)  # numbered from 1, as the rest
        results["identification_risk"] = {
            "known": list(known), "synthesized": list(synthesized), "radius": radius,
            "per_dataset": ir_table, "summary": ir.summary,
            "sweep": sweep, "best_radius": best,
            "risk_at_best_radius": float(sweep.loc[sweep["radius"] == best, "risk"].mean()),
        }
        sections.append(_section(
            "Identification risk (partially synthetic data)",
            f"Known: {', '.join(known) or '-'}; synthesized: {', '.join(synthesized) or '-'}; "
            f"radius {100 * radius:g}% of the real value. File-level risk = sum of T_i/c_i "
            f"(Hornby & Hu 2021). The radius maximising the mean risk is {100 * best:g}% "
            f"(risk {results['identification_risk']['risk_at_best_radius']:.4g}).",
            [_table_html(ir_table), _table_html(ir.summary)],
            [_png(plots.plot_risk_by_radius(sweep, best))]))
    if sensitive and public:
        ad = [outlier_attribute_disclosure(real, s, public=public, sensitive=sensitive)
              for s in syns]
        ad_df = pd.DataFrame(ad)
        _number_datasets(ad_df)
        results["attribute_disclosure"] = {"public": public, "sensitive": sensitive,
                                           "per_dataset": ad_df}
        per_end = sorted({int(x) // 2 for x in ad_df["n_pairs"]})
        ends = " to ".join(str(x) for x in (per_end[0], per_end[-1])) if len(per_end) > 1 \
            else str(per_end[0])
        sections.append(_section(
            "Attribute disclosure at outliers",
            f"Sensitive <b>{html.escape(sensitive)}</b> of the {ends} records with the lowest "
            f"and the {ends} with the highest values "
            f"of public <b>{html.escape(public)}</b> (ties taken in row order; Feldman & "
            "Kowal 2022, section 6.4): R^2 "
            "(numeric) or accuracy (categorical); near 0, or near the base rate, is safe. R^2 "
            "is NaN when one side is constant at the extremes: read exact_share (pairs with "
            "equal values) there.",
            [_table_html(ad_df)], []))
    return risk_values


def _fully_synthetic_risk(real, syns, results, sections, *, schema, known, sensitive, holdout,
                          random_seed):
    """Exact copies, DCR against a hold-out, singling out and attribute inference."""
    cols = list(real.columns)
    rows = []
    for s in syns:
        row: dict[str, Any] = {}
        if holdout is not None:
            d = distance_to_closest_record(real, s[cols], holdout[cols], schema=schema)
            so = singling_out_risk(real, s[cols], holdout[cols], schema=schema,
                                   random_seed=random_seed)
            lo, hi = d.ratio_interval(random_seed=random_seed)
            null = so.null_test(random_seed=random_seed)
            row.update(exact_copy_share=d.exact_copy_share, dcr_ratio=d.ratio,
                       dcr_ratio_lower=lo, dcr_ratio_upper=hi,
                       median_dcr=float(np.median(d.to_train)),
                       median_dcr_holdout=float(np.median(d.holdout_to_train)),
                       singling_out_rate=so.rate_train, singling_out_control=so.rate_control,
                       singling_out_risk=so.risk, singling_out_excess=so.excess,
                       singling_out_chance95=null.band, singling_out_p=null.p,
                       singling_out_p_decided=null.decided,
                       singling_out_splits=null.n_perm,
                       singling_out_attacks=so.n_attacks)
        else:
            row["exact_copy_share"] = float(
                _record_keys(s, cols).isin(_record_keys(real, cols)).mean())
        rows.append(row)
    df = pd.DataFrame(rows)
    _number_datasets(df)
    results["fully_synthetic_risk"] = {"per_dataset": df, "holdout": holdout is not None}
    note = html.escape(results.get("kind_note", "stated"))
    text = (f"Treated as fully synthetic data ({note}; state "
            "kind/--kind if this is wrong): no synthetic row corresponds to a real person, "
            "so row-by-row matching (identification risk) does not apply. exact_copy_share: "
            "synthetic records equal to a training record on every column.")
    if holdout is not None:
        text += (" dcr_ratio: median distance from a synthetic record to its closest training "
                 "record over the same median for the hold-out records (at least 1: synthetic "
                 "records are no closer to the training data than new real records are). "
                 "singling_out_risk: predicates read off synthetic records that isolate exactly "
                 "one training record, beyond the rate for hold-out records (0: none); "
                 "singling_out_excess is the same before flooring at 0 (chance makes it "
                 "negative as often as positive when there is no risk); "
                 "singling_out_chance95: the 95th percentile of that excess when the same "
                 "training and hold-out people are split at random (a permutation test; "
                 "singling_out_p is its p-value, from singling_out_splits random splits, "
                 "added until the p-value's 99.9% Monte Carlo interval lies on one side of "
                 "0.05 or 25,600 splits are reached; singling_out_p_decided says whether it "
                 "does).")
    else:
        text += (" Pass a hold-out sample of real records the synthesizer did not see "
                 "(<code>holdout=</code>, <code>bayesynth evaluate --holdout</code>) for the "
                 "DCR ratio and the singling-out risk.")
    sections.append(_section("Disclosure risk (fully synthetic data)", text, [_table_html(df)],
                             []))
    if sensitive:
        keys = list(known) or [c for c in cols if c != sensitive][:DEFAULT_KEYS]
        ai = [attribute_inference_risk(real, s, keys=keys, sensitive=sensitive,
                                       holdout=holdout, schema=schema) for s in syns]
        ai_df = pd.DataFrame([{"cap": a.cap, "coverage": a.coverage, "baseline": a.baseline,
                               "holdout_cap": a.holdout_cap} for a in ai])
        _number_datasets(ai_df)
        results["attribute_inference"] = {"keys": keys, "sensitive": sensitive,
                                          "per_dataset": ai_df}
        sections.append(_section(
            "Attribute inference",
            f"An intruder who knows <b>{html.escape(', '.join(keys))}</b> of a real person "
            f"guesses <b>{html.escape(sensitive)}</b> from the synthetic records with the same "
            "keys. cap: correct attribution probability over training records with a match "
            "(Taub et al. 2018); baseline: guessing from the marginal distribution; holdout_cap: "
            "the same for real people outside the training data (what the data teach about "
            "anyone). Numeric columns with more than 10 distinct training values are cut "
            "at the training quintiles (fewer bins where values tie); those with at most 10 "
            "(integer codes, small counts) are taken value by value.",
            [_table_html(ai_df)], []))
    if holdout is not None:
        return df["singling_out_risk"].to_numpy()
    return None


def _check_names(real: pd.DataFrame, *, known, synthesized, synthesised, sensitive, public,
                 regression) -> None:
    """Refuse column names the real data lack before any slow section runs."""
    named = {"known": list(known or ()), "synthesized": list(synthesized or ()),
             "synthesised": list(synthesised or ()),
             "sensitive": [sensitive] if sensitive else [], "public": [public] if public else []}
    if regression:
        from formulaic import Formula

        try:
            named["regression"] = sorted(
                v for v in Formula(regression).required_variables if str(v) != "1")
        except Exception as err:  # noqa: BLE001 - formulaic raises many kinds
            raise InvalidParameterError(f"The regression formula {regression!r} cannot be "
                                        f"read: {err}.", column="regression") from None
    for what, cols in named.items():
        absent = [str(c) for c in cols if c not in real.columns]
        if absent:
            raise MissingColumnError(
                f"{what} names column(s) {absent} that the real data lack (columns: "
                f"{list(real.columns)[:12]}{' ...' if real.shape[1] > 12 else ''}).",
                column=absent[0])
    if public and not sensitive:
        raise InvalidParameterError("public (the column an intruder knows) is used only with "
                                    "sensitive (the column they try to learn); give both.",
                                    column="public")


def _check_numeric(num: list, syns: list[pd.DataFrame], holdout: pd.DataFrame | None) -> None:
    """Refuse a table whose column is text where the real column holds numbers."""
    tables = [(f"synthetic dataset {i + 1}", s) for i, s in enumerate(syns)]
    if holdout is not None:
        tables.append(("the hold-out data", holdout))
    for c in num:
        for label, t in tables:
            col = t[c]
            if pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
                continue
            bad = pd.to_numeric(col, errors="coerce").isna() & col.notna()
            example = col[bad].iloc[0] if bad.any() else col.dropna().iloc[0] \
                if col.notna().any() else None
            raise ColumnTypeError(
                f"Column '{c}' holds numbers in the real data but not in {label} (for example "
                f"{example!r}). Write missing values as empty fields, and numbers as numbers.",
                column=str(c))


def _at_a_glance(results: dict) -> list[dict[str, Any]]:
    """Summarise the results in a few numbers, with a sentence each."""
    out = []
    auc = float(np.mean(results["propensity"]["auc_gbm"]))
    spmse = float(np.mean(results["propensity"]["s_pmse"]))
    verdict = ("no better than chance" if auc <= 0.5 else
               "hardly better than chance" if auc < 0.6 else
               "somewhat better than chance" if auc < 0.75 else "easily")
    below = ("; below 0.5 it can also mean synthetic records close to real ones, so read "
             "the risk measures" if auc < 0.5 else "")
    paired = ("; records that keep most of their row's real values put it well below 1"
              if results["kind"] == "partially" else "")
    sentence = (f"A gradient-boosting classifier tells synthetic from real records {verdict} "
                f"(out-of-fold AUC {auc:.2f}; 0.5 = indistinguishable{below}); logistic "
                f"S_pMSE {spmse:.2g} (about 1 = indistinguishable{paired}).")
    if auc < 0.4 and results["kind"] == "partially":
        sentence = (f"The out-of-fold AUC is {auc:.2f}, well below 0.5, as expected when the "
                    "synthetic records keep the real records' rows (each sits next to its own "
                    "real record); it does not measure distinguishability here. Logistic "
                    f"S_pMSE {spmse:.1f}.")
    elif auc < 0.4:  # an out-of-fold artifact of records the two tables share, not a virtue
        sentence = (f"The out-of-fold AUC is {auc:.2f}, well below 0.5: synthetic records "
                    "sit very close to real ones, as exact or near copies do (an exact copy "
                    "of a real table of 300 to 2,000 records scored 0.02 to 0.15 in our "
                    "tests). Check the exact-copy share and the distances to the real "
                    f"records. Logistic S_pMSE {spmse:.1f}.")
    out.append({"aspect": "distinguishability", "value": auc, "measure": "propensity AUC",
                "sentence": sentence})
    if "regression" in results:
        cio = float(results["regression"]["summary"]["mean_cio"].mean()) \
            if "mean_cio" in results["regression"]["summary"] else float("nan")
        out.append({"aspect": "inference", "value": cio, "measure": "mean CIO",
                    "sentence": f"Confidence intervals of the regression overlap the real "
                                f"ones by {cio:.2f} on average (1 = identical, 0.5 = half, "
                                "below 0 = disjoint)."})
    else:
        out.append({"aspect": "inference", "value": None, "measure": "mean CIO",
                    "sentence": "No regression was given (pass regression=, or --regression "
                                "on the command line) to see how analyses survive."})
    if results["kind"] == "fully":
        fr = results["fully_synthetic_risk"]["per_dataset"]
        copies = float(fr["exact_copy_share"].mean())
        sent = f"{copies:.1%} of the synthetic records are exact copies of training records"
        value, measure = copies, "exact-copy share"
        if "dcr_ratio" in fr:
            ratio = float(fr["dcr_ratio"].mean())
            upper = float(fr["dcr_ratio_upper"].mean()) if "dcr_ratio_upper" in fr else ratio
            # average before flooring: the mean of floored estimates is biased upwards
            excess = fr["singling_out_excess"].dropna()
            so = max(0.0, float(excess.mean())) if len(excess) else float("nan")
            decided = fr["singling_out_p_decided"].fillna(True).astype(bool)
            above = int(((fr["singling_out_p"] < 0.05) & decided).sum())
            borderline = int((~decided).sum())
            if not len(excess):
                verdict = ""
            elif len(fr) == 1:
                p_so = float(fr["singling_out_p"].iloc[0])
                band = float(fr["singling_out_chance95"].iloc[0])
                verdict = (f"above what chance gives, permutation p = {p_so:.3f}" if above else
                           f"at the edge of what chance gives, permutation p = {p_so:.3f}"
                           if borderline else
                           "within what chance gives: random splits of the same people into "
                           f"training and hold-out exceed {band:.2f} in 5% of cases")
            else:
                verdict = (f"above what chance gives in {above} of {len(fr)} datasets at "
                           "permutation p < 0.05")
                if borderline:
                    verdict += f" and at its edge in {borderline}, p within 0.005 of 0.05"
            so_text = (f"singling-out risk {so:.2f} (0 = no more than for outsiders; "
                       f"{verdict})" if len(excess) else
                       "singling-out risk not measured (no predicate read off a synthetic "
                       "record was true of exactly one synthetic record, as when records "
                       "are duplicated)")
            if 0 < len(excess) < len(fr):
                so_text += f"; measured on {len(excess)} of {len(fr)} datasets"
            how = ("no closer" if ratio >= 1 else "closer" if upper < 1
                   else "not measurably closer")
            sent += (f"; synthetic records are {how} to "
                     f"the training records than new real records are (DCR ratio {ratio:.2f}"
                     + ("" if ratio >= 1 or upper < 1 else
                        f"; its 95% bootstrap interval reaches {upper:.2f}") + ")"
                     f"; {so_text}")
            value, measure = ratio, "DCR ratio"
        else:
            sent += "; give a hold-out sample for the DCR ratio and singling-out risk"
        if "attribute_inference" in results:
            ai = results["attribute_inference"]["per_dataset"]
            target = results["attribute_inference"]["sensitive"]
            if ai["cap"].notna().any():
                sent += (f"; correct attribution of {target}: {float(ai['cap'].mean()):.2f} "
                         f"against {float(ai['baseline'].mean()):.2f} from its marginal alone "
                         "(over the same training records, those whose keys occur in the "
                         "synthetic data)")
            else:
                sent += (f"; correct attribution of {target} not measured: no training "
                         "record's keys occur in the synthetic data")
        out.append({"aspect": "risk", "value": value, "measure": measure,
                    "sentence": sent + "."})
    else:
        cp = results.get("partially_synthetic_copies")
        whole = "" if cp is None else (
            f" {float(cp['own_record_share'].mean()):.1%} of the records keep every real "
            f"value of their row ({float(cp['exact_copy_share'].mean()):.1%} equal some real "
            "record).")
        if "identification_risk" in results:
            ir = results["identification_risk"]
            r = float(np.mean(ir["per_dataset"]["risk"]))
            out.append({"aspect": "risk", "value": r, "measure": "identification risk",
                        "sentence": f"Matching real records row by row identifies {r:.4g} "
                                    f"records in expectation at radius "
                                    f"{100 * ir['radius']:g}% (partially synthetic data)"
                                    + ("" if ir["best_radius"] == ir["radius"] else
                                       f"; {ir['risk_at_best_radius']:.4g} at radius "
                                       f"{100 * ir['best_radius']:g}%, the radius of those "
                                       "tried that maximises it")
                                    + "." + whole})
        else:
            out.append({"aspect": "risk", "value": None, "measure": "identification risk",
                        "sentence": "Partially synthetic data: name the known and synthesized "
                                    "variables to measure the identification risk." + whole})
    return out


def _glance_html(items: list[dict[str, Any]]) -> str:
    rows = []
    for i in items:
        value = "" if i["value"] is None else f"{i['value']:.3g}"
        rows.append(f"<tr><th>{html.escape(i['aspect'])}</th><td>{value}</td>"
                    f"<td>{html.escape(i['measure'])}</td><td style='text-align:left'>"
                    f"{html.escape(i['sentence'])}</td></tr>")
    return f"<section><h2>At a glance</h2><table class='t glance'>{''.join(rows)}</table></section>"


def _number_datasets(df: pd.DataFrame) -> None:
    """Renumber the rows of a per-dataset table 1, 2, ... (as ``synthetic_1.csv``, ...)."""
    df.index = pd.RangeIndex(1, len(df) + 1, name="dataset")


def _section(title: str, text: str, tables: list[str], images: list[str]) -> str:
    imgs = "".join(f'<img alt="{html.escape(title)}" src="data:image/png;base64,{b}">'
                   for b in images)
    return (f"<section><h2>{html.escape(title)}</h2><p>{text}</p>{''.join(tables)}"
            f"<div class='figs'>{imgs}</div></section>")


def _page(title: str, results: dict, sections: list[str]) -> str:
    from bayesynth import __version__

    head = (f"<p>{results['n_real']} real records; {results['m']} synthetic dataset(s) of "
            f"{', '.join(str(n) for n in results['n_synthetic'])} records; "
            f"{len(results['columns'])} columns. bayesynth {__version__}.</p>")
    style = """
    body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
           max-width: 1200px; color: #222; line-height: 1.4; padding: 0 1em; }
    h1 { color: #1f3b73; } h2 { color: #1f3b73; border-bottom: 1px solid #ccd; }
    table.t { border-collapse: collapse; font-size: 12px; margin: 0.5em 0; }
    table.t th, table.t td { padding: 2px 8px; text-align: right; border-bottom: 1px solid #eee; }
    table.t th { background: #f3f5fa; }
    .figs img { max-width: 100%; margin: 0.5em 0; display: block; }
    .wide { overflow-x: auto; max-width: 100%; }
    code { background: #f3f5fa; padding: 1px 4px; }
    """
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{style}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{head}{''.join(sections)}</body></html>\n")
