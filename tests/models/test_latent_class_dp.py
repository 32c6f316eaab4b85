"""The latent class model for private counts: selection behaviour, count moves, posterior.

The mechanisms themselves (noise laws, exact losses, budget accounting) are tested in
tests/privacy/.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

import bayesynth as bs
from bayesynth.errors import DataValidationError, PrivacyWarning, SchemaError
from bayesynth.evaluation import combine_marginal_estimates
from bayesynth.models import latent_class_dp_model
from bayesynth.privacy import (
    NoisyMarginal,
    privatize_marginals,
    select_marginals,
    true_marginal,
)
from bayesynth.samplers.latent_class import TrueCountsMetropolis, count_moves
from bayesynth.synthesis import (
    full_table_probabilities,
    marginal_probabilities,
    probability_summary,
    synthesize_latent_class,
)


def binary_data(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.4
    b = np.where(a, rng.random(n) < 0.8, rng.random(n) < 0.3)
    c = np.where(b, rng.random(n) < 0.6, rng.random(n) < 0.2)
    d = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])  # a three-level variable
    return pd.DataFrame({"a": a.astype(int), "b": b.astype(int), "c": c.astype(int), "d": d})


DOMAIN = {"a": [0, 1], "b": [0, 1], "c": [0, 1], "d": [0, 1, 2]}


@pytest.fixture(autouse=True)
def _seeded_releases_are_intended():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


# ------------------------------------------------------------------------------ the selection


def test_selection_picks_the_strong_dependence_and_degree_two_gives_2p_minus_3_pairs():
    rng = np.random.default_rng(0)
    n = 5000
    x = {f"x{j}": rng.integers(0, 2, n) for j in range(6)}
    x["x1"] = np.where(rng.random(n) < 0.95, x["x0"], 1 - x["x0"])  # x0 - x1 strongly tied
    df = pd.DataFrame(x)
    dom = {c: [0, 1] for c in df}
    sel = select_marginals(df, 50.0, degree=1, domain=dom, random_seed=1)
    assert len(sel["pairs"]) == 5
    assert any(set(p) == {"x0", "x1"} for p in sel["pairs"])
    sel2 = select_marginals(df, 50.0, degree=2, domain=dom, random_seed=1)
    assert len(sel2["pairs"]) == 2 * 6 - 3


def test_bad_model_input_is_named():
    df = binary_data(100, 0)
    rel = privatize_marginals(df, "all2", 1.0, domain=DOMAIN, random_seed=0)
    bad = NoisyMarginal(("a", "b"), np.zeros((3, 2), dtype=int), 0.5)
    with pytest.raises(DataValidationError, match="shape"):
        latent_class_dp_model([bad], domain=rel.domain, n=100)
    with pytest.raises(SchemaError, match="domain and n"):
        latent_class_dp_model(rel.tables)


# ---------------------------------------------------------------------------- the count moves


def test_count_moves_have_the_exact_conditional_as_stationary_law():
    """Three cells, n = 6: enumerate Multinomial(M | n, P) x geometric(noisy - M) exactly and
    compare with the empirical law of a long run of the compiled kernel."""
    P = np.array([0.5, 0.3, 0.2])
    noisy = np.array([4, -1, 3])
    log_q = -0.7
    n = 6
    states = [s for s in itertools.product(range(n + 1), repeat=3) if sum(s) == n]
    logp = np.array([stats.multinomial.logpmf(s, n, P) + log_q * np.abs(noisy - s).sum()
                     for s in states])
    exact = np.exp(logp - logp.max())
    exact /= exact.sum()
    rng = np.random.default_rng(5)
    M = np.array([2, 2, 2], dtype=np.int64)
    counts = dict.fromkeys(states, 0)
    for _ in range(40_000):
        r = 3
        a = rng.integers(0, 3, r)
        b = (a + 1 + rng.integers(0, 2, r)) % 3
        count_moves(M, np.log(P), noisy, log_q, a, b, rng.integers(1, 3, r),
                    np.log(rng.random(r)))
        assert M.sum() == n and M.min() >= 0
        counts[tuple(M)] += 1
    observed = np.array([counts[s] for s in states])
    # thinning-free chain: a chi-square with a generous effective-size correction (x4)
    chi = ((observed - exact * observed.sum()) ** 2 / (exact * observed.sum())).sum() / 4
    assert stats.chi2.sf(chi, len(states) - 1) > 1e-3
    assert np.abs(observed / observed.sum() - exact).max() < 0.02


# ------------------------------------------------------------------------ posterior behaviour


@pytest.fixture(scope="module")
def big_epsilon_fit():
    df = binary_data(3000, 2)
    rel = privatize_marginals(df, "all2", 1e4, domain=DOMAIN, random_seed=4)
    model = latent_class_dp_model(rel, k=6)
    idata = bs.sample(model, draws=400, tune=300, chains=2, random_seed=5, progressbar=False)
    return df, rel, model, idata


def test_totals_of_true_counts_always_equal_n(big_epsilon_fit):
    df, rel, _, idata = big_epsilon_fit
    for i in range(len(rel.tables)):
        totals = idata.posterior[f"M_t{i}"].sum(f"cell_t{i}").values
        assert np.all(totals == len(df))


def test_with_a_huge_epsilon_the_posterior_concentrates_on_the_true_marginals(big_epsilon_fit):
    df, rel, _, idata = big_epsilon_fit
    for i, t in enumerate(rel.tables):
        truth = true_marginal(df, t.variables, rel.domain).reshape(-1)
        M = idata.posterior[f"M_t{i}"].values.reshape(-1, truth.size)
        assert np.mean(np.all(M == truth, axis=1)) > 0.95  # noise ~ 0 at epsilon 1e4
        P = idata.posterior[f"P_t{i}"].mean(("chain", "draw")).values
        # the composite posterior sd of a cell probability is below sqrt(p(1-p)/n)
        tol = 4 * np.sqrt(truth / len(df) * (1 - truth / len(df)) / len(df)) + 1e-3
        assert np.all(np.abs(P - truth / len(df)) < tol)
    assert "pi" in idata.posterior and "cell_prob" in idata.posterior


def test_outputs_marginals_full_table_synthesis_and_combining(big_epsilon_fit):
    df, rel, _, idata = big_epsilon_fit
    ab = marginal_probabilities(idata, ["a", "b"])
    assert ab.dims == ("chain", "draw", "a", "b")
    np.testing.assert_allclose(ab.sum(("a", "b")).values, 1.0, rtol=1e-10)
    full = full_table_probabilities(idata)
    np.testing.assert_allclose(full.sum(["b", "c", "d"]).values,
                               marginal_probabilities(idata, ["a"]).values, rtol=1e-10)
    np.testing.assert_allclose(
        idata.posterior["P_t0"].values.reshape(ab.shape), ab.values, rtol=1e-10)
    # variable order is the caller's, whatever letters einsum would have used
    np.testing.assert_allclose(marginal_probabilities(idata, ["b", "a"]).values,
                               ab.values.transpose(0, 1, 3, 2), rtol=1e-12)
    truth = true_marginal(df, ["a", "b"], rel.domain) / len(df)
    summ = probability_summary(ab, truth=truth)
    assert list(summ.columns) == ["mean", "sd", "lower", "upper", "truth", "covered"]
    assert summ["covered"].all()
    syn = synthesize_latent_class(idata, m=5, random_seed=1)
    assert len(syn) == 5 and all(len(s) == len(df) for s in syn)
    assert list(syn[0]["d"].cat.categories) == [0, 1, 2]
    again = synthesize_latent_class(idata, m=5, random_seed=1, ledger=rel.ledger)
    pd.testing.assert_frame_equal(syn[3], again[3])
    # synthesis is post-processing: recorded, at no cost
    assert rel.ledger.entries[-1].epsilon == 0 and rel.ledger.total_epsilon == pytest.approx(1e4)
    comb = combine_marginal_estimates(syn, ["a", "b"])
    assert np.all(np.abs(comb["estimate"].to_numpy() - truth.reshape(-1)) < 0.03)
    assert np.all(comb["lower"] < comb["upper"])


def test_convergence_is_judged_on_cell_probabilities(big_epsilon_fit):
    from bayesynth.evaluation import diagnose

    _, rel, _, idata = big_epsilon_fit
    declared = idata.posterior.attrs["identified_vars"].split(",")
    assert declared == [f"P_t{i}" for i in range(len(rel.tables))] + ["cell_prob"]
    d = diagnose(idata)
    text = " ".join(d.warnings) + " " + " ".join(map(str, d.table.index))
    assert "P_t0" in text and "psi_" not in text and "pi[" not in text


def test_unconverged_chains_raise_a_warning():
    df = binary_data(2000, 3)
    rel = privatize_marginals(df, "all2", 0.5, domain=DOMAIN, random_seed=1)
    model = latent_class_dp_model(rel, k=8)
    with pytest.warns(RuntimeWarning, match="cell probabilities"):
        bs.sample(model, draws=6, tune=0, chains=2, random_seed=1, progressbar=False)


def test_gibbs_sampler_matches_the_nuts_reference_posterior():
    """Same model, same count moves; pi and psi by our data-augmentation Gibbs step or by
    PyMC's NUTS. Posterior means of every marginal cell probability must agree within
    Monte Carlo error (5 combined standard errors from the ESS of each run)."""
    import arviz as az

    df = binary_data(300, 7)[["a", "b", "c"]]
    rel = privatize_marginals(df, "all2", 1.5, domain={v: DOMAIN[v] for v in "abc"},
                              random_seed=8)
    ests = []
    for reference in (False, True):
        model = latent_class_dp_model(rel, k=3)
        if reference:
            idata = pm.sample(draws=1000, tune=700, chains=2, random_seed=9, model=model,
                              step=[TrueCountsMetropolis(model=model)], progressbar=False,
                              target_accept=0.9, compute_convergence_checks=False)
        else:
            idata = bs.sample(model, draws=1500, tune=700, chains=2, random_seed=9,
                              progressbar=False)
        cells = xr_cells(idata)
        ess = az.ess(cells)["p"].values
        ests.append((cells["p"].mean(("chain", "draw")).values,
                     cells["p"].std(("chain", "draw")).values / np.sqrt(ess)))
    (m1, se1), (m2, se2) = ests
    z = (m1 - m2) / np.sqrt(se1**2 + se2**2)
    assert np.all(np.abs(z) < 5), z
    assert stats.chi2.sf((z**2).sum(), z.size) > 1e-4


def xr_cells(idata):
    import xarray as xr

    parts = [idata.posterior[f"P_t{i}"].rename({f"cell_t{i}": "cell"})
             .assign_coords(cell=[f"t{i}_{c}" for c in range(4)]) for i in range(3)]
    return xr.Dataset({"p": xr.concat(parts, "cell")})


def test_marginal_probabilities_of_many_variables_match_the_mixture_formula():
    """16 variables (more than einsum's letters after chain/draw/class would allow in a
    string spec); one cell checked against sum_h pi_h prod_j psi_j[h, c_j]."""
    import arviz as az
    import xarray as xr

    rng = np.random.default_rng(0)
    k, names = 3, [f"x{i}" for i in range(16)]
    post = {"pi": (("chain", "draw", "class"), rng.dirichlet(np.ones(k), size=(1, 4)))}
    coords = {"chain": [0], "draw": list(range(4)), "class": list(range(k))}
    for v in names:
        post[f"psi_{v}"] = (("chain", "draw", "class", v),
                            rng.dirichlet(np.ones(2), size=(1, 4, k)))
        coords[v] = [0, 1]
    idata = az.InferenceData(posterior=xr.Dataset(post, coords=coords))
    full = full_table_probabilities(idata)
    assert full.shape == (1, 4) + (2,) * 16
    np.testing.assert_allclose(full.sum(names).values, 1.0, rtol=1e-12)
    cell = (1, 0) * 8
    pi = post["pi"][1][0, 2]
    expected = sum(pi[h] * np.prod([post[f"psi_{v}"][1][0, 2, h, c]
                                    for v, c in zip(names, cell)]) for h in range(k))
    assert full.values[(0, 2, *cell)] == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------- the non-centred joint move


def test_split_of_counts_matches_explicit_uniforms():
    """Given the counts, the records' uniforms are uniform on their cells; cutting them at the
    new bounds is what _split_counts draws. Compared with explicit uniforms (chi-square on
    the joint law of the new counts)."""
    from bayesynth.samplers.latent_class import _seed_numba, _split_counts

    M = np.array([3, 0, 2, 4], dtype=np.int64)
    P_old = np.array([0.2, 0.1, 0.3, 0.4])
    P_new = np.array([0.35, 0.05, 0.15, 0.45])
    reps = 20_000
    rng = np.random.default_rng(3)
    bounds_old = np.concatenate([[0], np.cumsum(P_old)])
    bounds_new = np.cumsum(P_new)[:-1]
    explicit = {}
    for _ in range(reps):
        u = np.concatenate([rng.uniform(bounds_old[c], bounds_old[c + 1], M[c])
                            for c in range(4)])
        key = tuple(np.bincount(np.searchsorted(bounds_new, u, side="right"), minlength=4))
        explicit[key] = explicit.get(key, 0) + 1
    _seed_numba(11)
    kernel = {}
    out = np.zeros(4, dtype=np.int64)
    for _ in range(reps):
        assert _split_counts(M, P_old, P_new, 4, out)
        assert out.sum() == M.sum()
        kernel[tuple(out)] = kernel.get(tuple(out), 0) + 1
    keys = sorted(set(explicit) | set(kernel))
    a = np.array([explicit.get(k, 0) for k in keys])
    b = np.array([kernel.get(k, 0) for k in keys])
    keep = (a + b) >= 10
    table = np.array([np.append(a[keep], a[~keep].sum()), np.append(b[keep], b[~keep].sum())])
    table = table[:, table.sum(0) > 0]
    assert stats.chi2_contingency(table)[1] > 1e-3


def _exact_small_posterior(tables, dom, n, k, n_prior=400_000, seed=0):
    """Posterior means of the cells of every table by importance sampling from the prior:
    the weight of a prior draw is prod_t sum_M Multinomial(M | n, P_t) geometric(noisy - M),
    summed over every composition M of n (exact for these tiny tables)."""
    rng = np.random.default_rng(seed)
    v = rng.beta(1.0, 1.0, size=(n_prior, k - 1))
    pi = np.concatenate([v, np.ones((n_prior, 1))], 1) * np.concatenate(
        [np.ones((n_prior, 1)), np.cumprod(1 - v, 1)], 1)
    psi = {x: rng.dirichlet(np.ones(len(dom[x])), size=(n_prior, k)) for x in dom}
    logw = np.zeros(n_prior)
    Ps = []
    for t in tables:
        joint = psi[t.variables[0]]
        for x in t.variables[1:]:
            joint = (joint[:, :, :, None] * psi[x][:, :, None, :]).reshape(n_prior, k, -1)
        P = np.einsum("nh,nhc->nc", pi, joint)
        Ps.append(P)
        cells = P.shape[1]
        comps = np.array([s for s in itertools.product(range(n + 1), repeat=cells)
                          if sum(s) == n])
        noisy = t.counts.reshape(-1)
        log_geo = (-t.epsilon / t.sensitivity) * np.abs(noisy - comps).sum(1)
        log_coef = (math.lgamma(n + 1) - np.array([sum(math.lgamma(m + 1) for m in s)
                                                    for s in comps]))
        logm = np.log(np.maximum(P, 1e-300)) @ comps.T + log_coef + log_geo
        mx = logm.max(1, keepdims=True)
        logw += (mx + np.log(np.exp(logm - mx).sum(1, keepdims=True)))[:, 0]
    w = np.exp(logw - logw.max())
    w /= w.sum()
    means = np.concatenate([w @ P for P in Ps])
    ses = np.concatenate([np.sqrt(((w[:, None] * (P - w @ P)) ** 2).sum(0)) for P in Ps])
    return means, ses


@pytest.mark.parametrize("steps", ["non_centred_only", "default"])
def test_non_centred_move_targets_the_exact_posterior(steps):
    """k = 2 classes, a 2 x 3 and a one-way table, n = 5: the posterior means of the cell
    probabilities, from the non-centred move alone and from the default steps, agree with an
    importance-sampling computation that sums over every true-count table (4 combined
    standard errors per cell: the cells of a table are dependent, so no chi-square).
    Dropping either Jacobian or drawing the moved counts afresh fails by 9 to 33 standard
    errors."""
    import arviz as az

    from bayesynth.models.latent_class_dp import _initial_counts
    from bayesynth.samplers.latent_class import NonCentredCountsMetropolis

    dom = {"a": [0, 1], "b": [0, 1, 2]}
    tables = [NoisyMarginal(("a", "b"), np.array([[2, -1, 0], [0, 1, 3]]), 1.0),
              NoisyMarginal(("b",), np.array([1, 3, 1]), 1.0)]
    exact, exact_se = _exact_small_posterior(tables, dom, 5, k=2)
    model = latent_class_dp_model(tables, domain=dom, n=5, k=2)
    init = {f"M_t{i}": _initial_counts(t.counts.reshape(-1), 5) for i, t in enumerate(tables)}
    if steps == "non_centred_only":
        idata = pm.sample(draws=6000, tune=1500, chains=2, random_seed=3, model=model,
                          step=[NonCentredCountsMetropolis(model=model, moves=5)],
                          initvals=init, progressbar=False, compute_convergence_checks=False)
    else:
        idata = bs.sample(model, draws=6000, tune=1500, chains=2, random_seed=3,
                          progressbar=False)
    draws = [idata.posterior[f"P_t{i}"] for i in range(2)]
    means = np.concatenate([d.mean(("chain", "draw")).values for d in draws])
    ses = np.concatenate([(d.std(("chain", "draw")) / np.sqrt(az.ess(d.to_dataset())[d.name]))
                          .values for d in draws])
    z = (means - exact) / np.sqrt(ses**2 + exact_se**2)
    assert np.all(np.abs(z) < 4), (z, means, exact)


def test_chains_start_from_dispersed_prior_draws():
    """Each chain starts at its own prior draw of v and psi (all chains at the prior means
    would sit on the mixture's saddle and agree more than the posterior does); the draws
    repeat with the seed and a Generator seed is not consumed."""
    from bayesynth.samplers.sampling import _dispersed_class_starts

    rel = privatize_marginals(binary_data(200, 1), "all2", 1.0, domain=DOMAIN, random_seed=2)
    model = latent_class_dp_model(rel, k=3)
    a = _dispersed_class_starts(model, 3, 11)
    b = _dispersed_class_starts(model, 3, 11)
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
    assert not np.allclose(a[0]["psi_a"], a[1]["psi_a"])
    assert set(a[0]) == {"v", "psi_a", "psi_b", "psi_c", "psi_d"}
    assert all(np.allclose(x["psi_d"].sum(1), 1) and x["psi_d"].shape == (3, 3) for x in a)
    gen = np.random.default_rng(4)
    before = gen.bit_generator.state
    _dispersed_class_starts(model, 2, gen)
    assert gen.bit_generator.state == before


def test_non_centred_adaptation_starts_afresh_for_every_chain():
    """Chains run one after the other (cores=1, or inside a dask worker) must adapt as if
    alone: the same seed gives the same draws with one core or two. Before, chain 1 began
    tuning from chain 0's proposal shape, scale and history."""
    from bayesynth.models.latent_class_dp import _initial_counts
    from bayesynth.samplers.latent_class import NonCentredCountsMetropolis

    dom = {"a": [0, 1], "b": [0, 1, 2]}
    tables = [NoisyMarginal(("a", "b"), np.array([[20, -1, 10], [0, 11, 30]]), 1.0),
              NoisyMarginal(("b",), np.array([21, 13, 31]), 1.0)]
    model = latent_class_dp_model(tables, domain=dom, n=70, k=3)
    init = {f"M_t{i}": _initial_counts(t.counts.reshape(-1), 70) for i, t in enumerate(tables)}
    runs = []
    for cores in (1, 2):
        idata = pm.sample(draws=50, tune=200, chains=2, cores=cores, random_seed=5, model=model,
                          step=[NonCentredCountsMetropolis(model=model, moves=5)],
                          initvals=init, progressbar=False, compute_convergence_checks=False)
        runs.append(idata.posterior["P_t0"].values)
    assert np.array_equal(runs[0], runs[1])
