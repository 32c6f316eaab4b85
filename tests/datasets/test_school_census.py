"""The simulated school census: a table of ESCsub's shape."""

from __future__ import annotations

from bayesynth.datasets import simulate_school_census
from bayesynth.tables import microdata_to_table


def test_simulated_school_census_has_the_escsub_shape():
    df = simulate_school_census(100_000, n_areas=4, random_seed=0)
    t = microdata_to_table(df, count="count")
    assert t.names == ["local_authority", "age", "sex", "ethnicity", "language"]
    assert t.shape == (4, 20, 4, 19, 7)
    assert t.n_records == 100_000
