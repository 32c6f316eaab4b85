"""One protocol for every synthesizer: fit, from_posterior, sample, save and load.

Every method is fitted once on tiny data (short chains); each test then checks one promise of
the protocol for every method: reproducible samples, a saved directory that loads back as the
right class and samples the same datasets, from_posterior synthesizing from the posterior it is
given, the shared validation errors, and the shared choice of posterior draws.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytest

import bayesynth as bs
from bayesynth.errors import (
    IncompatibleModelError,
    InvalidParameterError,
    NoPosteriorError,
    NotFittedError,
    PrivacyWarning,
    SchemaError,
)
from bayesynth.models.pseudo_posterior import beta_mixture
from bayesynth.privacy import privatize_marginals
from bayesynth.synthesis import (
    CartSynthesizer,
    CopulaSynthesizer,
    LatentClassSynthesizer,
    PerturbedHistogramSynthesizer,
    PseudoPosteriorSynthesizer,
    RankLikelihoodSynthesizer,
    SaturatedCountSynthesizer,
    Synthesizer,
    select_draws,
)
from bayesynth.synthesis.base import check_sample_args, draw_positions
from tests.conftest import make_mixed

FIT_SEED = 11
BETA = {"n_components": 1}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # seeded DP releases are intended here
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: R-hat warnings
        warnings.simplefilter("ignore", UserWarning)
        yield


@dataclass
class Case:
    """A fitted synthesizer, the rows to ask for, and the model/posterior it came from."""

    syn: Synthesizer
    n_rows: int | None
    data: Any = None
    model: Any = None


def _copula() -> Case:
    df = make_mixed(n=60, seed=3, missing=True)
    schema = bs.infer_schema(df, suggest=False)
    syn = CopulaSynthesizer(schema, n_factors=2, draws=15, tune=15, chains=2,
                            random_seed=FIT_SEED, progressbar=False).fit(df)
    model = bs.models.rank_probit_copula(df, schema, n_factors=2)
    return Case(syn, 25, df, model)


def _pseudo() -> Case:
    x = pd.DataFrame({"x": np.random.default_rng(5).beta(0.5, 3, 40)})
    syn = PseudoPosteriorSynthesizer(beta_mixture, mechanism="censor_uw", epsilon=4.0,
                                     draws=30, tune=30, chains=2, max_extensions=0,
                                     random_seed=FIT_SEED, factory_kwargs=BETA).fit(x)
    return Case(syn, 15, x, syn.model_)


def _histogram() -> Case:
    x = pd.DataFrame({"x": np.random.default_rng(6).beta(2, 5, 80)})
    return Case(PerturbedHistogramSynthesizer(3.0, bins=8, random_seed=FIT_SEED).fit(x), 20, x)


def _saturated() -> Case:
    r = np.random.default_rng(7)
    df = pd.DataFrame({"area": r.choice(["n", "s", "e"], 120), "age": r.integers(0, 4, 120),
                       "sex": pd.Categorical(r.choice(["f", "m"], 120))})
    syn = SaturatedCountSynthesizer(family="nbi", sigma=0.5, alpha=0.2,
                                    structural=[{"age": [0], "sex": ["m"]}])
    df = df[~((df["age"] == 0) & (df["sex"] == "m"))]
    return Case(syn.fit(df), None, df)


def _latent_class() -> Case:
    r = np.random.default_rng(8)
    a = r.integers(0, 2, 150)
    df = pd.DataFrame({"a": a, "b": np.where(a == 1, r.choice(["x", "y"], 150, p=[0.8, 0.2]),
                                             r.choice(["x", "y", "z"], 150)),
                       "c": r.integers(0, 2, 150)})
    domain = {"a": [0, 1], "b": ["x", "y", "z"], "c": [0, 1]}
    release = privatize_marginals(df, "all2", 4.0, domain=domain, random_seed=FIT_SEED)
    syn = LatentClassSynthesizer(k=3, draws=30, tune=20, chains=1, random_seed=FIT_SEED)
    return Case(syn.fit(release), 40, release, syn.model_)


def _rank_likelihood() -> Case:
    df = make_mixed(n=60, seed=4, missing=True)
    return Case(RankLikelihoodSynthesizer(draws=10, tune=10, random_seed=FIT_SEED).fit(df), 30,
                df)


def _cart() -> Case:
    df = make_mixed(n=80, seed=5, missing=True)
    return Case(CartSynthesizer(random_seed=FIT_SEED).fit(df), 30, df)


BUILDERS = {"copula": _copula, "pseudo_posterior": _pseudo, "saturated": _saturated,
            "latent_class": _latent_class, "rank_likelihood": _rank_likelihood,
            "cart": _cart, "perturbed_histogram": _histogram}
BAYESIAN = ["copula", "pseudo_posterior", "latent_class"]


@pytest.fixture(scope="module")
def fitted():
    cache: dict[str, Case] = {}

    def get(name: str) -> Case:
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = BUILDERS[name]()
        return cache[name]

    return get


def assert_same(a: list[pd.DataFrame], b: list[pd.DataFrame]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)


def differ(a: list[pd.DataFrame], b: list[pd.DataFrame]) -> bool:
    return any(not x.equals(y) for x, y in zip(a, b))


# ------------------------------------------------------------------------------ round trip


@pytest.mark.parametrize("name", list(BUILDERS))
def test_round_trip_fit_sample_save_load(name, fitted, tmp_path, seed):
    case = fitted(name)
    syn = case.syn
    a = syn.sample(m=2, n_rows=case.n_rows, random_seed=seed)
    assert isinstance(a, list) and len(a) == 2
    assert all(isinstance(x, pd.DataFrame) and len(x) > 0 for x in a)
    if case.n_rows is not None:
        assert all(len(x) == case.n_rows for x in a)
    assert_same(a, syn.sample(m=2, n_rows=case.n_rows, random_seed=seed))  # reproducible
    assert differ(a, syn.sample(m=2, n_rows=case.n_rows, random_seed=seed + 1))
    assert differ(a[:1], a[1:])  # two datasets, not one twice

    path = syn.save(tmp_path / "saved")
    files = sorted(p.name for p in path.iterdir())
    assert "meta.json" in files
    assert all(f.endswith((".json", ".nc")) for f in files), files  # no pickle
    assert not list(tmp_path.glob(".*"))  # no temporary directory left behind
    meta = json.loads((path / "meta.json").read_text())
    assert meta["class"] == type(syn).__name__
    assert meta["format"] == "bayesynth-synthesizer" and meta["format_version"] >= 1
    assert meta["bayesynth_version"] == bs.__version__ and isinstance(meta["params"], dict)

    back = Synthesizer.load(path)
    assert type(back) is type(syn)
    assert_same(a, back.sample(m=2, n_rows=case.n_rows, random_seed=seed))
    assert_same(a, type(syn).load(path).sample(m=2, n_rows=case.n_rows, random_seed=seed))
    if not isinstance(syn, SaturatedCountSynthesizer):  # its size is drawn, never given
        assert_same(syn.sample(m=1, random_seed=seed), back.sample(m=1, random_seed=seed))
    back.save(path)  # a loaded synthesizer saves again, over the old directory
    assert_same(a, Synthesizer.load(path).sample(m=2, n_rows=case.n_rows, random_seed=seed))


# ------------------------------------------------------------------------------ from_posterior


def _from_posterior(name: str, case: Case, idata) -> Synthesizer:
    if name == "pseudo_posterior":
        return PseudoPosteriorSynthesizer.from_posterior(case.model, idata, factory=beta_mixture,
                                                         factory_kwargs=BETA)
    return type(case.syn).from_posterior(case.model, idata)


@pytest.mark.parametrize("name", BAYESIAN)
def test_from_posterior_of_the_fit_gives_the_fit_output(name, fitted, seed):
    case = fitted(name)
    syn = _from_posterior(name, case, case.syn.idata_)
    assert syn.idata_ is case.syn.idata_  # that very posterior, no refit
    assert_same(case.syn.sample(m=2, n_rows=case.n_rows, random_seed=seed),
                syn.sample(m=2, n_rows=case.n_rows, random_seed=seed))


@pytest.mark.parametrize("name", BAYESIAN)
def test_from_posterior_of_a_posterior_you_sampled(name, fitted, seed, tmp_path):
    case = fitted(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bs.sample(case.model, draws=12, tune=12, chains=1, random_seed=seed,
                          progressbar=False)
    syn = _from_posterior(name, case, idata)
    assert syn.idata_ is idata
    a = syn.sample(m=2, n_rows=case.n_rows, random_seed=seed)
    assert differ(a, case.syn.sample(m=2, n_rows=case.n_rows, random_seed=seed))
    back = Synthesizer.load(syn.save(tmp_path / "s"))
    assert_same(a, back.sample(m=2, n_rows=case.n_rows, random_seed=seed))
    with pytest.raises(IncompatibleModelError):
        type(case.syn).from_posterior(pm.Model(), idata)  # not the model of this method


def test_latent_class_synthesis_follows_the_posterior_it_is_given(fitted, seed):
    case = fitted("latent_class")
    idata = case.syn.idata_.copy()
    psi = idata.posterior["psi_a"].values
    psi[..., 0], psi[..., 1] = 0.0, 1.0  # every class has a = 1 in every draw
    idata.posterior["psi_a"] = (idata.posterior["psi_a"].dims, psi)
    out = LatentClassSynthesizer.from_posterior(case.model, idata).sample(m=3, n_rows=50,
                                                                          random_seed=seed)
    assert all((x["a"] == 1).all() for x in out)
    assert any((x["a"] == 0).any() for x in case.syn.sample(m=3, n_rows=50, random_seed=seed))


def test_pseudo_posterior_synthesis_follows_the_posterior_it_is_given(fitted, seed,
                                                                      tmp_path):
    case = fitted("pseudo_posterior")
    idata = case.syn.idata_.copy()
    for var, value in (("log_a", np.log(1.0)), ("log_b", np.log(9.0))):  # Beta(1, 9): mean 0.1
        idata.posterior[var] = xr_full(idata.posterior[var], value)
    syn = PseudoPosteriorSynthesizer.from_posterior(case.model, idata)
    x = np.concatenate([d["x"].to_numpy() for d in syn.sample(m=10, random_seed=seed)])
    assert len(x) == 400
    assert abs(x.mean() - 0.1) < 4 * np.sqrt(0.1 * 0.9 / 11 / len(x))  # Beta(1, 9) sd
    fit_x = np.concatenate([d["x"].to_numpy() for d in case.syn.sample(m=10,
                                                                        random_seed=seed)])
    assert abs(fit_x.mean() - 0.1) > 4 * np.sqrt(0.1 * 0.9 / 11 / len(x))
    assert syn.mechanism == "censor_uw" and syn.guarantee_.epsilon == pytest.approx(4.0)
    assert syn.guarantee_.guarantee == "strict"
    with pytest.raises(InvalidParameterError, match="factory"):
        syn.save(tmp_path / "never_written")  # no factory: the model cannot be rebuilt on load


def xr_full(da, value):
    return da.copy(data=np.full(da.shape, value))


def test_pseudo_posterior_with_a_user_factory_loads_only_when_it_is_passed(fitted, tmp_path,
                                                                         seed):
    case = fitted("pseudo_posterior")

    def my_model(data, weights=None, censor=None, **kw):
        return beta_mixture(data, weights, censor, **kw)

    syn = PseudoPosteriorSynthesizer.from_posterior(case.model, case.syn.idata_,
                                                    factory=my_model, factory_kwargs=BETA)
    path = syn.save(tmp_path / "u")
    with pytest.raises(InvalidParameterError, match="factory="):
        Synthesizer.load(path)
    back = Synthesizer.load(path, factory=my_model)
    assert_same(syn.sample(m=2, random_seed=seed), back.sample(m=2, random_seed=seed))
    assert len(back.ledger_.entries) == len(syn.ledger_.entries)  # the ledger is kept


@pytest.mark.parametrize("name,why", [("cart", "not a Bayesian model"),
                                      ("rank_likelihood", "not from a PyMC model"),
                                      ("saturated", "no parameters to infer"),
                                      ("perturbed_histogram", "not a Bayesian model")])
def test_from_posterior_refused_where_there_is_no_posterior(name, why, fitted):
    cls = type(fitted(name).syn)
    with pytest.raises(NoPosteriorError, match=why) as err:
        cls.from_posterior(None, None)
    assert isinstance(err.value, NotImplementedError)


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize("name", list(BUILDERS))
def test_sample_validation_names_the_parameter_and_range(name, fitted):
    syn = fitted(name).syn
    with pytest.raises(InvalidParameterError, match=r"m must be an integer >= 1.*got 0") as e:
        syn.sample(m=0)
    assert e.value.column == "m" and isinstance(e.value, ValueError)
    with pytest.raises(InvalidParameterError, match=r"n_rows must be .*integer >= 1.*got -1"):
        syn.sample(m=1, n_rows=-1)
    with pytest.raises(InvalidParameterError, match=r"m must be .*got 1\.5"):
        syn.sample(m=1.5)
    with pytest.raises(InvalidParameterError, match=r"random_seed must be .*>= 0.*got -3"):
        syn.sample(m=1, random_seed=-3)
    with pytest.raises(NotFittedError, match="fit"):
        type(syn).__new__(type(syn)).sample()


def test_method_specific_limits(fitted):
    with pytest.raises(InvalidParameterError, match="n_rows must be None for saturated"):
        fitted("saturated").syn.sample(m=1, n_rows=5)
    lc = fitted("latent_class").syn
    with pytest.raises(InvalidParameterError, match="m = 31 datasets need 31 distinct"):
        lc.sample(m=31)
    with pytest.raises(SchemaError, match="m must be between"):  # the old entry point
        bs.synthesis.synthesize_latent_class(lc.idata_, m=31)


# ------------------------------------------------------------------------------ load errors


def test_load_dispatch_and_refusals(fitted, tmp_path):
    cart = fitted("cart").syn.save(tmp_path / "cart")
    with pytest.raises(SchemaError, match="holds a CartSynthesizer, not a CopulaSynthesizer"):
        CopulaSynthesizer.load(cart)
    with pytest.raises(SchemaError, match="not a saved synthesizer"):
        Synthesizer.load(tmp_path / "nothing")
    with pytest.raises(InvalidParameterError, match="takes no keyword 'factory'"):
        Synthesizer.load(cart, factory=beta_mixture)
    meta = json.loads((cart / "meta.json").read_text())
    (cart / "meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(SchemaError, match="Upgrade bayesynth"):
        Synthesizer.load(cart)
    (cart / "meta.json").write_text(json.dumps({**meta, "class": "EvilSynthesizer",
                                                "module": "os"}))
    with pytest.raises(SchemaError, match="not defined"):
        Synthesizer.load(cart)


def test_damaged_or_mismatched_saved_files_are_clear_errors(fitted, tmp_path):
    """A posterior from another fit loaded fine and failed at sample (IndexError); an edited
    synthesizer.json gave a raw JSONDecodeError."""
    import shutil

    cop = fitted("copula").syn.save(tmp_path / "cop")
    other = tmp_path / "other"
    shutil.copytree(cop, other)
    idata = az.from_dict(posterior={"Lambda": np.zeros((1, 2, 3, 1))})
    (other / "posterior.nc").unlink()
    idata.to_netcdf(str(other / "posterior.nc"), engine="h5netcdf")
    with pytest.raises(SchemaError, match="does not belong to this synthesizer"):
        CopulaSynthesizer.load(other)
    (other / "synthesizer.json").write_text("{ not json")
    with pytest.raises(SchemaError, match="could not be read as a CopulaSynthesizer"):
        Synthesizer.load(other)


def test_copula_directory_saved_before_meta_json_still_loads(fitted, tmp_path, seed):
    syn = fitted("copula").syn
    path = syn.save(tmp_path / "old")
    (path / "meta.json").unlink()  # the layout before the shared protocol
    back = Synthesizer.load(path)
    assert isinstance(back, CopulaSynthesizer)
    assert_same(syn.sample(m=1, random_seed=seed), back.sample(m=1, random_seed=seed))


def test_saturated_table_output_and_sample_tables(fitted, tmp_path, seed):
    syn = fitted("saturated").syn
    tables = syn.sample_tables(m=2, random_seed=seed)
    table = SaturatedCountSynthesizer(family="nbi", sigma=0.5, alpha=0.2, output="table").fit(
        syn.table_)
    frames = table.sample(m=2, random_seed=seed)
    for t, f in zip(tables, frames):
        assert f["count"].sum() == t.n_records
        assert not ((f["age"] == 0) & (f["sex"] == "m")).any()  # structural zeros stay zero
    back = Synthesizer.load(table.save(tmp_path / "t"))
    assert_same(frames, back.sample(m=2, random_seed=seed))


# ------------------------------------------------------------------------------ shared pieces


def test_select_draws_is_reproducible_distinct_and_explicit(seed):
    S = 12
    a = select_draws(S, 5, seed)
    np.testing.assert_array_equal(a, select_draws(S, 5, seed))
    assert len(set(a)) == 5 and a.min() >= 0 and a.max() < S
    assert sorted(select_draws(S, S, seed)) == list(range(S))  # m = S: every draw once
    many = select_draws(S, 30, seed)
    assert set(many) <= set(range(S)) and len(many) == 30  # repeats only beyond S
    with pytest.raises(InvalidParameterError, match="13 distinct posterior draws"):
        select_draws(S, 13, seed, distinct="required")
    np.testing.assert_array_equal(select_draws(S, 4, spacing="even"), [0, 4, 7, 11])
    # the copula's own choice, rng.choice(S, m, replace=m > S), from the same generator
    np.testing.assert_array_equal(a, np.random.default_rng(seed).choice(S, 5, replace=False))


def test_draw_positions_follow_the_stacked_order(fitted):
    idata = fitted("copula").syn.idata_
    post = idata.posterior
    picks = select_draws(idata, 6, 3)
    pos = draw_positions(idata, picks)
    stacked = post["sigma"].stack(sample=("chain", "draw")).transpose("sample", ...).values
    for s, (c, d) in zip(picks, pos):
        np.testing.assert_array_equal(stacked[s], post["sigma"].values[c, d])


def test_check_sample_args_accepts_the_usual_seeds():
    assert check_sample_args(3, 10, np.random.default_rng(1)) == (3, 10)
    assert check_sample_args(np.int64(2), None, np.random.SeedSequence(4)) == (2, None)
    with pytest.raises(InvalidParameterError, match="m must"):
        check_sample_args(True)


def test_cart_tree_arrays_route_records_as_sklearn_does(rng):
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    from bayesynth.synthesis.baselines import _Tree

    X = rng.normal(size=(300, 3)).round(3)
    X[rng.random(300) < 0.15, 1] = np.nan
    y = X[:, 0] + np.nan_to_num(X[:, 1]) + 0.1 * rng.normal(size=300)
    new = rng.normal(size=(500, 3))
    new[rng.random(500) < 0.2, 0] = np.nan  # missing where training had none
    new[rng.random(500) < 0.2, 1] = np.nan
    new[:50] = X[:50]  # values exactly at thresholds' neighbours
    for tree in (DecisionTreeRegressor(min_samples_leaf=5, random_state=0).fit(X, y),
                 DecisionTreeClassifier(min_samples_leaf=5, random_state=0).fit(X, y > 0)):
        arrays = _Tree.from_sklearn(tree)
        np.testing.assert_array_equal(arrays.apply(X), tree.apply(X))
        np.testing.assert_array_equal(arrays.apply(new), tree.apply(new))
