"""Bad or unusual input at the user-facing boundary: each case once gave a traceback, a silent
wrong result, or lost a file (found by a review; each test fails on the code before its fix)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesynth as bs
from bayesynth.cli import main
from bayesynth.errors import NonFiniteValueError, SchemaError
from bayesynth.evaluation import propensity_score_utility, regression_inference
from bayesynth.schema import infer_schema
from bayesynth.synthesis import (
    CartSynthesizer,
    CopulaSynthesizer,
    RankLikelihoodSynthesizer,
    SaturatedCountSynthesizer,
)
from bayesynth.tables import microdata_to_table


def test_rank_likelihood_keeps_dates():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=100),
                       "d": pd.Timestamp("2020-01-01")
                       + pd.to_timedelta(rng.integers(0, 300, 100), unit="D")})
    syn = RankLikelihoodSynthesizer(draws=30, tune=30, random_seed=1).fit(df).sample(
        random_seed=2)[0]
    assert syn["d"].notna().all()
    assert df["d"].min() <= syn["d"].min() and syn["d"].max() <= df["d"].max()


def test_a_variable_named_count_is_not_overwritten(tmp_path, capsys):
    df = pd.DataFrame({"region": list("xyzxyz") * 10, "count": list("aabbcc") * 10})
    table = microdata_to_table(df)
    with pytest.raises(SchemaError, match="'count'"):
        table.to_frame()
    assert list(table.to_frame(count="n").columns) == ["region", "count", "n"]
    src, out = tmp_path / "cnt.csv", tmp_path / "o.csv"
    df.to_csv(src, index=False)
    assert main(["saturate", str(src), "-o", str(out), "--seed", "1", "--quiet"]) == 2
    assert "'count'" in capsys.readouterr().err and not out.exists()
    assert main(["saturate", str(src), "-o", str(out), "--seed", "1", "--quiet",
                 "--microdata"]) == 0
    assert set(pd.read_csv(out)["count"]) <= {"a", "b", "c"}


def test_saturated_save_keeps_dates_and_mixed_levels(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"d": pd.Timestamp("2020-01-01")
                       + pd.to_timedelta(rng.integers(0, 5, 200), unit="D"),
                       "m": rng.choice(np.array([1, "p"], dtype=object), 200)})
    syn = SaturatedCountSynthesizer().fit(df)
    syn.save(tmp_path / "m")
    back = SaturatedCountSynthesizer.load(tmp_path / "m")
    a, b = syn.sample(random_seed=3)[0], back.sample(random_seed=3)[0]
    pd.testing.assert_frame_equal(a, b)
    assert pd.api.types.is_datetime64_any_dtype(a["d"].cat.categories.dtype)
    assert set(a["m"].astype(str)) <= {"1", "p"}


def test_infinite_values_are_refused_even_in_two_valued_columns():
    r = np.random.default_rng(0).random(100)
    df = pd.DataFrame({"ratio": np.where(r < 0.2, np.inf, 0.5), "x": r})
    with pytest.raises(NonFiniteValueError, match="'ratio'"):
        infer_schema(df)
    schema = infer_schema(df.assign(ratio=np.where(r < 0.2, 2.0, 0.5)))
    with pytest.raises(NonFiniteValueError, match="'ratio'"):
        CartSynthesizer(schema=schema, random_seed=0).fit(df)


def test_numbered_columns_get_a_clear_error():
    df = pd.DataFrame(np.random.default_rng(0).normal(size=(100, 3)))
    with pytest.raises(SchemaError, match="must be text.*astype\\(str\\)"):
        CartSynthesizer(random_seed=0).fit(df)


def test_a_target_with_missing_values_is_refused_before_the_copula_runs(monkeypatch):
    import bayesynth.synthesis.copula as cop

    def never(*a, **k):
        raise AssertionError("the copula ran")

    monkeypatch.setattr(cop, "rank_probit_copula", never)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=80), "y": rng.normal(size=80)})
    df.loc[:4, "y"] = np.nan
    with pytest.raises(SchemaError, match="Target 'y' has missing values"):
        CopulaSynthesizer(targets=["y"], draws=10, tune=10, chains=1).fit(df)


def test_regression_reads_string_dtypes_and_leaves_out_unseen_levels():
    rng = np.random.default_rng(0)
    g = rng.choice(list("abc"), 300)
    x = rng.normal(size=300) + (g == "b")
    real = pd.DataFrame({"x": x, "g": pd.array(g, dtype="string")})
    same = regression_inference(real, [real.astype({"g": object})], "x ~ g")
    assert np.allclose(same.summary["mean_cio"], 1.0)
    # synthetic records with a level the real data lack: left out (not counted as level a)
    syn = pd.DataFrame({"x": np.r_[x, np.full(50, 10.0)], "g": np.r_[g, ["d"] * 50]})
    with pytest.warns(RuntimeWarning, match="50 in 'g'"):
        out = regression_inference(real, [syn], "x ~ g")
    assert np.allclose(out.summary["mean_cio"], 1.0)


def test_s_pmse_null_counts_the_identified_parameters():
    """Columns that repeat one another add no parameter to the null's degrees of freedom."""
    rng = np.random.default_rng(0)

    def draw(n):
        a = rng.normal(size=n)
        miss = rng.random(n) < 0.3
        return pd.DataFrame({"a": np.where(miss, np.nan, a),
                             "b": np.where(miss, np.nan, rng.normal(size=n)),
                             "g": rng.choice(list("pq"), n)})

    real, syn = draw(500), draw(500)
    res = propensity_score_utility(real, syn, random_seed=0)
    # intercept, a, b, g, and one missing indicator (a's and b's are the same column)
    assert res.n_params == 5


def test_evaluate_refuses_bad_names_and_text_before_any_work(tmp_path, capsys):
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"age": rng.integers(18, 80, 150), "inc": rng.normal(size=150),
                         "g": rng.choice(list("ab"), 150)})
    r, s, out = tmp_path / "r.csv", tmp_path / "s.csv", tmp_path / "rep.html"
    real.to_csv(r, index=False)
    real.sample(frac=1, random_state=0).to_csv(s, index=False)
    for extra, said in ((["--known", "zz"], "zz"), (["--sensitive", "zz"], "zz"),
                        (["--regression", "inc ~ zz"], "zz"),
                        (["--public", "age"], "sensitive"),
                        (["--kind", "partially", "--synthesized", "inc", "--radius", "-1"],
                         "radius")):
        assert main(["evaluate", str(r), str(s), "-o", str(out), *extra]) == 2
        assert said in capsys.readouterr().err and not out.exists()
    assert main(["evaluate", str(r), str(s), "-o", str(tmp_path / "rep.json")]) == 2
    assert ".html" in capsys.readouterr().err
    na = real.astype({"inc": object})
    na.loc[3, "inc"] = "NA"
    na.to_csv(s, index=False)
    assert main(["evaluate", str(r), str(s), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "'inc'" in err and "'NA'" in err and not out.exists()


def test_save_model_under_a_file_is_refused_before_fitting(tmp_path, capsys):
    rng = np.random.default_rng(0)
    src = tmp_path / "d.csv"
    pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)}).to_csv(src, index=False)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "o.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "10", "--chains", "1",
                 "--quiet", "--save-model", str(tmp_path / "afile" / "model")]) == 2
    assert "is a file" in capsys.readouterr().err and not out.exists()


def test_cart_is_unaffected_by_these_checks():
    """A plain mixed table still goes through (no false refusals)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=80), "g": rng.choice(list("xy"), 80),
                       "flag": rng.random(80) < 0.5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = CartSynthesizer(random_seed=0).fit(df).sample(random_seed=1)[0]
    assert list(out.columns) == list(df.columns)


def test_max_risk_refuses_a_family_sigma_or_alpha_it_would_ignore(tmp_path, capsys):
    src = tmp_path / "t.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.choice(list("xyz"), 300), "b": rng.choice(list("pq"), 300)}).to_csv(
        src, index=False)
    out = tmp_path / "o.csv"
    assert main(["saturate", str(src), "-o", str(out), "--max-risk", "0.5", "--alpha",
                 "0.02", "--quiet"]) == 2
    assert "--alpha" in capsys.readouterr().err and not out.exists()


def test_bare_pm_sample_in_a_model_context_uses_the_copula_blocks():
    """PyMC's automatic assignment passes initial_point and friends to every step it builds;
    FactorScoresGibbs used to refuse them (TypeError)."""
    import pymc as pm

    from bayesynth.datasets import simulate_child_health
    from bayesynth.models import rank_probit_copula

    df = simulate_child_health(n=150, random_seed=1)[["read", "math", "m_race", "male"]]
    model = rank_probit_copula(df, n_factors=2)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=5, tune=5, chains=1, progressbar=False, random_seed=1,
                          compute_convergence_checks=False)
    assert "eta" in idata.posterior and "diverging" not in idata.sample_stats


def test_attribute_disclosure_without_complete_pairs_measures_nothing():
    from bayesynth.evaluation import outlier_attribute_disclosure

    rng = np.random.default_rng(0)
    real = pd.DataFrame({"p": np.full(50, np.nan), "s": rng.normal(size=50),
                         "c": rng.choice(list("ab"), 50)})
    for sens in ("s", "c"):
        out = outlier_attribute_disclosure(real, real, public="p", sensitive=sens)
        assert out["n_pairs"] == 0 and np.isnan(out["statistic"])


def test_aliased_regression_terms_are_not_reported():
    """A constant predictor beside the intercept: its coefficient is not identified, so it gets
    NaN (and no CIO), as R's lm reports NA; the identified terms are unchanged."""
    from bayesynth.evaluation.regression import fit_regression

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": rng.normal(size=100), "x": rng.normal(size=100), "k": 3.0})
    with pytest.warns(RuntimeWarning, match="rank deficient"):
        table, _ = fit_regression(df, "y ~ x + k")
    plain, _ = fit_regression(df, "y ~ x")
    assert np.isnan(table.loc["k", "estimate"])
    assert table.loc["x", "estimate"] == pytest.approx(plain.loc["x", "estimate"])


def test_a_term_aliased_only_in_synthetic_data_leaves_the_others_as_without_it():
    """z equals x in the synthetic table: x's estimate and sd are those of y ~ x on the same
    standardised design (least squares with z kept would split x's effect over both)."""
    from bayesynth.evaluation.regression import fit_regression

    rng = np.random.default_rng(1)
    real = pd.DataFrame({"x": rng.normal(size=50), "z": rng.normal(size=50)})
    real["y"] = 1 + 2 * real["x"] + rng.normal(size=50)
    _, spec = fit_regression(real, "y ~ x + z")
    syn = real.assign(z=real["x"])
    with pytest.warns(RuntimeWarning, match="rank deficient"):
        table, _ = fit_regression(syn, "y ~ x + z", spec=spec, scale_from=real)
    _, spec_x = fit_regression(real, "y ~ x")
    alone, _ = fit_regression(syn, "y ~ x", spec=spec_x, scale_from=real)
    assert np.isnan(table.loc["z", "estimate"])
    assert table.loc["x", "estimate"] == pytest.approx(alone.loc["x", "estimate"], rel=1e-9)
    assert table.loc["x", "sd"] == pytest.approx(alone.loc["x", "sd"], rel=1e-9)


def test_a_regression_with_no_complete_record_is_nan_not_a_crash():
    from bayesynth.evaluation.regression import fit_regression

    rng = np.random.default_rng(2)
    real = pd.DataFrame({"x": rng.normal(size=40), "y": rng.normal(size=40)})
    _, spec = fit_regression(real, "y ~ x")
    with pytest.warns(RuntimeWarning, match="Only 0 complete records"):
        table, _ = fit_regression(real.assign(x=np.nan), "y ~ x", spec=spec, scale_from=real)
    assert table["estimate"].isna().all()


def test_quiet_synthesize_hides_which_moves_are_unused(tmp_path):
    rng = np.random.default_rng(0)
    src, out = tmp_path / "d.csv", tmp_path / "o.csv"
    pd.DataFrame({"a": rng.normal(size=60), "b": rng.choice(list("xyz"), 60)}).to_csv(
        src, index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["synthesize", str(src), "-o", str(out), "--draws", "10", "--tune", "10",
                     "--chains", "1", "--quiet", "--seed", "1"]) == 0
    assert not [w for w in caught if "is not used" in str(w.message)]


def test_a_column_mixing_booleans_and_numbers_is_refused():
    # Python counts True as 1: pandas would merge the two into one level without a word
    df = pd.DataFrame({"a": pd.Series([True, 1, "x", False, 0, "y"] * 20, dtype=object),
                       "b": np.random.default_rng(0).normal(size=120)})
    with pytest.raises(SchemaError, match="'a' mixes True/False with numbers"):
        infer_schema(df)
    ok = df.assign(a=df["a"].astype(str))
    assert set(infer_schema(ok)["a"].levels) == {"True", "1", "x", "False", "0", "y"}


def test_propensity_measures_skip_a_numeric_column_missing_in_both_tables():
    from bayesynth.evaluation import propensity_auc

    rng = np.random.default_rng(3)
    real = pd.DataFrame({"x": rng.normal(size=120), "m": rng.normal(size=120)})
    schema = infer_schema(real)  # m is continuous here
    assert schema["m"].type == "continuous"
    R, S = real.assign(m=np.nan), real.assign(x=rng.normal(size=120), m=np.nan)
    with_m = propensity_score_utility(R, S, schema=schema)
    without = propensity_score_utility(R[["x"]], S[["x"]], schema=schema)
    assert with_m.pmse == pytest.approx(without.pmse) and with_m.n_params == without.n_params
    assert propensity_auc(R, S, schema=schema, random_seed=0) == pytest.approx(
        propensity_auc(R[["x"]], S[["x"]], schema=schema, random_seed=0))


def test_level_shares_match_across_text_and_numbers():
    from bayesynth.evaluation import crosstab_comparison, tv_distance

    assert tv_distance(pd.Series([1, 2, 2]), pd.Series(["1", "2", "2"])) == 0.0
    assert tv_distance(pd.Series([1.0, np.nan]), pd.Series([1, None], dtype=object)) == 0.0
    real = pd.DataFrame({"a": [1, 2, 2, 1], "b": ["x", "y", "x", "y"]})
    _, worst = crosstab_comparison(real, real.assign(a=real["a"].astype(str)), ["a", "b"])
    assert worst == 0.0


def test_bad_run_lengths_and_a_wide_histogram_input_are_clear_errors():
    from bayesynth.errors import InvalidParameterError
    from bayesynth.synthesis import PerturbedHistogramSynthesizer, RankLikelihoodSynthesizer

    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.normal(size=50), "b": rng.normal(size=50)})
    model = bs.models.rank_probit_copula(df, n_factors=1)
    # tune=-1 raised KeyboardInterrupt, chains=0 ZeroDivisionError, draws=0 after tuning
    for kw, name in (({"tune": -1}, "tune"), ({"chains": 0}, "chains"), ({"draws": 0}, "draws")):
        with pytest.raises(InvalidParameterError, match=f"{name} must be an integer"):
            bs.sample(model, **{"draws": 10, "tune": 10, "chains": 1, **kw})
    with pytest.raises(InvalidParameterError, match="thin must be an integer"):
        RankLikelihoodSynthesizer(draws=10, tune=10, thin=0).fit(df)
    # the histogram releases one column: a second one was dropped without a word
    with pytest.raises(InvalidParameterError, match="releases one column; got 2"):
        PerturbedHistogramSynthesizer(epsilon=1.0, bounds=(-10, 10)).fit(df)
