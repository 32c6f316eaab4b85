"""Sparse contingency tables: records to table and back, structural zeros, input checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.errors import DataValidationError, InputTypeError, SchemaError
from bayesynth.tables import microdata_to_table, table_to_microdata


def test_microdata_table_round_trip_keeps_labels():
    df = pd.DataFrame({
        "age": pd.Categorical(["0-4", "5-9", "5-9", "10-14"],
                              categories=["0-4", "5-9", "10-14", "15+"]),
        "sex": ["F", "M", "M", "F"],
    })
    table = microdata_to_table(df)
    assert table.levels == {"age": ["0-4", "5-9", "10-14", "15+"], "sex": ["F", "M"]}
    assert table.n_records == 4 and table.n_cells == 8 and len(table.index) == 3
    back = table_to_microdata(table, random_seed=0)
    assert list(back["age"].cat.categories) == ["0-4", "5-9", "10-14", "15+"]
    again = microdata_to_table(back)
    np.testing.assert_array_equal(again.index, table.index)
    np.testing.assert_array_equal(again.counts, table.counts)
    frame = table.to_frame()
    via_counts = microdata_to_table(frame, count="count")
    np.testing.assert_array_equal(via_counts.index, table.index)
    np.testing.assert_array_equal(via_counts.counts, table.counts)
    assert via_counts.levels["sex"] == ["F", "M"]
    pd.testing.assert_frame_equal(df, df.copy())  # input untouched


def test_structural_rule_by_labels():
    df = pd.DataFrame({"age": pd.Categorical([14, 20, 30], categories=[14, 20, 30]),
                       "degree": pd.Categorical(["no", "yes", "no"], categories=["no", "yes"])})
    table = microdata_to_table(df, structural=[{"age": [14], "degree": ["yes"]}])
    assert table.n_structural() == 1
    assert table.structural_mask()[0, 1]
    bad = pd.concat([df, pd.DataFrame({"age": pd.Categorical([14], categories=[14, 20, 30]),
                                       "degree": pd.Categorical(["yes"],
                                                                categories=["no", "yes"])})])
    with pytest.raises(DataValidationError, match="structural"):
        microdata_to_table(bad, structural=[{"age": [14], "degree": ["yes"]}])
    with pytest.raises(SchemaError, match="not levels of 'degree'"):
        microdata_to_table(df, structural=[{"degree": ["phd"]}])
    with pytest.raises(SchemaError, match="unknown variable"):
        microdata_to_table(df, structural=[{"income": [1]}])


def test_bad_table_input_is_named():
    df = pd.DataFrame({"a": ["x", None, "y"], "b": [1, 2, 3]})
    with pytest.raises(InputTypeError):
        microdata_to_table(df.to_numpy())
    with pytest.raises(DataValidationError, match=r"\['a'\]"):
        microdata_to_table(df)
    with pytest.raises(SchemaError, match="'n'"):
        microdata_to_table(df.fillna("z"), count="n")
    with pytest.raises(DataValidationError, match="'b'"):
        microdata_to_table(df.fillna("z").assign(b=[1, -2, 3]), ["a"], count="b")
    with pytest.raises(SchemaError, match=r"\['c'\]"):
        microdata_to_table(df.fillna("z"), ["a", "c"])


@pytest.mark.parametrize("index,counts,match", [
    ([0, 1, 5], [2, 1, 0], "count of 0"),
    ([1, 0], [2, 1], "sorted and distinct"),
    ([0, 0], [2, 1], "sorted and distinct"),
    ([0, 6], [2, 1], "lie in 0..5"),
    ([0, 1], [2], "one length"),
])
def test_a_malformed_sparse_table_is_refused(index, counts, match):
    """A stored zero would pass for a non-zero cell (no pseudocount, and two size-0 classes in
    the tau metrics: tau2(0) 0.667 instead of 0.167 on this table)."""
    from bayesynth.errors import DataValidationError
    from bayesynth.evaluation.tau_risk import expected_tau
    from bayesynth.synthesis import synthesize_table
    from bayesynth.tables import SparseTable

    t = SparseTable(["a", "b"], {"a": [0, 1], "b": [0, 1, 2]}, np.array(index),
                    np.array(counts))
    with pytest.raises(DataValidationError, match=match):
        t.check()
    with pytest.raises(DataValidationError, match=match):
        expected_tau(t, alpha=0.5, ks=(0, 1))
    with pytest.raises(DataValidationError, match=match):
        synthesize_table(t, alpha=0.5, random_seed=0)
