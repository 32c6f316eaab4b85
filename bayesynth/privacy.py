"""Differentially private marginal tables: the geometric mechanism and budget accounting.

This module sits at the start of the data flow for formally private releases: it turns a
confidential DataFrame into noisy marginal tables, which is all that
:func:`bayesynth.models.latent_class_dp.latent_class_dp_model` ever sees.

* :func:`geometric_mechanism` adds two-sided geometric noise with parameter
  ``q = exp(-epsilon / sensitivity)`` to integer counts (Ghosh, Roughgarden & Sundararajan 2012):
  ``P(noise = k) = (1 - q) / (1 + q) q^|k|``.
* :func:`privatize_marginals` releases a set of marginal tables, splitting epsilon equally across
  tables by sequential composition (each record adds one to one cell of each table).
* :func:`select_marginals` chooses two-way marginals with the first (structure-learning) step of
  PrivBayes (Zhang et al. 2017): a greedy Bayesian network of the given degree, each
  (child, parents) pair picked by the exponential mechanism on mutual information.

Neighbouring datasets: ``sensitivity=2`` is the change-one-record relation (one count goes down
by one and another up by one; n is public); ``sensitivity=1`` is add/remove-one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesynth.errors import DataValidationError, InputTypeError, SchemaError

__all__ = [
    "geometric_mechanism",
    "geometric_logpmf",
    "privacy_loss",
    "NoisyMarginal",
    "PrivateMarginals",
    "privatize_marginals",
    "select_marginals",
    "table_domain",
    "true_marginal",
]


def _check_epsilon(epsilon: float, sensitivity: float) -> float:
    if not np.isfinite(epsilon) or epsilon <= 0:
        raise SchemaError(f"epsilon must be a positive finite number; got {epsilon!r}.")
    if not np.isfinite(sensitivity) or sensitivity <= 0:
        raise SchemaError(f"sensitivity must be positive; got {sensitivity!r}.")
    return float(np.exp(-epsilon / sensitivity))


def geometric_mechanism(counts: np.ndarray, epsilon: float, sensitivity: float = 2.0,
                        rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Add two-sided geometric noise to integer counts (epsilon-DP for the given sensitivity).

    Parameters
    ----------
    counts : array of int
        True counts (any shape).
    epsilon : float
        Privacy loss of this release.
    sensitivity : float, default 2
        L1 sensitivity of the counts: 2 under change-one-record neighbours, 1 under add/remove.
    rng : Generator or int, optional

    Returns
    -------
    numpy.ndarray of int64
        ``counts + (G1 - G2)`` with G1, G2 independent geometric on {0, 1, ...} with failure
        probability q = exp(-epsilon / sensitivity). Noisy counts can be negative; keep them
        so (post-processing them away loses information the model uses).
    """
    q = _check_epsilon(epsilon, sensitivity)
    rng = np.random.default_rng(rng)
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        if np.any(counts != np.round(counts)):
            raise DataValidationError("The geometric mechanism needs integer counts.")
    g1 = rng.geometric(1.0 - q, size=counts.shape) - 1
    g2 = rng.geometric(1.0 - q, size=counts.shape) - 1
    return counts.astype(np.int64) + g1 - g2


def geometric_logpmf(noise: np.ndarray, epsilon: float, sensitivity: float = 2.0
                     ) -> np.ndarray:
    """log P(noise = k) of the two-sided geometric distribution with q = exp(-eps / sens)."""
    q = _check_epsilon(epsilon, sensitivity)
    return np.log1p(-q) - np.log1p(q) + np.abs(np.asarray(noise)) * np.log(q)


def privacy_loss(x: np.ndarray, x_prime: np.ndarray, epsilon: float, sensitivity: float = 2.0,
                 *, span: int = 60) -> float:
    """Exact worst-case privacy loss of one geometric release of ``x`` against ``x_prime``:
    ``max_y |log P(y | x) - log P(y | x')|`` over noisy outputs y within ``span`` of both
    (the log ratio is constant beyond)."""
    x, xp = np.asarray(x, np.int64).ravel(), np.asarray(x_prime, np.int64).ravel()
    lo = np.minimum(x, xp) - span
    hi = np.maximum(x, xp) + span
    worst = 0.0
    # the loss adds up over cells; the maximum is attained cell by cell
    for a, b, lo_c, hi_c in zip(x, xp, lo, hi):
        y = np.arange(lo_c, hi_c + 1)
        r = geometric_logpmf(y - a, epsilon, sensitivity) - geometric_logpmf(y - b, epsilon,
                                                                            sensitivity)
        worst += np.max(np.abs(r)) if a != b else 0.0
    return float(worst)


def table_domain(df: pd.DataFrame, variables: Sequence[str] | None = None
                 ) -> dict[str, list]:
    """Levels of each variable: a categorical column's categories, else its sorted values.

    The domain must be public (not learnt from the confidential data) for the release to be
    differentially private; pass it explicitly when it is known in advance.
    """
    variables = list(df.columns if variables is None else variables)
    out = {}
    for v in variables:
        s = df[v]
        out[v] = (list(s.cat.categories) if isinstance(s.dtype, pd.CategoricalDtype)
                  else sorted(pd.unique(s.dropna()).tolist()))
    return out


def _codes(df: pd.DataFrame, domain: Mapping[str, Sequence]) -> dict[str, np.ndarray]:
    if not isinstance(df, pd.DataFrame):
        raise InputTypeError(f"Expected a pandas DataFrame; got {type(df).__name__}.")
    missing = [v for v in domain if v not in df.columns]
    if missing:
        raise SchemaError(f"Columns {missing} of the domain are not in the frame.")
    out = {}
    for v, levels in domain.items():
        s = df[v]
        if s.isna().any():
            raise DataValidationError(f"Column '{v}' has missing values; recode them as a level.")
        lookup = {lev: i for i, lev in enumerate(levels)}
        codes = s.map(lookup)
        if codes.isna().any():
            bad = sorted(map(str, pd.unique(s[codes.isna()])))[:5]
            raise DataValidationError(f"Column '{v}' has values {bad} outside its domain "
                                      f"{list(levels)[:10]}.")
        out[v] = codes.to_numpy(dtype=np.int64)
    return out


def true_marginal(df: pd.DataFrame, variables: Sequence[str],
                  domain: Mapping[str, Sequence]) -> np.ndarray:
    """The (confidential) marginal count table over ``variables``, shaped by their levels."""
    codes = _codes(df, {v: domain[v] for v in variables})
    shape = tuple(len(domain[v]) for v in variables)
    lin = np.ravel_multi_index([codes[v] for v in variables], shape)
    return np.bincount(lin, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)


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
    """

    variables: tuple[str, ...]
    counts: np.ndarray
    epsilon: float
    sensitivity: float = 2.0

    @property
    def q(self) -> float:
        return float(np.exp(-self.epsilon / self.sensitivity))


@dataclass
class PrivateMarginals:
    """A release of noisy marginals with its public metadata.

    Attributes
    ----------
    tables : list of NoisyMarginal
    domain : dict
        Levels of every variable (public).
    n : int
        Number of records (public under change-one-record neighbours).
    epsilon : float
        Total privacy loss (selection included).
    selection_epsilon : float
        The part spent choosing the marginals (0 for a user-given list).
    """

    tables: list[NoisyMarginal]
    domain: dict[str, list]
    n: int
    epsilon: float
    selection_epsilon: float = 0.0
    meta: dict = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """One row per table: its variables, cells and epsilon spent."""
        return pd.DataFrame([{"table": " x ".join(t.variables), "cells": t.counts.size,
                              "epsilon": t.epsilon, "sensitivity": t.sensitivity}
                             for t in self.tables])


def privatize_marginals(df: pd.DataFrame, marginals: Sequence[Sequence[str]] | str,
                        epsilon: float, *, sensitivity: float = 2.0,
                        domain: Mapping[str, Sequence] | None = None,
                        select_share: float = 0.25, degree: int = 2,
                        random_seed: int | np.random.Generator | None = None
                        ) -> PrivateMarginals:
    """Release noisy marginal tables of ``df`` under a total budget ``epsilon``.

    Parameters
    ----------
    df : pandas.DataFrame
        Confidential records (not modified).
    marginals : list of tuples of column names, ``"all2"`` or ``"select"``
        The tables (any order: 1-, 2- or higher-way); ``"all2"`` for every two-way table;
        ``"select"`` to choose two-way tables privately with :func:`select_marginals`, spending
        ``select_share`` of the budget.
    epsilon : float
        Total privacy loss. The tables share what is left after selection equally (sequential
        composition: every record is in one cell of each table).
    sensitivity : float, default 2
        Per table: 2 for change-one-record neighbours, 1 for add/remove.
    domain : dict, optional
        Levels of each variable (default: :func:`table_domain` of the used columns). Give it
        when it is public knowledge, as differential privacy assumes.
    select_share : float, default 0.25
        Budget share for ``marginals="select"`` (the paper's NLTCS analysis uses a quarter).
    degree : int, default 2
        Parents per variable in the selection network.
    random_seed : int or Generator, optional

    Returns
    -------
    PrivateMarginals
    """
    _check_epsilon(epsilon, sensitivity)
    rng = np.random.default_rng(random_seed)
    if domain is None:
        cols = (list(df.columns) if isinstance(marginals, str)
                else list(dict.fromkeys(v for t in marginals for v in t)))
        domain = table_domain(df, cols)
    domain = {v: list(levels) for v, levels in domain.items()}
    _codes(df, domain)  # validates
    spent_on_selection = 0.0
    meta: dict = {}
    if isinstance(marginals, str):
        if marginals == "all2":
            marginals = list(itertools.combinations(domain, 2))
        elif marginals == "select":
            if not 0 < select_share < 1:
                raise SchemaError(f"select_share must be in (0, 1); got {select_share}.")
            spent_on_selection = epsilon * select_share
            sel = select_marginals(df, spent_on_selection, degree=degree, domain=domain,
                                   random_seed=rng)
            marginals = sel["pairs"]
            meta["network"] = sel["network"]
        else:
            raise SchemaError(f"marginals must be a list of tables, 'all2' or 'select'; got "
                              f"{marginals!r}.")
    marginals = [tuple(t) for t in marginals]
    if not marginals:
        raise SchemaError("No marginal tables to release.")
    for t in marginals:
        unknown = [v for v in t if v not in domain]
        if unknown:
            raise SchemaError(f"Marginal {t} names variables {unknown} outside the domain.")
        if len(set(t)) != len(t):
            raise SchemaError(f"Marginal {t} repeats a variable.")
    eps_t = (epsilon - spent_on_selection) / len(marginals)
    tables = [NoisyMarginal(t, geometric_mechanism(true_marginal(df, t, domain), eps_t,
                                                   sensitivity, rng), eps_t, sensitivity)
              for t in marginals]
    return PrivateMarginals(tables, domain, int(len(df)), float(epsilon),
                            float(spent_on_selection), meta)


def _mutual_information(child: np.ndarray, parent: np.ndarray, n_child: int,
                        n_parent: int) -> float:
    joint = np.bincount(child * n_parent + parent, minlength=n_child * n_parent).reshape(
        n_child, n_parent) / len(child)
    pc = joint.sum(1, keepdims=True)
    pp = joint.sum(0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (pc @ pp)[nz])).sum())


def _mi_sensitivity(n: int) -> float:
    """Sensitivity of empirical mutual information (nats) under change-one-record neighbours:
    the larger of PrivBayes' two bounds (Zhang et al. 2017, Lemmas 1-2), so valid for any
    domain sizes."""
    general = np.log(n) / n + (n - 1) / n * np.log(n / (n - 1))
    binary = 2 / n * np.log((n + 1) / 2) + (n - 1) / n * np.log((n + 1) / (n - 1))
    return float(max(general, binary))


def select_marginals(df: pd.DataFrame, epsilon: float, *, degree: int = 2,
                     domain: Mapping[str, Sequence] | None = None,
                     random_seed: int | np.random.Generator | None = None) -> dict:
    """Choose two-way marginals privately: PrivBayes' greedy network, epsilon-DP.

    The first variable is drawn uniformly; then, p - 1 times, a (child, parents) pair with the
    child not yet in the network and ``min(degree, size)`` parents from it is drawn by the
    exponential mechanism with score the empirical mutual information I(child; parents), each
    step spending ``epsilon / (p - 1)``. The released marginals are the two-way tables
    (child, parent) of every edge: for 16 variables and degree 2 that is 29 tables, as in the
    paper's NLTCS analysis.

    Returns
    -------
    dict
        ``pairs`` (list of (child, parent)), ``network`` (list of (child, parents)) and
        ``epsilon``.
    """
    rng = np.random.default_rng(random_seed)
    domain = dict(domain) if domain is not None else table_domain(df)
    codes = _codes(df, domain)
    names = list(domain)
    if len(names) < 2:
        raise SchemaError("Selecting marginals needs at least two variables.")
    n = len(df)
    eps_step = epsilon / (len(names) - 1)
    delta = _mi_sensitivity(n)
    first = names[int(rng.integers(len(names)))]
    network: list[tuple[str, tuple[str, ...]]] = [(first, ())]
    inside = [first]
    while len(inside) < len(names):
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
        logits = eps_step * np.asarray(scores) / (2 * delta)
        w = np.exp(logits - logits.max())
        pick = cands[int(rng.choice(len(cands), p=w / w.sum()))]
        network.append(pick)
        inside.append(pick[0])
    pairs = [(child, p) for child, parents in network for p in parents]
    return {"pairs": pairs, "network": network, "epsilon": float(epsilon)}
