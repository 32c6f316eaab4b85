"""Identification risk (paper cases and a brute-force reference), attribute disclosure, DCR."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.evaluation import (
    distance_to_closest_record,
    identification_risk,
    identification_risk_sweep,
    outlier_attribute_disclosure,
)


def _case(own_synthetic: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    real = pd.DataFrame({"k": ["a"] * 6, "inc": [100.0, 1000, 2000, 3000, 4000, 5000]})
    syn = real.copy()
    syn["inc"] = [own_synthetic, 96.0, 99.0, 104.0, 105.0, 5000.0]
    return real, syn


def test_paper_case_five_matches_including_itself():
    real, syn = _case(101.0)
    res = identification_risk(real, syn, known=["k"], synthesized=["inc"], radius=0.05)
    assert res.c[0, 0] == 5 and res.T[0, 0] == 1 and res.ir[0, 0] == pytest.approx(1 / 5)
    assert res.c[0, 1] == 0 and res.ir[0, 1] == 0  # nothing within 5% of 1000
    assert res.c[0, 5] == 1 and res.ir[0, 5] == 1  # unique true match
    assert res.per_dataset.loc[0, "risk"] == pytest.approx(1 / 5 + 1)
    assert res.per_dataset.loc[0, "true_match_rate"] == pytest.approx(1 / 6)


def test_paper_case_four_matches_not_including_itself():
    real, syn = _case(120.0)
    res = identification_risk(real, syn, known=["k"], synthesized=["inc"], radius=0.05)
    assert res.c[0, 0] == 4 and res.T[0, 0] == 0 and res.ir[0, 0] == 0


def test_false_match_and_categorical_keys():
    real = pd.DataFrame({"k": ["a", "a", "b"], "s": ["x", "y", "x"], "v": [10.0, 20.0, 30.0]})
    syn = pd.DataFrame({"k": ["a", "a", "b"], "s": ["y", "x", "x"], "v": [20.0, 10.0, 30.0]})
    res = identification_risk(real, syn, known=["k"], synthesized=["s", "v"], radius=0.01)
    # record 0 (a, x, 10): synthetic record 1 matches (a, x, 10) but it is not record 0
    assert res.c[0, 0] == 1 and res.T[0, 0] == 0
    assert res.c[0, 2] == 1 and res.T[0, 2] == 1
    assert res.per_dataset.loc[0, "false_match_rate"] == pytest.approx(2 / 3)
    assert res.per_dataset.loc[0, "true_match_rate"] == pytest.approx(1 / 3)


def _brute(real, syn, known, cont, radius, radius_type):
    n = len(real)
    c, T = np.zeros(n), np.zeros(n)
    rk = real[known].astype(str).agg("|".join, axis=1).to_numpy()
    sk = syn[known].astype(str).agg("|".join, axis=1).to_numpy()
    for i in range(n):
        ok = sk == rk[i]
        for col in cont:
            x = real[col].iloc[i]
            r = radius * abs(x) if radius_type == "percent" else radius
            ok &= np.abs(syn[col].to_numpy() - x) <= r
        c[i] = ok.sum()
        T[i] = ok[i]
    return c, T


@pytest.mark.parametrize("radius_type,radius", [("percent", 0.1), ("absolute", 0.3)])
def test_against_brute_force(rng, radius_type, radius):
    n = 400
    real = pd.DataFrame({"k1": rng.choice(list("ab"), n), "k2": rng.integers(0, 3, n),
                         "x": rng.normal(5, 1, n), "y": rng.gamma(3.0, 1.0, n)})
    syn = real.copy()
    syn["x"] = real["x"] + rng.normal(0, 0.3, n)
    syn["y"] = real["y"] * np.exp(rng.normal(0, 0.1, n))
    syn.loc[rng.random(n) < 0.05, "y"] = np.nan
    res = identification_risk(real, [syn, syn.sample(frac=1, random_state=2)],
                              known=["k1", "k2"], synthesized=["x", "y"], radius=radius,
                              radius_type=radius_type)
    c, T = _brute(real, syn, ["k1", "k2"], ["x", "y"], radius, radius_type)
    np.testing.assert_array_equal(res.c[0], c)
    np.testing.assert_array_equal(res.T[0], T)
    assert res.summary.loc["mean", "risk"] == pytest.approx(res.per_dataset["risk"].mean())


def test_sweep_reports_the_maximising_radius(rng):
    n = 300
    real = pd.DataFrame({"k": rng.choice(list("ab"), n), "x": rng.gamma(5.0, 2.0, n)})
    syn = real.assign(x=real["x"] * np.exp(rng.normal(0, 0.05, n)))
    table, best = identification_risk_sweep(real, syn, known=["k"], synthesized=["x"])
    means = table.groupby("radius")["risk"].mean()
    assert best == means.idxmax()
    assert set(table["radius"]) == {0.01, 0.025, 0.05, 0.1, 0.2, 0.3}


def test_outlier_attribute_disclosure(rng):
    n = 1000
    real = pd.DataFrame({"pub": rng.normal(size=n), "sens": rng.normal(size=n),
                         "cat": rng.choice(list("abc"), n)})
    assert outlier_attribute_disclosure(real, real, public="pub", sensitive="sens")[
        "statistic"] == pytest.approx(1.0)
    other = real.assign(sens=rng.normal(size=n))
    res = outlier_attribute_disclosure(real, other, public="pub", sensitive="sens")
    assert res["kind"] == "r2" and res["n_pairs"] == 100 and res["statistic"] < 0.1
    acc = outlier_attribute_disclosure(real, real, public="pub", sensitive="cat")
    assert acc["kind"] == "accuracy" and acc["statistic"] == 1.0


def test_distance_to_closest_record(rng):
    def draw(n):
        return pd.DataFrame({"x": rng.normal(size=n), "y": rng.gamma(2.0, size=n),
                             "g": rng.choice(list("ab"), n)})

    train, hold = draw(500), draw(500)
    copy = distance_to_closest_record(train, train.iloc[:200], hold)
    assert copy.share_closer_to_train == 1.0 and copy.n_identical == 200
    fresh = distance_to_closest_record(train, draw(400), hold)
    assert abs(fresh.share_closer_to_train - 0.5) < 4 * 0.5 / np.sqrt(400)
    assert fresh.n_identical == 0
