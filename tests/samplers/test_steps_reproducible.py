"""The same seed gives the same draws whether chains run in one process or one each."""

from __future__ import annotations

import warnings

import numpy as np

import bayesynth as bs
from bayesynth.models import latent_class_dp_model
from bayesynth.privacy import privatize_marginals


def test_chains_in_one_process_match_chains_in_their_own():
    """Run one after the other (cores=1), chain 2 started with chain 1's adapted step sizes
    and Newton starts, so its draws differed from the cores=2 run of the same seed."""
    df = bs.datasets.simulate_child_health(n=200, random_seed=1)[
        ["m_race", "read", "mage", "male"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [bs.sample(bs.models.rank_probit_copula(df, n_factors=2), draws=30, tune=30,
                          chains=2, cores=cores, random_seed=3, progressbar=False)
                for cores in (1, 2)]
    np.testing.assert_array_equal(runs[0].posterior["Lambda"].values,
                                  runs[1].posterior["Lambda"].values)


def test_latent_class_chains_in_one_process_match_chains_in_their_own():
    rng = np.random.default_rng(0)
    data = {v: rng.integers(0, 2, 300) for v in "abc"}
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = privatize_marginals(pd.DataFrame(data), "all2", 2.0,
                                  domain={v: [0, 1] for v in "abc"}, random_seed=1)
        runs = [bs.sample(latent_class_dp_model(rel, k=3), draws=40, tune=40, chains=2,
                          cores=cores, random_seed=5, progressbar=False) for cores in (1, 2)]
    np.testing.assert_array_equal(runs[0].posterior["P_t0"].values,
                                  runs[1].posterior["P_t0"].values)
