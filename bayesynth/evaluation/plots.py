"""Plots of computed utility and risk results (matplotlib; each returns a Figure).

Computing lives in :mod:`~bayesynth.evaluation.utility`, :mod:`~bayesynth.evaluation.regression`
and :mod:`~bayesynth.evaluation.risk`; these functions only draw what those return.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bayesynth.evaluation._values import as_text

__all__ = [
    "plot_marginals",
    "plot_crosstab",
    "plot_coefficients",
    "plot_risk_by_radius",
    "plot_risk_utility",
    "boxplot_2d",
    "plot_count_privacy_utility",
    "plot_tau_by_sigma",
    "plot_count_comparison",
]

REAL, SYN = "#1f3b73", "#6fa8dc"


def plot_marginals(real: pd.DataFrame, synthetic: Sequence[pd.DataFrame], *,
                   numeric: Sequence[str] = (), columns: Sequence[str] | None = None,
                   ncols: int = 4) -> plt.Figure:
    """Plot the real against the synthetic marginal of each column.

    Histograms for numbers (all synthetic datasets pooled), bar charts of level shares (at most
    12 levels) for the rest.

    Parameters
    ----------
    real : pandas.DataFrame
        The real table.
    synthetic : sequence of pandas.DataFrame
        One or more synthetic tables with the same columns; they are pooled.
    numeric : sequence of str, default ()
        Columns drawn as histograms; every other column is drawn as level shares.
    columns : sequence of str, optional
        Columns to plot, in panel order; all columns of ``real`` by default.
    ncols : int, default 4
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        One panel per column.
    """
    cols = list(real.columns if columns is None else columns)
    nrows = int(np.ceil(len(cols) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.4 * nrows), squeeze=False)
    pooled = pd.concat(list(synthetic), ignore_index=True)
    for ax, col in zip(axes.flat, cols):
        if col in numeric:
            x = real[col].dropna().to_numpy(float)
            y = pooled[col].dropna().to_numpy(float)
            both = np.r_[x, y]
            if np.all(both == np.round(both)):  # integers: whole-number bins, no aliasing
                step = max(1.0, np.ceil((both.max() - both.min() + 1) / 40))
                bins = np.arange(both.min() - 0.5, both.max() + step + 0.5, step)
            else:
                bins = np.histogram_bin_edges(both, bins=30)
            ax.hist(x, bins=bins, density=True, color=REAL, alpha=0.8, label="real")
            ax.hist(y, bins=bins, density=True, histtype="step", color=SYN, lw=2,
                    label="synthetic")
        else:
            p = as_text(real[col]).value_counts(normalize=True)
            q = as_text(pooled[col]).value_counts(normalize=True)
            p, q = p.align(q, fill_value=0.0)
            if isinstance(real[col].dtype, pd.CategoricalDtype):  # keep the level order
                cats = as_text(pd.Series(real[col].cat.categories))
                order = [c for c in cats if c in p.index]
                p = p.reindex(order + [i for i in p.index if i not in order]).iloc[:12]
            else:
                p = p.sort_values(ascending=False).iloc[:12]
            q = q.reindex(p.index)
            pos = np.arange(len(p))
            ax.bar(pos - 0.2, p.values, 0.4, color=REAL, label="real")
            ax.bar(pos + 0.2, q.values, 0.4, color=SYN, label="synthetic")
            ax.set_xticks(pos, [str(v)[:10] for v in p.index], rotation=45, ha="right",
                          fontsize=7)
        ax.set_title(col, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(cols):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_crosstab(table: pd.DataFrame) -> plt.Figure:
    """Draw heat maps of a cross-tabulation: real shares, synthetic shares, their difference.

    Parameters
    ----------
    table : pandas.DataFrame
        The table returned by :func:`~bayesynth.evaluation.crosstab_comparison` (a two-level
        index and columns ``real``, ``synthetic`` and ``difference``).

    Returns
    -------
    matplotlib.figure.Figure
        Three heat maps side by side.
    """
    a, b = table.index.names
    panels = [("real", "Blues"), ("synthetic", "Blues"), ("difference", "RdBu_r")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (col, cmap) in zip(axes, panels):
        grid = table[col].unstack(fill_value=0.0)
        lim = np.abs(grid.values).max() or 1.0
        kw = {"vmin": -lim, "vmax": lim} if col == "difference" else {"vmin": 0}
        im = ax.imshow(grid.values, cmap=cmap, aspect="auto", **kw)
        ax.set_xticks(range(grid.shape[1]), [str(v)[:12] for v in grid.columns], rotation=45,
                      ha="right", fontsize=7)
        ax.set_yticks(range(grid.shape[0]), [str(v)[:14] for v in grid.index], fontsize=7)
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                v = grid.values[i, j]
                dark = abs(v) > 0.6 * lim
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")
        ax.set_title(f"{col}: {a} x {b}", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


def plot_coefficients(comparison, dataset: int = 0) -> plt.Figure:
    """Plot estimates and intervals of the real fit beside one synthetic fit.

    As in Feldman & Kowal, Figure 3.

    Parameters
    ----------
    comparison : RegressionComparison
        The result of :func:`~bayesynth.evaluation.regression_inference`.
    dataset : int, default 0
        Index of the synthetic dataset to show.

    Returns
    -------
    matplotlib.figure.Figure
        One row per coefficient; the title gives the dataset's mean CIO and mean standardised
        squared error.
    """
    obs, syn = comparison.real, comparison.synthetic[dataset]
    terms = list(obs.index)
    y = np.arange(len(terms))
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(terms) + 1.5))
    ax.hlines(y + 0.15, obs["lower"], obs["upper"], color=REAL, lw=2, label="real")
    ax.plot(obs["estimate"], y + 0.15, "x", color=REAL)
    ax.hlines(y - 0.15, syn["lower"], syn["upper"], color=SYN, lw=2,
              label=f"synthetic {dataset + 1}")
    ax.plot(syn["estimate"], y - 0.15, "x", color=SYN)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, terms, fontsize=8)
    ax.set_xlabel("coefficient (numeric predictors standardised)")
    m = comparison.summary.loc[dataset]
    ax.set_title(f"mean CIO {m['mean_cio']:.3f}, mean standardised sq. error "
                 f"{m['mean_std_sq_error']:.3f}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_risk_by_radius(table: pd.DataFrame, best_radius: float | None = None) -> plt.Figure:
    """Plot file-level identification risk against the matching radius.

    One box per radius over the synthetic datasets, with the mean as a line.

    Parameters
    ----------
    table : pandas.DataFrame
        The table returned by :func:`~bayesynth.evaluation.identification_risk_sweep` (columns
        ``radius`` and ``risk``).
    best_radius : float, optional
        The maximising radius, shown in the title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    radii = sorted(table["radius"].unique())
    data = [table.loc[table["radius"] == r, "risk"].to_numpy() for r in radii]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.boxplot(data, tick_labels=[f"{100 * r:g}%" for r in radii])
    ax.plot(range(1, len(radii) + 1), [d.mean() for d in data], "o-", color=SYN,
            label="mean")
    if best_radius is not None:
        ax.set_title(f"maximising radius {100 * best_radius:g}%", fontsize=9)
    ax.set_xlabel("radius (share of the real value)")
    ax.set_ylabel("file-level identification risk")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def boxplot_2d(ax, x: np.ndarray, y: np.ndarray, *, color: str = SYN, label: str | None = None):
    """Draw Hornby & Hu's "2D boxplot" on ``ax``.

    A rectangle from the first to the third quartile on both axes, with whiskers from the
    medians to the minima and maxima.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes to draw on.
    x, y : numpy.ndarray
        The points' coordinates.
    color : str, optional
        Colour of the rectangle and whiskers.
    label : str, optional
        Legend label of the rectangle.
    """
    from matplotlib.patches import Rectangle

    qx, qy = np.quantile(x, [0, 0.25, 0.5, 0.75, 1]), np.quantile(y, [0, 0.25, 0.5, 0.75, 1])
    ax.add_patch(Rectangle((qx[1], qy[1]), qx[3] - qx[1], qy[3] - qy[1], fill=False,
                           edgecolor=color, lw=2, label=label))
    ax.plot([qx[0], qx[1]], [qy[2], qy[2]], color=color)
    ax.plot([qx[3], qx[4]], [qy[2], qy[2]], color=color)
    ax.plot([qx[2], qx[2]], [qy[0], qy[1]], color=color)
    ax.plot([qx[2], qx[2]], [qy[3], qy[4]], color=color)


def plot_risk_utility(utility: np.ndarray, risk: np.ndarray, *,
                      utility_label: str = "pMSE (lower is better)",
                      risk_label: str = "identification risk") -> plt.Figure:
    """Plot utility against risk, one point per synthetic dataset.

    With more than one dataset the 2D boxplot (:func:`boxplot_2d`) is drawn over the points.

    Parameters
    ----------
    utility, risk : numpy.ndarray
        One value per synthetic dataset.
    utility_label, risk_label : str
        Axis labels.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.scatter(utility, risk, color=REAL, zorder=3, label="synthetic datasets")
    if len(utility) > 1:
        boxplot_2d(ax, np.asarray(utility), np.asarray(risk), label="quartiles, min-max")
    ax.set_xlabel(utility_label)
    ax.set_ylabel(risk_label)
    ax.legend(fontsize=8)
    ax.margins(0.15)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------- saturated count synthesis

_FAMILY_STYLE = {"poisson": ("k", "o"), "nbi": (REAL, "s"), "pig": ("#c0504d", "^"),
                 "dpo": ("#4f9a4f", "D")}


def plot_count_privacy_utility(results: pd.DataFrame) -> plt.Figure:
    """Plot privacy ``1 - tau_4(1)`` against utility, one point per synthetic table.

    Jackson et al.'s Figure 6, with utility the mean confidence-interval overlap. The original
    data sit at (1, 0); points further from the origin are better.

    Parameters
    ----------
    results : pandas.DataFrame
        Columns ``family``, ``sigma``, ``mean_cio`` and ``tau4``, and optionally ``alpha``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for family, rows in results.groupby("family", sort=False):
        color, marker = _FAMILY_STYLE.get(str(family), (SYN, "o"))
        ax.scatter(rows["mean_cio"], 1 - rows["tau4"], color=color, marker=marker,
                   label=str(family).upper(), zorder=3)
        for _, r in rows.iterrows():
            text = f"σ={r['sigma']:g}" + (f", α={r['alpha']:g}" if r.get("alpha", 0) else "")
            ax.annotate(text, (r["mean_cio"], 1 - r["tau4"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.scatter([1], [0], color="0.5", marker="*", s=90, label="original data", zorder=3)
    ax.set_xlim(0, 1.05)
    ax.set_ylim(-0.02, 1)
    ax.set_xlabel("utility: mean confidence-interval overlap")
    ax.set_ylabel("privacy: 1 - tau_4(1)")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_tau_by_sigma(grid: pd.DataFrame, *, metric: str = "tau4") -> plt.Figure:
    """Plot an expected tau metric at k = 1 against sigma (log scale).

    Jackson et al.'s Figure 1: one line per family and alpha (dashed for alpha > 0); rows with
    sigma = 0 are left out.

    Parameters
    ----------
    grid : pandas.DataFrame
        Columns ``family``, ``sigma``, ``alpha`` and ``metric``.
    metric : str, default "tau4"
        The column to plot.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    for (family, alpha), rows in grid.groupby(["family", "alpha"], sort=False):
        rows = rows[rows["sigma"] > 0].sort_values("sigma")
        color, marker = _FAMILY_STYLE.get(str(family), (SYN, "o"))
        style = "-" if alpha == 0 else "--"
        ax.plot(rows["sigma"], rows[metric], style, color=color, marker=marker, ms=3,
                label=f"{str(family).upper()}, α={alpha:g}")
    ax.set_xscale("log")
    ax.set_xlabel("sigma")
    ax.set_ylabel(f"expected {metric[:3]}_{metric[3:]}(1)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_count_comparison(pairs: pd.DataFrame, *, max_points: int = 20_000,
                          random_seed: int = 0) -> plt.Figure:
    """Plot synthetic against original cell counts of one synthetic table.

    Jackson et al.'s Figures 2 and 3: synthetic against original counts (log-log, with the
    45-degree line) and the percentage difference against the original count (the funnel).
    Only cells non-zero in the original are drawn.

    Parameters
    ----------
    pairs : pandas.DataFrame
        Columns ``original`` and ``synthetic`` (see
        :func:`~bayesynth.evaluation.counts.paired_counts`).
    max_points : int, default 20000
        With more cells than this, a random subset of this size is drawn.
    random_seed : int, default 0
        Seed of that subset.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels side by side.
    """
    pairs = pairs[pairs["original"] > 0]
    if len(pairs) > max_points:
        pairs = pairs.sample(max_points, random_state=random_seed)
    o = pairs["original"].to_numpy(float)
    s = pairs["synthetic"].to_numpy(float)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.scatter(o, s + 1, s=3, alpha=0.3, color=REAL)
    top = max(o.max(), s.max()) + 1
    a1.plot([1, top], [1, top], color="0.4", lw=1)
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("original count")
    a1.set_ylabel("synthetic count + 1")
    a2.scatter(o, 100 * (s - o) / o, s=3, alpha=0.3, color=REAL)
    a2.axhline(0, color="0.4", lw=1)
    a2.set_xscale("log")
    a2.set_xlabel("original count")
    a2.set_ylabel("% difference (synthetic - original)")
    fig.tight_layout()
    return fig
