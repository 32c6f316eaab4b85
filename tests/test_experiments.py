"""The replicate runner: serial and dask runs agree, failures are reported, not fatal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayesynth.experiments import run_replicates


def study(rng, n, scale):
    x = rng.normal(scale=scale, size=n)
    return {"mean": x.mean(), "quantiles": np.quantile(x, [0.1, 0.9])}


def flaky(rng, n):
    if n == 3:
        raise ValueError("n = 3 is not allowed")
    return {"value": rng.random() + n}


def test_serial_shape_and_reproducibility():
    grid = {"n": [10, 100], "scale": [1.0, 2.0]}
    a = run_replicates(study, grid, 3, client="serial", random_seed=5, progressbar=False)
    b = run_replicates(study, grid, 3, client="serial", random_seed=5, progressbar=False)
    assert dict(a["mean"].sizes) == {"n": 2, "scale": 2, "replicate": 3}
    assert a["quantiles"].dims == ("n", "scale", "replicate", "quantiles_dim_0")
    np.testing.assert_array_equal(a["mean"].values, b["mean"].values)
    c = run_replicates(study, grid, 3, client="serial", random_seed=6, progressbar=False)
    assert not np.array_equal(a["mean"].values, c["mean"].values)
    # replicates are independent streams: no two are equal
    assert len(np.unique(a["mean"].values)) == a["mean"].size


def test_failures_are_reported_and_finished_tasks_kept():
    with pytest.warns(RuntimeWarning, match="1 of 3 tasks failed"):
        ds = run_replicates(flaky, {"n": [1, 2, 3]}, 1, client="serial", random_seed=0,
                            progressbar=False)
    assert np.isnan(ds["value"].sel(n=3).item())
    assert np.isfinite(ds["value"].sel(n=[1, 2]).values).all()
    fails = json.loads(ds.attrs["failures"])
    assert fails == [{"n": 3, "replicate": 0, "error": "ValueError: n = 3 is not allowed"}]


@pytest.mark.slow
def test_dask_two_workers_equals_serial():
    grid = {"n": [5, 50], "scale": [1.0, 3.0]}
    serial = run_replicates(study, grid, 4, client="serial", random_seed=11, progressbar=False)
    dask = run_replicates(study, grid, 4, n_workers=2, random_seed=11, progressbar=False)
    np.testing.assert_array_equal(serial["mean"].values, dask["mean"].values)
    np.testing.assert_array_equal(serial["quantiles"].values, dask["quantiles"].values)
    assert dask.attrs["n_failed"] == 0
