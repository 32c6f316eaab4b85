"""CopulaSynthesizer: posterior-predictive synthesis, dtypes, missingness, persistence."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import ndtr

import bayesynth as bs
from bayesynth.errors import NotFittedError, SchemaError
from bayesynth.evaluation import ks_distance, tv_distance
from bayesynth.synthesis.copula import draw_latent


@pytest.fixture(scope="module")
def fitted():
    from tests.conftest import make_mixed

    df = make_mixed(n=400, seed=11, missing=True)
    before = df.copy(deep=True)
    syn = bs.CopulaSynthesizer(n_factors=3, draws=200, tune=200, chains=2, random_seed=5,
                               progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: R-hat warning
        syn.fit(df)
    pd.testing.assert_frame_equal(df, before)  # never modifies the caller's data
    return df, syn


def test_same_columns_dtypes_and_categories(fitted):
    df, syn = fitted
    out = syn.sample(m=2, random_seed=1)
    assert len(out) == 2
    for s in out:
        assert list(s.columns) == list(df.columns)
        assert s.shape == df.shape
        pd.testing.assert_series_equal(s.dtypes, df.dtypes)
        assert list(s["level"].cat.categories) == list(df["level"].cat.categories)
        assert s["level"].cat.ordered
        assert set(s["group"].dropna()) <= set(df["group"].dropna())
        assert set(s["flag"]) <= {0, 1}
        assert (s["visits"] >= 0).all() and (s["visits"] == s["visits"].round()).all()
    assert not out[0].equals(out[1])  # different posterior draws


def test_marginals_match(fitted):
    df, syn = fitted
    [s] = syn.sample(m=1, n_rows=4000, random_seed=2)
    n, m = df["visits"].notna().sum(), s["visits"].notna().sum()
    crit = 1.95 * np.sqrt((n + m) / (n * m))  # two-sample KS, alpha = 0.001
    for col in ("visits", "income"):
        assert ks_distance(df[col], s[col]) < crit, col
    for col in ("group", "level", "flag"):
        # total variation of a k-level table: generous 0.001-level multinomial bound
        k = df[col].nunique(dropna=False)
        assert tv_distance(df[col], s[col]) < 2.5 * np.sqrt(k / n), col
    # synthetic continuous values are smoothed, not copies of real ones: drawn from a smooth
    # density and rounded to the column's two decimals, a value meets one of the ~270 real
    # values by chance with probability about 270 * 0.01 / (range of incomes) < 1e-3
    assert df["income"].dropna().nunique() == df["income"].notna().sum()  # no point masses
    assert np.isin(s["income"].dropna(), df["income"].dropna()).mean() < 0.005
    lo, hi = df["income"].min(), df["income"].max()
    assert s["income"].min() >= lo and s["income"].max() <= hi


def test_missingness_rates_reproduced(fitted):
    df, syn = fitted
    [s] = syn.sample(m=1, n_rows=5000, random_seed=3)
    for col in ("income", "group"):
        p_real = df[col].isna().mean()
        se = np.sqrt(p_real * (1 - p_real) * (1 / len(df) + 1 / len(s)))
        assert abs(s[col].isna().mean() - p_real) < 4 * se, col
    assert s["flag"].notna().all() and s["visits"].notna().all()


def test_reproducible_and_seeded(fitted):
    _, syn = fitted
    a = syn.sample(m=2, random_seed=9)
    b = syn.sample(m=2, random_seed=9)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)
    c = syn.sample(m=1, random_seed=10)[0]
    assert not a[0].equals(c)


def test_model_mode_valid_and_empirical_needs_its_table(fitted):
    df, syn = fitted
    assert syn.categorical == "model" and syn.combos_ is None  # no real counts kept
    [s] = syn.sample(m=1, n_rows=500, random_seed=4)
    assert set(s["group"].dropna()) <= {"a", "b", "c"}
    assert s["level"].notna().all()
    syn.categorical = "empirical"
    try:
        with pytest.raises(SchemaError, match="fit with categorical='empirical'"):
            syn.sample(m=1)
    finally:
        syn.categorical = "model"


def test_save_load_round_trip(fitted, tmp_path):
    _, syn = fitted
    path = syn.save(tmp_path / "model")
    assert (path / "posterior.nc").exists() and (path / "synthesizer.json").exists()
    assert not list(tmp_path.glob(".*tmp"))  # no temporary left behind
    loaded = bs.CopulaSynthesizer.load(path)
    a = syn.sample(m=2, random_seed=7)
    b = loaded.sample(m=2, random_seed=7)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)
    syn.save(path)  # overwriting an existing save works
    with pytest.raises(SchemaError, match="not a saved"):
        bs.CopulaSynthesizer.load(tmp_path)


def test_marginal_group_reaches_the_marginals_and_is_saved(fitted, tmp_path):
    """``marginal_group`` is the ``group`` of every smooth marginal the synthesizer fits, and a
    saved synthesizer keeps it."""
    from bayesynth.synthesis.marginals import fit_marginal

    df, syn = fitted
    model = bs.models.rank_probit_copula(df, syn.schema_, n_factors=3)
    one = bs.CopulaSynthesizer.from_posterior(model, syn.idata_, marginal_group=1)
    x = df["income"].dropna().to_numpy(float)
    for group, s in ((None, syn), (1, one)):
        want = fit_marginal(x, continuous=True, decimals=2, group=group).to_dict()
        assert s.marginals_["income"].to_dict() == want, group
    assert one.marginals_["income"].to_dict() != syn.marginals_["income"].to_dict()
    back = bs.CopulaSynthesizer.load(one.save(tmp_path / "g1"))
    assert back.marginal_group == 1
    assert back.marginals_["income"].to_dict() == one.marginals_["income"].to_dict()
    with pytest.raises(bs.errors.InvalidParameterError, match="marginal_group"):
        bs.CopulaSynthesizer.from_posterior(model, syn.idata_, marginal_group=0)


def test_not_fitted_and_bad_arguments(fitted):
    with pytest.raises(NotFittedError, match="fit"):
        bs.CopulaSynthesizer().sample()
    with pytest.raises(bs.errors.InvalidParameterError, match="categorical"):
        bs.CopulaSynthesizer(categorical="joint").fit(fitted[0])
    with pytest.raises(ValueError, match="m must"):
        fitted[1].sample(m=0)


# ------------------------------------------------------------------ latent draws: exact answers


def _exact(alpha, lam, sig):
    x, w = hermegauss(120)
    w = w / w.sum()
    p = ndtr((alpha[:3, None] + lam[:3, None] * x) / sig[:3, None])  # (3, nodes)
    wh = np.array([p[h] * np.prod(np.delete(1 - p, h, axis=0), axis=0) for h in range(3)])
    mass = (wh * w).sum(1)
    return mass / mass.sum(), (wh * w * x).sum(1) / mass


@pytest.mark.parametrize("mode", ["model", "empirical"])
@pytest.mark.parametrize("max_tries", [2000, 0])
def test_draw_latent_against_quadrature(mode, max_tries, rng):
    """One 3-level variable, one factor: level probabilities and E[z_other | level] exactly,
    for the rejection sampler and for its Gibbs fallback (max_tries=0)."""
    alpha = np.array([0.3, -0.5, -1.0, 0.0])
    lam = np.array([1.0, -0.6, 0.4, 0.8])
    sig = np.array([0.6, 0.8, 0.5, 0.7])
    probs, eta_mean = _exact(alpha, lam, sig)
    n = 40_000
    codes = None
    if mode == "empirical":
        codes = rng.choice(3, size=(n, 1), p=probs)
    z, got = draw_latent(rng, alpha, lam[:, None], sig, [np.arange(3)], n, codes=codes,
                         max_tries=max_tries, n_sweeps=60)
    got = got[:, 0]
    # exactly one positive level column per record, and it is the reported level
    assert np.all((z[:, :3] > 0).sum(1) == 1)
    assert np.all(np.argmax(z[:, :3], axis=1) == got)
    freq = np.bincount(got, minlength=3) / n
    assert np.all(np.abs(freq - probs) < 4 * np.sqrt(probs * (1 - probs) / n)), (freq, probs)
    for h in range(3):
        zo = z[got == h, 3]
        expect = alpha[3] + lam[3] * eta_mean[h]
        assert abs(zo.mean() - expect) < 4.5 * zo.std() / np.sqrt(len(zo)), (h, zo.mean(),
                                                                             expect)


def test_draw_latent_keeps_the_copula_correlation_with_tight_levels(rng):
    """With level columns nearly determined by the factors (small sigma), the other columns
    must keep the model's correlation given a valid combination (a short Gibbs run from
    eta = 0 attenuates it). Reference: plain rejection from the unconstrained model."""
    lam = np.array([[1.5, 0.2], [-1.2, 0.9], [0.1, -1.4], [-0.3, -0.2],
                    [0.9, 0.5], [0.8, 0.6]])
    sig = np.array([0.15, 0.15, 0.15, 0.15, 0.4, 0.4])
    alpha = np.array([-0.5, -0.8, -0.9, -1.5, 0.0, 0.0])
    big = 600_000
    eta = rng.standard_normal((big, 2))
    zz = alpha + eta @ lam.T + sig * rng.standard_normal((big, 6))
    valid = (zz[:, :4] > 0).sum(axis=1) == 1
    ref = zz[valid]
    target = np.corrcoef(ref[:, 4], ref[:, 5])[0, 1]
    n = 30_000
    _, codes = draw_latent(rng, alpha, lam, sig, [np.arange(4)], n)
    z, _ = draw_latent(rng, alpha, lam, sig, [np.arange(4)], n, codes=codes)
    r = np.corrcoef(z[:, 4], z[:, 5])[0, 1]
    se = (1 - target**2) * np.sqrt(1 / n + 1 / len(ref))
    assert abs(r - target) < 5 * se, (r, target)
    np.testing.assert_allclose(z[:, 4].std(), ref[:, 4].std(), rtol=0.03)


def _survey(n: int = 500, seed: int = 5) -> pd.DataFrame:
    """Survey habits: a code for 'not applicable' tied to another column, heaped integer
    amounts with a refusal code, money with two decimals, a date."""
    r = np.random.default_rng(seed)
    age = r.integers(18, 90, n)
    smoke = np.where(r.random(n) < 0.25 + 0.002 * (60 - age), "YES", "NO")
    nociga = np.where(smoke == "YES", r.choice([5, 10, 15, 20, 30], n), -8)
    raw = np.exp(7.3 + 0.01 * (age - 50) + 0.4 * r.standard_normal(n))
    income = np.where(r.random(n) < 0.3, np.round(raw, -3), np.round(raw)).astype(np.int64)
    income[r.random(n) < 0.1] = -9
    money = np.round(r.gamma(2.0, 50.0, n), 2)
    return pd.DataFrame({
        "age": age, "smoke": smoke, "nociga": nociga, "income": income, "money": money,
        "yearly": np.round(money * 12, 2),  # derived: a formula of money
        "old": np.where(age >= 65, "yes", "no"),  # derived: fixed by rules on age
        "visit": pd.Timestamp("2021-01-01") + pd.to_timedelta(r.integers(0, 365, n), unit="D"),
    })


@pytest.fixture(scope="module")
def survey_fit():
    from bayesynth.rules import Rule

    df = _survey()
    schema = bs.infer_schema(df)
    rule = Rule("nociga", -8, (("smoke", ("NO",)),))
    assert rule in schema.suggested_rules  # found in the data, not applied
    old_rules = [Rule("old", "yes", (("age", tuple(range(65, 90))),)),
                 Rule("old", "no", (("age", tuple(range(18, 65))),))]
    schema = schema.with_rules([rule, *old_rules]).with_formulas({"yearly": "money * 12"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = bs.CopulaSynthesizer(schema, draws=150, tune=150, chains=1, random_seed=2,
                                   progressbar=False).fit(df)
    return df, schema, syn, syn.sample(m=3, random_seed=3)


def test_the_factory_leaves_out_what_synthesis_fills_and_from_posterior_fills_it(survey_fit):
    # The research loop (factory, sample, from_posterior) fits what CopulaSynthesizer fits:
    # a derived column and one that rules fix for every record are not modelled (fitting them
    # would count a deterministic relation as data), and synthesis fills them in.
    from bayesynth.errors import SchemaError
    from bayesynth.rules import Rule

    df, schema, syn, _ = survey_fit
    model = bs.models.rank_probit_copula(df, schema, n_factors=2)
    names = list(model.coords["latent"])
    assert names == syn.latent_names_
    assert "yearly" not in names and not any(c.startswith("old") for c in names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idata = bs.sample(model, draws=20, tune=20, chains=1, random_seed=1, progressbar=False,
                          check_convergence=False)
    out = bs.CopulaSynthesizer.from_posterior(model, idata).sample(m=1, random_seed=2)[0]
    assert list(out.columns) == list(df.columns)
    assert np.allclose(out["yearly"], (out["money"] * 12).round(2), atol=1e-9, rtol=0)
    assert ((out["age"] >= 65) == (out["old"] == "yes")).all()
    # a rule on a modelled column that reads a column left out is refused by the factory too
    bad = schema.with_rules([*schema.rules,
                             Rule("nociga", -8, (("old", ("yes",)), ("smoke", ("NO",))))])
    with pytest.raises(SchemaError, match="'old'"):
        bs.models.rank_probit_copula(df, bad, n_factors=2)


def test_special_codes_rules_integers_and_dates_survive(survey_fit):
    df, schema, syn, frames = survey_fit
    assert schema["nociga"].special_codes == (-8,) and schema["income"].special_codes == (-9,)
    assert "yearly" not in syn.latent_names_ and not any("old" in c for c in syn.latent_names_)
    for out in frames:
        # the stated rules hold in every synthetic record; derived columns follow their formula
        assert (out.loc[out["smoke"] == "NO", "nociga"] == -8).all()
        assert ((out["age"] >= 65) == (out["old"] == "yes")).all()
        assert np.allclose(out["yearly"], (out["money"] * 12).round(2), atol=1e-9, rtol=0)
        assert list(out.columns) == list(df.columns)
        # a discrete column never gets a value the real column does not have
        assert set(out["nociga"]) <= set(df["nociga"])
        # integer columns come back integer, with the real dtype
        assert out["income"].dtype == df["income"].dtype == np.int64
        assert out["age"].dtype == np.int64
        # codes are levels: reproduced, never smeared into neighbouring numbers
        assert -9 in set(out["income"]) and not set(out["income"]) & {-8, -7, -1}
        assert (out["income"].to_numpy() >= 0).sum() + (out["income"] == -9).sum() == len(out)
        # money keeps its two decimals; dates are dates inside the observed range
        assert np.allclose(out["money"], out["money"].round(2), atol=1e-9, rtol=0)
        assert out["visit"].dtype == df["visit"].dtype
        assert out["visit"].min() >= df["visit"].min()
        assert out["visit"].max() <= df["visit"].max()
    # the shares of codes and of heaped amounts follow the data (3 datasets of 500 records:
    # a share's sd is below sqrt(0.25 / 1500) = 0.013; a short chain adds its own error)
    allout = pd.concat(frames)
    for value in (-9,):
        assert abs((allout["income"] == value).mean() - (df["income"] == value).mean()) < 0.05
    assert abs((allout["nociga"] == -8).mean() - (df["nociga"] == -8).mean()) < 0.06
    heaped = lambda s: ((s > 0) & (s % 1000 == 0)).mean()  # noqa: E731
    assert abs(heaped(allout["income"]) - heaped(df["income"])) < 0.06


def test_survey_synthesizer_round_trip(survey_fit, tmp_path):
    df, schema, syn, frames = survey_fit
    syn.save(tmp_path / "m")
    back = bs.CopulaSynthesizer.load(tmp_path / "m")
    assert back.schema_.rules == schema.rules
    a, b = syn.sample(m=1, random_seed=9)[0], back.sample(m=1, random_seed=9)[0]
    pd.testing.assert_frame_equal(a, b)


def test_informative_missingness_keeps_the_observed_marginal():
    """y is missing exactly when x is high: the latent values of the records showing y are the
    low part of its latent law, so y must be decoded from ranks among the shown records."""
    r = np.random.default_rng(11)
    n = 800
    x = r.standard_normal(n)
    y = np.round(np.exp(x + 0.5 * r.standard_normal(n)), 3)
    df = pd.DataFrame({"x": np.round(x, 3), "y": np.where(x > 0.3, np.nan, y)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = bs.CopulaSynthesizer(n_factors=1, draws=150, tune=150, chains=1, random_seed=4,
                                   progressbar=False).fit(df)
    [s] = syn.sample(m=1, n_rows=4000, random_seed=5)
    assert syn.partial_columns_ == ["y"]
    real_y, syn_y = df["y"].dropna(), s["y"].dropna()
    n1, n2 = len(real_y), len(syn_y)
    crit = 1.95 * np.sqrt((n1 + n2) / (n1 * n2))  # two-sample KS, alpha = 0.001
    assert ks_distance(real_y, syn_y) < crit
    assert abs(s["y"].isna().mean() - df["y"].isna().mean()) < 0.06


def test_missingness_of_a_ruled_column_keeps_its_share_where_no_rule_applies():
    """y is missing (structurally) when g == "a", a rule; where g == "b" it is missing when x
    is low. g is "a" when x is high, so the indicator's latent values where no rule applies
    are not a sample of its law: its share must be read off ranks among those records."""
    from bayesynth.rules import Rule

    r = np.random.default_rng(12)
    n = 900
    x = r.standard_normal(n)
    g = np.where(x > 0.5, "a", "b")
    y = np.round(np.exp(0.5 * r.standard_normal(n)), 3)
    y = np.where((g == "a") | (x < -1.0), np.nan, y)
    df = pd.DataFrame({"x": np.round(x, 3), "g": g, "y": y})
    schema = bs.infer_schema(df, suggest=False).with_rules([Rule("y", None, (("g", ("a",)),))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = bs.CopulaSynthesizer(schema=schema, n_factors=1, draws=150, tune=150, chains=1,
                                   random_seed=4, progressbar=False).fit(df)
    [s] = syn.sample(m=1, n_rows=4000, random_seed=5)
    free_real, free_syn = df["g"] == "b", s["g"] == "b"
    p = df.loc[free_real, "y"].isna().mean()
    q = s.loc[free_syn, "y"].isna().mean()
    # both shares binomial: 5 standard errors of their difference
    se = np.sqrt(p * (1 - p) * (1 / free_real.sum() + 1 / free_syn.sum()))
    assert abs(q - p) < 5 * se
    assert s.loc[~free_syn, "y"].isna().all()  # the rule


def _height_weight(r: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Heights (cm) and weights (kg) that depend on them, to one decimal."""
    height = np.round(r.normal(170, 10, n), 1)
    return height, np.round(0.9 * (height - 170) + r.normal(70, 8, n), 1)


def _synthesize_with_rules(df: pd.DataFrame, rules: list) -> pd.DataFrame:
    """Fit a small copula under ``rules`` (its convergence judged) and draw 4,000 records."""
    schema = bs.infer_schema(df, suggest=False).with_rules(rules)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        syn = bs.CopulaSynthesizer(schema=schema, n_factors=1, draws=100, tune=100, chains=2,
                                   cores=1, random_seed=4, progressbar=False).fit(df)
    assert syn.convergence_table_ is not None
    [s] = syn.sample(m=1, n_rows=4000, random_seed=5)
    return s


def test_values_missing_together_stay_together_and_the_rest_keep_their_share():
    """weight is missing wherever height is (a rule on missing values) and, where height is
    shown, for 6% of the records: synthesis keeps both, and the fit judges the quantities
    with the rule applied (no quantity over records the rule empties)."""
    from bayesynth.rules import Rule

    r = np.random.default_rng(3)
    n = 800
    height, weight = _height_weight(r, n)
    sex = r.choice(["F", "M"], n)
    gone = r.random(n) < 0.07
    height[gone] = np.nan
    weight[gone | (r.random(n) < 0.06)] = np.nan
    df = pd.DataFrame({"height": height, "weight": weight, "sex": sex})
    rule = Rule("weight", None, (("height", (None,)),))
    s = _synthesize_with_rules(df, [rule])
    assert rule.broken(s)[1] == 0 and s["height"].isna().any()
    free_real, free_syn = df["height"].notna(), s["height"].notna()
    p = df.loc[free_real, "weight"].isna().mean()
    q = s.loc[free_syn, "weight"].isna().mean()
    se = np.sqrt(p * (1 - p) * (1 / free_real.sum() + 1 / free_syn.sum()))
    assert abs(q - p) < 5 * se


def test_rules_on_missing_values_in_a_cycle_are_both_kept():
    """height is missing exactly where weight is, stated both ways (weight missing if height
    is, height missing if weight is): a cycle of rules on missing values. Synthesis breaks
    neither and keeps the share of records missing both, and the fit's judgement runs."""
    from bayesynth.rules import Rule

    r = np.random.default_rng(11)
    n = 800
    height, weight = _height_weight(r, n)
    gone = r.random(n) < 0.08
    height[gone] = np.nan
    weight[gone] = np.nan
    df = pd.DataFrame({"height": height, "weight": weight, "sex": r.choice(["F", "M"], n)})
    rules = [Rule("weight", None, (("height", (None,)),)),
             Rule("height", None, (("weight", (None,)),))]
    s = _synthesize_with_rules(df, rules)
    for rule in rules:
        assert rule.broken(s)[1] == 0, rule
    p, q = gone.mean(), s["height"].isna().mean()
    se = np.sqrt(p * (1 - p) * (1 / n + 1 / len(s)))
    assert abs(q - p) < 5 * se, (p, q, se)


def test_from_posterior_synthesizes_the_posterior_you_sampled(tmp_path):
    import pymc as pm

    from bayesynth.errors import IncompatibleModelError

    df = bs.datasets.simulate_child_health(n=150, random_seed=8)[
        ["m_race", "male", "read", "mage", "ndi_birth"]]
    # a swapped prior: heavier-tailed intercepts
    model = bs.models.rank_probit_copula(df, n_factors=2, priors={
        "alpha": lambda name, dims: pm.StudentT(name, nu=4, mu=0, sigma=1, dims=dims)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(model, draws=40, tune=40, chains=1, random_seed=9, progressbar=False)
    syn = bs.CopulaSynthesizer.from_posterior(model, idata)
    assert syn.idata_ is idata  # that very posterior, no refit
    a = syn.sample(m=2, random_seed=3)
    assert a[0].shape == df.shape and list(a[0].columns) == list(df.columns)
    pd.testing.assert_series_equal(a[0].dtypes, df.dtypes)
    syn.save(tmp_path / "s")
    back = bs.CopulaSynthesizer.load(tmp_path / "s")
    b = back.sample(m=2, random_seed=3)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)
    with pytest.raises(IncompatibleModelError, match="rank_probit_copula"):
        bs.CopulaSynthesizer.from_posterior(pm.Model(), idata)
    with pytest.raises(IncompatibleModelError, match="lacks"):
        bs.CopulaSynthesizer.from_posterior(model, idata.posterior.drop_vars("Lambda"))


@pytest.mark.parametrize("margins", ["data", "model"])
def test_convergence_is_checked_with_the_synthesizers_categorical_margins(margins):
    from bayesynth.evaluation import copula_diagnostics

    df = bs.datasets.simulate_child_health(n=120, random_seed=3)
    syn = bs.CopulaSynthesizer(categorical_margins=margins, draws=5, tune=5, chains=2, cores=1,
                               random_seed=1, progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 5 draws: not converged
        syn.fit(df)
    # the table the fit judged is the synthesizer's own margins' (calibrated margins leave
    # the level probabilities of the calibrated variables out), computed once
    kept = syn.convergence_table_
    pd.testing.assert_frame_equal(kept, copula_diagnostics(syn.idata_,
                                                           categorical_margins=margins))
    levels = (kept["kind"] == "level probability").sum()
    assert (levels == 0) if margins == "data" else (levels > 0)
    with pytest.raises(ValueError, match="categorical_margins"):
        bs.sample(bs.models.rank_probit_copula(df, n_factors=2), draws=5, tune=5,
                  categorical_margins="both", progressbar=False)


def _quick(schema, categorical="model", n_factors=1):
    return bs.CopulaSynthesizer(schema, n_factors=n_factors, categorical=categorical, draws=30,
                                tune=30, chains=1, cores=1, max_extensions=0, random_seed=1,
                                progressbar=False)


def test_empirical_mode_leaves_a_block_free_where_the_real_record_shows_no_level():
    """Real records whose block has no level (fixed by a rule on a count, or missing in a
    column with special codes) gave combinations with code -1: decoded as a missing value
    (37 of 150 records of a column without any) and a special code's share read too low
    (0.20 for 0.27). The block is now drawn from the model for those combinations."""
    from bayesynth.rules import Rule

    rng = np.random.default_rng(2)
    n = 150
    kids = rng.choice([0, 1, 2, 3], n, p=[0.4, 0.3, 0.2, 0.1])
    care = np.where(kids == 0, "none", rng.choice(["nursery", "family", "none"], n))
    df = pd.DataFrame({"kids": kids, "care": care, "inc": rng.normal(50, 10, n).round(1)})
    schema = bs.infer_schema(df, suggest=False).with_rules(
        [Rule("care", "none", (("kids", (0,)),))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        syn = _quick(schema, "empirical", 2).fit(df)
    assert (syn.combos_ < 0).any()
    out = pd.concat(syn.sample(m=3, random_seed=2))
    assert out["care"].notna().all()
    assert not ((out["kids"] == 0) & (out["care"] != "none")).any()
    # special code -8 on 27% and missing on 21.5% of a count column
    rng = np.random.default_rng(5)
    n = 200
    v = rng.integers(0, 30, n).astype(float)
    r = rng.random(n)
    v[r < 0.25] = -8
    v[(r >= 0.25) & (r < 0.45)] = np.nan
    df = pd.DataFrame({"hrs": v, "g": rng.choice(["a", "b"], n)})
    schema = bs.infer_schema(df, suggest=False)
    assert -8 in schema["hrs"].special_codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        syn = _quick(schema, "empirical").fit(df)
    out = pd.concat(syn.sample(m=10, random_seed=2))
    share, real = float((out["hrs"] == -8).mean()), float((df["hrs"] == -8).mean())
    # 2000 synthetic records: binomial sd of the share about 0.01, plus the real sample's
    assert abs(share - real) < 4 * np.sqrt(real * (1 - real) * (1 / len(out) + 1 / n))


def test_a_column_of_one_special_code_outside_its_rule_keeps_that_code():
    """Non-smokers are -8 by rule and every smoker is -9: no code block is needed, and the
    value part used to be a placeholder 0 that no block overrode."""
    import dataclasses

    from bayesynth.rules import Rule
    from bayesynth.schema import Schema

    rng = np.random.default_rng(3)
    smoke = rng.choice(["YES", "NO"], 120)
    df = pd.DataFrame({"smoke": smoke, "nociga": np.where(smoke == "NO", -8, -9),
                       "x": rng.normal(size=120).round(2)})
    base = bs.infer_schema(df, suggest=False)
    cols = [base[c] for c in base.names]
    cols[1] = dataclasses.replace(cols[1], type="count", levels=None, special_codes=(-9, -8),
                                  integer=True, decimals=0)
    schema = Schema(cols, [Rule("nociga", -8, (("smoke", ("NO",)),))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _quick(schema).fit(df).sample(random_seed=2)[0]
    assert set(out["nociga"]) <= {-8, -9}
    assert (out.loc[out["smoke"] == "YES", "nociga"] == -9).all()


def test_a_level_spelled_like_the_missing_label_is_refused():
    df = pd.DataFrame({"a": ["<NA>", "yes", "no"] * 20,
                       "x": np.random.default_rng(0).normal(size=60)})
    with pytest.raises(SchemaError, match="'a'.*rename"):
        _quick(bs.infer_schema(df, suggest=False)).fit(df)
