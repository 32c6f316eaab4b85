"""A simulated stand-in for the North Carolina child-health data of Feldman & Kowal (Table 1).

The real data (birth records linked to blood-lead surveillance and end-of-grade test scores) are
confidential. :func:`simulate_child_health` draws a table with the same variables, types and
ranges: 2 categorical, 6 binary, 6 integer and 12 continuous columns (p = 26, p* = 33 latent
columns under the rank-probit likelihood), whose dependence comes from three latent traits
(socio-economic status, environmental burden, urbanicity), and whose two test scores depend on
the exposures with nonlinear and interaction effects, as the paper's regression analyses assume.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit, ndtr

__all__ = ["simulate_child_health", "CHILD_HEALTH_TYPES"]

RACE_LEVELS = ("NH White", "NH Black", "Hispanic", "NH Asian/PI", "NH Other")
EDUC_LEVELS = ("No HS Diploma", "HS Diploma", "Some College", "Bachelor+")

#: Column types of the simulated table (what :func:`bayesynth.infer_schema` finds).
CHILD_HEALTH_TYPES: dict[str, str] = {
    "m_race": "categorical",
    "m_educ": "ordinal",
    **{c: "binary" for c in ("male", "nopnc", "notmarried", "smoker", "ed", "medicaid")},
    **{c: "count" for c in ("read", "math", "mage", "bwtpctl", "gest", "pbresult")},
    **{
        c: "continuous"
        for c in (
            "temp_t1", "temp_t2", "temp_t3", "pm25_t1", "pm25_t2", "pm25_t3",
            "pm25_30d", "pm25_1yr", "ri_birth", "ri_educ", "ndi_birth", "ndi_educ",
        )
    },
}


def _clip_round(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.round(x), lo, hi).astype(np.int64)


def simulate_child_health(
    n: int = 2000, random_seed: int | np.random.Generator | None = None
) -> pd.DataFrame:
    """Simulate a mixed-type child-health table shaped like Feldman & Kowal's Table 1.

    Parameters
    ----------
    n : int, default 2000
        Number of records (the real data have 19,364).
    random_seed : int or numpy.random.Generator, optional
        Seed for reproducibility.

    Returns
    -------
    pandas.DataFrame
        Columns (types as in :data:`CHILD_HEALTH_TYPES`):

        * ``m_race``: mother's race, unordered categorical with 5 levels;
        * ``m_educ``: mother's education, ordered categorical with 4 levels;
        * ``male``, ``nopnc`` (no prenatal care), ``notmarried``, ``smoker``, ``ed``
          (economically disadvantaged), ``medicaid``: 0/1 integers;
        * ``read`` (316-370), ``math`` (321-373): end-of-grade test scores; ``mage`` (15-40),
          ``bwtpctl`` (0-100), ``gest`` (32-42 weeks), ``pbresult`` (blood lead, 1-10);
        * ``temp_t1..3`` (Fahrenheit, by trimester), ``pm25_t1..3``, ``pm25_30d``,
          ``pm25_1yr`` (PM2.5), ``ri_birth``, ``ri_educ`` (racial isolation, 0-1),
          ``ndi_birth``, ``ndi_educ`` (neighbourhood deprivation).

        The test scores depend on the exposures nonlinearly (a quadratic in deprivation, the log
        of blood lead) and with interactions (PM2.5 by racial isolation, temperature by
        deprivation).

    Examples
    --------
    >>> df = simulate_child_health(n=100, random_seed=0)
    >>> df.shape
    (100, 26)
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}.")
    n = int(n)
    rng = np.random.default_rng(random_seed)
    ses = rng.standard_normal(n)
    env = rng.standard_normal(n)
    urban = rng.standard_normal(n)

    # Mother's race: multinomial logit on the latent traits.
    logits = np.column_stack([
        0.6 + 0.3 * ses - 0.2 * urban,
        0.0 - 0.5 * ses + 0.5 * urban,
        -1.2 - 0.3 * ses + 0.2 * urban,
        -3.0 + 0.4 * ses + 0.4 * urban,
        -3.4 + 0.0 * ses,
    ])
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    race = (prob.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    black, hisp = race == 1, race == 2

    # Mother's education: ordered probit on SES.
    e_lat = 0.9 * ses - 0.4 * hisp + 0.6 * rng.standard_normal(n)
    educ = np.searchsorted(np.array([-0.9, 0.1, 0.8]), e_lat)

    male = rng.random(n) < 0.51
    smoker = rng.random(n) < expit(-1.8 - 0.6 * ses)
    nopnc = rng.random(n) < expit(-3.0 - 0.6 * ses)
    notmarried = rng.random(n) < expit(-0.3 - 1.0 * ses + 0.9 * black)
    ed = rng.random(n) < expit(-0.2 - 1.3 * ses)
    medicaid = rng.random(n) < expit(-0.4 - 1.2 * ses + 0.9 * ed)

    mage = _clip_round(27 + 3.2 * ses + 4.0 * rng.standard_normal(n), 15, 40)
    bwt = _clip_round(100 * ndtr(0.25 * ses - 0.35 * smoker + 0.9 * rng.standard_normal(n)), 0, 100)
    gest = _clip_round(39 - 0.4 * smoker + 1.3 * rng.standard_normal(n), 32, 42)
    pb = _clip_round(np.exp(0.7 + 0.25 * env - 0.2 * ses + 0.45 * rng.standard_normal(n)), 1, 10)

    month = rng.integers(0, 12, n)
    temps = [
        np.clip(62 + 17 * np.sin(2 * np.pi * (month + 3 * t) / 12) + 3.5 * rng.standard_normal(n),
                27.8, 86.6)
        for t in range(3)
    ]
    pm = [
        np.clip(np.exp(np.log(12.5) + 0.18 * env + 0.06 * np.cos(2 * np.pi * (month + 3 * t) / 12)
                       + 0.2 * rng.standard_normal(n)), 5.6, 31.06)
        for t in range(3)
    ]
    pm30 = np.clip(11.5 + 1.4 * env + 1.6 * rng.standard_normal(n), 6.026, 17.891)
    pm1y = np.clip(9.6 + 0.5 * env + 0.3 * urban + 0.35 * rng.standard_normal(n), 7.549, 11.709)
    ri_b = ndtr(-0.4 + 1.1 * black + 0.5 * urban - 0.2 * ses + 0.6 * rng.standard_normal(n))
    ri_e = ndtr(0.85 * (ri_b - 0.5) * 3 + 0.5 * rng.standard_normal(n))
    ndi_b = np.clip(0.5 - 1.6 * ses + 0.7 * black + 0.5 * urban
                    + 1.4 * rng.gamma(2.0, 0.7, n) - 1.96, -4.5174, 11.3888)
    ndi_e = np.clip(0.8 * ndi_b + 0.9 * rng.standard_normal(n), -4.17036, 10.3524)

    # Test scores: main effects, a quadratic, a log, and two interactions.
    educ_eff = np.array([0.0, 1.5, 3.0, 6.0])[educ]
    race_eff = np.array([0.0, -3.5, -2.0, 1.0, -1.0])[race]
    signal = (
        educ_eff + race_eff + 2.0 * ses
        - 1.1 * ndi_b + 0.09 * ndi_b**2
        - 3.0 * np.log(pb)
        - 2.0 * (pm1y - 9.6) * ri_e
        - 0.6 * (temps[1] - 62) / 10 * ndi_b
        - 1.5 * ed + 0.04 * (bwt - 50)
        + 0.3 * (gest - 39)
    )
    read = _clip_round(347 + signal - 1.5 * male + 6.0 * rng.standard_normal(n), 316, 370)
    math = _clip_round(349 + 0.9 * signal + 1.0 * male + 0.5 * (read - 347)
                       + 5.0 * rng.standard_normal(n), 321, 373)

    df = pd.DataFrame({
        "m_race": pd.Categorical.from_codes(race, categories=list(RACE_LEVELS)),
        "m_educ": pd.Categorical.from_codes(educ, categories=list(EDUC_LEVELS), ordered=True),
        "male": male.astype(np.int64),
        "nopnc": nopnc.astype(np.int64),
        "notmarried": notmarried.astype(np.int64),
        "smoker": smoker.astype(np.int64),
        "ed": ed.astype(np.int64),
        "medicaid": medicaid.astype(np.int64),
        "read": read,
        "math": math,
        "mage": mage,
        "bwtpctl": bwt,
        "gest": gest,
        "pbresult": pb,
        "temp_t1": np.round(temps[0], 2),
        "temp_t2": np.round(temps[1], 2),
        "temp_t3": np.round(temps[2], 2),
        "pm25_t1": np.round(pm[0], 3),
        "pm25_t2": np.round(pm[1], 3),
        "pm25_t3": np.round(pm[2], 3),
        "pm25_30d": np.round(pm30, 3),
        "pm25_1yr": np.round(pm1y, 3),
        "ri_birth": np.round(ri_b, 4),
        "ri_educ": np.round(ri_e, 4),
        "ndi_birth": np.round(ndi_b, 4),
        "ndi_educ": np.round(ndi_e, 4),
    })
    return df
