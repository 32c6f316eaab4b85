"""Combining rules: inference for an estimand from m synthetic datasets.

Each synthetic dataset is analysed as if it were the real data, giving an estimate q_l and a
variance estimate v_l; :func:`combine_estimates` turns the m pairs into one estimate, its
variance and an interval (the rules for fully synthetic data of Raghunathan, Reiter & Rubin,
Reiter's for partially synthetic data, or Raab, Nowok & Dibben's for synthesis from the
posterior predictive). :func:`combine_marginal_estimates` applies the fully synthetic rules to
the cell proportions of a marginal table, as for the latent class synthesis of private marginals
(Pistner et al.).

References
----------
Raghunathan, T. E., Reiter, J. P. and Rubin, D. B. (2003). Multiple imputation for statistical
disclosure limitation. *Journal of Official Statistics*, 19(1), 1-16 (fully synthetic data).
Reiter, J. P. (2003). Inference for partially synthetic, public use microdata sets. *Survey
Methodology*, 29(2), 181-188.
Raab, G. M., Nowok, B. and Dibben, C. (2016). Practical data synthesis for large samples.
*Journal of Privacy and Confidentiality*, 7(3), 67-97.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from bayesynth.errors import SchemaError

__all__ = [
    "CombinedEstimate",
    "combine_estimates",
    "combine_marginal_estimates",
]


class CombinedEstimate(NamedTuple):
    """A point estimate combined over m synthetic datasets, with its variance and interval."""

    estimate: float
    variance: float
    se: float
    df: float
    lower: float
    upper: float
    rule: str


def combine_estimates(
    estimates: Sequence[float],
    variances: Sequence[float],
    *,
    rule: str = "raab2016",
    n: int | None = None,
    n_syn: int | None = None,
    level: float = 0.95,
    proper: bool = False,
) -> CombinedEstimate:
    r"""Combine one estimand's estimates q_l and variance estimates v_l from m synthetic datasets.

    With :math:`\bar q = m^{-1}\sum q_l`, :math:`b = (m-1)^{-1}\sum (q_l - \bar q)^2` and
    :math:`\bar v = m^{-1}\sum v_l`:

    ``rule="fully"`` (fully synthetic data, Raghunathan, Reiter & Rubin 2003; Reiter 2002):
    :math:`T_f = (1 + 1/m)\,b - \bar v`, t reference distribution with
    :math:`\nu = (m-1)\,(1 - \bar v / ((1 + 1/m) b))^2` degrees of freedom. Needs m >= 2. When
    :math:`T_f \le 0` the conservative :math:`T^* = (n_{syn}/n)\,\bar v` is used instead (Reiter
    2002), with a normal reference.

    ``rule="partially"`` (partially synthetic data, the real records with some values replaced;
    Reiter 2003): :math:`T_p = b/m + \bar v`, t reference distribution with
    :math:`\nu = (m-1)\,(1 + m \bar v / b)^2` degrees of freedom (normal when b = 0). Needs
    m >= 2.

    ``rule="raab2016"`` (Raab, Nowok & Dibben 2016, any m >= 1, normal reference), with
    :math:`k = n_{syn}`: for synthesis from parameters held at their estimates (the saturated
    count models; ``proper=False``) :math:`T_s = \bar v\,(k/n + 1/m)`, which is :math:`2 v` at
    m = 1 and k = n; for proper synthesis, each dataset from its own posterior draw of the
    parameters (bayesynth's Bayesian synthesizers; ``proper=True``)
    :math:`T_s = \bar v\,(k/n + (1 + k/n)/m)`, :math:`3 v` at m = 1 and k = n (for a normal
    mean: Var(ybar) + (Var(mu*) + sigma^2/k)/m with Var(mu*) = sigma^2/n).

    Parameters
    ----------
    estimates, variances : sequence of float
        q_l and v_l (the squared standard errors computed as if each synthetic dataset were real).
    rule : {"raab2016", "fully", "partially"}, default "raab2016"
        The combining rule, as above. (``"reiter2003"``, this function's old name for the fully
        synthetic rule, is refused: Reiter 2003 is the partially synthetic one.)
    n, n_syn : int, optional
        Rows of the real and of each synthetic dataset (default equal).
    level : float, default 0.95
    proper : bool, default False
        For ``"raab2016"``: each synthetic dataset was drawn with its own posterior draw of the
        parameters (see above).

    Returns
    -------
    CombinedEstimate
    """
    q = np.asarray(estimates, float)
    v = np.asarray(variances, float)
    m = len(q)
    if m == 0 or len(v) != m:
        raise ValueError("estimates and variances must be non-empty and of equal length.")
    ratio = 1.0 if n is None or n_syn is None else n_syn / n
    qbar, vbar = float(q.mean()), float(v.mean())
    if rule == "raab2016":
        T = vbar * (ratio + (1.0 + ratio) / m) if proper else vbar * (ratio + 1.0 / m)
        df = np.inf
    elif rule in ("fully", "partially"):
        if m < 2:
            raise ValueError(f"rule={rule!r} needs at least two synthetic datasets.")
        b = float(q.var(ddof=1))
        if rule == "partially":
            T = b / m + vbar
            df = (m - 1) * (1 + m * vbar / b) ** 2 if b > 0 else np.inf
        else:
            T = (1 + 1 / m) * b - vbar
            if T > 0:
                df = (m - 1) * (1 - vbar / ((1 + 1 / m) * b)) ** 2
            else:
                T, df = ratio * vbar, np.inf
    elif rule == "reiter2003":
        raise ValueError("rule='reiter2003' was this function's name for the fully synthetic "
                         "rule of Raghunathan, Reiter & Rubin (2003); say rule='fully' for it, "
                         "or rule='partially' for Reiter's (2003) partially synthetic rule.")
    else:
        raise ValueError("rule must be 'raab2016', 'fully' or 'partially'; got "
                         f"{rule!r}.")
    crit = stats.norm.ppf(0.5 + level / 2) if np.isinf(df) else stats.t.ppf(0.5 + level / 2, df)
    se = float(np.sqrt(T))
    return CombinedEstimate(qbar, float(T), se, float(df), qbar - crit * se, qbar + crit * se,
                            rule)


def combine_marginal_estimates(synthetic: Sequence[pd.DataFrame], variables: Sequence[str],
                               *, level: float = 0.95, n: int | None = None) -> pd.DataFrame:
    """Combine estimates of a marginal's cell proportions from m fully synthetic datasets.

    The fully synthetic rules (Raghunathan, Reiter & Rubin 2003), with per dataset q = the
    cell's proportion and v = q (1 - q) / n_syn (see
    :func:`bayesynth.evaluation.combine_estimates`, ``rule="fully"``).

    Parameters
    ----------
    synthetic : sequence of pandas.DataFrame
        At least two synthetic datasets of equal size.
    variables : sequence of str
        The marginal's variables.
    level : float, default 0.95
        Confidence level of the intervals.
    n : int, optional
        Records of the real data (default: the size of a synthetic dataset).

    Returns
    -------
    pandas.DataFrame
        One row per cell (MultiIndex of levels): ``estimate``, ``se``, ``lower``, ``upper``.
    """
    if len(synthetic) < 2:
        raise SchemaError("Reiter's rules need at least two synthetic datasets.")
    tabs, sizes = [], []
    for df in synthetic:
        t = df.groupby(list(variables), observed=False).size()
        sizes.append(float(t.sum()))  # the records with every variable shown
        tabs.append(t / t.sum())
    # every cell seen in any dataset (a level absent from one dataset is a share of 0 there)
    cells = tabs[0].index
    for t in tabs[1:]:
        cells = cells.union(t.index, sort=False)
    tabs = [t.reindex(cells, fill_value=0.0) for t in tabs]
    n_syn = float(np.mean(sizes))
    rows = []
    for cell in cells:
        q = [float(t.loc[cell]) for t in tabs]
        comb = combine_estimates(q, [x * (1 - x) / k for x, k in zip(q, sizes)],
                                 rule="fully", n=n or n_syn, n_syn=n_syn, level=level)
        rows.append({"estimate": comb.estimate, "se": comb.se, "lower": comb.lower,
                     "upper": comb.upper})
    return pd.DataFrame(rows, index=cells)
