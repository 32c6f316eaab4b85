"""Identification risk (paper cases and a brute-force reference), attribute disclosure, DCR."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesynth.evaluation import (
    attribute_inference_risk,
    distance_to_closest_record,
    identification_risk,
    identification_risk_sweep,
    outlier_attribute_disclosure,
    singling_out_risk,
    synthetic_kind,
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
            v = syn[col].to_numpy()
            if np.isnan(x):  # a missing value matches only a missing value
                ok &= np.isnan(v)
            else:
                ok &= np.abs(v - x) <= r
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
    gone = rng.random(n) < 0.1  # missing in the real data, and mostly in its synthetic twin
    real.loc[gone, "x"] = np.nan
    syn.loc[gone & (rng.random(n) < 0.8), "x"] = np.nan
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
    # the DCR ratio: 0 for copies; for new draws from the same law the medians of the two
    # nearest-neighbour distance samples agree (ratio about 1)
    assert copy.ratio == 0.0 and copy.exact_copy_share == 1.0
    assert fresh.exact_copy_share == 0.0
    assert 0.8 < fresh.ratio < 1.25
    assert len(fresh.holdout_to_train) == len(hold)


def test_dcr_ratio_matches_a_direct_computation(rng):
    train = pd.DataFrame({"x": rng.normal(size=50), "g": rng.choice(list("ab"), 50)})
    hold = pd.DataFrame({"x": rng.normal(size=30), "g": rng.choice(list("ab"), 30)})
    syn = pd.DataFrame({"x": rng.normal(size=40), "g": rng.choice(list("ab"), 40)})
    res = distance_to_closest_record(train, syn, hold)
    sd = train["x"].std()

    def nearest(a):  # brute force: (x / sd)^2 + one unit per category mismatch
        d = ((a["x"].to_numpy()[:, None] - train["x"].to_numpy()[None, :]) / sd) ** 2 + (
            a["g"].to_numpy()[:, None] != train["g"].to_numpy()[None, :])
        return np.sqrt(d.min(axis=1))

    np.testing.assert_allclose(res.to_train, nearest(syn), rtol=1e-10)
    np.testing.assert_allclose(res.holdout_to_train, nearest(hold), rtol=1e-10)
    assert res.ratio == pytest.approx(np.median(nearest(syn)) / np.median(nearest(hold)))


def test_correct_attribution_probability_by_hand():
    train = pd.DataFrame({"k": ["a", "a", "b", "c"], "s": ["x", "y", "x", "x"]})
    syn = pd.DataFrame({"k": ["a", "a", "a", "b", "b"], "s": ["x", "x", "y", "y", "y"]})
    res = attribute_inference_risk(train, syn, keys=["k"], sensitive="s")
    # record 1 (a, x): 2/3; record 2 (a, y): 1/3; record 3 (b, x): 0; record 4 (c): no match
    assert res.cap == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert res.coverage == pytest.approx(3 / 4)
    # marginal baseline: x has share 3/4, y 1/4 -> mean over the matched records 1-3
    # (3/4 + 1/4 + 3/4) / 3
    assert res.baseline == pytest.approx((0.75 + 0.25 + 0.75) / 3)
    assert np.isnan(res.holdout_cap)
    hold = pd.DataFrame({"k": ["b"], "s": ["y"]})
    assert attribute_inference_risk(train, syn, keys=["k"], sensitive="s",
                                     holdout=hold).holdout_cap == pytest.approx(1.0)
    with pytest.raises(ValueError, match="also a key"):
        attribute_inference_risk(train, syn, keys=["s"], sensitive="s")


def test_integer_codes_are_known_value_by_value(rng):
    """A numeric key with few distinct values (an integer-coded category, 85% in one code) is
    known exactly, as the same codes written as text are, not merged into tied quantile bins;
    a numeric key with many values is cut into quintiles."""
    n = 600
    code = rng.choice(np.arange(7), n, p=[.85, .05, .03, .03, .02, .01, .01])
    s = np.where(code == 0, rng.choice(list("xy"), n), "z")
    train = pd.DataFrame({"k": code, "s": s})
    syn = train.sample(frac=1.0, random_state=1).reset_index(drop=True)
    as_int = attribute_inference_risk(train, syn, keys=["k"], sensitive="s")
    as_text = attribute_inference_risk(train.astype({"k": str}), syn.astype({"k": str}),
                                       keys=["k"], sensitive="s")
    assert as_int.cap == pytest.approx(as_text.cap)
    # merged into one bin, the key would teach nothing beyond the marginal shares
    assert as_int.cap > as_int.baseline + 0.05
    x = rng.normal(size=n)
    cont = attribute_inference_risk(pd.DataFrame({"k": x, "s": s}),
                                    pd.DataFrame({"k": x, "s": s}), keys=["k"], sensitive="s")
    quint = np.searchsorted(np.quantile(x, [.2, .4, .6, .8]), x, side="right").astype(str)
    by_hand = attribute_inference_risk(pd.DataFrame({"k": quint, "s": s}),
                                       pd.DataFrame({"k": quint, "s": s}), keys=["k"],
                                       sensitive="s")
    assert cont.cap == pytest.approx(by_hand.cap)


def test_singling_out_separates_copies_from_new_records(rng):
    def draw(n):
        return pd.DataFrame({"x": rng.normal(size=n), "y": rng.gamma(2.0, size=n),
                             "g": rng.choice(list("abcd"), n), "h": rng.choice(list("pq"), n)})

    train, hold = draw(600), draw(600)
    copied = singling_out_risk(train, train.sample(600, random_state=1), hold, n_attacks=300,
                               random_seed=0)
    fresh = singling_out_risk(train, draw(600), hold, n_attacks=300, random_seed=0)
    # copies: every predicate isolating one synthetic record isolates that same training record
    assert copied.rate_train == 1.0 and copied.risk > 0.5
    # new records from the same law: no more singling out of training than of hold-out people
    # (difference of two proportions over 300 attacks: sd below 0.041)
    assert abs(fresh.rate_train - fresh.rate_control) < 4 * 0.041
    assert min(fresh.n_attacks, copied.n_attacks) > 250


def test_singling_out_predicates_turn_at_the_synthetic_median():
    # The intruder sees only the synthetic data, so a predicate's direction turns at the
    # synthetic median (50.5 here), not the training one (248.5). Counted predicates come from
    # the smallest record ("x <= 1": one training person, a hit) and the largest ("x >= 100":
    # 99 training people, no hit), half each; turned at 248.5, only "x <= 1" would count.
    syn = pd.DataFrame({"x": np.arange(1.0, 101.0)})
    train = pd.DataFrame({"x": np.r_[0.5, 200.0 + np.arange(99.0)]})
    hold = pd.DataFrame({"x": 400.0 + np.arange(100.0)})
    res = singling_out_risk(train, syn, hold, n_attacks=400, n_columns=1, random_seed=3)
    # 2 of 100 picks count: about 160 of the 8,000 tries allowed
    assert res.n_attacks > 100 and res.rate_control == 0.0
    # a binomial share of at least 100 trials at 1/2: sd at most 0.05
    assert abs(res.rate_train - 0.5) < 4 * 0.05


def test_synthetic_kind(rng):
    real = pd.DataFrame({"id_like": rng.normal(size=200), "g": rng.choice(list("ab"), 200)})
    partial = real.assign(g=rng.choice(list("ab"), 200))
    assert synthetic_kind(real, partial) == "partially"
    assert synthetic_kind(real, real.sample(frac=1, random_state=0)) == "fully"
    assert synthetic_kind(real, real.iloc[:150]) == "fully"
    # a column that is mostly one value agrees by chance: not evidence of partial synthesis
    mostly = pd.DataFrame({"m": np.where(rng.random(200) < 0.97, "z", "y")})
    assert synthetic_kind(mostly, mostly.assign(m=np.where(rng.random(200) < 0.97, "z", "y"))) \
        == "fully"


def test_risk_measures_match_values_across_numeric_dtypes():
    """A copy of the training records written back as float (as after a missing value or a
    model draw) is a copy: values are compared as numbers, not as the text "1" vs "1.0"."""
    rng = np.random.default_rng(1)
    n = 400
    train = pd.DataFrame({"sex": rng.integers(0, 2, n), "age": rng.integers(18, 90, n)})
    train["y"] = train["sex"]  # the key determines the attribute
    holdout = train.sample(frac=1, random_state=2).reset_index(drop=True)
    syn = train.astype(float)
    d = distance_to_closest_record(train, syn, holdout)
    assert d.n_identical == n and np.median(d.to_train) == 0.0
    a = attribute_inference_risk(train, syn, keys=["sex"], sensitive="y")
    assert a.cap == 1.0 and a.coverage == 1.0


def test_a_level_unseen_in_training_is_one_unit_away():
    """Each categorical mismatch adds one unit of squared distance, also for a level the
    training data lack (it used to encode as all zeros: 0.5)."""
    train = pd.DataFrame({"g": ["a", "b"] * 50})
    d = distance_to_closest_record(train, pd.DataFrame({"g": ["new"] * 4}), train)
    np.testing.assert_allclose(np.asarray(d.to_train) ** 2, 1.0)


def test_outlier_disclosure_pairs_lowest_with_lowest_when_the_synthetic_table_is_short():
    """With fewer than 2k synthetic records both sides take the same number of lowest and of
    highest records (the synthetic side used to take all its records against the real k lowest
    then k highest)."""
    p = np.arange(200.0)
    real = pd.DataFrame({"p": p, "s": np.where(p < 100, "low", "high")})
    syn = real.iloc[::4].reset_index(drop=True)  # 50 records: 25 low, 25 high
    out = outlier_attribute_disclosure(real, syn, public="p", sensitive="s", k=50)
    assert out["n_pairs"] == 50 and out["statistic"] == 1.0  # the old pairing gave 0.5


def test_partially_synthetic_data_that_keep_only_two_level_columns(rng):
    """Kept binary columns (sex, smoker, urban) agree row by row in every record, against
    about half by chance: partially synthetic. The old rule (chance below one half) never
    counted a two-level column, and the report then dropped the identification risk."""
    from bayesynth.evaluation import report

    n = 300
    real = pd.DataFrame({"sex": rng.choice(["F", "M"], n),
                         "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3]),
                         "age": rng.normal(45, 12, n).round(1)})
    syn = real.assign(age=(real["age"] * (1 + rng.normal(0, 0.05, n))).round(1))
    assert synthetic_kind(real, syn) == "partially"
    fresh = pd.DataFrame({"sex": rng.choice(["F", "M"], n),
                          "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3]),
                          "age": rng.normal(45, 12, n).round(1)})
    assert synthetic_kind(real, fresh) == "fully"
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = report(real, fresh, f"{tmp}/r.html", known=["sex", "smoker"],
                     synthesized=["age"])
    assert out["kind"] == "partially"  # the caller named the replaced columns


def test_dcr_verdict_allows_for_sampling_noise(rng):
    """An independent draw from the real law can have a DCR ratio a little below 1 (0.99
    read as "closer"); the verdict says "closer" only when the bootstrap interval of the ratio
    lies below 1, as for copies of training records."""
    from bayesynth.evaluation import distance_to_closest_record, report

    def draw(n):
        return pd.DataFrame({"x": rng.normal(size=n).round(2), "y": rng.normal(size=n).round(2),
                             "g": rng.choice(list("abc"), n)})

    real, holdout = draw(300), draw(300)
    fresh = draw(300)
    d = distance_to_closest_record(real, fresh, holdout)
    lo, hi = d.ratio_interval()
    assert lo < d.ratio < hi and lo < 1 < hi  # one law: 1 inside the interval
    copies = real.sample(300, replace=True, random_state=1)
    dc = distance_to_closest_record(real, copies, holdout)
    assert dc.ratio_interval()[1] < 1
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        glance = {g["aspect"]: g["sentence"] for g in
                  report(real, fresh, f"{tmp}/a.html", holdout=holdout,
                         kind="fully")["at_a_glance"]}
        assert "are closer to" not in glance["risk"]
        glance = {g["aspect"]: g["sentence"] for g in
                  report(real, copies, f"{tmp}/b.html", holdout=holdout,
                         kind="fully")["at_a_glance"]}
        assert "are closer to" in glance["risk"]


def test_singling_out_permutation_band_and_unfloored_excess(rng):
    """Synthetic records from the real law, independent of the training people: the unfloored
    excess takes both signs and the permutation p-values are uniform (the test is exact under
    exchangeability of training and hold-out people); copies of the training data are far
    above the band."""
    def draw(n):
        return pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(list("abcd"), n),
                             "h": rng.choice(list("pq"), n)})

    excess, pvals = [], []
    for seed in range(16):
        train, hold = draw(300), draw(300)
        so = singling_out_risk(train, draw(300), hold, n_attacks=150, random_seed=seed)
        assert so.risk == pytest.approx(max(0.0, so.excess))
        band, p = so.null_band(n_perm=200, random_seed=seed)
        excess.append(so.excess)
        pvals.append(p)
    pvals = np.array(pvals)
    assert min(excess) < 0 < max(excess)
    # p uniform: P(p <= 0.05) = 0.05 each, so 4 or more of 16 has probability 0.007
    assert (pvals <= 0.05).sum() <= 3
    # and not stuck near 1 (a band too wide): P(p > 0.5) = 0.5, so 14+ of 16 has prob. 0.002
    assert (pvals > 0.5).sum() <= 13
    train, hold = draw(300), draw(300)
    copied = singling_out_risk(train, train.sample(300, random_state=1), hold, n_attacks=150,
                               random_seed=0)
    band, p = copied.null_band(random_seed=0)
    assert copied.excess > band + 0.3 and p < 0.01


def test_singling_out_null_test_adds_splits_until_the_verdict_is_clear(rng):
    """Where the observed excess sits at the null's 95% quantile (p near 0.05) the test keeps
    doubling the splits and its 99.9% interval holds the p-value of 20,000 other splits; far
    from 0.05 it stops at the first 400; a fixed number of splits is what null_band uses."""
    from dataclasses import replace

    def draw(n):
        return pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(list("abcd"), n),
                             "h": rng.choice(list("pq"), n)})

    train, hold = draw(400), draw(400)
    so = singling_out_risk(train, draw(400), hold, n_attacks=200, random_seed=3)
    assert so.n_attacks > 20
    fixed = so.null_test(n_perm=300, decide_at=None, random_seed=5)
    assert (fixed.band, fixed.p) == so.null_band(n_perm=300, random_seed=5)
    assert fixed.n_perm == 300 and fixed.decided
    # the null distribution of the excess, from splits the tests below do not see
    ref = replace(so, excess=np.inf).null_test(n_perm=20_000, decide_at=None,
                                               random_seed=99)
    assert ref.p == pytest.approx(1 / 20_001)
    null = so.null_test(level=0.95, n_perm=20_000, decide_at=None, random_seed=98).band

    def exceed(excess, seed):
        return (replace(so, excess=excess).null_test(n_perm=20_000, decide_at=None,
                                                    random_seed=seed).p)

    near = replace(so, excess=null)
    p_ref = exceed(null, 97)
    test = near.null_test(random_seed=0)
    assert test.n_perm > 400
    lo, hi = test.p_interval
    assert lo - 1e-4 <= p_ref <= hi + 1e-4
    assert not test.decided or not (lo <= 0.05 <= hi)
    if test.decided:
        assert (test.p < 0.05) == (p_ref < 0.05) or abs(p_ref - 0.05) < 0.005
    far = replace(so, excess=so.null_test(level=0.6, n_perm=20_000, decide_at=None,
                                          random_seed=96).band)
    quick = far.null_test(random_seed=0)
    assert quick.n_perm == 400 and quick.decided and quick.p > 0.2
    assert not (quick.p_interval[0] <= 0.05 <= quick.p_interval[1])


def test_tables_sorted_alike_are_not_taken_for_partially_synthetic(rng):
    """Both tables sorted by a category, or both carrying a row number, agree row by row on
    that column by construction: that says nothing about records being kept."""
    from bayesynth.evaluation import kept_columns

    def draw(n):
        return pd.DataFrame({"region": rng.choice(list("ab"), n, p=[0.9, 0.1]),
                             "x": rng.normal(size=n)})

    real, syn = draw(300), draw(300)
    a = real.sort_values("region", kind="stable").reset_index(drop=True)
    b = syn.sort_values("region", kind="stable").reset_index(drop=True)
    assert (a["region"] == b["region"]).mean() > 0.9
    assert synthetic_kind(a, b) == "fully"
    assert synthetic_kind(real.assign(id=range(300)), syn.assign(id=range(300))) == "fully"
    # a column really kept (unsorted) still counts, with its agreement
    kept = real.assign(x=rng.normal(size=300))
    assert synthetic_kind(real, kept) == "partially"
    assert kept_columns(real, kept) == {"region": 1.0}


def test_singling_out_with_nothing_to_count_is_nan_not_zero(rng):
    train = pd.DataFrame({"x": rng.normal(size=100), "g": rng.choice(list("ab"), 100)})
    hold = pd.DataFrame({"x": rng.normal(size=100), "g": rng.choice(list("ab"), 100)})
    doubled = pd.concat([train, train], ignore_index=True)  # no record is unique
    res = singling_out_risk(train, doubled, hold, n_attacks=50, random_seed=0)
    assert res.n_attacks == 0 and np.isnan(res.risk) and np.isnan(res.excess)
    assert all(np.isnan(v) for v in res.null_band())


def test_cap_baseline_is_over_the_records_cap_averages():
    """s carries no information about the key in the synthetic data; only key 'a' occurs
    there, so CAP is averaged over the 90 'a' records: the baseline must be too (0.9, not
    the 0.82 of all 100 training records)."""
    train = pd.DataFrame({"k": ["a"] * 90 + ["b"] * 10, "s": ["x"] * 90 + ["y"] * 10})
    syn = pd.DataFrame({"k": ["a"] * 100, "s": ["x"] * 90 + ["y"] * 10})
    res = attribute_inference_risk(train, syn, keys=["k"], sensitive="s")
    assert res.cap == pytest.approx(0.9) and res.baseline == pytest.approx(0.9)
    assert res.coverage == pytest.approx(0.9)
    # keys are compared column by column: ("x|y", "z") is not ("x", "y|z")
    tr = pd.DataFrame({"k1": ["x|y"], "k2": ["z"], "s": ["u"]})
    sy = pd.DataFrame({"k1": ["x"], "k2": ["y|z"], "s": ["u"]})
    none = attribute_inference_risk(tr, sy, keys=["k1", "k2"], sensitive="s")
    assert none.coverage == 0 and np.isnan(none.cap) and np.isnan(none.baseline)
    with pytest.raises(ValueError, match="hold-out data have no rows"):
        attribute_inference_risk(train, syn, keys=["k"], sensitive="s", holdout=train.iloc[:0])


def test_outlier_disclosure_with_constant_extremes_is_not_called_safe():
    real = pd.DataFrame({"pub": np.arange(200.0), "sens": np.r_[[7.0] * 50, np.arange(100.0),
                                                                [7.0] * 50]})
    out = outlier_attribute_disclosure(real, real.copy(), public="pub", sensitive="sens")
    assert np.isnan(out["statistic"]) and out["exact_share"] == 1.0
