"""Schema inference, JSON round trip, and validation errors at the boundary."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs
from bayesynth import errors
from bayesynth.schema import ColumnSchema, Schema, infer_schema, validate_data
from tests.conftest import SHARED_DATA


def test_inference_rules(mixed_df):
    schema = infer_schema(mixed_df)
    assert [schema[c].type for c in mixed_df.columns] == [
        "categorical", "ordinal", "binary", "count", "continuous"]
    assert schema["level"].levels == ("low", "mid", "high", "top")
    assert schema["level"].ordered
    assert schema["group"].levels == ("a", "b", "c")
    assert schema["flag"].levels == (0, 1)


def test_more_inference_rules():
    n = 40
    r = np.random.default_rng(0)
    df = pd.DataFrame({
        "yes": r.random(n) < 0.5,                      # bool -> binary
        "sex": r.choice(["F", "M"], n),                # two strings -> binary
        "neg": r.integers(-5, 5, n),                   # integers with negatives -> continuous
        "cnt_float": r.poisson(3, n).astype(float),    # integral floats -> count
        "cat": pd.Categorical(r.choice(list("xyz"), n)),  # unordered categorical
    })
    s = infer_schema(df)
    assert s["yes"].type == "binary" and s["yes"].levels == (False, True)
    assert s["sex"].type == "binary"
    assert s["neg"].type == "continuous"
    assert s["cnt_float"].type == "count"
    assert s["cat"].type == "categorical"


def test_keyword_overrides(mixed_df):
    s = infer_schema(mixed_df, categorical=["visits"], continuous="flag")
    assert s["visits"].type == "categorical"
    assert s["visits"].levels == tuple(sorted(mixed_df["visits"].unique()))
    # continuous with two values is allowed when declared
    assert s["flag"].type == "continuous"


def test_json_round_trip(mixed_df, tmp_path):
    schema = infer_schema(mixed_df)
    assert Schema.from_json(schema.to_json()) == schema
    path = tmp_path / "schema.json"
    schema.to_json(path)
    assert Schema.from_json(path) == schema
    assert Schema.from_json(str(path)) == schema


def test_input_not_modified(mixed_missing_df):
    before = mixed_missing_df.copy(deep=True)
    schema = infer_schema(mixed_missing_df)
    validate_data(mixed_missing_df, schema)
    bs.models.rank_probit_copula(mixed_missing_df, schema, n_factors=2)
    pd.testing.assert_frame_equal(mixed_missing_df, before)


# ----------------------------------------------------------------------------- bad input


def test_not_a_dataframe():
    with pytest.raises(errors.InputTypeError, match="pandas DataFrame"):
        infer_schema([[1, 2], [3, 4]])
    with pytest.raises(TypeError):  # also a TypeError for standard handling
        infer_schema(np.zeros((20, 2)))


def test_empty_table():
    with pytest.raises(errors.EmptyDataError, match="empty"):
        infer_schema(pd.DataFrame())
    with pytest.raises(errors.EmptyDataError):
        infer_schema(pd.DataFrame({"a": []}))


def test_too_few_rows(mixed_df):
    small = mixed_df.head(9)
    schema = infer_schema(mixed_df)
    with pytest.raises(errors.TooFewRowsError, match="at least 10"):
        validate_data(small, schema)


def test_constant_column(mixed_df):
    df = mixed_df.assign(const=7)
    with pytest.raises(errors.ConstantColumnError, match="'const'") as info:
        infer_schema(df)
    assert info.value.column == "const"
    schema = infer_schema(mixed_df)
    bad = Schema(list(schema.values()) + [ColumnSchema("const", "count")])
    with pytest.raises(errors.ConstantColumnError, match="Drop it"):
        validate_data(df, bad)


def test_all_missing_column(mixed_df):
    with pytest.raises(errors.ConstantColumnError, match="entirely missing"):
        infer_schema(mixed_df.assign(empty=np.nan))


def test_identifier_column(mixed_df):
    df = mixed_df.assign(id=[f"P{i:05d}" for i in range(len(mixed_df))])
    with pytest.raises(errors.IdentifierColumnError, match="identifier") as info:
        infer_schema(df)
    assert "'id'" in str(info.value) and "Drop it" in str(info.value)


def test_infinite_values(mixed_df):
    df = mixed_df.copy()
    df.loc[3, "income"] = np.inf
    with pytest.raises(errors.NonFiniteValueError, match="'income'"):
        infer_schema(df)
    with pytest.raises(errors.NonFiniteValueError, match="infinite"):
        validate_data(df, infer_schema(mixed_df))


def test_unknown_schema_type():
    with pytest.raises(errors.UnknownColumnTypeError, match="'x'.*'weird'"):
        ColumnSchema("x", "weird")
    with pytest.raises(errors.UnknownColumnTypeError):
        Schema.from_json('{"columns": [{"name": "x", "type": "nominal"}]}')


def test_schema_names_absent_column(mixed_df):
    schema = infer_schema(mixed_df)
    with pytest.raises(errors.MissingColumnError, match="'visits'"):
        validate_data(mixed_df.drop(columns="visits"), schema)
    with pytest.raises(errors.MissingColumnError, match="'nope'"):
        infer_schema(mixed_df, count=["nope"])
    extra = mixed_df.assign(more=np.arange(len(mixed_df)) % 3)
    with pytest.raises(errors.MissingColumnError, match="'more'"):
        validate_data(extra, schema)


def test_type_mismatch_and_unknown_level(mixed_df):
    schema = infer_schema(mixed_df)
    df = mixed_df.copy()
    df["visits"] = df["visits"] - 50  # negative counts
    with pytest.raises(errors.ColumnTypeError, match="'visits'.*continuous"):
        validate_data(df, schema)
    df = mixed_df.copy()
    df.loc[0, "group"] = "zzz"
    with pytest.raises(errors.UnknownLevelError, match="'group'"):
        validate_data(df, schema)
    with pytest.raises(errors.ColumnTypeError, match="strings|holds"):
        validate_data(mixed_df.assign(income=mixed_df["group"]), schema)


def test_conflicting_declarations(mixed_df):
    with pytest.raises(errors.SchemaError, match="both"):
        infer_schema(mixed_df, count=["visits"], continuous=["visits"])


def test_unsupported_dtype(mixed_df):
    df = mixed_df.assign(lag=pd.to_timedelta(np.arange(len(mixed_df)), unit="D"))
    with pytest.raises(errors.ColumnTypeError, match="'lag'.*timedelta"):
        infer_schema(df)


def test_dates_are_ordered_values(mixed_df):
    df = mixed_df.assign(when=pd.date_range("2020-01-01", periods=len(mixed_df)),
                         stamp=pd.date_range("2020-01-01", periods=len(mixed_df), freq="37min"))
    s = infer_schema(df, suggest=False)
    assert s["when"].type == "continuous" and s["when"].dtype.startswith("datetime64")
    assert s["when"].integer  # whole days
    assert not s["stamp"].integer
    validate_data(df, s)


def test_timestamps_come_back_at_their_resolution():
    """Times written to the minute came back with seconds (from_days rounded to the second
    whatever the column's resolution)."""
    from bayesynth.synthesis import CartSynthesizer

    r = np.random.default_rng(7)
    n = 200
    base = pd.Timestamp("2024-03-01")
    df = pd.DataFrame({
        "stamp": base + pd.to_timedelta(r.integers(0, 60 * 24 * 30, n), unit="min"),
        "hour": base + pd.to_timedelta(r.integers(0, 24 * 30, n), unit="h"),
        "sec": base + pd.to_timedelta(r.integers(0, 86400 * 30, n), unit="s"),
        "x": r.normal(size=n)})
    s = infer_schema(df, suggest=False)
    assert (s["stamp"].time_unit, s["hour"].time_unit, s["sec"].time_unit) == ("min", "h", "s")
    assert Schema.from_json(s.to_json()) == s
    with pytest.raises(errors.SchemaError, match="time_unit"):
        ColumnSchema("t", "continuous", time_unit="week")
    syn = CartSynthesizer(random_seed=1).fit(df).sample(random_seed=2)[0]
    assert (syn["stamp"].dt.second == 0).all() and (syn["hour"].dt.minute == 0).all()
    assert (syn["stamp"].dt.minute != 0).any()  # to the minute, not coarser
    assert syn["stamp"].dtype == df["stamp"].dtype


def test_survey_codes_and_discrete_floats():
    r = np.random.default_rng(1)
    n = 500
    df = pd.DataFrame({
        # a count with the "not applicable" code -8 for most records
        "nociga": np.where(r.random(n) < 0.7, -8, r.integers(1, 40, n)),
        # a float column with five distinct values: discrete
        "score": r.choice([0.5, 1.0, 1.5, 2.0, 2.5], n),
        # money with two decimals
        "money": np.round(r.gamma(2, 500, n), 2),
        # negative values that are not codes (many distinct): a plain continuous column
        "change": r.normal(size=n),
        # a few scattered negative amounts (losses), each held by one record: values
        "income": np.r_[[-3000, -57500], r.integers(0, 90_000, n - 2)],
        # small negative amounts held by one record each: values too, not codes
        "balance": np.r_[[-3, -5], r.integers(0, 500, n - 2)],
    })
    with pytest.warns(UserWarning, match=r"'balance' has the negative values -5 \(1 record\), "
                      r"-3 \(1 record\)"):
        s = infer_schema(df, suggest=False)
    assert s["nociga"].type == "count" and s["nociga"].special_codes == (-8,)
    assert s["nociga"].integer
    assert s["score"].type == "ordinal"
    assert s["money"].type == "continuous" and s["money"].decimals == 2
    assert s["change"].special_codes == () and s["change"].type == "continuous"
    assert s["income"].special_codes == () and s["income"].type == "continuous"
    assert s["balance"].special_codes == ()
    assert Schema.from_json(s.to_json()) == s


def test_a_code_too_rare_to_infer_is_named_and_can_be_declared():
    """A sample of a survey file can hold its -8 in two records: read as a number, it made the
    column continuous without a word (SD2011's nofriend in 13 of 20 samples of 500 records),
    its "not applicable" modelled as the fewest friends."""
    import warnings

    r = np.random.default_rng(7)
    n = 300
    friends = r.integers(0, 30, n)
    friends[[3, 70]] = -8
    df = pd.DataFrame({"nofriend": friends, "x": r.normal(size=n)})
    before = df.copy()
    with pytest.warns(UserWarning, match=r"'nofriend' has the negative values -8 \(2 records\)"
                      r".*at least 5 records.*special_codes=\{'nofriend': \[-8\]\}"):
        s = infer_schema(df, suggest=False)
    assert s["nofriend"].type == "continuous" and s["nofriend"].special_codes == ()
    with warnings.catch_warnings():  # declared: read as the code, and nothing to warn about
        warnings.simplefilter("error")
        d = infer_schema(df, suggest=False, special_codes={"nofriend": [-8]})
        # an empty list: the negative values are numbers, said so
        e = infer_schema(df, suggest=False, special_codes={"nofriend": []})
    assert d["nofriend"].type == "count" and d["nofriend"].special_codes == (-8,)
    assert d["nofriend"].integer and d["nofriend"].decimals == 0
    assert e["nofriend"] == s["nofriend"]
    validate_data(df, d)
    pd.testing.assert_frame_equal(df, before)
    # at four records still a number, at five a code: the threshold is MIN_CODE_RECORDS
    four = df.assign(nofriend=np.r_[np.full(4, -8), friends[4:].clip(0)])
    with pytest.warns(UserWarning, match=r"-8 \(4 records\)"):
        assert infer_schema(four, suggest=False)["nofriend"].special_codes == ()
    five = df.assign(nofriend=np.r_[np.full(5, -8), friends[5:].clip(0)])
    assert infer_schema(five, suggest=False)["nofriend"].special_codes == (-8,)
    # a rare code beside a frequent one is a code of the same survey
    both = df.assign(nofriend=np.r_[np.full(40, -8), [-9, -9], friends[42:].clip(0)])
    b = infer_schema(both, suggest=False)["nofriend"]
    assert b.special_codes == (-9, -8) and b.type == "count"
    # declared a count, whose values cannot be negative: the rare -8 is a code, said nothing
    # of, and the schema passes validation (it was typed count with -8 as a number before)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = infer_schema(df, suggest=False, count=["nofriend"])
    assert c["nofriend"] == d["nofriend"]
    validate_data(df, c)
    # the warning points at the caller's line, not at bayesynth's
    with pytest.warns(UserWarning, match="negative values -8") as w:
        infer_schema(df, suggest=False)
    assert w[0].filename == __file__
    # a declared code that this sample lacks is kept (the schema describes the file)
    none = df.assign(nofriend=friends.clip(0))
    assert infer_schema(none, suggest=False,
                        special_codes={"nofriend": [-9]})["nofriend"].special_codes == (-9,)
    # frequent codes turned off by an empty list: numbers, so the column is continuous
    off = infer_schema(both, suggest=False, special_codes={"nofriend": []})["nofriend"]
    assert off.special_codes == () and off.type == "continuous"
    # the JSON route the warning names gives the same column
    import json

    j = json.loads(s.to_json())
    for c in j["columns"]:
        if c["name"] == "nofriend":
            c["special_codes"], c["type"] = [-8], "count"
    assert Schema.from_dict(j)["nofriend"] == d["nofriend"]


def test_declared_special_codes_are_checked():
    df = pd.DataFrame({"n": [0, 1, 2, 3, -8] * 4, "g": list("abcde") * 4})
    with pytest.raises(errors.MissingColumnError, match="'m'"):
        infer_schema(df, special_codes={"m": [-8]})
    with pytest.raises(errors.SchemaError, match="'g'.*not numeric"):
        infer_schema(df, special_codes={"g": [-8]})
    for bad in ("minus eight", float("nan"), float("inf"), True):
        with pytest.raises(errors.SchemaError, match="'n'.*finite number"):
            infer_schema(df, special_codes={"n": [bad]})
    with pytest.raises(errors.SchemaError, match="map column names"):
        infer_schema(df, special_codes=[("n", -8)])
    for bad in ("-8", np.True_):  # a number, not its text nor a truth value
        with pytest.raises(errors.SchemaError, match="'n'.*finite number"):
            infer_schema(df, special_codes={"n": [bad]})
    # repeated codes are one code, sorted
    assert infer_schema(df, special_codes={"n": [-8, -9, -8.0]})["n"].special_codes == (-9, -8)
    # a single code need not be in a list; a column declared categorical keeps it as a level
    assert infer_schema(df, special_codes={"n": -8})["n"].special_codes == (-8,)
    c = infer_schema(df, categorical=["n"], special_codes={"n": [-8]})["n"]
    assert c.type == "categorical" and -8 in c.levels and c.special_codes == ()


@pytest.mark.data
@pytest.mark.skipif(not (SHARED_DATA / "sd2011.csv").exists(),
                    reason="needs ../shared/data/sd2011.csv")
def test_sd2011_samples_read_nofriend_as_the_whole_file_does_once_declared():
    """In 500-record samples of SD2011, nofriend's -8 (41 of 5,000 records) is too rare to be
    read as a code in most: each such sample says so, and declaring the code gives the whole
    file's column."""
    df = pd.read_csv(SHARED_DATA / "sd2011.csv", keep_default_na=False, na_values=[""])
    whole = infer_schema(df, suggest=False)["nofriend"]
    assert whole.special_codes == (-8,) and whole.type == "count"
    warned = 0
    for seed in range(5):
        part = df.sample(500, random_state=seed)
        rare = 0 < (part["nofriend"] == -8).sum() < 5
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = infer_schema(part, suggest=False)["nofriend"]
        said = [x for x in w if "'nofriend' has the negative values -8" in str(x.message)]
        assert bool(said) == rare
        warned += rare
        if rare:
            assert got.type == "continuous"
        declared = infer_schema(part, suggest=False, special_codes={"nofriend": [-8]})
        assert declared["nofriend"] == whole
    assert warned == 2  # seeds 0 and 3 (2 and 3 records; the others hold 6-8)


def test_a_special_code_inside_the_value_range_is_warned_about():
    """Age 99 = "not known" among ages 0-105: every 99 is read as the code, never as an age;
    that was accepted without a word. A code outside the range (-8) stays quiet."""
    import warnings

    r = np.random.default_rng(4)
    df = pd.DataFrame({"age": np.r_[np.full(20, 99), r.integers(0, 106, 180)],
                       "x": r.normal(size=200)})
    x = infer_schema(df, suggest=False)["x"]
    coded = Schema([ColumnSchema("age", "count", special_codes=(99,), integer=True), x])
    with pytest.warns(UserWarning, match=r"'age'.*\[99\].*inside the range.*0 to 10[0-5]"):
        validate_data(df, coded)
    outside = df.assign(age=np.r_[np.full(20, -8), df["age"].to_numpy()[20:]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_data(outside, Schema([ColumnSchema("age", "count", special_codes=(-8,),
                                                    integer=True), x]))


def test_derived_columns_are_checked_against_the_data(tmp_path):
    r = np.random.default_rng(3)
    df = pd.DataFrame({"h": r.integers(150, 200, 100).astype(float),
                       "w": r.integers(45, 120, 100).astype(float)})
    df["bmi"] = df.eval("w / (h / 100) ** 2")
    s = infer_schema(df, suggest=False).with_formulas({"bmi": "w / (h / 100) ** 2"})
    assert s.derived == ["bmi"] and Schema.from_json(s.to_json()) == s
    validate_data(df, s)
    wrong = s.with_formulas({"bmi": "w / h ** 2"})
    with pytest.raises(errors.SchemaError, match="'bmi'.*does not reproduce it for 100"):
        validate_data(df, wrong)
    with pytest.raises(errors.SchemaError, match="'bmi'.*cannot be evaluated"):
        validate_data(df, s.with_formulas({"bmi": "w / height"}))
    with pytest.raises(errors.MissingColumnError, match="'BMI'"):
        s.with_formulas({"BMI": "w"})


def test_declared_categories_survive_when_only_two_are_observed():
    """A pandas categorical declaring more levels than the two it shows is not binary: the
    output dtype must keep every declared category (as the copula promises)."""
    s = pd.Categorical(["lo", "hi"] * 50, categories=["lo", "hi", "unused"])
    o = pd.Categorical(["lo", "hi"] * 50, categories=["lo", "mid", "hi"], ordered=True)
    schema = infer_schema(pd.DataFrame({"c": s, "o": o, "b": pd.Categorical(["x", "y"] * 50)}))
    assert schema["c"].type == "categorical" and schema["c"].levels == ("lo", "hi", "unused")
    assert schema["o"].type == "ordinal" and schema["o"].levels == ("lo", "mid", "hi")
    assert schema["b"].type == "binary"  # two declared, two observed: binary as before


def test_decimals_are_read_from_the_values_as_written_whatever_their_size():
    """An absolute tolerance gave 0 places to values below 1e-6 (every synthetic value then
    rounded to 0) and 3 to 1234567890.12."""
    from bayesynth.schema import infer_schema

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"conc": rng.uniform(1e-7, 9e-7, 60),
                       "big": np.round(rng.uniform(1e9, 3e9, 60), 2),
                       "money": np.round(rng.uniform(10, 5000, 60), 2)})
    schema = infer_schema(df)
    assert schema["conc"].decimals is None  # more than 6 places: no rounding
    assert schema["big"].decimals == 2 and schema["money"].decimals == 2


def test_a_misspelt_schema_key_is_refused_by_name():
    """Unknown keys were dropped without a word: a top-level 'rule' gave a schema with no
    rules, a column's 'decimal' was ignored."""
    import json

    from bayesynth.errors import SchemaError
    from bayesynth.schema import Schema

    df = pd.DataFrame({"a": [1.25, 2.5, 3.75] * 10, "g": list("xyz") * 10})
    d = json.loads(infer_schema(df, suggest=False).to_json())
    Schema.from_dict(d)  # round trip
    with pytest.raises(SchemaError, match="'rule' in the schema .*did you mean 'rules'"):
        Schema.from_dict({**d, "rule": []})
    col = {**d["columns"][0], "decimal": 2}
    with pytest.raises(SchemaError, match="'decimal' in column 'a'"):
        Schema.from_dict({**d, "columns": [col, d["columns"][1]]})
    bad_rule = {"column": "a", "values": 1, "when": {"g": ["x"]}}
    with pytest.raises(SchemaError, match="Unknown key 'values'"):
        Schema.from_dict({**d, "rules": [bad_rule]})


def test_numbers_written_as_text_with_missing_markers_are_warned_about():
    """'12', '7.5', ... with 'NA' and '.' for missing values became a categorical column of
    one level per number without a word; the warning names the markers and the fix."""
    import warnings

    r = np.random.default_rng(5)
    x = np.round(r.gamma(2, 10, 300), 1).astype(str).astype(object)
    x[:20], x[20:25] = "NA", "."
    df = pd.DataFrame({"x": x, "g": r.choice(["a", "b", "c"], 300)})
    with pytest.warns(UserWarning, match=r"'x'.*\[('\.', 'NA'|'\.', 'NA')\].*25 records"):
        s = infer_schema(df, suggest=False)
    assert s["x"].type == "categorical"  # as read; the warning says how to read it as numbers
    # a text column of a few numbers and a word is a genuine categorical: no warning
    few = pd.DataFrame({"y": r.choice(["1", "2", "3", "Other"], 300), "g": df["g"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        infer_schema(few, suggest=False)


def test_a_record_number_column_is_refused_as_an_identifier(tmp_path):
    """The index pandas writes with to_csv ('Unnamed: 0', 0..n-1) was inferred as a count,
    modelled and released; text identifiers were already refused."""
    r = np.random.default_rng(6)
    df = pd.DataFrame({"x": r.normal(size=50), "g": r.choice(["a", "b"], 50)})
    df.to_csv(tmp_path / "t.csv")  # with the index
    read = pd.read_csv(tmp_path / "t.csv")
    with pytest.raises(errors.IdentifierColumnError, match="'Unnamed: 0'.*consecutive"):
        infer_schema(read)
    shuffled = df.assign(id=r.permutation(50) + 1001)
    with pytest.raises(errors.IdentifierColumnError, match="'id'"):
        infer_schema(shuffled)
    sorted_ids = df.assign(id=np.sort(r.choice(10**6, 50, replace=False)))
    with pytest.raises(errors.IdentifierColumnError, match="'id'.*sorted"):
        infer_schema(sorted_ids)
    # declared as a quantity, it is one; distinct whole amounts in no order are quantities
    assert infer_schema(shuffled, count=["id"])["id"].type == "count"
    amounts = df.assign(k=r.choice(10**6, 50, replace=False))
    assert infer_schema(amounts)["k"].type == "count"


def test_values_written_to_15_significant_digits_come_back_so():
    """R's write.csv writes doubles with 15 significant digits; synthetic values came back
    with 16-17 (a body-mass index derived by formula, or a smoothed continuous column), and a
    classifier told SD2011's real body-mass indices from synthetic ones with AUC 0.64 on that
    column alone. The schema records the digits and the synthetic values keep them."""
    from bayesynth.schema import infer_schema, round_values
    from bayesynth.synthesis import CartSynthesizer

    rng = np.random.default_rng(0)
    r15 = np.vectorize(lambda v: float(f"{v:.15g}"))
    height = rng.integers(150, 200, 300).astype(float)
    weight = rng.integers(45, 120, 300).astype(float)
    df = pd.DataFrame({"height": height, "weight": weight,
                       "score": r15(rng.gamma(2.0, 1.3, 300)),
                       "bmi": r15(weight / (height / 100) ** 2),
                       "conc": np.round(rng.uniform(1e-7, 9e-7, 300), 9)})
    schema = infer_schema(df, suggest=False).with_formulas(
        {"bmi": "weight / (height / 100) ** 2"})
    assert schema["score"].digits == 15 and schema["bmi"].digits == 15
    assert schema["conc"].decimals is None and schema["conc"].digits == 3
    assert schema["height"].digits is None and schema["height"].decimals == 0
    assert round_values(np.array([31.69907016060862]), schema["bmi"])[0] == 31.6990701606086
    syn = CartSynthesizer(schema, random_seed=1).fit(df).sample(m=1)[0]
    for c, d in (("score", 15), ("bmi", 15), ("conc", 3)):
        x = syn[c].dropna().to_numpy()
        assert len(np.unique(x)) > 50, c  # smoothed or derived: not copies of a few values
        assert all(float(f"{v:.{d}g}") == v for v in x), c
