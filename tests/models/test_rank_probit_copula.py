"""The model factory and the latent layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs
from bayesynth.errors import TooManyLevelsError
from bayesynth.models import LatentLayout, choose_n_factors, get_layout


def test_coords_dims_and_variables(mixed_missing_df):
    model = bs.models.rank_probit_copula(mixed_missing_df, n_factors=2)
    lay = get_layout(model)
    # multinomial probit: K - 1 utility columns per categorical variable (reference = most
    # frequent level), a binary variable is a one-column probit; continuous columns with
    # mostly distinct values keep their normal scores (income), counts the rank likelihood
    cats = {b.name: b for b in lay.categorical}
    assert set(cats) == {"group", "level", "flag"}
    assert [len(cats[v].latent) for v in ("group", "level", "flag")] == [3, 3, 1]
    assert all(b.likelihood == "mnp" for b in lay.categorical)
    ref = cats["group"].levels[cats["group"].reference]
    assert ref == mixed_missing_df["group"].fillna("<NA>").value_counts().index[0]
    assert f"group[{ref}]" not in lay.latent_names and "group[<NA>]" in lay.latent_names
    assert lay.latent_names[-3:] == ["visits", "income", "income[missing]"]
    assert [o.name for o in lay.ordered if o.fixed] == ["income"]
    assert model.coords["level"] == tuple(lay.latent_names[:7])
    assert model.coords["free_scale"] == ("visits", "income", "income[missing]")
    assert len(model.coords["record"]) == len(mixed_missing_df)
    dims = model.named_vars_to_dims
    assert dims["Lambda"] == ("latent", "factor")
    assert dims["z"] == ("record", "latent")
    assert dims["eta"] == ("record", "factor")
    assert dims["alpha"] == ("level",)
    assert dims["prec"] == ("free_scale",) and dims["sigma"] == ("latent",)
    assert dims["C"] == ("latent", "latent2")
    assert {"prec", "phi", "delta"} <= set(model.named_vars)
    point = model.initial_point()
    assert lay.bounds_satisfied(point["z"])
    assert np.isfinite(model.compile_logp()(point))
    sigma = model.compile_fn(model["sigma"], inputs=model.value_vars,
                             on_unused_input="ignore")(point)
    np.testing.assert_array_equal(sigma[:7], 1.0)  # probit scale identification


def test_the_papers_likelihood_is_an_option(mixed_missing_df):
    model = bs.models.rank_probit_copula(mixed_missing_df, n_factors=2,
                                         categorical_likelihood="rpl", continuous="rank")
    lay = get_layout(model)
    assert lay.latent_names == [
        "group[a]", "group[b]", "group[c]", "group[<NA>]",
        "level[low]", "level[mid]", "level[high]", "level[top]",
        "flag", "visits", "income", "income[missing]"]
    assert model.coords["free_scale"] == tuple(lay.latent_names)
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_ordinal_threshold(mixed_df):
    lay = get_layout(bs.models.rank_probit_copula(mixed_df, n_factors=1, ordinal_threshold=0))
    assert "level" in lay.latent_names  # ordered: one column
    assert [b.name for b in lay.categorical] == ["group", "flag"]


def test_default_number_of_factors(mixed_df):
    lay = LatentLayout.from_data(mixed_df, bs.infer_schema(mixed_df))
    k = choose_n_factors(lay)
    model = bs.models.rank_probit_copula(mixed_df)
    assert len(model.coords["factor"]) == k
    assert 1 <= k <= lay.p_latent
    # independent columns: parallel analysis finds no factor (the floor is one, plus slack)
    rng = np.random.default_rng(0)
    noise = pd.DataFrame(rng.normal(size=(800, 6)), columns=list("abcdef"))
    lay0 = LatentLayout.from_data(noise, bs.infer_schema(noise))
    assert choose_n_factors(lay0, slack=0) == 1 and choose_n_factors(lay0) == 2
    # three strong factors are found
    f = rng.normal(size=(800, 3))
    x = f @ rng.normal(size=(3, 9)) + 0.3 * rng.normal(size=(800, 9))
    three = pd.DataFrame(x, columns=[f"x{i}" for i in range(9)])
    assert choose_n_factors(LatentLayout.from_data(three, bs.infer_schema(three)), slack=0) == 3


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
