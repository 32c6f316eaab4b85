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
from bayesynth.evaluation import plots
from bayesynth.evaluation.regression import regression_inference
from bayesynth.evaluation.risk import (
    identification_risk,
    identification_risk_sweep,
    outlier_attribute_disclosure,
)
from bayesynth.evaluation.utility import (
    crosstab_comparison,
    marginal_utility,
    numeric_columns,
    propensity_score_utility,
)

__all__ = ["report"]

MAX_CROSSTABS = 3


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
        return _jsonable(obj.reset_index().to_dict(orient="records"))
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _table_html(df: pd.DataFrame, digits: int = 4) -> str:
    return df.to_html(float_format=lambda v: f"{v:.{digits}g}", border=0, classes="t",
                      na_rep="")


def report(
    real: pd.DataFrame,
    synthetic: pd.DataFrame | Sequence[pd.DataFrame],
    output: str | os.PathLike = "report.html",
    *,
    schema=None,
    known: Sequence[str] = (),
    synthesised: Sequence[str] = (),
    sensitive: str | None = None,
    public: str | None = None,
    radius: float = 0.05,
    radii: Sequence[float] = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3),
    regression: str | None = None,
    regression_method: str = "ols",
    title: str = "bayesynth: utility and disclosure risk",
    random_state: int | None = 0,
    ledger=None,
) -> dict[str, Any]:
    """Evaluate synthetic data against the real data and write an HTML report and its JSON.

    Sections (each when its inputs are given): marginals (max/avg ECDF, quantiles, total
    variation; overlays), cross-tabulations of up to three pairs of categorical columns (heat
    maps), propensity-score utility (pMSE, S_pMSE per dataset), regression inference (CIO,
    standardised squared error; coefficient plot), identification risk (at ``radius`` and swept
    over ``radii``; needs ``known`` and/or ``synthesised``), attribute disclosure at outliers of
    ``public`` for ``sensitive``, and the risk-utility scatter with the 2D boxplot when there are
    several synthetic datasets. With a privacy ledger, the report opens with what was released
    under differential privacy, at what cost, and under which guarantee.

    Parameters
    ----------
    real : pandas.DataFrame
    synthetic : DataFrame or list of DataFrame
    output : path-like, default "report.html"
        HTML file; the JSON goes to the same path with suffix ``.json``. Both written atomically.
    schema : bayesynth.Schema, optional
    known, synthesised : sequence of str
        Identification risk variables (see :func:`~bayesynth.evaluation.identification_risk`).
    sensitive, public : str, optional
        Attribute disclosure (see :func:`~bayesynth.evaluation.outlier_attribute_disclosure`).
    radius : float, default 0.05
    radii : sequence of float
    regression : str, optional
        Formula for :func:`~bayesynth.evaluation.regression_inference`.
    regression_method : {"ols", "bayes"}, default "ols"
    title : str
    random_state : int, optional
        Seed for the permutation and sampling steps.
    ledger : bayesynth.privacy.Ledger or path-like, optional
        The privacy ledger of the release (or its JSON file, as written by
        :meth:`~bayesynth.privacy.Ledger.to_json`).

    Returns
    -------
    dict
        Every number in the report (what the JSON file holds).
    """
    syns = [synthetic] if isinstance(synthetic, pd.DataFrame) else list(synthetic)
    if not syns:
        raise ValueError("report needs at least one synthetic dataset.")
    missing = [c for c in real.columns if any(c not in s.columns for s in syns)]
    if missing:
        raise KeyError(f"Synthetic data lack column(s) {missing} of the real data.")
    output = Path(output)
    m = len(syns)
    num = numeric_columns(real, schema)
    cat = [c for c in real.columns if c not in num]
    results: dict[str, Any] = {"n_real": len(real), "n_synthetic": [len(s) for s in syns],
                               "m": m, "columns": list(real.columns)}
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
        f"Averages over {m} synthetic dataset(s). max/avg ECDF: Woo et al. (2009); tv: total "
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
    prop = [propensity_score_utility(real, s, schema=schema, random_state=random_state)
            for s in syns]
    prop_df = pd.DataFrame([p._asdict() for p in prop])
    prop_df.index.name = "dataset"
    results["propensity"] = prop_df
    sections.append(_section(
        "Propensity-score utility",
        "Logistic regression on main effects; pMSE = mean (p - c)^2; S_pMSE = pMSE / its null "
        "expectation (about 1 when real and synthetic are indistinguishable).",
        [_table_html(prop_df)], []))

    # Regression
    if regression:
        comp = regression_inference(real, syns, regression, method=regression_method,
                                    random_seed=random_state)
        results["regression"] = {"formula": regression, "method": regression_method,
                                 "real": comp.real, "summary": comp.summary,
                                 "per_coefficient": comp.per_coefficient}
        sections.append(_section(
            "Regression inference",
            f"<code>{html.escape(regression)}</code> ({regression_method}); CIO = interval "
            "overlap (1 identical, negative disjoint); standardised squared error = "
            "(b_real - b_syn)^2 / sd_real^2.",
            [_table_html(comp.summary)], [_png(plots.plot_coefficients(comp))]))

    # Identification risk
    risk_values = None
    if known or synthesised:
        ir = identification_risk(real, syns, known=known, synthesized=synthesised,
                                 radius=radius, schema=schema)
        sweep, best = identification_risk_sweep(real, syns, known=known,
                                                synthesized=synthesised, radii=radii,
                                                schema=schema)
        risk_values = ir.per_dataset["risk"].to_numpy()
        results["identification_risk"] = {
            "known": list(known), "synthesised": list(synthesised), "radius": radius,
            "per_dataset": ir.per_dataset, "summary": ir.summary,
            "sweep": sweep, "best_radius": best,
            "risk_at_best_radius": float(sweep.loc[sweep["radius"] == best, "risk"].mean()),
        }
        sections.append(_section(
            "Identification risk",
            f"Known: {', '.join(known) or '-'}; synthesised: {', '.join(synthesised) or '-'}; "
            f"radius {100 * radius:g}% of the real value. File-level risk = sum of T_i/c_i "
            f"(Hornby & Hu 2021). The radius maximising the mean risk is {100 * best:g}% "
            f"(risk {results['identification_risk']['risk_at_best_radius']:.4g}).",
            [_table_html(ir.per_dataset), _table_html(ir.summary)],
            [_png(plots.plot_risk_by_radius(sweep, best))]))

    # Attribute disclosure
    if sensitive and public:
        ad = [outlier_attribute_disclosure(real, s, public=public, sensitive=sensitive)
              for s in syns]
        ad_df = pd.DataFrame(ad)
        ad_df.index.name = "dataset"
        results["attribute_disclosure"] = {"public": public, "sensitive": sensitive,
                                           "per_dataset": ad_df}
        sections.append(_section(
            "Attribute disclosure at outliers",
            f"Sensitive <b>{html.escape(sensitive)}</b> at the 50 lowest and 50 highest values "
            f"of public <b>{html.escape(public)}</b> (Feldman & Kowal 2022, section 6.4): R^2 "
            "(numeric) or accuracy (categorical); near 0, or near the base rate, is safe.",
            [_table_html(ad_df)], []))

    # Risk-utility
    if risk_values is not None:
        fig = plots.plot_risk_utility(prop_df["pmse"].to_numpy(), risk_values)
        sections.append(_section(
            "Risk and utility",
            "One point per synthetic dataset" + (
                "; the rectangle spans the quartiles on both axes and the whiskers run from the "
                "medians to the minima and maxima (Hornby & Hu's 2D boxplot)." if m > 1 else "."),
            [], [_png(fig)]))

    page = _page(title, results, sections)
    atomic_write_text(output, page)
    payload = json.dumps(_jsonable(results), indent=1)
    atomic_write_text(output.with_suffix(".json"), payload + "\n")
    return json.loads(payload)


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
    code { background: #f3f5fa; padding: 1px 4px; }
    """
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{style}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{head}{''.join(sections)}</body></html>\n")
