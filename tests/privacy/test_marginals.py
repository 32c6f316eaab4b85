"""Noisy marginals and the PrivBayes selection: exact privacy losses on tiny domains, noise
laws against each table's epsilon, the mutual-information sensitivity against brute force."""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import mutual_info_score

from bayesynth.errors import (
    DataValidationError,
    InvalidParameterError,
    PrivacyGuaranteeError,
    PrivacyWarning,
)
from bayesynth.privacy import (
    Ledger,
    mi_sensitivity,
    privatize_marginals,
    select_marginals,
    selection_probabilities,
    true_marginal,
)

BINARY3 = {"a": [0, 1], "b": [0, 1], "c": [0, 1]}


def binary_data(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.4
    b = np.where(a, rng.random(n) < 0.8, rng.random(n) < 0.3)
    c = np.where(b, rng.random(n) < 0.6, rng.random(n) < 0.2)
    d = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    return pd.DataFrame({"a": a.astype(int), "b": b.astype(int), "c": c.astype(int), "d": d})


DOMAIN4 = {"a": [0, 1], "b": [0, 1], "c": [0, 1], "d": [0, 1, 2]}


@pytest.fixture(autouse=True)
def _seeded_releases_are_intended():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


# ----------------------------------------------------------------------------- noise vs epsilon


def noise_draws(df, marginals, epsilon, reps, **kw):
    """Noise (noisy - true) of every table over ``reps`` releases, and the last release."""
    out: dict[tuple, list] = {}
    for r in range(reps):
        rel = privatize_marginals(df, marginals, epsilon, domain=DOMAIN4, random_seed=r, **kw)
        for t in rel.tables:
            out.setdefault(t.variables, []).append(t.counts - true_marginal(df, t.variables,
                                                                             DOMAIN4))
    return {k: np.concatenate([v.ravel() for v in vs]) for k, vs in out.items()}, rel


def assert_variance(noise, epsilon_t, sensitivity):
    q = math.exp(-epsilon_t / sensitivity)
    var = 2 * q / (1 - q) ** 2
    # sd of a sample variance: var sqrt((kurtosis - 1) / N); a discrete Laplace has kurtosis < 6
    assert abs(np.var(noise) - var) < 4 * var * math.sqrt(5 / len(noise)), (np.var(noise), var)


@pytest.mark.parametrize("neighbours", ["change_one", "add_remove"])
def test_each_table_is_noised_with_its_share_of_the_budget(neighbours):
    df = binary_data(400, 1)
    tables = [("a", "b"), ("b", "c"), ("c", "d")]
    noise, rel = noise_draws(df, tables, 1.5, 150, neighbours=neighbours)
    sens = 2.0 if neighbours == "change_one" else 1.0
    for t in rel.tables:
        assert t.epsilon == pytest.approx(0.5) and t.sensitivity == sens
        assert_variance(noise[t.variables], 0.5, sens)
    noise, rel = noise_draws(df, tables, 1.5, 150, neighbours=neighbours,
                             table_epsilons=[0.2, 0.3, 1.0])
    for t, eps_t in zip(rel.tables, [0.2, 0.3, 1.0]):
        assert t.epsilon == eps_t
        assert_variance(noise[t.variables], eps_t, sens)
    assert rel.ledger.total_epsilon == pytest.approx(1.5)


def test_selected_tables_share_what_selection_leaves():
    df = binary_data(400, 2)
    noise, rel = noise_draws(df, "select", 2.0, 120, degree=1, select_share=0.25)
    left = 2.0 * 0.75 / len(rel.tables)
    assert rel.selection_epsilon == pytest.approx(0.5)
    allnoise = np.concatenate(list(noise.values()))
    assert_variance(allnoise, left, 2.0)
    assert sum(t.epsilon for t in rel.tables) + rel.selection_epsilon == pytest.approx(2.0)


# ----------------------------------------------------------------------------- exact losses


def datasets(n: int, domain=BINARY3):
    cells = list(itertools.product(*domain.values()))
    for combo in itertools.combinations_with_replacement(range(len(cells)), n):
        yield combo, pd.DataFrame([cells[i] for i in combo], columns=list(domain))


def change_one_pairs(n: int, domain=BINARY3):
    cells = list(itertools.product(*domain.values()))
    for combo, df in datasets(n, domain):
        for pos in sorted(set(combo)):
            i = combo.index(pos)
            for other in range(len(cells)):
                if other != pos:
                    new = list(combo)
                    new[i] = other
                    yield df, pd.DataFrame([cells[j] for j in sorted(new)],
                                           columns=list(domain))


def add_remove_pairs(n: int, domain=BINARY3):
    cells = list(itertools.product(*domain.values()))
    for combo, df in datasets(n, domain):
        for other in range(len(cells)):
            yield df, pd.DataFrame([cells[j] for j in sorted(combo + (other,))],
                                   columns=list(domain))


def table_loss(df1, df2, tables, domain) -> float:
    """Worst-case log ratio of the geometric noise on every table: sum of eps/sens |diff|_1."""
    return sum(t.epsilon / t.sensitivity * np.abs(true_marginal(df1, t.variables, domain)
                                                   - true_marginal(df2, t.variables, domain)
                                                   ).sum() for t in tables)


@pytest.mark.parametrize("neighbours", ["change_one", "add_remove"])
def test_exact_loss_of_a_release_of_given_tables(neighbours):
    """Every neighbouring pair of 3-record datasets on a 2x2x2 domain: the release of three
    tables loses at most epsilon, and exactly epsilon for some pair."""
    eps = 1.2
    tables = [("a", "b"), ("b", "c"), ("a",)]
    ref = privatize_marginals(binary_data(50, 0)[["a", "b", "c"]], tables, eps, domain=BINARY3,
                              neighbours=neighbours, table_epsilons=[0.2, 0.4, 0.6])
    pairs = change_one_pairs(3) if neighbours == "change_one" else add_remove_pairs(3)
    worst = max(table_loss(d1, d2, ref.tables, BINARY3) for d1, d2 in pairs)
    assert worst == pytest.approx(eps, rel=1e-12)
    assert ref.ledger.total_epsilon == pytest.approx(eps)


@pytest.mark.parametrize("neighbours", ["change_one", "add_remove"])
def test_exact_loss_of_a_selected_release(neighbours):
    """Selection (exact network probabilities) plus the tables it picks: for each output the
    log ratio is that of the network plus the tables' worst case; the maximum over all
    neighbouring pairs stays within the total epsilon."""
    eps, share = 1.0, 0.4
    kw = dict(degree=1, neighbours=neighbours)
    if neighbours == "add_remove":
        kw["min_records"] = 2
    ref = privatize_marginals(binary_data(50, 0)[["a", "b", "c"]], "select", eps,
                              domain=BINARY3, select_share=share, **kw)
    eps_sel, tables = ref.selection_epsilon, ref.tables
    eps_t, sens = tables[0].epsilon, tables[0].sensitivity
    cache: dict = {}

    def summary(df):
        key = tuple(map(tuple, df.to_numpy()))
        if key not in cache:
            cache[key] = (selection_probabilities(df, eps_sel, domain=BINARY3, **kw),
                          {t: true_marginal(df, t, BINARY3)
                           for t in itertools.permutations(BINARY3, 2)})
        return cache[key]

    pairs = change_one_pairs(3) if neighbours == "change_one" else add_remove_pairs(3)
    worst = 0.0
    for d1, d2 in pairs:
        (p1, m1), (p2, m2) = summary(d1), summary(d2)
        assert p1.keys() == p2.keys()
        for net, p in p1.items():
            t_loss = sum(eps_t / sens * np.abs(m1[(child, parents[0])]
                                               - m2[(child, parents[0])]).sum()
                         for child, parents in net if parents)
            worst = max(worst, abs(math.log(p) - math.log(p2[net])) + t_loss)
    assert worst <= eps + 1e-12
    assert worst >= (1 - share) * eps - 1e-12  # the two tables alone reach this


def independent_network_probabilities(df, eps, degree, domain):
    """Selection probabilities from the exponential-mechanism formula, written out afresh: MI
    by scikit-learn, the step budget epsilon / (p - 1), P proportional to
    exp(eps_step MI / (2 Delta))."""
    names = list(domain)
    p = len(names)
    delta = mi_sensitivity(len(df), "change_one")
    eps_step = eps / (p - 1)
    out = {}

    def walk(inside, prob, net):
        if len(inside) == p:
            out[tuple(net)] = out.get(tuple(net), 0.0) + prob
            return
        cands, scores = [], []
        for child in names:
            if child in inside:
                continue
            for parents in itertools.combinations(inside, min(degree, len(inside))):
                joint = df[list(parents)].astype(str).agg("|".join, axis=1)
                cands.append((child, parents))
                scores.append(mutual_info_score(df[child], joint))
        w = np.exp(eps_step * np.array(scores) / (2 * delta))
        for cand, pr in zip(cands, w / w.sum()):
            walk(inside + [cand[0]], prob * pr, net + [cand])

    for first in names:
        walk([first], 1 / p, [(first, ())])
    return out


@pytest.mark.parametrize("degree", [1, 2])
def test_selection_probabilities_are_the_exponential_mechanism(degree):
    df = binary_data(40, 3)
    got = selection_probabilities(df, 3.0, degree=degree, domain=DOMAIN4)
    want = independent_network_probabilities(df, 3.0, degree, DOMAIN4)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-15)
    assert sum(got.values()) == pytest.approx(1.0)


def test_selection_draws_follow_the_exact_probabilities():
    df = binary_data(60, 4)[["a", "b", "c"]]
    exact = selection_probabilities(df, 4.0, degree=1, domain=BINARY3)
    draws = Counter(tuple(select_marginals(df, 4.0, degree=1, domain=BINARY3,
                                           random_seed=s)["network"]) for s in range(1500))
    keys = list(exact)
    obs = np.array([draws.get(k, 0) for k in keys])
    assert obs.sum() == 1500
    assert stats.chisquare(obs, np.array([exact[k] for k in keys]) * 1500).pvalue > 1e-3


def all_tables(n, kx, ky):
    for combo in itertools.combinations_with_replacement(range(kx * ky), n):
        yield np.bincount(combo, minlength=kx * ky).reshape(kx, ky)


def mi(counts):
    p = counts / counts.sum()
    outer = p.sum(1, keepdims=True) @ p.sum(0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log(p[nz] / outer[nz])).sum())


def brute_force_sensitivity(n, kx, ky):
    change, add = 0.0, 0.0
    for t in all_tables(n, kx, ky):
        base = mi(t)
        flat = t.ravel()
        for a in np.flatnonzero(flat):
            for b in range(flat.size):
                if a != b:
                    u = flat.copy()
                    u[a] -= 1
                    u[b] += 1
                    change = max(change, abs(base - mi(u.reshape(t.shape))))
        for b in range(flat.size):
            u = flat.copy()
            u[b] += 1
            add = max(add, abs(base - mi(u.reshape(t.shape))))
    return change, add


@pytest.mark.parametrize("kx,ky,ns", [(2, 2, range(2, 7)), (2, 3, range(2, 6)),
                                      (3, 3, range(2, 5))])
def test_mi_sensitivity_bounds_brute_force(kx, ky, ns):
    for n in ns:
        change, add = brute_force_sensitivity(n, kx, ky)
        bound_c = mi_sensitivity(n, "change_one")
        bound_a = mi_sensitivity(n, "add_remove", max_levels=min(kx, ky))
        assert change <= bound_c + 1e-12
        assert change >= 0.6 * bound_c  # not loose: the PrivBayes bounds are near tight
        assert add <= bound_a + 1e-12
        assert add >= 0.4 * bound_a  # the proved add/remove bound is within 2.5x of the truth
    if (kx, ky) == (3, 3):  # attained exactly: (2/n) log((n+1)/2) + ... at n = 3
        assert brute_force_sensitivity(3, 3, 3)[0] == pytest.approx(mi_sensitivity(3), rel=1e-9)


# ----------------------------------------------------------------------------- domain and n


def test_a_domain_is_required_and_reading_it_from_the_data_is_not_dp():
    df = binary_data(200, 5)
    with pytest.raises(PrivacyGuaranteeError, match="public domain"):
        privatize_marginals(df, "all2", 1.0)
    rel = privatize_marginals(df, "all2", 1.0, domain="data")
    assert not rel.is_private and rel.ledger.guarantee == "none"
    assert math.isinf(rel.ledger.total_epsilon)
    # why: a level present in one neighbour and absent in the other changes the shapes
    rare = df.copy()
    rare.loc[0, "d"] = 9
    shapes = [privatize_marginals(x, [("c", "d")], 1.0, domain="data").tables[0].counts.shape
              for x in (df, rare)]
    assert shapes[0] != shapes[1]
    public = privatize_marginals(df, "all2", 1.0, domain=DOMAIN4)
    assert public.is_private and public.ledger.guarantee == "strict"


def test_n_is_exact_only_under_change_one():
    df = binary_data(300, 6)
    rel = privatize_marginals(df, "all2", 1.0, domain=DOMAIN4)
    assert rel.n == 300 and rel.n_public
    ns = [privatize_marginals(df, "all2", 1.0, domain=DOMAIN4, neighbours="add_remove").n
          for _ in range(30)]
    assert not privatize_marginals(df, "all2", 1.0, domain=DOMAIN4,
                                   neighbours="add_remove").n_public
    assert len(set(ns)) > 1  # a noisy estimate, not the exact n
    assert abs(np.mean(ns) - 300) < 4 * np.std(ns) / np.sqrt(30) + 1


# ----------------------------------------------------------------------------- bad input


def test_bad_release_input_is_named_and_nothing_is_released():
    df = binary_data(100, 0)
    ledger = Ledger()
    with pytest.raises(InvalidParameterError, match="epsilon"):
        privatize_marginals(df, "all2", 0.0, domain=DOMAIN4, ledger=ledger)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        privatize_marginals(df, "all2", float("inf"), domain=DOMAIN4, ledger=ledger)
    with pytest.raises(InvalidParameterError, match="neighbours"):
        privatize_marginals(df, "all2", 1.0, domain=DOMAIN4, neighbours="swap", ledger=ledger)
    with pytest.raises(InvalidParameterError, match="add up to 0.9.*make them add up"):
        privatize_marginals(df, [("a", "b"), ("c",)], 1.0, domain=DOMAIN4,
                            table_epsilons=[0.5, 0.4], ledger=ledger)
    with pytest.raises(InvalidParameterError, match="one per table"):
        privatize_marginals(df, [("a", "b")], 1.0, domain=DOMAIN4, table_epsilons=[0.5, 0.5])
    with pytest.raises(DataValidationError, match="'d'.*outside its domain"):
        privatize_marginals(df, [("c", "d")], 1.0, domain={**DOMAIN4, "d": [0, 1]},
                            ledger=ledger)
    with pytest.raises(DataValidationError, match="'a'"):
        privatize_marginals(df.assign(a=df["a"].astype(float).where(df.index > 0)), "all2",
                            1.0, domain=DOMAIN4)
    with pytest.raises(Exception, match="outside the domain"):
        privatize_marginals(df, [("a", "zz")], 1.0, domain={"a": [0, 1]})
    with pytest.raises(InvalidParameterError, match="min_records"):
        privatize_marginals(df, "select", 1.0, domain=DOMAIN4, neighbours="add_remove",
                            ledger=ledger)
    with pytest.raises(InvalidParameterError, match="select_share"):
        privatize_marginals(df, "select", 1.0, domain=DOMAIN4, select_share=1.0,
                            ledger=ledger)
    assert ledger.entries == []  # nothing was released


def test_seeded_release_warns_and_is_recorded():
    df = binary_data(100, 0)
    with pytest.warns(PrivacyWarning):
        rel = privatize_marginals(df, "all2", 1.0, domain=DOMAIN4, random_seed=1)
    assert rel.ledger.seeded and "fixed seed" in rel.ledger.summary()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        fresh = privatize_marginals(df, "all2", 1.0, domain=DOMAIN4)
    assert not fresh.ledger.seeded


def test_release_epsilon_is_the_spend_as_composed():
    """Table epsilons that exceed epsilon by rounding: the release states their sum."""
    rel = privatize_marginals(binary_data(100, 0), [("a", "b"), ("c",)], 1.0, domain=DOMAIN4,
                              table_epsilons=[0.5, 0.5000000009], random_seed=0)
    assert rel.epsilon == rel.ledger.total_epsilon == pytest.approx(1.0000000009, abs=1e-13)
