"""Shared fixtures: fixed seeds and small tables of every column type."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


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


@pytest.fixture(autouse=True)
def _quiet_arviz():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ArviZ is undergoing.*")
        warnings.filterwarnings("ignore", message="Only .* samples per chain.*")
        yield
