"""One vocabulary for differential privacy across bayesynth.

It covers neighbour relations, epsilon, sensitivities and the randomness of a release.

Every mechanism in bayesynth takes ``neighbours=`` with one of two values:

``"change_one"`` (the default everywhere)
    Two datasets are neighbours when they have the same number of records n and differ in one
    record (one record replaced by any other). n itself is public under this relation.
``"add_remove"``
    Two datasets are neighbours when one is the other with one record added. n is private:
    nothing may be released that reveals it exactly.

A mechanism that is epsilon-DP under add/remove is 2 epsilon-DP under change-one (a change is a
removal followed by an addition); the converse does not hold in general.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np

from bayesynth.errors import InvalidParameterError, PrivacyWarning

__all__ = [
    "NEIGHBOURS",
    "DESCRIPTIONS",
    "check_neighbours",
    "check_epsilon",
    "histogram_sensitivity",
    "censor_bound",
    "release_rng",
]

NEIGHBOURS = ("change_one", "add_remove")

DESCRIPTIONS = {
    "change_one": "same n, one record replaced (n public)",
    "add_remove": "one record added or removed (n private)",
}


def check_neighbours(neighbours: str) -> str:
    """Validate a neighbour relation.

    Parameters
    ----------
    neighbours : {"change_one", "add_remove"}

    Returns
    -------
    str
        ``neighbours``.

    Raises
    ------
    InvalidParameterError
        For any other value.
    """
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            f"neighbours must be one of {NEIGHBOURS}; got {neighbours!r}. 'change_one': "
            "datasets of equal size differing in one record; 'add_remove': one record added or "
            "removed.", column="neighbours")
    return neighbours


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Validate a privacy-loss parameter: a positive finite number.

    Parameters
    ----------
    epsilon : float
    name : str
        The parameter's name, for the message.

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        When ``epsilon`` is not a real number, is not finite, or is not positive.
    """
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a positive finite number; got {epsilon!r}.",
                                    column=name) from None
    if isinstance(epsilon, bool) or not math.isfinite(value) or value <= 0:
        raise InvalidParameterError(f"{name} must be a positive finite number; got {epsilon!r}. "
                                    "Smaller values give more privacy and more noise.",
                                    column=name)
    return value


def histogram_sensitivity(neighbours: str) -> int:
    """L1 sensitivity of a histogram (any marginal count table) under ``neighbours``.

    One record sits in exactly one cell: adding or removing it changes one count by one (1);
    replacing it moves it from one cell to another (2).

    Parameters
    ----------
    neighbours : {"change_one", "add_remove"}

    Returns
    -------
    int
    """
    return 2 if check_neighbours(neighbours) == "change_one" else 1


def censor_bound(epsilon: float, neighbours: str) -> float:
    """Return the bound c that makes a censored pseudo posterior epsilon-DP under ``neighbours``.

    Censoring clips each record's log-likelihood contribution into [-c, c].

    With every contribution ``g(x_i, theta)`` in [-c, c] and a prior that does not depend on the
    data, the log density ratio of the pseudo posteriors of two neighbouring datasets is
    ``D(theta) - log E_{x'}[exp D]`` with ``D = u(x, .) - u(x', .)``, so the privacy loss is at
    most ``sup D - inf D``. Add/remove changes one term: D in [-c, c], loss <= 2c. Change-one
    swaps one term for another: D in [-2c, 2c], loss <= 4c. Both bounds are attained in the
    limit of a posterior concentrated where D is smallest. Hence c = epsilon / 2 (add/remove)
    and c = epsilon / 4 (change-one).

    Parameters
    ----------
    epsilon : float
    neighbours : {"change_one", "add_remove"}

    Returns
    -------
    float
    """
    epsilon = check_epsilon(epsilon)
    return epsilon / (4.0 if check_neighbours(neighbours) == "change_one" else 2.0)


def release_rng(random_seed, what: str) -> tuple[np.random.Generator, bool]:
    """Return the random generator of a differentially private release.

    Without a seed the noise comes from fresh operating-system entropy. A fixed seed makes the
    noise reproducible by anyone who knows it, and so removable: it is allowed (tests, papers)
    but raises a :class:`~bayesynth.errors.PrivacyWarning` and is recorded in the ledger.

    Parameters
    ----------
    random_seed : None, int, SeedSequence or Generator
    what : str
        The release, for the warning.

    Returns
    -------
    (numpy.random.Generator, bool)
        The generator and whether it was seeded by the caller.
    """
    if random_seed is None:
        return np.random.default_rng(), False
    warnings.warn(f"{what}: the noise is drawn from a fixed random_seed, so anyone who knows "
                  "the seed can remove it. Use a seed only for tests and reproductions; leave "
                  "random_seed=None for a real release.", PrivacyWarning, stacklevel=3)
    return np.random.default_rng(random_seed), True


def _as_fraction(x: float) -> Fraction:
    """Return the exact rational value of a float (floats are dyadic rationals)."""
    return Fraction(float(x))
