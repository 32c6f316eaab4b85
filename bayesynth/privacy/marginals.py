"""Differentially private marginal tables: budget split, PrivBayes selection, public domains.

:func:`privatize_marginals` turns a confidential DataFrame into noisy marginal tables, which is
all that :func:`bayesynth.models.latent_class_dp.latent_class_dp_model` ever sees. Every release
records its cost in a :class:`~bayesynth.privacy.Ledger`.

What is guaranteed (see also the README's "What is guaranteed" table):

* A noisy table of epsilon_t is epsilon_t-DP under the chosen neighbour relation: exact
  two-sided geometric noise with ``q = exp(-epsilon_t / sensitivity)``, sensitivity 2 under
  change-one and 1 under add/remove. The tables compose sequentially (each record sits in one
  cell of every table), so the budget is split among them.
* The PrivBayes selection (:func:`select_marginals`) is epsilon_sel-DP: p - 1 exponential
  mechanisms of epsilon_sel / (p - 1) each on the empirical mutual information, whose
  sensitivity is bounded by :func:`mi_sensitivity`.
* The domain (levels of every variable) must be public. Read from the data, it reveals which
  levels occur (two neighbours that differ in a rare level give tables of different shapes), so
  the release is then marked as not differentially private.
* Under change-one neighbours n is public and released exactly. Under add/remove it is private:
  the release carries an estimate of n computed from the noisy tables (post-processing, no
  extra budget), never the exact n.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesynth.errors import (
    DataValidationError,
    InputTypeError,
    InvalidParameterError,
    MissingColumnError,
    PrivacyGuaranteeError,
    SchemaError,
)
from bayesynth.privacy.geometric import _add_noise, _rate
from bayesynth.privacy.ledger import Ledger, LedgerEntry
from bayesynth.privacy.neighbours import (
    check_epsilon,
    check_neighbours,
    histogram_sensitivity,
    release_rng,
)

__all__ = [
    "NoisyMarginal",
    "PrivateMarginals",
    "privatize_marginals",
    "select_marginals",
    "selection_probabilities",
    "mi_sensitivity",
    "table_domain",
    "true_marginal",
]

DOMAIN_FROM_DATA = "data"


# ----------------------------------------------------------------------------- domains


def table_domain(df: pd.DataFrame, variables: Sequence[str] | None = None
                 ) -> dict[str, list]:
    """Read the levels of each variable as they occur in ``df``.

    A categorical column's levels are its categories, any other column's its sorted distinct
    values.

    A domain read from confidential data is itself a disclosure; releases built on it are not
    differentially private (see :func:`privatize_marginals`).

    Parameters
    ----------
    df : pandas.DataFrame
    variables : list of str, optional
        Default: every column.

    Returns
    -------
    dict
        ``{variable: [levels]}``.
    """
    variables = list(df.columns if variables is None else variables)
    out = {}
    for v in variables:
        s = df[v]
        out[v] = (list(s.cat.categories) if isinstance(s.dtype, pd.CategoricalDtype)
                  else sorted(pd.unique(s.dropna()).tolist()))
    return out


def _resolve_domain(df: pd.DataFrame, domain, columns: Sequence[str], what: str
                    ) -> tuple[dict[str, list], bool]:
    """(domain, public) from a user's ``domain`` argument."""
    if domain is None:
        raise PrivacyGuaranteeError(
            f"{what} needs the public domain of every variable (domain={{column: [levels]}}): "
            "levels read from the confidential data reveal which ones occur. If the levels are "
            f"public knowledge, list them; to read them from the data anyway, pass "
            f"domain='{DOMAIN_FROM_DATA}' and the release is marked as not differentially "
            "private.", column="domain")
    if isinstance(domain, str):
        if domain != DOMAIN_FROM_DATA:
            raise InvalidParameterError(f"domain must be a dict of levels or "
                                        f"'{DOMAIN_FROM_DATA}'; got {domain!r}.",
                                        column="domain")
        unknown = [v for v in columns if v not in df.columns]
        if unknown:
            raise MissingColumnError(f"Variables {unknown} are not columns of the frame.",
                                     column=str(unknown[0]))
        return table_domain(df, list(columns)), False
    if not isinstance(domain, Mapping):
        raise InvalidParameterError(f"domain must be a dict {{column: [levels]}}; got "
                                    f"{type(domain).__name__}.", column="domain")
    out = {}
    for v, levels in domain.items():
        levels = list(levels)
        if not levels:
            raise InvalidParameterError(f"The domain of '{v}' is empty; list its levels.",
                                        column=str(v))
        if len(set(map(repr, levels))) != len(levels):
            raise InvalidParameterError(f"The domain of '{v}' repeats a level: {levels}.",
                                        column=str(v))
        out[v] = levels
    return out, True


def _codes(df: pd.DataFrame, domain: Mapping[str, Sequence]) -> dict[str, np.ndarray]:
    """Integer codes of every domain variable; validates the frame against the domain."""
    if not isinstance(df, pd.DataFrame):
        raise InputTypeError(f"Expected a pandas DataFrame; got {type(df).__name__}.")
    missing = [v for v in domain if v not in df.columns]
    if missing:
        raise MissingColumnError(f"Columns {missing} of the domain are not in the frame.",
                                 column=str(missing[0]))
    out = {}
    for v, levels in domain.items():
        s = df[v]
        if s.isna().any():
            raise DataValidationError(f"Column '{v}' has missing values; recode them as a "
                                      "level of the domain.", column=str(v))
        lookup = {lev: i for i, lev in enumerate(levels)}
        codes = s.map(lookup)
        if codes.isna().any():
            bad = sorted(map(str, pd.unique(s[codes.isna()])))[:5]
            raise DataValidationError(
                f"Column '{v}' has values {bad} outside its domain {list(levels)[:10]}: add "
                "them to the domain (levels must be public) or recode the column.",
                column=str(v))
        out[v] = codes.to_numpy(dtype=np.int64)
    return out


def true_marginal(df: pd.DataFrame, variables: Sequence[str],
                  domain: Mapping[str, Sequence]) -> np.ndarray:
    """Count the (confidential) marginal table over ``variables``, shaped by their levels.

    Parameters
    ----------
    df : pandas.DataFrame
    variables : sequence of str
    domain : dict

    Returns
    -------
    numpy.ndarray of int64
    """
    codes = _codes(df, {v: domain[v] for v in variables})
    shape = tuple(len(domain[v]) for v in variables)
    lin = np.ravel_multi_index([codes[v] for v in variables], shape)
    return np.bincount(lin, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)


# ----------------------------------------------------------------------------- releases


@dataclass
class NoisyMarginal:
    """One released marginal table.

    Attributes
    ----------
    variables : tuple of str
    counts : numpy.ndarray of int64
        Noisy counts, shaped by the variables' numbers of levels.
    epsilon : float
        Privacy loss spent on this table.
    sensitivity : float
        L1 sensitivity the noise was scaled to (2 change-one, 1 add/remove).
    """

    variables: tuple[str, ...]
    counts: np.ndarray
    epsilon: float
    sensitivity: float = 2.0

    @property
    def q(self) -> float:
        """The geometric parameter exp(-epsilon / sensitivity)."""
        return float(np.exp(-self.epsilon / self.sensitivity))

    @property
    def noise_variance(self) -> float:
        """Variance of each cell's noise, 2q / (1 - q)^2."""
        q = self.q
        return 2 * q / (1 - q) ** 2


@dataclass
class PrivateMarginals:
    """A release of noisy marginals with its public metadata.

    Attributes
    ----------
    tables : list of NoisyMarginal
    domain : dict
        Levels of every variable.
    n : int
        Number of records: exact under change-one neighbours (public by the relation); under
        add/remove an estimate from the noisy tables (``n_public`` is False).
    epsilon : float
        The budget spent (selection included); a bound on the privacy loss only when the
        domain is public (``domain="data"`` reads the levels from the data: no bound).
    selection_epsilon : float
        The part spent choosing the marginals (0 for a user-given list).
    meta : dict
    neighbours : str
    n_public : bool
    ledger : Ledger
        What was released and what it cost.
    """

    tables: list[NoisyMarginal]
    domain: dict[str, list]
    n: int
    epsilon: float
    selection_epsilon: float = 0.0
    meta: dict = field(default_factory=dict)
    neighbours: str = "change_one"
    n_public: bool = True
    ledger: Ledger = field(default_factory=Ledger)

    @property
    def is_private(self) -> bool:
        """True when every part of the release carries a strict DP guarantee."""
        return self.ledger.guarantee == "strict"

    def summary(self) -> pd.DataFrame:
        """Tabulate the released tables.

        Returns
        -------
        pandas.DataFrame
            One row per table: ``table`` (its variables), ``cells``, ``epsilon`` spent and
            ``sensitivity``.
        """
        return pd.DataFrame([{"table": " x ".join(t.variables), "cells": t.counts.size,
                              "epsilon": t.epsilon, "sensitivity": t.sensitivity}
                             for t in self.tables])


def _estimate_n(tables: Sequence[NoisyMarginal]) -> int:
    """Inverse-variance weighted mean of the noisy table totals (post-processing)."""
    totals = np.array([t.counts.sum() for t in tables], dtype=float)
    var = np.array([t.counts.size * t.noise_variance for t in tables])
    return max(1, int(round(float(np.sum(totals / var) / np.sum(1 / var)))))


def privatize_marginals(df: pd.DataFrame, marginals: Sequence[Sequence[str]] | str,
                        epsilon: float, *, domain: Mapping[str, Sequence] | str | None = None,
                        neighbours: str = "change_one",
                        table_epsilons: Sequence[float] | None = None,
                        select_share: float = 0.25, degree: int = 2,
                        min_records: int | None = None, random_seed=None,
                        ledger: Ledger | None = None) -> PrivateMarginals:
    """Release noisy marginal tables of ``df`` under a total budget ``epsilon``.

    Parameters
    ----------
    df : pandas.DataFrame
        Confidential records (not modified).
    marginals : list of tuples of column names, ``"all2"`` or ``"select"``
        The tables (1-, 2- or higher-way); ``"all2"`` for every two-way table of the domain;
        ``"select"`` to choose two-way tables privately with :func:`select_marginals`, spending
        ``select_share`` of the budget.
    epsilon : float
        Total privacy loss (positive, finite).
    domain : dict or "data"
        Public levels of each variable, ``{column: [levels]}``; required. ``"data"`` reads them
        from ``df`` and marks the release as not differentially private.
    neighbours : {"change_one", "add_remove"}, default "change_one"
    table_epsilons : list of float, optional
        Budget of each table (for a list of tables or ``"all2"``); must add up with the
        selection to ``epsilon``. Default: an equal split.
    select_share : float, default 0.25
        Budget share of the selection (the paper's NLTCS analysis uses a quarter).
    degree : int, default 2
        Parents per variable in the selection network.
    min_records : int, optional
        A public lower bound on n, needed by ``"select"`` under add/remove neighbours (the
        mutual-information sensitivity depends on n); see :func:`select_marginals`.
    random_seed : int, Generator or None
        ``None`` (default): fresh OS entropy. A fixed seed warns (:class:`PrivacyWarning`)
        and is recorded in the ledger.
    ledger : Ledger, optional
        Also record the entries here (sequential composition with earlier releases).

    Returns
    -------
    PrivateMarginals

    Raises
    ------
    InvalidParameterError
        Bad epsilon, neighbours, share or budget split.
    PrivacyGuaranteeError
        No domain given.
    DataValidationError
        A value outside the domain, or missing values.

    Notes
    -----
    All validation happens before any noise is drawn: on an error nothing is released and the
    ledger is unchanged.
    """
    epsilon = check_epsilon(epsilon)
    check_neighbours(neighbours)
    if ledger is not None and not isinstance(ledger, Ledger):
        raise InvalidParameterError("ledger must be a bayesynth.privacy.Ledger.",
                                    column="ledger")
    if not isinstance(df, pd.DataFrame):
        raise InputTypeError(f"Expected a pandas DataFrame; got {type(df).__name__}.")
    if isinstance(marginals, str) and marginals not in ("all2", "select"):
        raise InvalidParameterError(f"marginals must be a list of tables, 'all2' or 'select'; "
                                    f"got {marginals!r}.", column="marginals")
    cols = (list(df.columns) if isinstance(marginals, str)
            else list(dict.fromkeys(v for t in marginals for v in t)))
    domain, public = _resolve_domain(df, domain, cols, "privatize_marginals")
    codes = _codes(df, domain)  # validates before anything is released
    del codes
    spent_on_selection = 0.0
    if marginals == "select":
        if not 0 < select_share < 1:
            raise InvalidParameterError(f"select_share must be in (0, 1); got {select_share!r}.",
                                        column="select_share")
        if table_epsilons is not None:
            raise InvalidParameterError(
                "table_epsilons cannot be given with marginals='select': the number of tables "
                "is not known before the selection. Give a list of tables instead.",
                column="table_epsilons")
        spent_on_selection = epsilon * select_share
        _selection_setup(df, domain, degree, neighbours, min_records)  # validate early
    elif marginals == "all2":
        marginals = list(itertools.combinations(domain, 2))
    if marginals != "select":
        marginals = _check_tables(marginals, domain)
        table_epsilons = _split(epsilon, len(marginals), table_epsilons)
    rng, seeded = release_rng(random_seed, "privatize_marginals")
    entries: list[LedgerEntry] = []
    meta: dict = {}
    if not public:
        entries.append(LedgerEntry(
            "domain (levels of every variable)", "read from the confidential data",
            neighbours, math.inf, "none",
            why="levels present in the data are revealed: neighbours that differ in a rare level "
                "give tables of different shapes"))
    if marginals == "select":
        sel = _select(df, spent_on_selection, degree, domain, neighbours, min_records, rng)
        marginals = _check_tables(sel["pairs"], domain)
        meta["network"] = sel["network"]
        entries.append(LedgerEntry(
            f"choice of {len(marginals)} two-way marginals", "exponential mechanism "
            "(PrivBayes greedy network)", neighbours, spent_on_selection, "strict",
            sensitivity=sel["sensitivity"], why=sel["why"], seeded=seeded))
        table_epsilons = _split(epsilon - spent_on_selection, len(marginals), None)
    sens = histogram_sensitivity(neighbours)
    tables = []
    for t, eps_t in zip(marginals, table_epsilons):
        counts = _add_noise(true_marginal(df, t, domain), _rate(eps_t, neighbours, sens), rng)
        tables.append(NoisyMarginal(t, counts, float(eps_t), float(sens)))
        entries.append(LedgerEntry(
            f"noisy marginal {' x '.join(t)}", "geometric (exact discrete Laplace)", neighbours,
            float(eps_t), "strict", sensitivity=float(sens),
            why="public domain; one record is in one cell" if public else
                "noise as for epsilon-DP, but the domain came from the data", seeded=seeded))
    if neighbours == "change_one":
        n, n_public = int(len(df)), True
    else:
        n, n_public = _estimate_n(tables), False
    own = Ledger(neighbours, entries)
    if ledger is not None:
        ledger.extend(own)
    # the spend as composed (table epsilons may exceed epsilon by rounding: report the sum)
    spent = float(spent_on_selection) + float(sum(float(e) for e in table_epsilons))
    return PrivateMarginals(tables, domain, n, max(float(epsilon), spent),
                            float(spent_on_selection), meta, neighbours, n_public, own)


def _check_tables(marginals, domain) -> list[tuple[str, ...]]:
    out = []
    for t in marginals:
        if isinstance(t, str):
            raise InvalidParameterError(f"Each marginal is a tuple of column names; got the "
                                        f"string {t!r}. Write ({t!r},) for a one-way table.",
                                        column="marginals")
        t = tuple(t)
        unknown = [v for v in t if v not in domain]
        if unknown:
            raise SchemaError(f"Marginal {t} names variables {unknown} outside the domain "
                              f"{list(domain)}.")
        if len(set(t)) != len(t):
            raise SchemaError(f"Marginal {t} repeats a variable.")
        out.append(t)
    if not out:
        raise InvalidParameterError("No marginal tables to release.", column="marginals")
    return out


def _split(total: float, k: int, given: Sequence[float] | None) -> list[float]:
    if given is None:
        return [total / k] * k
    given = [check_epsilon(e, "table_epsilons") for e in given]
    if len(given) != k:
        raise InvalidParameterError(f"table_epsilons has {len(given)} entries for {k} tables; "
                                    "give one per table.", column="table_epsilons")
    if not math.isclose(sum(given), total, rel_tol=1e-9, abs_tol=1e-12):
        raise InvalidParameterError(
            f"table_epsilons add up to {sum(given):.10g} but the tables' budget is "
            f"{total:.10g} (epsilon minus the selection); make them add up.",
            column="table_epsilons")
    return given


# ----------------------------------------------------------------------------- selection


def _entropy_mix(lam: float) -> float:
    return -lam * math.log(lam) - (1 - lam) * math.log1p(-lam)


def mi_sensitivity(n: int, neighbours: str = "change_one", *, max_levels: int | None = None
                   ) -> float:
    """Sensitivity of the empirical mutual information (nats) of two discrete variables.

    Change-one (n records on both sides, n public): the larger of PrivBayes' two bounds (Zhang
    et al. 2017, Lemmas 4.1-4.2), ``h(1/n)`` and ``(2/n) log((n+1)/2) + ((n-1)/n)
    log((n+1)/(n-1))``, where ``h`` is the binary entropy; the first covers a binary variable,
    the second any sizes.

    Add/remove (``n`` is the smaller dataset's size; pass a public lower bound): adding one
    record mixes the empirical law with a point mass of weight ``lam = 1/(n+1)``. Concavity of
    entropy gives ``H(p') >= (1 - lam) H(p)`` and mixing gives ``H(p') <= (1 - lam) H(p) +
    h(lam)``, so ``-lam I - h(lam) <= I' - I <= -lam I + 2 h(lam)`` with ``I <= log K``,
    K the smaller number of levels: the bound is ``max(2 h(lam), h(lam) + lam log K)``
    (proved here; checked against brute force in the tests, which find at most ``h(lam)``).

    Parameters
    ----------
    n : int
        Records (change-one), or the public lower bound on them (add/remove).
    neighbours : {"change_one", "add_remove"}
    max_levels : int, optional
        Largest K over the candidate pairs (add/remove; default ``n``, since I <= log n).

    Returns
    -------
    float
    """
    check_neighbours(neighbours)
    n = int(n)
    if n < 2:
        raise InvalidParameterError(f"mi_sensitivity needs n >= 2; got {n}.", column="n")
    if neighbours == "change_one":
        general = math.log(n) / n + (n - 1) / n * math.log(n / (n - 1))
        other = 2 / n * math.log((n + 1) / 2) + (n - 1) / n * math.log((n + 1) / (n - 1))
        return float(max(general, other))
    lam = 1.0 / (n + 1)
    k = n if max_levels is None else min(int(max_levels), n)
    return float(max(2 * _entropy_mix(lam), _entropy_mix(lam) + lam * math.log(max(k, 1))))


def _mutual_information(child: np.ndarray, parent: np.ndarray, n_child: int,
                        n_parent: int) -> float:
    joint = np.bincount(child * n_parent + parent, minlength=n_child * n_parent).reshape(
        n_child, n_parent) / len(child)
    pc = joint.sum(1, keepdims=True)
    pp = joint.sum(0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (pc @ pp)[nz])).sum())


def _selection_setup(df, domain, degree, neighbours, min_records) -> dict:
    """Validate the settings of the selection: codes, names, the score sensitivity and why."""
    check_neighbours(neighbours)
    if int(degree) != degree or degree < 1:
        raise InvalidParameterError(f"degree must be a positive integer; got {degree!r}.",
                                    column="degree")
    codes = _codes(df, domain)
    names = list(domain)
    if len(names) < 2:
        raise InvalidParameterError("Selecting marginals needs at least two variables.",
                                    column="domain")
    n = len(df)
    if neighbours == "change_one":
        delta = mi_sensitivity(n, "change_one")
        why = (f"n = {n} public (change-one); MI sensitivity {delta:.4g} (PrivBayes bound); "
               f"{len(names) - 1} steps of epsilon/{len(names) - 1}")
    else:
        if min_records is None:
            raise InvalidParameterError(
                "Under add/remove neighbours the mutual-information sensitivity depends on n, "
                "which is private: pass min_records, a public lower bound on the number of "
                "records (the guarantee covers tables at least that large).",
                column="min_records")
        if int(min_records) != min_records or min_records < 2:
            raise InvalidParameterError(f"min_records must be an integer >= 2; got "
                                        f"{min_records!r}.", column="min_records")
        if n < min_records:
            raise InvalidParameterError(
                f"min_records = {min_records} is above the table's size; a public lower bound "
                "must not exceed n.", column="min_records")
        levels = [len(domain[v]) for v in names]
        delta = mi_sensitivity(int(min_records), "add_remove", max_levels=max(levels))
        why = (f"MI sensitivity {delta:.4g} at the public bound n >= {min_records}; "
               f"{len(names) - 1} steps of epsilon/{len(names) - 1}")
    return {"codes": codes, "names": names, "delta": delta, "why": why}


def _step_candidates(codes, domain, names, inside, degree):
    """Candidates (child, parents) of one greedy step and their mutual-information scores."""
    cands, scores = [], []
    size = min(degree, len(inside))
    for child in names:
        if child in inside:
            continue
        for parents in itertools.combinations(inside, size):
            shape = [len(domain[p]) for p in parents]
            pc = np.ravel_multi_index([codes[p] for p in parents], shape)
            cands.append((child, parents))
            scores.append(_mutual_information(codes[child], pc, len(domain[child]),
                                              int(np.prod(shape))))
    return cands, np.asarray(scores)


def _step_probabilities(scores: np.ndarray, eps_step: float, delta: float) -> np.ndarray:
    """Return the exponential mechanism's P(candidate), prop. to exp(eps_step score / (2 delta))."""
    logits = eps_step * scores / (2.0 * delta)
    w = np.exp(logits - logits.max())
    return w / w.sum()


def _select(df, epsilon, degree, domain, neighbours, min_records, rng) -> dict:
    setup = _selection_setup(df, domain, degree, neighbours, min_records)
    codes, names, delta = setup["codes"], setup["names"], setup["delta"]
    eps_step = epsilon / (len(names) - 1)
    first = names[int(rng.integers(len(names)))]
    network: list[tuple[str, tuple[str, ...]]] = [(first, ())]
    inside = [first]
    while len(inside) < len(names):
        cands, scores = _step_candidates(codes, domain, names, inside, degree)
        p = _step_probabilities(scores, eps_step, delta)
        pick = cands[int(rng.choice(len(cands), p=p))]
        network.append(pick)
        inside.append(pick[0])
    pairs = [(child, p) for child, parents in network for p in parents]
    return {"pairs": pairs, "network": network, "epsilon": float(epsilon),
            "sensitivity": delta, "why": setup["why"]}


def select_marginals(df: pd.DataFrame, epsilon: float, *, degree: int = 2,
                     domain: Mapping[str, Sequence] | str | None = None,
                     neighbours: str = "change_one", min_records: int | None = None,
                     random_seed=None, ledger: Ledger | None = None) -> dict:
    """Choose two-way marginals privately: PrivBayes' network, epsilon-DP under ``neighbours``.

    The first variable is drawn uniformly; then, p - 1 times, a (child, parents) pair with the
    child not yet in the network and ``min(degree, size)`` parents from it is drawn by the
    exponential mechanism with score the empirical mutual information I(child; parents),
    ``P proportional to exp(eps_step I / (2 Delta))`` with ``eps_step = epsilon / (p - 1)``
    and Delta from :func:`mi_sensitivity`. The released marginals are the two-way tables
    (child, parent) of every edge: for 16 variables and degree 2, 29 tables.

    Parameters
    ----------
    df : pandas.DataFrame
    epsilon : float
    degree : int, default 2
    domain : dict or "data"
        Public levels (required; ``"data"`` marks the result as not DP).
    neighbours : {"change_one", "add_remove"}, default "change_one"
    min_records : int, optional
        Public lower bound on n, required under add/remove.
    random_seed : int, Generator or None
        ``None``: fresh OS entropy; a fixed seed warns.
    ledger : Ledger, optional
        Records the selection here.

    Returns
    -------
    dict
        ``pairs`` (list of (child, parent)), ``network`` (list of (child, parents)),
        ``epsilon``, ``sensitivity`` (Delta) and ``ledger`` (this release's entries).

    References
    ----------
    Zhang, Cormode, Procopiuc, Srivastava & Xiao (2017). PrivBayes: private data release via
    Bayesian networks. ACM TODS 42(4).
    """
    epsilon = check_epsilon(epsilon)
    domain, public = _resolve_domain(df, domain, list(df.columns), "select_marginals")
    _selection_setup(df, domain, degree, neighbours, min_records)
    rng, seeded = release_rng(random_seed, "select_marginals")
    sel = _select(df, epsilon, degree, domain, neighbours, min_records, rng)
    own = Ledger(neighbours)
    if not public:
        own.record("domain (levels of every variable)", "read from the confidential data",
                   math.inf, guarantee="none", why="levels present in the data are revealed")
    own.record(f"choice of {len(sel['pairs'])} two-way marginals",
               "exponential mechanism (PrivBayes greedy network)", epsilon,
               sensitivity=sel["sensitivity"], why=sel["why"], seeded=seeded)
    if ledger is not None:
        ledger.extend(own)
    sel["ledger"] = own
    return sel


def selection_probabilities(df: pd.DataFrame, epsilon: float, *, degree: int = 2,
                            domain: Mapping[str, Sequence], neighbours: str = "change_one",
                            min_records: int | None = None) -> dict[tuple, float]:
    """Compute the exact probability of every network :func:`select_marginals` can return.

    Enumerates the greedy process (first variable uniform, then each exponential-mechanism
    step) with the same score, sensitivity and budget as the sampler; meant for audits on small
    tables (the number of networks grows factorially with the number of variables).

    Parameters
    ----------
    df, epsilon, degree, domain, neighbours, min_records
        As in :func:`select_marginals` (the domain must be given).

    Returns
    -------
    dict
        ``{network: probability}``, networks as tuples of (child, parents).
    """
    epsilon = check_epsilon(epsilon)
    domain, _ = _resolve_domain(df, domain, list(df.columns), "selection_probabilities")
    setup = _selection_setup(df, domain, degree, neighbours, min_records)
    codes, names, delta = setup["codes"], setup["names"], setup["delta"]
    eps_step = epsilon / (len(names) - 1)
    out: dict[tuple, float] = {}

    def walk(inside, prob, network):
        if len(inside) == len(names):
            key = tuple(network)
            out[key] = out.get(key, 0.0) + prob
            return
        cands, scores = _step_candidates(codes, domain, names, inside, degree)
        for (child, parents), p in zip(cands, _step_probabilities(scores, eps_step, delta)):
            walk(inside + [child], prob * p, network + [(child, parents)])

    for first in names:
        walk([first], 1.0 / len(names), [(first, ())])
    return out
