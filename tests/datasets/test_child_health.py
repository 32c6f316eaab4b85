"""The embedded child-health simulator: types and ranges of Feldman & Kowal's Table 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs
from bayesynth.datasets import CHILD_HEALTH_TYPES, simulate_child_health


def test_shape_types_and_ranges():
    df = simulate_child_health(n=3000, random_seed=0)
    assert df.shape == (3000, 26)
    schema = bs.infer_schema(df)
    assert {c: schema[c].type for c in df} == CHILD_HEALTH_TYPES
    ranges = {"read": (316, 370), "math": (321, 373), "mage": (15, 40), "bwtpctl": (0, 100),
              "gest": (32, 42), "pbresult": (1, 10), "temp_t1": (27.8, 86.6),
              "pm25_1yr": (7.549, 11.709), "ri_birth": (0, 1), "ndi_birth": (-4.5174, 11.3888)}
    for col, (lo, hi) in ranges.items():
        assert df[col].min() >= lo and df[col].max() <= hi, col
    assert df["m_race"].nunique() == 5 and df["m_educ"].cat.ordered
    lay = bs.models.LatentLayout.from_data(df, schema)
    # 24 ordered columns, race (5 levels) and education (4 levels) as multinomial-probit
    # utilities (K - 1 columns each): 24 + 4 + 3
    assert lay.p_latent == 31
    rpl = bs.models.LatentLayout.from_data(df, schema, categorical_likelihood="rpl")
    assert rpl.p_latent == 33  # the paper's K level columns each
    # the scores depend on exposures: deprivation lowers reading scores
    assert df[["read", "ndi_birth"]].corr().iloc[0, 1] < -0.3


def test_reproducible():
    pd.testing.assert_frame_equal(simulate_child_health(50, 1), simulate_child_health(50, 1))
    assert not simulate_child_health(50, 1).equals(simulate_child_health(50, 2))
    with pytest.raises(ValueError):
        simulate_child_health(0)
    assert np.isfinite(simulate_child_health(10, 0).select_dtypes("number")).all().all()
