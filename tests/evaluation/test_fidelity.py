"""Fidelity metrics and diagnostics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesynth.evaluation import crosstab_comparison, ks_distance, marginal_fidelity, tv_distance


def test_ks_and_tv_known_values():
    assert ks_distance([1, 2, 3, 4], [1, 2, 3, 4]) == 0.0
    assert ks_distance([0, 0, 0, 0], [1, 1, 1, 1]) == 1.0
    assert abs(ks_distance([1, 2, 3, 4], [3, 4, 5, 6]) - 0.5) < 1e-12
    assert tv_distance(["a", "a", "b", "b"], ["a", "b", "b", "b"]) == 0.25
    assert tv_distance(pd.Series(["a", None]), pd.Series(["a", "a"])) == 0.5


def test_marginal_and_crosstab(mixed_df):
    rep = marginal_fidelity(mixed_df, mixed_df)
    assert (rep["distance"] == 0).all() and (rep["missing_diff"] == 0).all()
    table, diff = crosstab_comparison(mixed_df, mixed_df.sample(frac=1, random_state=0),
                                      ["group", "level"])
    assert diff == 0.0
    np.testing.assert_allclose(table["real"].sum(), 1.0)
