"""Logical rules between variables: stating, checking, suggesting and enforcing them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth import errors
from bayesynth.rules import (
    Rule,
    apply_rules,
    check_rules,
    conflicting_rules,
    rule_mask,
    structural_rules,
    suggest_rules,
)
from bayesynth.schema import Schema, infer_schema, validate_data


def survey(n: int = 400, seed: int = 0, broken: int = 0) -> pd.DataFrame:
    """Smokers report a count of cigarettes; non-smokers carry the code -8."""
    r = np.random.default_rng(seed)
    smoke = r.choice(["YES", "NO"], n, p=[0.3, 0.7])
    nociga = np.where(smoke == "YES", r.integers(1, 40, n), -8)
    if broken:
        nociga[np.flatnonzero(smoke == "NO")[:broken]] = 5
    work = r.choice(["YES", "NO"], n)
    return pd.DataFrame({"smoke": smoke, "nociga": nociga, "work": work,
                         "age": r.integers(18, 90, n)})


NOCIGA = Rule("nociga", -8, (("smoke", ("NO",)),))


def test_mask_broken_and_apply():
    df = survey(broken=3)
    before = df.copy(deep=True)
    assert NOCIGA.mask(df).sum() == (df["smoke"] == "NO").sum()
    n, bad = NOCIGA.broken(df)
    assert (n, bad) == ((df["smoke"] == "NO").sum(), 3)
    fixed = apply_rules(df, [NOCIGA])
    assert NOCIGA.broken(fixed)[1] == 0
    pd.testing.assert_frame_equal(df, before)  # input untouched
    # only the covered records change
    changed = (fixed["nociga"] != df["nociga"]).to_numpy()
    assert changed.sum() == 3 and np.all(NOCIGA.mask(df)[changed])
    assert np.array_equal(rule_mask(df, [NOCIGA], "nociga"), NOCIGA.mask(df))
    assert not rule_mask(df, [NOCIGA], "age").any()


def test_missing_value_rules():
    df = pd.DataFrame({"married": ["no", "yes", "yes", "no"], "year": [np.nan, 1990, 2001, 5]})
    r = Rule("year", None, (("married", ("no",)),))
    out = apply_rules(df, [r])
    assert out["year"].isna().tolist() == [True, False, False, True]
    assert r.broken(df) == (2, 1)


def test_values_missing_together_are_a_rule_and_are_suggested():
    """"weight is missing if height is": a condition on the missing values of a measurement
    (a column with many values), stated, checked and suggested."""
    r = np.random.default_rng(1)
    n = 500
    height = np.round(r.normal(170, 10, n), 1)
    weight = np.round(r.normal(70, 12, n), 1)
    gone = r.random(n) < 0.08
    height[gone] = np.nan
    weight[gone | (r.random(n) < 0.02)] = np.nan  # a few more weights go missing alone
    df = pd.DataFrame({"height": height, "weight": weight,
                       "sex": r.choice(["F", "M"], n)})
    before = df.copy(deep=True)
    rule = Rule("weight", None, (("height", (None,)),))
    assert np.array_equal(rule.mask(df), np.isnan(height))
    assert rule.broken(df) == (int(gone.sum()), 0)
    check_rules(df, [rule])
    found = suggest_rules(df)
    assert rule in found
    # a measurement's values themselves are no condition (too many to be levels)
    assert all(c != "height" or lv == (None,) for r_ in found for c, lv in r_.when)
    assert not any(r_.column == "height" for r_ in found)  # 2% of weights missing alone
    pd.testing.assert_frame_equal(df, before)


def test_a_rule_that_closes_a_cycle_is_enforced_but_not_structural():
    """Stated both ways, "weight missing if height is" and "height missing if weight is"
    would leave the records missing both informing neither column: the second rule (it
    closes the cycle) stays enforced but does not make records structural. Rules that
    chain without a cycle all stay structural."""
    w_if_h = Rule("weight", None, (("height", (None,)),))
    h_if_w = Rule("height", None, (("weight", (None,)),))
    chain = Rule("bmi", None, (("weight", (None,)),))
    assert structural_rules([w_if_h, h_if_w, chain]) == (w_if_h, chain)
    assert structural_rules([h_if_w, w_if_h]) == (h_if_w,)
    # a longer cycle: a -> b -> c -> a
    ab, bc, ca = (Rule(t, None, ((c, (None,)),)) for t, c in (("b", "a"), ("c", "b"),
                                                              ("a", "c")))
    assert structural_rules([ab, bc, ca]) == (ab, bc)
    df = pd.DataFrame({"height": [np.nan, 170.0, np.nan, 160.0],
                       "weight": [np.nan, np.nan, 60.0, 55.0]})
    assert list(rule_mask(df, [w_if_h, h_if_w], "height")) == [False] * 4
    assert list(rule_mask(df, [w_if_h, h_if_w], "weight")) == [True, False, True, False]
    # enforcing both reaches the fixed point whatever the order
    for rules in ([w_if_h, h_if_w], [h_if_w, w_if_h]):
        out = apply_rules(df, rules)
        assert out.isna().to_numpy().tolist() == [[True, True], [True, True], [True, True],
                                                  [False, False]]
        assert all(r.broken(out)[1] == 0 for r in rules)


def test_apply_rules_repeats_until_no_rule_changes_anything():
    """A later rule sets the value an earlier rule reads: one pass in the order given would
    leave the earlier one broken."""
    first = Rule("c", None, (("b", (None,)),))  # c missing if b is
    second = Rule("b", None, (("a", ("x",)),))  # b missing if a == "x"
    df = pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0], "c": [3.0, 4.0]})
    out = apply_rules(df, [first, second])
    assert out["b"].isna().tolist() == [True, False]
    assert out["c"].isna().tolist() == [True, False]
    assert df.notna().all().all()  # the input is untouched


def test_json_round_trip_and_repr():
    d = NOCIGA.to_dict()
    assert d == {"column": "nociga", "value": -8, "when": {"smoke": ["NO"]}}
    assert Rule.from_dict(d) == NOCIGA
    assert repr(NOCIGA) == "Rule(nociga == -8 if smoke in ['NO'])"
    with pytest.raises(errors.SchemaError, match="'column'"):
        Rule.from_dict({"value": 1})
    with pytest.raises(errors.SchemaError, match="itself"):
        Rule("a", 1, (("a", (1,)),))


def test_suggestions_find_the_pattern_without_applying_it():
    df = survey(broken=1)
    s = infer_schema(df)
    assert NOCIGA in s.suggested_rules
    assert s.rules == ()  # suggested, not applied
    assert all(r.column != "age" for r in s.suggested_rules)  # age follows no pattern
    # a pattern broken by 5% of the records is not suggested at the 99% threshold
    assert NOCIGA not in suggest_rules(survey(broken=15))


def test_schema_rules_in_json(tmp_path):
    df = survey()
    s = infer_schema(df).with_rules([NOCIGA])
    path = tmp_path / "schema.json"
    s.to_json(path)
    back = Schema.from_json(path)
    assert back.rules == (NOCIGA,) and back == s


def test_bad_rules_are_clear_errors_naming_the_column():
    df = survey(broken=40)
    s = infer_schema(df, suggest=False)
    with pytest.raises(errors.MissingColumnError, match="'smoker'"):
        s.with_rules([Rule("nociga", -8, (("smoker", ("NO",)),))])
    with pytest.raises(errors.UnknownLevelError, match="'smoke'"):
        s.with_rules([Rule("nociga", -8, (("smoke", ("N",)),))])
    with pytest.raises(errors.UnknownLevelError, match="'work'"):
        s.with_rules([Rule("work", "MAYBE", (("smoke", ("NO",)),))])
    with pytest.raises(errors.SchemaError, match="'age'.*not a number"):
        s.with_rules([Rule("age", "old", (("smoke", ("NO",)),))])
    before = df.copy(deep=True)
    with pytest.raises(errors.SchemaError, match="break the rule.*nociga"):
        validate_data(df, s.with_rules([NOCIGA]))  # 40 of ~280 non-smokers break it
    pd.testing.assert_frame_equal(df, before)
    validate_data(df, s.with_rules([NOCIGA]), rule_max_broken=0.2)  # a stated share
    with pytest.raises(errors.UnknownLevelError, match="'smoke'"):
        check_rules(df, [Rule("nociga", -8, (("smoke", ("MAYBE",)),))])


def test_special_code_on_a_categorical_column_is_refused():
    from bayesynth.schema import ColumnSchema

    with pytest.raises(errors.SchemaError, match="'smoke'.*special codes"):
        ColumnSchema("smoke", "categorical", levels=("NO", "YES"), special_codes=(-8,))


def test_rule_covered_records_carry_no_information_in_the_model():
    from bayesynth.models.layout import LatentLayout

    df = survey()
    # some smokers also answer "not applicable": the code carries information outside the rule
    smokers = np.flatnonzero(df["smoke"] == "YES")
    df.loc[smokers[::8], "nociga"] = -8
    s = infer_schema(df, suggest=False)
    free = LatentLayout.from_data(df, s)
    ruled = LatentLayout.from_data(df, s.with_rules([NOCIGA]))
    covered = NOCIGA.mask(df)
    block = {b.name: b for b in ruled.categorical}["nociga[code]"]
    assert np.all(block.codes[covered] == -1)  # structural: unobserved in the model
    assert np.all(block.codes[~covered] >= 0)
    free_block = {b.name: b for b in free.categorical}["nociga[code]"]
    assert np.all(free_block.codes >= 0)  # without the rule every record informs it
    # when the rule explains every code, the code is not modelled at all
    plain = survey()
    lay = LatentLayout.from_data(plain, infer_schema(plain, suggest=False).with_rules([NOCIGA]))
    assert "nociga[code]" not in {b.name for b in lay.categorical}


def test_rules_that_cannot_hold_together_or_never_apply_are_caught():
    df = survey()
    # two values for one column, and a young non-smoker meets both conditions
    young = Rule("nociga", 0, (("age", tuple(range(18, 25))),))
    with pytest.raises(errors.SchemaError, match="make the conditions exclusive"):
        check_rules(df, [NOCIGA, young])
    # exclusive conditions on a shared column are fine
    assert not conflicting_rules([Rule("g", "a", (("age", (20, 21)),)),
                                  Rule("g", "b", (("age", (22, 23)),))])
    assert conflicting_rules([Rule("g", "a", (("age", (20, 21)),)),
                              Rule("g", "b", (("age", (21, 23)),))])
    # a numeric range written as text never matches: refused
    with pytest.raises(errors.SchemaError, match="not a number"):
        check_rules(df, [Rule("work", "NO", (("age", ("30",)),))])
    # a range that covers no record: warned
    with pytest.warns(UserWarning, match="covers no record"):
        check_rules(df, [Rule("work", "NO", (("age", (150, 151)),))])
    # rules that undo each other when applied anyway: warned, with the count
    bad = pd.DataFrame({"a": ["x", "x"], "b": ["y", "z"], "c": [1, 2]})
    with pytest.warns(RuntimeWarning, match="do not settle"):
        apply_rules(bad, [Rule("c", 5, (("a", ("x",)),)), Rule("c", 6, (("b", ("y",)),))])


def test_a_column_set_by_rules_only_warns_for_records_no_rule_covers():
    from bayesynth.synthesis._output import finish

    df = pd.DataFrame({"sex": ["M", "F", "F", "M"], "smoke": ["NO", "YES", "NO", "YES"],
                       "grp": ["a", "b", "b", "a"]})
    rules = [Rule("grp", "a", (("sex", ("M",)),)),
             Rule("grp", "b", (("sex", ("F",)), ("smoke", ("YES", "NO"))))]
    schema = infer_schema(df, suggest=False).with_rules(rules)
    frame = pd.DataFrame({"sex": ["M", "F"], "smoke": ["NO", None]})
    with pytest.warns(RuntimeWarning, match="1 synthetic records meet none of its rules"):
        out = finish(frame, schema)
    assert out["grp"].isna().sum() == 1


def test_a_rule_reading_an_unmodelled_column_for_a_modelled_one_is_refused():
    """The copula fitted such a rule's records as observed while synthesis set them by the
    rule: the fixed value counted twice (zero incomes 0.14 -> 0.25). Refused before fitting."""
    import bayesynth as bs

    df = survey()
    df["old"] = np.where(df["age"] >= 65, "yes", "no")
    df.loc[df["old"] == "yes", "work"] = "NO"
    rules = [Rule("old", "yes", (("age", tuple(range(65, 90))),)),
             Rule("old", "no", (("age", tuple(range(18, 65))),)),
             Rule("work", "NO", (("old", ("yes",)),))]
    schema = infer_schema(df, suggest=False).with_rules(rules)
    with pytest.raises(errors.SchemaError, match="reads 'old', which the copula does not"):
        bs.CopulaSynthesizer(schema=schema, draws=10, tune=10, chains=1).fit(df)


def _aged(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """Ages in years and the age group each falls in (SD2011's agegr and age)."""
    r = np.random.default_rng(seed)
    age = r.integers(16, 91, n)
    bins = [(16, 24, "16-24"), (25, 44, "25-44"), (45, 64, "45-64"), (65, 90, "65+")]
    group = np.select([(age >= lo) & (age <= hi) for lo, hi, _ in bins],
                      [g for _, _, g in bins], "")
    return pd.DataFrame({"age": age, "agegr": group, "sex": r.choice(["F", "M"], n)})


def test_groups_of_a_whole_number_column_are_suggested_whole():
    """A column that splits ages into disjoint ranges gets one rule per group, listing every
    whole number of its range (a gap between groups split at its middle); the split counts as
    one rule; the other suggestions read the groups through the ages, and none conflicts."""
    df = _aged()
    assert set(df.age) == set(range(16, 91))  # every age occurs
    found = [r for r in suggest_rules(df) if r.column == "agegr"]
    assert {r.value: r.when for r in found} == {
        g: (("age", tuple(range(lo, hi + 1))),)
        for g, lo, hi in (("16-24", 16, 24), ("25-44", 25, 44), ("45-64", 45, 64),
                          ("65+", 65, 90))}
    for r in found:  # exact in the data
        assert r.broken(df) == ((df.agegr == r.value).sum(), 0)
    assert len(suggest_rules(df, max_rules=1)) == 4  # the whole split, or nothing
    # no one aged 25 or 26: the gap between 24 and 27 is split at its middle, 25
    gap = df[~df.age.isin([25, 26])]
    ranges = {r.value: r.when[0][1] for r in suggest_rules(gap) if r.column == "agegr"}
    assert (ranges["16-24"][-1], ranges["25-44"][0]) == (25, 26)
    r = np.random.default_rng(1)  # a second pattern, on fewer records: students are young
    more = df.assign(student=np.where(df.agegr == "16-24", "YES",
                                      r.choice(["YES", "NO"], len(df), p=[0.2, 0.8])))
    two = suggest_rules(more, max_rules=2)
    # the copula does not model a column the rules fix: the pattern is read through the ages
    assert len(two) == 5 and two[-1] == Rule("student", "YES", (("age", tuple(range(16, 25))),))
    assert Rule("student", "YES", (("agegr", ("16-24",)),)) not in suggest_rules(more)
    # the groups split a second column (the year of birth) too: one split is suggested, the
    # one covering more records (the year is missing for some), and nothing conflicts
    born = more.assign(byear=(2011 - more.age).where(r.random(len(more)) > 0.1))
    every = suggest_rules(born)
    splits = {c for rule in every if rule.column == "agegr" for c, _ in rule.when}
    assert splits == {"age"} and not conflicting_rules(every)
    # a group held by a rule that could contradict a stronger suggestion is left out
    old = born.assign(old=born.age >= 65)
    assert not conflicting_rules(suggest_rules(old))
    # one record of a neighbouring group at a boundary age: the ranges overlap, no rule
    shared = df.copy()
    shared.loc[shared.index[shared.age == 25][0], "agegr"] = "16-24"
    assert not [r for r in suggest_rules(shared) if r.column == "agegr"]
    # a group held by too few records, or values too few to be more than levels: no split
    older = df[df.age >= 23]
    assert (older.agegr == "16-24").sum() < 20
    assert not [r for r in suggest_rules(older) if r.column == "agegr"]
    unknown = df.copy()  # enough of the youngest, but too few with an age
    unknown.loc[unknown.index[unknown.agegr == "16-24"][10:], "age"] = np.nan
    assert (unknown.agegr == "16-24").sum() >= 20
    assert not [r for r in suggest_rules(unknown) if r.column == "agegr"
                and r.when[0][1] != (None,)]  # ("agegr is 16-24 if age is missing" stays)
    few = df.assign(age=df.age // 5)  # 16 distinct values, split alike: levels, not values
    assert few.groupby("agegr").age.agg(["min", "max"]).to_numpy().ravel().tolist() == [
        3, 4, 5, 8, 9, 12, 13, 18]
    assert not any(c == "age" and len(v) > 1 for r in suggest_rules(few) for c, v in r.when)
    # ranges wider than MAX_RANGE_VALUES are not listed
    wide = df.assign(age=df.age * 100)
    assert not [r for r in suggest_rules(wide) if r.column == "agegr"]


def test_suggestions_never_conflict_and_splits_come_whole():
    """Two patterns that never meet in the data but could in synthetic records (B is x where
    A1 is p, y where A2 is q) are not both suggested: the stronger stays. A split that would
    contradict a stronger suggestion is left out whole, not in part."""
    r = np.random.default_rng(5)
    n = 400
    b = r.choice(["x", "y", "z"], n)
    a1 = np.where((b == "x") & (r.random(n) < 0.7), "p", "r")
    a2 = np.where((b == "y") & (r.random(n) < 0.5), "q", "t")
    df = pd.DataFrame({"b": b, "a1": a1, "a2": a2})
    found = suggest_rules(df)
    assert Rule("b", "x", (("a1", ("p",)),)) in found
    assert Rule("b", "y", (("a2", ("q",)),)) not in found
    assert not conflicting_rules(found)
    # ages known for 30% of the records: the split comes first though it covers fewer records
    # than "agegr is 65+ for the retired", which it could contradict (a retired 20-year-old)
    # and which is left out; the groups stay modelled where the age is missing, so the
    # suggestions that read them keep reading them
    aged = _aged(n=1500, seed=3)
    aged["retired"] = np.where(aged.agegr == "65+", "YES", "NO")
    aged["student"] = np.where(aged.agegr == "16-24", "YES",
                               r.choice(["YES", "NO"], len(aged), p=[0.2, 0.8]))
    aged.loc[r.random(len(aged)) < 0.7, "age"] = np.nan
    assert aged.age.notna().sum() < (aged.retired == "YES").sum()
    found = suggest_rules(aged)
    assert Rule("agegr", "65+", (("retired", ("YES",)),)) not in found
    assert len([x for x in found if x.column == "agegr" and x.when[0][0] == "age"]) == 4
    assert Rule("student", "YES", (("agegr", ("16-24",)),)) in found
    assert not conflicting_rules(found)


def test_suggestions_that_cannot_be_read_through_a_split_are_left_out():
    """Once the groups are fixed by the ages, a suggestion on a missing group (no range stands
    for it) or one that would set the age from the age itself is dropped, not an error."""
    df = _aged(n=2400, seed=4)
    df = df[df.age <= 65].reset_index(drop=True)  # the oldest group is the 65-year-olds
    df["note"] = "ok"
    gone = df.index[df.agegr == "25-44"][:25]
    df.loc[gone, "agegr"] = None
    df.loc[gone, "note"] = None
    found = suggest_rules(df)
    assert {x.value for x in found if x.column == "agegr"} == {"16-24", "25-44", "45-64",
                                                                 "65+"}
    assert not [x for x in found if x.column == "note"]  # "note is missing if agegr is"
    assert not [x for x in found if x.column == "age"]  # "age is 65 if agegr is 65+"
    assert not conflicting_rules(found)


def test_patterns_that_chance_gives_are_not_suggested():
    """Adult's "native-country == 0 if capital-gain in [25]": 20 of 20 records in a country
    that 89.7% of the others share, which chance gives 11% of the time, and thousands of
    (level, column) pairs are examined. Here 20 of 20 at a value 80% of the others hold
    (chance 1%: below 0.05, above 0.05 over the pairs examined), beside the same sizes at a
    value 25% of the others hold (10^-12)."""
    from scipy.stats import binom

    from bayesynth.rules import CHANCE_ALPHA

    r = np.random.default_rng(8)
    n = 2000
    g = np.r_[np.full(20, "rare"), r.choice(["a", "b", "c"], n - 20)]
    country = np.r_[np.full(20, "US"), np.where(r.random(n - 20) < 0.8, "US", "other")]
    rich = np.r_[np.full(20, "yes"), np.where(r.random(n - 20) < 0.25, "yes", "no")]
    df = pd.DataFrame({"g": g, "country": country, "rich": rich})
    said = {(x.column, x.value, x.when) for x in suggest_rules(df)}
    assert ("rich", "yes", (("g", ("rare",)),)) in said
    assert not any(c == "country" for c, _, _ in said)
    # the bound: 20 of 20 at the others' share, against CHANCE_ALPHA over the pairs examined
    # (3 columns, each level of each against the 2 other columns; levels of at least 20)
    share = (country[20:] == "US").mean()
    examined = 2 * sum(len(set(c)) for c in (g, country, rich))
    assert np.log(CHANCE_ALPHA / examined) < binom.logsf(19, 20, share) < np.log(CHANCE_ALPHA)
    assert binom.logsf(19, 20, (rich[20:] == "yes").mean()) < np.log(CHANCE_ALPHA / examined)
