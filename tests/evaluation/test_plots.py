"""Plots of computed results return figures."""

from __future__ import annotations

import pandas as pd

from bayesynth.evaluation import expected_tau, paired_counts
from bayesynth.synthesis import synthesize_table


def test_count_plots_return_figures(medium_table):
    import matplotlib

    matplotlib.use("Agg")
    from bayesynth.evaluation.plots import (
        plot_count_comparison,
        plot_count_privacy_utility,
        plot_tau_by_sigma,
    )

    syn = synthesize_table(medium_table, family="nbi", sigma=0.1, random_seed=0)
    fig = plot_count_comparison(paired_counts(medium_table, syn))
    assert fig.axes
    grid = pd.DataFrame([{"family": f, "sigma": s, "alpha": 0.0,
                          "tau4": expected_tau(medium_table, family=f, sigma=s,
                                               ks=(1,)).loc[1, "tau4"]}
                         for f in ("nbi", "pig") for s in (0.01, 0.1, 1.0)])
    assert plot_tau_by_sigma(grid).axes
    results = grid.assign(mean_cio=0.8)
    assert plot_count_privacy_utility(results).axes
