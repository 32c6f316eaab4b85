"""Shared fixtures: fixed seeds, small tables of every column type, sparse count tables."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs
from bayesynth.tables import SparseTable, StructuralZeros

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


#: The longest files of ``make test``, longest first (seconds in CI, 2026-12-03). pytest-xdist's
#: ``--dist loadfile`` hands out whole files in collection order (``--no-loadscope-reorder``),
#: so starting the long ones first keeps both workers busy to the end; left to its default it
#: sorts files by their number of tests and ran the notebooks (one test each) last.
LONGEST_FIRST = (
    "notebooks/01_rank_probit_copula.ipynb",  # 344
    "notebooks/02_targeted_synthesis.ipynb",  # 326
    "tests/statistical/test_copula_posterior.py",  # about 360
    "notebooks/05_latent_class_dp.ipynb",  # 283
    "notebooks/03_pseudo_posterior.ipynb",  # 185
    "tests/statistical/test_sbc.py",  # about 150
    "notebooks/00_research_workflow.ipynb",  # 110
    "notebooks/04_saturated_counts.ipynb",  # 88
)


def pytest_collection_modifyitems(session, config, items):
    """Run the longest files first (see LONGEST_FIRST); each file's tests stay together."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item):
        return rank.get(item.nodeid.split("::", 1)[0], len(rank))

    items.sort(key=key)  # stable: the other files keep their order


@pytest.fixture
def seed() -> int:
    return 20261129


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


def make_mixed(n: int = 300, seed: int = 0, missing: bool = False) -> pd.DataFrame:
    """A small table with one column of each type and real dependence between them."""
    r = np.random.default_rng(seed)
    u = r.standard_normal(n)
    group = np.where(u + 0.5 * r.standard_normal(n) > 0.5, "b",
                     np.where(r.random(n) < 0.4, "c", "a"))
    df = pd.DataFrame({
        "group": group,
        "level": pd.Categorical.from_codes(
            np.clip(np.round(1.5 + u + 0.7 * r.standard_normal(n)), 0, 3).astype(int),
            categories=["low", "mid", "high", "top"], ordered=True),
        "flag": (u + r.standard_normal(n) > 0).astype(int),
        "visits": r.poisson(np.exp(0.8 + 0.4 * u)),
        "income": np.round(np.exp(10 + 0.5 * u + 0.3 * r.standard_normal(n)), 2),
    })
    if missing:
        df.loc[r.random(n) < 0.1, "income"] = np.nan
        df.loc[r.random(n) < 0.08, "group"] = None
    return df


@pytest.fixture
def mixed_df() -> pd.DataFrame:
    return make_mixed()


@pytest.fixture
def mixed_missing_df() -> pd.DataFrame:
    return make_mixed(missing=True)


@pytest.fixture
def child_small() -> pd.DataFrame:
    return bs.datasets.simulate_child_health(n=250, random_seed=3)


# ------------------------------------------------------------ sparse contingency tables

#: Synthesis distributions and their dispersion (precision theta for ``dpo``) the saturated count
#: tests run through.
COUNT_SETTINGS = [("poisson", 0.0), ("nbi", 1.0), ("pig", 1.0), ("dpo", 3.0)]


def random_table(shape, share_nonzero, seed, structural=None) -> SparseTable:
    """Counts from a geometric(0.35) on a random share of cells (many ones and twos)."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random(shape) < share_nonzero, rng.geometric(0.35, size=shape), 0)
    names = [f"v{j}" for j in range(len(shape))]
    levels = {n: [f"{n}_{i}" for i in range(s)] for n, s in zip(names, shape)}
    table = SparseTable.from_dense(dense, names, levels, structural)
    if structural is not None:  # empty the structural cells
        keep = ~structural.mask_codes(names, table.codes())
        table = SparseTable(names, levels, table.index[keep], table.counts[keep], structural)
    return table


@pytest.fixture(scope="module")
def medium_table() -> SparseTable:
    """A 40 x 30 x 25 table, a quarter of its cells non-zero, no structural zeros."""
    return random_table((40, 30, 25), 0.25, seed=1)


@pytest.fixture(scope="module")
def small_table() -> SparseTable:
    """A 4 x 5 x 3 table, half its cells non-zero, with 6 structural zeros."""
    structural = StructuralZeros([{"v0": np.array([0]), "v1": np.array([1, 2])}])
    return random_table((4, 5, 3), 0.5, seed=2, structural=structural)


@pytest.fixture(autouse=True)
def _quiet_arviz():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ArviZ is undergoing.*")
        warnings.filterwarnings("ignore", message="Only .* samples per chain.*")
        yield
