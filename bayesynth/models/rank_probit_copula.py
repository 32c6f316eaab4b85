"""The extended rank-probit likelihood Gaussian copula factor model (Feldman & Kowal 2022).

The factory :func:`rank_probit_copula` turns a mixed-type table into a :class:`pymc.Model`
whose posterior is the paper's; :func:`bayesynth.sample` fits it with the custom Gibbs steps of
:mod:`bayesynth.samplers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from bayesynth.errors import SchemaError
from bayesynth.models.layout import LatentLayout, registered_layout
from bayesynth.schema import Schema, infer_schema, validate_data

__all__ = [
    "rank_probit_copula",
    "RankProbitConstraint",
    "get_layout",
    "choose_n_factors",
    "SWAPPABLE_PRIORS",
]

#: Names whose prior a user may replace through ``priors=`` (see :func:`rank_probit_copula`).
SWAPPABLE_PRIORS = ("alpha", "sigma", "Lambda")

PriorFactory = Callable[[str, tuple[str, ...]], Any]


class RankProbitConstraint(Op):
    """Log-indicator of the rank-probit event E: 0 when ``z`` satisfies every constraint.

    Used as ``pm.Potential("rank_probit", RankProbitConstraint(layout)(z))``; it makes the model's
    joint density the paper's augmented posterior and carries the constraint structure (the
    layout) that the z step reads. Its gradient is zero (the indicator is flat inside E).
    """

    def __init__(self, layout: LatentLayout):
        self.layout = layout

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def make_node(self, z):  # noqa: D102
        z = pt.as_tensor_variable(z)
        return Apply(self, [z], [pt.dscalar()])

    def perform(self, node, inputs, output_storage):  # noqa: D102
        ok = self.layout.bounds_satisfied(inputs[0])
        output_storage[0][0] = np.asarray(0.0 if ok else -np.inf)

    def grad(self, inputs, output_grads):  # noqa: D102
        return [pt.zeros_like(inputs[0])]

    def infer_shape(self, fgraph, node, input_shapes):  # noqa: D102
        return [()]

    def __str__(self) -> str:
        return "RankProbitConstraint"


def get_layout(model: pm.Model) -> LatentLayout:
    """The :class:`LatentLayout` of a model built by :func:`rank_probit_copula`.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        The model has no rank-probit constraint.
    """
    from bayesynth.errors import IncompatibleModelError

    for pot in model.potentials:
        if pot.owner is not None and isinstance(pot.owner.op, RankProbitConstraint):
            return pot.owner.op.layout
    layout = registered_layout(model)
    if layout is not None:
        return layout
    raise IncompatibleModelError(
        "This model has no rank-probit constraint (pm.Potential of RankProbitConstraint). "
        "Build it with bayesynth.models.rank_probit_copula."
    )


def choose_n_factors(scores: np.ndarray, variance_explained: float = 0.95) -> int:
    """Number of principal components of ``scores`` needed to explain a share of variance.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n, p)
        Normal scores of the data (columns are standardised here).
    variance_explained : float, default 0.95

    Returns
    -------
    int
        Smallest k whose leading k eigenvalues of the correlation matrix sum to at least
        ``variance_explained`` of the total.
    """
    sd = scores.std(axis=0)
    sd[sd == 0] = 1.0
    x = (scores - scores.mean(axis=0)) / sd
    ev = np.linalg.eigvalsh(x.T @ x / len(x))[::-1].clip(min=0)
    share = np.cumsum(ev) / ev.sum()
    return int(min(np.searchsorted(share, variance_explained - 1e-12) + 1, scores.shape[1]))


def rank_probit_copula(
    data: pd.DataFrame,
    schema: Schema | None = None,
    *,
    n_factors: int | None = None,
    nu: float = 3.0,
    a1: float = 2.0,
    a2: float = 3.0,
    a_sigma: float = 1.0,
    b_sigma: float = 0.3,
    alpha_mu: float = 0.0,
    alpha_sigma: float = 1.0,
    ordinal_threshold: int = 10,
    max_levels: int = 50,
    variance_explained: float = 0.95,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    r"""Build the extended rank-probit Gaussian copula factor model of a mixed-type table.

    Latent data z (records x latent columns) follow the factor model

    .. math::

        z_i = \alpha + \Lambda \eta_i + \epsilon_i,\quad \epsilon_i \sim N(0, \Sigma),\quad
        \eta_i \sim N(0, I_k),

    with :math:`\alpha_j \sim N(\mu_\alpha, \sigma_\alpha^2)` on categorical level columns only
    (zero elsewhere), :math:`\sigma_j^{-2} \sim \mathrm{Gamma}(a_\sigma, b_\sigma)` (shape, rate),
    and the multiplicative gamma process prior on the loadings,
    :math:`\lambda_{jh} \sim N(0, 1/(\phi_{jh}\tau_h))`,
    :math:`\phi_{jh} \sim \mathrm{Gamma}(\nu/2, \nu/2)`, :math:`\tau_h = \prod_{l \le h}\delta_l`,
    :math:`\delta_1 \sim \mathrm{Gamma}(a_1, 1)`, :math:`\delta_l \sim \mathrm{Gamma}(a_2, 1)`.
    The likelihood is the extended rank-probit likelihood: z must lie in the event E defined by
    the data (see :class:`bayesynth.models.layout.LatentLayout`), imposed by the potential
    ``rank_probit``.

    Parameters
    ----------
    data : pandas.DataFrame
        The confidential table (not modified).
    schema : Schema, optional
        Column types; inferred with :func:`bayesynth.infer_schema` when omitted.
    n_factors : int, optional
        Number of factors k. By default the number of principal components of the normal scores
        that explain ``variance_explained`` of their variance.
    nu, a1, a2 : float
        Multiplicative gamma process hyperparameters (defaults 3, 2, 3).
    a_sigma, b_sigma : float
        Shape and rate of the Gamma prior on the residual precisions (defaults 1, 0.3).
    alpha_mu, alpha_sigma : float
        Mean and standard deviation of the normal prior on the intercepts (defaults 0, 1).
    ordinal_threshold : int, default 10
        Ordinal columns with fewer levels are modelled as unordered categorical.
    max_levels : int, default 50
        Most levels accepted for one categorical variable.
    variance_explained : float, default 0.95
        Share of variance used to choose ``n_factors`` when it is not given.
    priors : mapping, optional
        Replacement priors, keyed by ``"alpha"``, ``"sigma"`` or ``"Lambda"``. Each value is a
        callable ``f(name, dims)`` that creates and returns the random variable inside the model
        context, e.g. ``{"alpha": lambda name, dims: pm.StudentT(name, nu=4, sigma=1,
        dims=dims)}``. Replacing ``"sigma"`` removes ``prec``; replacing ``"Lambda"`` removes the
        shrinkage variables ``phi``, ``delta`` and ``tau``. :func:`bayesynth.sample` keeps its
        Gibbs step for any replacement that stays conjugate (a zero-mean normal ``Lambda``, a
        normal ``alpha``) and hands the others to PyMC's samplers.

    Notes
    -----
    The chain starts from neutral values: the latent data at the normal scores of the ranks
    (``+-0.5`` for level columns), zero loadings, factor scores and intercepts, unit precisions.
    The first sweeps build the factor structure from noise. (Starting from a principal-component
    fit was tried and found to leave the sampler in a slowly mixing region.)

    Returns
    -------
    pymc.Model
        Coordinates ``record``, ``latent`` (and ``latent2``), ``factor`` and ``level``. Free
        variables ``delta`` (factor), ``phi`` and ``Lambda`` (latent, factor), ``alpha`` (level),
        ``prec`` (latent), ``eta`` (record, factor), ``z`` (record, latent); deterministics
        ``tau``, ``sigma``, the copula correlation ``C`` (latent, latent2) and the scaled
        intercepts ``alpha_scaled`` (level), the identified quantities.

    Raises
    ------
    bayesynth.errors.DataValidationError, bayesynth.errors.SchemaError
        Bad input (see :func:`bayesynth.schema.validate_data`).

    References
    ----------
    Feldman, J. and Kowal, D. R. (2022). A Bayesian framework for generation of fully synthetic
    mixed datasets. arXiv:2102.08255, sections 3-4.
    Bhattacharya, A. and Dunson, D. B. (2011). Sparse Bayesian infinite factor models.
    *Biometrika*, 98(2), 291-306.

    Examples
    --------
    >>> import bayesynth as bs
    >>> df = bs.datasets.simulate_child_health(n=200, random_seed=1)
    >>> model = bs.models.rank_probit_copula(df, n_factors=3)
    >>> sorted(model.coords)
    ['factor', 'latent', 'latent2', 'level', 'record']
    """
    schema = infer_schema(data) if schema is None else schema
    validate_data(data, schema)
    priors = dict(priors or {})
    unknown = sorted(set(priors) - set(SWAPPABLE_PRIORS))
    if unknown:
        raise SchemaError(
            f"priors= names {unknown}; only {list(SWAPPABLE_PRIORS)} can be replaced."
        )
    for label, value in (("nu", nu), ("a1", a1), ("a2", a2), ("a_sigma", a_sigma),
                         ("b_sigma", b_sigma), ("alpha_sigma", alpha_sigma)):
        if not (np.isfinite(value) and value > 0):
            raise SchemaError(f"{label} must be a positive number; got {value!r}.")
    layout = LatentLayout.from_data(
        data, schema, ordinal_threshold=ordinal_threshold, max_levels=max_levels
    )
    p = layout.p_latent
    z0 = layout.initial_z()
    if n_factors is None:
        k = choose_n_factors(z0, variance_explained)
    else:
        if int(n_factors) != n_factors or not 1 <= n_factors <= p:
            raise SchemaError(
                f"n_factors must be an integer between 1 and the number of latent columns "
                f"({p}); got {n_factors!r}."
            )
        k = int(n_factors)
    index = data.index if data.index.is_unique else pd.RangeIndex(len(data))
    coords = {
        "record": index.tolist(),
        "latent": layout.latent_names,
        "latent2": layout.latent_names,
        "factor": list(range(k)),
        "level": layout.level_names,
    }
    lvl = layout.level_columns
    with pm.Model(coords=coords) as model:
        if "Lambda" in priors:
            Lambda = priors["Lambda"]("Lambda", ("latent", "factor"))
        else:
            delta = pm.Gamma(
                "delta", alpha=np.r_[a1, np.full(k - 1, a2)], beta=1.0, dims="factor",
                initval=np.ones(k),
            )
            tau = pm.Deterministic("tau", pt.cumprod(delta), dims="factor")
            phi = pm.Gamma("phi", alpha=nu / 2.0, beta=nu / 2.0, dims=("latent", "factor"),
                           initval=np.ones((p, k)))
            Lambda = pm.Normal("Lambda", mu=0.0, sigma=1.0 / pt.sqrt(phi * tau[None, :]),
                               dims=("latent", "factor"), initval=np.zeros((p, k)))
        alpha_full = pt.zeros(p)
        alpha = None
        if len(lvl):
            if "alpha" in priors:
                alpha = priors["alpha"]("alpha", ("level",))
            else:
                alpha = pm.Normal("alpha", mu=alpha_mu, sigma=alpha_sigma, dims="level",
                                  initval=np.zeros(len(lvl)))
            alpha_full = pt.set_subtensor(alpha_full[lvl], alpha)
        if "sigma" in priors:
            sigma = priors["sigma"]("sigma", ("latent",))
        else:
            prec = pm.Gamma("prec", alpha=a_sigma, beta=b_sigma, dims="latent",
                            initval=np.ones(p))
            sigma = pm.Deterministic("sigma", 1.0 / pt.sqrt(prec), dims="latent")
        eta = pm.Normal("eta", mu=0.0, sigma=1.0, dims=("record", "factor"),
                        initval=np.zeros((len(data), k)))
        mu = alpha_full[None, :] + pt.dot(eta, Lambda.T)
        z = pm.Normal("z", mu=mu, sigma=sigma[None, :], dims=("record", "latent"),
                      initval=z0)
        pm.Potential("rank_probit", RankProbitConstraint(layout)(z))
        omega = pt.dot(Lambda, Lambda.T) + pt.diag(sigma**2)
        d = pt.sqrt(pt.diag(omega))
        pm.Deterministic("C", omega / pt.outer(d, d), dims=("latent", "latent2"))
        if alpha is not None:
            pm.Deterministic("alpha_scaled", alpha / d[lvl], dims="level")
    return model
