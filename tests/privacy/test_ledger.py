"""The privacy ledger: composition (checked against exact losses), conversion, persistence."""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from bayesynth.errors import InvalidParameterError, PrivacyWarning
from bayesynth.privacy import Ledger, privacy_loss, privatize_marginals, true_marginal

DOMAIN = {"a": [0, 1], "b": [0, 1, 2]}


def strata_release(df, eps, neighbours):
    """One histogram of b per stratum of a, each under add/remove neighbours."""
    ledger = Ledger(neighbours)
    for level, e in zip(DOMAIN["a"], eps):
        part = df[df["a"] == level]
        rel = privatize_marginals(part, [("b",)], e, domain=DOMAIN, neighbours="add_remove")
        ledger.extend(rel.ledger, partition="a", part=level)
    return ledger


def strata_loss(d1, d2, eps):
    """Exact worst-case loss of the per-stratum histograms (geometric noise of rate eps)."""
    return sum(privacy_loss(true_marginal(d1[d1["a"] == level], ["b"], DOMAIN),
                            true_marginal(d2[d2["a"] == level], ["b"], DOMAIN), e,
                            "add_remove")
               for level, e in zip(DOMAIN["a"], eps))


def tiny_datasets(n):
    cells = list(itertools.product(*DOMAIN.values()))
    for combo in itertools.combinations_with_replacement(range(len(cells)), n):
        yield combo, cells


@pytest.mark.parametrize("neighbours", ["change_one", "add_remove"])
def test_parallel_composition_equals_the_exact_loss(neighbours):
    eps = (0.3, 0.8)
    worst = 0.0
    for combo, cells in tiny_datasets(3):
        df = pd.DataFrame([cells[i] for i in combo], columns=["a", "b"])
        if neighbours == "change_one":
            for i, j in itertools.product(range(3), range(len(cells))):
                other = list(combo)
                other[i] = j
                d2 = pd.DataFrame([cells[k] for k in other], columns=["a", "b"])
                worst = max(worst, strata_loss(df, d2, eps))
        else:
            for j in range(len(cells)):
                d2 = pd.DataFrame([cells[k] for k in combo + (j,)], columns=["a", "b"])
                worst = max(worst, strata_loss(df, d2, eps))
    df = pd.DataFrame({"a": [0, 1, 1, 0], "b": [0, 1, 2, 2]})
    ledger = strata_release(df, eps, neighbours)
    assert ledger.total_epsilon == pytest.approx(worst, rel=1e-12)
    assert worst == pytest.approx(0.8 if neighbours == "add_remove" else 1.6)


def test_sequential_composition_and_the_weakest_guarantee():
    ledger = Ledger()
    ledger.record("table 1", "geometric", 0.4, sensitivity=2)
    ledger.record("table 2", "geometric", 0.6, sensitivity=2)
    assert ledger.total_epsilon == pytest.approx(1.0) and ledger.guarantee == "strict"
    ledger.record("synthetic data", "censored pseudo posterior", 1.0, guarantee="local")
    assert ledger.total_epsilon == pytest.approx(2.0) and ledger.guarantee == "local"
    assert "local / asymptotic" in ledger.summary()
    ledger.record("domain", "read from the data", math.inf, guarantee="none")
    assert math.isinf(ledger.total_epsilon) and ledger.guarantee == "none"
    assert "Not differentially private" in str(ledger)


def test_add_remove_entries_cost_double_in_a_change_one_ledger():
    ledger = Ledger("change_one")
    e = ledger.record("histogram", "geometric", 0.5, neighbours="add_remove", sensitivity=1)
    assert e.epsilon == 1.0 and e.converted_from == "add_remove"
    # the sensitivity is stated under the ledger's relation too: a histogram's change-one
    # sensitivity is 2 (it printed 1 beside the doubled epsilon), and the table says which
    # entries were converted
    assert e.sensitivity == 2.0
    text = str(ledger)
    assert "stated under" in text and "add_remove" in text
    assert "stated under" not in str(Ledger("change_one"))
    with pytest.raises(InvalidParameterError, match="add/remove"):
        Ledger("add_remove").record("histogram", "geometric", 0.5, neighbours="change_one")
    with pytest.raises(InvalidParameterError, match="add/remove neighbours"):
        Ledger("change_one").record("part", "geometric", 0.5, partition="a", part="0")


def test_json_round_trip_and_bad_entries(tmp_path):
    ledger = Ledger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        rel = privatize_marginals(pd.DataFrame({"a": [0, 1, 1], "b": [0, 2, 1]}), "all2", 1.0,
                                  domain=DOMAIN, random_seed=1, ledger=ledger)
    ledger.record("domain", "read from the data", math.inf, guarantee="none")
    path = tmp_path / "release" / "ledger.json"
    ledger.to_json(path)
    data = json.loads(path.read_text())
    assert data["total_epsilon"] is None and data["entries"][-1]["epsilon"] is None
    back = Ledger.from_json(path)
    assert back.to_frame().equals(ledger.to_frame())
    assert rel.ledger.seeded and back.seeded
    with pytest.raises(InvalidParameterError, match="guarantee"):
        ledger.record("x", "y", 1.0, guarantee="probably")
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ledger.record("x", "y", -1.0)
    assert len(ledger.entries) == len(back.entries)
    assert np.isfinite(Ledger().total_epsilon) and "Nothing" in Ledger().summary()


def test_an_entry_without_a_guarantee_makes_the_total_unbounded():
    led = Ledger()
    led.record("a table", "geometric", 1.0)
    assert led.total_epsilon == 1.0
    led.record("a fit", "weighted", 1.0, guarantee="none")  # a finite figure that bounds nothing
    assert led.total_epsilon == float("inf")


def test_ledger_from_dict_converts_and_nested_partitions_are_refused():
    """An add/remove entry read into a change-one ledger costs twice its epsilon, as when
    recorded; re-tagging entries of one partition as a part of another is refused (their
    composition would be overstated)."""
    entry = {"release": "noisy table", "mechanism": "geometric", "neighbours": "add_remove",
             "epsilon": 1.0, "guarantee": "strict", "sensitivity": 1.0, "why": "",
             "seeded": False, "partition": None, "part": None, "converted_from": None}
    led = Ledger.from_dict({"neighbours": "change_one", "entries": [entry]})
    assert led.total_epsilon == pytest.approx(2.0)
    # a written ledger reads back unchanged (already converted entries are not converted again)
    assert Ledger.from_dict(led.to_dict()).total_epsilon == pytest.approx(2.0)
    inner = Ledger("add_remove")
    inner.record("a", "geometric", 1.0, partition="region", part="X")
    inner.record("b", "geometric", 1.0, partition="region", part="Y")
    assert inner.total_epsilon == pytest.approx(1.0)
    outer = Ledger("add_remove")
    with pytest.raises(InvalidParameterError, match="nested partitions"):
        outer.extend(inner, partition="age", part="young")
    assert outer.entries == []
