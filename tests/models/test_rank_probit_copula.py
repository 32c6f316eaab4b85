"""The model factory and the latent layout."""

from __future__ import annotations

import numpy as np
import pytest

import bayesynth as bs
from bayesynth.errors import TooManyLevelsError
from bayesynth.models import LatentLayout, choose_n_factors, get_layout


def test_coords_dims_and_variables(mixed_missing_df):
    model = bs.models.rank_probit_copula(mixed_missing_df, n_factors=2)
    lay = get_layout(model)
    # group (a, b, c + <NA>) and level (4 levels < 10: categorical) are level columns
    assert lay.latent_names == [
        "group[a]", "group[b]", "group[c]", "group[<NA>]",
        "level[low]", "level[mid]", "level[high]", "level[top]",
        "flag", "visits", "income", "income[missing]"]
    assert model.coords["level"] == tuple(lay.latent_names[:8])
    assert len(model.coords["record"]) == len(mixed_missing_df)
    dims = model.named_vars_to_dims
    assert dims["Lambda"] == ("latent", "factor")
    assert dims["z"] == ("record", "latent")
    assert dims["eta"] == ("record", "factor")
    assert dims["alpha"] == ("level",)
    assert dims["C"] == ("latent", "latent2")
    assert {"prec", "phi", "delta"} <= set(model.named_vars)
    point = model.initial_point()
    assert lay.bounds_satisfied(point["z"])
    assert np.isfinite(model.compile_logp()(point))


def test_ordinal_threshold(mixed_df):
    lay = get_layout(bs.models.rank_probit_copula(mixed_df, n_factors=1, ordinal_threshold=0))
    assert "level" in lay.latent_names  # ordered: one column
    assert len(lay.categorical) == 1


def test_default_number_of_factors(mixed_df):
    lay = LatentLayout.from_data(mixed_df, bs.infer_schema(mixed_df))
    k = choose_n_factors(lay.initial_z(), 0.95)
    model = bs.models.rank_probit_copula(mixed_df)
    assert len(model.coords["factor"]) == k
    assert 1 <= k <= lay.p_latent
    x = np.random.default_rng(0).normal(size=(500, 3)) @ np.diag([3.0, 1.0, 0.1])
    assert choose_n_factors(x, 0.5) <= choose_n_factors(x, 0.99)


def test_too_many_levels(mixed_df):
    df = mixed_df.assign(code=np.arange(len(mixed_df)) % 60)
    schema = bs.infer_schema(df, categorical=["code"])
    with pytest.raises(TooManyLevelsError, match="'code'.*max_levels"):
        bs.models.rank_probit_copula(df, schema)


def test_constraint_potential_detects_violation(mixed_df):
    model = bs.models.rank_probit_copula(mixed_df, n_factors=1)
    point = model.initial_point()
    logp = model.compile_logp()
    assert np.isfinite(logp(point))
    bad = dict(point)
    z = bad["z"].copy()
    z[:, 0] = -z[:, 0]  # flip the signs of a level column
    bad["z"] = z
    assert logp(bad) == -np.inf
