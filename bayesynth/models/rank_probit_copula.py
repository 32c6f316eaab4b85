"""The extended rank-probit likelihood Gaussian copula factor model (Feldman & Kowal 2022).

The factory :func:`rank_probit_copula` turns a mixed-type table into a :class:`pymc.Model`
whose posterior is the paper's; :func:`bayesynth.sample` fits it with the custom Gibbs steps of
:mod:`bayesynth.samplers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.distribution import _support_point
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.tensor.random.basic import NormalRV

from bayesynth.errors import InvalidParameterError, is_real
from bayesynth.models.layout import CATEGORICAL_LIKELIHOODS, LatentLayout, registered_layout
from bayesynth.models.metadata import attach_metadata
from bayesynth.models.priors import PriorFactory, Priors
from bayesynth.schema import Schema, infer_schema, modelled_schema, validate_data

__all__ = [
    "rank_probit_copula",
    "RankProbitConstraint",
    "get_layout",
    "choose_n_factors",
    "SWAPPABLE_PRIORS",
]

#: Names whose prior a user may replace through ``priors=`` (see :func:`rank_probit_copula`),
#: with their defaults.
SWAPPABLE_PRIORS = {
    "alpha": "Normal(alpha_mu, alpha_sigma) intercepts of the categorical columns, dims level",
    "sigma": "1 / sqrt(prec), prec ~ Gamma(a_sigma, b_sigma), built as 'sigma_free' with dims "
             "free_scale",
    "Lambda": "Normal(0, 1 / sqrt(phi tau)) with the multiplicative gamma process, dims "
              "(latent, factor)",
}


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

    def make_node(self, z):
        """Build the node: the latent data ``z`` in, the scalar log-indicator out.

        Parameters
        ----------
        z : tensor-like
            The latent data (records x latent columns).

        Returns
        -------
        pytensor.graph.basic.Apply
            With input ``z`` and one float64 scalar output.
        """
        z = pt.as_tensor_variable(z)
        return Apply(self, [z], [pt.dscalar()])

    def perform(self, node, inputs, output_storage):
        """Store 0 when ``inputs[0]`` lies in the event E, else -inf.

        Parameters
        ----------
        node : pytensor.graph.basic.Apply
            The node made by :meth:`make_node` (unused).
        inputs : list of numpy.ndarray
            ``[z]``, checked with :meth:`LatentLayout.bounds_satisfied`.
        output_storage : list of list
            The result is written to ``output_storage[0][0]``.
        """
        ok = self.layout.bounds_satisfied(inputs[0])
        output_storage[0][0] = np.asarray(0.0 if ok else -np.inf)

    def grad(self, inputs, output_grads):
        """Return the gradient, zero: the indicator is flat inside E.

        Parameters
        ----------
        inputs : list of TensorVariable
            ``[z]``.
        output_grads : list of TensorVariable
            Gradient with respect to the output (unused).

        Returns
        -------
        list of TensorVariable
            ``[zeros_like(z)]``.
        """
        return [pt.zeros_like(inputs[0])]

    def infer_shape(self, fgraph, node, input_shapes):
        """Return the output shape: a scalar.

        Parameters
        ----------
        fgraph : pytensor.graph.fg.FunctionGraph
            Unused.
        node : pytensor.graph.basic.Apply
            Unused.
        input_shapes : list of tuple
            Unused.

        Returns
        -------
        list of tuple
            ``[()]``.
        """
        return [()]

    def __str__(self) -> str:
        return "RankProbitConstraint"


class LatentNormalRV(NormalRV):
    """The copula's latent data: ``N(mu, sigma)`` whose support point is a valid start.

    PyMC starts a variable at its support point (here the mean, which breaks every rank
    constraint) unless the model bakes in an initial value, and a model with baked-in initial
    values cannot be copied (``clone_model``, ``pm.observe``, ``pm.do``). This op carries the
    layout's start instead (latent data at the normal scores of the ranks), so the model's
    default initial point satisfies the constraints and the model stays transformable.
    """

    def __init__(self, start: np.ndarray | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.start = None if start is None else np.asarray(start, dtype=float)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


@_support_point.register(LatentNormalRV)
def _latent_support_point(op, rv, *inputs):  # noqa: ARG001
    if op.start is None:
        return pt.broadcast_to(inputs[-2], rv.shape)
    return pt.as_tensor_variable(op.start)


def get_layout(model: pm.Model) -> LatentLayout:
    """Return the :class:`LatentLayout` of a model built by :func:`rank_probit_copula`.

    Parameters
    ----------
    model : pymc.Model
        A model with a :class:`RankProbitConstraint` potential, or with a layout registered by
        :func:`bayesynth.models.layout.register_layout`.

    Returns
    -------
    LatentLayout
        The constraint's layout, else the registered one.

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


def _indicator_scores(layout: LatentLayout) -> np.ndarray:
    """Return the data as an n x p* array of indicator scores.

    Normal scores of the ranks for ordered columns, 0/1 indicators for categorical columns (of
    each non-reference level for ``"mnp"``).
    """
    z = layout.initial_z()
    out = np.array(z, copy=True)
    for b in layout.categorical:
        for pos, j in enumerate(b.latent):
            out[:, j] = (b.codes == b.column_levels[pos]).astype(float)
    return out


def choose_n_factors(layout: LatentLayout, *, n_permutations: int = 20,
                     quantile: float = 0.95, slack: int = 2) -> int:
    """Default number of factors: Horn's parallel analysis on the data's indicator scores.

    The correlation matrix of the data (ordered columns as normal scores of their ranks,
    categorical variables as 0/1 indicators of their K - 1 non-reference levels, so that a
    K-level variable counts as K - 1 dimensions), with the correlations among one variable's
    own indicators set to zero (they exclude each other by construction, which the
    categorical likelihood already encodes), is compared with the same matrix after every
    column is permuted independently; k is the number of leading eigenvalues above the
    ``quantile`` of their permutation distribution, plus ``slack`` (at least 1, at most p*).
    Noise dimensions, which a 95%-of-variance rule keeps until the model saturates, are left
    out. The slack is there because too few factors are worse than too many: with too few the
    posterior has separate modes for which structure the factors carry (on the demo table, k at
    the parallel-analysis count of 4 gave chains at C[temp_t1, temp_t3] = -0.00 and -0.90),
    while the multiplicative gamma process shrinks factors that are not needed
    (``benchmarks/README.md``).

    Parameters
    ----------
    layout : LatentLayout
        Layout of the data.
    n_permutations : int, default 20
        Independent permutations of the columns that form the null distribution.
    quantile : float, default 0.95
        Quantile of the permutation distribution a leading eigenvalue must exceed.
    slack : int, default 2
        Factors added to the parallel-analysis count.

    Returns
    -------
    int
        The number of factors k, at least 1 and at most p*.

    References
    ----------
    Horn, J. L. (1965). A rationale and test for the number of factors in factor analysis.
    *Psychometrika*, 30, 179-185.
    """
    x = _indicator_scores(layout)
    owner = np.arange(layout.p_latent)
    for b_i, b in enumerate(layout.categorical):
        owner[b.latent] = layout.p_latent + b_i
    sd = x.std(axis=0)
    keep = sd > 0
    x = (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]
    owner = owner[keep]
    same = (owner[:, None] == owner[None, :]) & ~np.eye(len(owner), dtype=bool)
    n, p = x.shape
    if p < 2:
        return 1

    def eig(a):
        R = a.T @ a / n
        R[same] = 0.0  # a variable's own indicators exclude each other: not a factor
        return np.linalg.eigvalsh(R)[::-1]

    ev = eig(x)
    rng = np.random.default_rng(0)  # a fixed, documented choice: the same data give the same k
    null = np.empty((n_permutations, p))
    for r in range(n_permutations):
        null[r] = eig(np.column_stack([rng.permutation(x[:, j]) for j in range(p)]))
    above = ev > np.quantile(null, quantile, axis=0)
    k = int(np.argmin(above)) if not above.all() else p
    return max(1, min(k + int(slack), layout.p_latent))


def rank_probit_copula(
    data: pd.DataFrame,
    schema: Schema | None = None,
    *,
    n_factors: int | None = None,
    categorical_likelihood: str = "mnp",
    continuous: str = "normal_scores",
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
    r"""Build the rank-probit Gaussian copula factor model of a mixed-type table.

    Latent data z (records x latent columns) follow the factor model

    .. math::

        z_i = \alpha + \Lambda \eta_i + \epsilon_i,\quad \epsilon_i \sim N(0, \Sigma),\quad
        \eta_i \sim N(0, I_k),

    with :math:`\alpha_j \sim N(\mu_\alpha, \sigma_\alpha^2)` on categorical columns only
    (zero elsewhere), :math:`\sigma_j^{-2} \sim \mathrm{Gamma}(a_\sigma, b_\sigma)` (shape,
    rate) on every column with a free scale (:math:`\sigma_j = 1` on multinomial-probit
    utility columns), and the multiplicative gamma process prior on the loadings,
    :math:`\lambda_{jh} \sim N(0, 1/(\phi_{jh}\tau_h))`,
    :math:`\phi_{jh} \sim \mathrm{Gamma}(\nu/2, \nu/2)`, :math:`\tau_h = \prod_{l \le h}\delta_l`,
    :math:`\delta_1 \sim \mathrm{Gamma}(a_1, 1)`, :math:`\delta_l \sim \mathrm{Gamma}(a_2, 1)`.
    The likelihood restricts z to the event E defined by the data (see
    :class:`bayesynth.models.layout.LatentLayout`), imposed by the potential ``rank_probit``:
    the rank likelihood for ordered columns and, for unordered categorical variables, either a
    multinomial probit (``categorical_likelihood="mnp"``, the default: K - 1 utility columns, the
    observed level is the argmax against a reference utility of 0, so the level probabilities
    sum to one) or the paper's extended rank-probit likelihood (``"rpl"``: K level columns, one
    positive).

    Parameters
    ----------
    data : pandas.DataFrame
        The confidential table (not modified).
    schema : Schema, optional
        Column types; inferred with :func:`bayesynth.infer_schema` when omitted. Columns it
        derives by a formula, or fixes by rules for every record, are left out of the model
        (:func:`bayesynth.schema.modelled_schema`), as the synthesizers leave them out:
        synthesis fills them in, and fitting them too would count a deterministic relation
        as data (on SD2011, age groups and BMI modelled beside age, height and weight had
        their latent columns nearly determined by those).
    n_factors : int, optional
        Number of factors k; by default :func:`choose_n_factors` on the data.
    categorical_likelihood : {"mnp", "rpl"}, default "mnp"
        See above. ``"rpl"`` reproduces Feldman & Kowal (2022).
    continuous : {"normal_scores", "rank"}, default "normal_scores"
        Columns with mostly distinct values: latent values fixed at the normal scores of their
        ranks (a plug-in step; the rank likelihood cannot be sampled for them in practice,
        see :mod:`bayesynth.models.layout`), or the rank likelihood as in the paper.
    nu, a1, a2 : float
        Multiplicative gamma process hyperparameters (defaults 3, 2, 3).
    a_sigma, b_sigma : float
        Shape and rate of the Gamma prior on the free residual precisions (defaults 1, 0.3).
    alpha_mu, alpha_sigma : float
        Mean and standard deviation of the normal prior on the intercepts (defaults 0, 1).
    ordinal_threshold : int, default 10
        Ordinal columns with fewer levels are modelled as unordered categorical.
    max_levels : int, default 50
        Most levels accepted for one categorical variable.
    variance_explained : float, default 0.95
        Unused: kept so that calls written for the earlier 95%-PCA rule of the number of
        factors still run (:func:`choose_n_factors` now uses parallel analysis).
    priors : mapping, optional
        Replacement priors (:mod:`bayesynth.models.priors`), keyed by a name of
        :data:`SWAPPABLE_PRIORS`: ``"alpha"``, ``"sigma"`` or ``"Lambda"``. Each value is a
        callable ``f(name, dims)`` that creates and returns the random variable inside the model
        context, e.g. ``{"alpha": lambda name, dims: pm.StudentT(name, nu=4, sigma=1,
        dims=dims)}``. ``"sigma"`` is called with the name ``"sigma_free"`` and dims
        ``("free_scale",)`` (the columns whose scale is a parameter) and removes ``prec``;
        replacing ``"Lambda"`` removes the shrinkage variables ``phi``, ``delta`` and ``tau``.
        :func:`bayesynth.sample` keeps its Gibbs step for any replacement that stays conjugate (a
        zero-mean normal ``Lambda``, a normal ``alpha``) and hands the others to PyMC's samplers.

    Notes
    -----
    The chain starts from neutral values: the latent data at the normal scores of the ranks
    (+-0.5 for categorical columns), zero loadings, factor scores and intercepts, unit
    precisions. The first sweeps build the factor structure from noise.

    Returns
    -------
    pymc.Model
        Coordinates ``record``, ``latent`` (and ``latent2``), ``free_scale``, ``factor`` and
        ``level``. Free variables ``delta`` (factor), ``phi`` and ``Lambda`` (latent, factor),
        ``alpha`` (level), ``prec`` (free_scale), ``eta`` (record, factor), ``z`` (record,
        latent); deterministics ``tau``, ``sigma`` (latent), the copula correlation ``C``
        (latent, latent2) and the scaled intercepts ``alpha_scaled`` (level).

    Raises
    ------
    bayesynth.errors.DataValidationError, bayesynth.errors.SchemaError
        Bad input (see :func:`bayesynth.schema.validate_data`).
    bayesynth.errors.InvalidParameterError
        An option out of its range (``n_factors``, ``categorical_likelihood``, a prior
        parameter).

    References
    ----------
    Feldman, J. and Kowal, D. R. (2022). A Bayesian framework for generation of fully synthetic
    mixed datasets. arXiv:2102.08255, sections 3-4.
    Bhattacharya, A. and Dunson, D. B. (2011). Sparse Bayesian infinite factor models.
    *Biometrika*, 98(2), 291-306.
    Imai, K. and van Dyk, D. A. (2005). A Bayesian analysis of the multinomial probit model using
    marginal data augmentation. *Journal of Econometrics*, 124, 311-334.

    Examples
    --------
    >>> import bayesynth as bs
    >>> df = bs.datasets.simulate_child_health(n=200, random_seed=1)
    >>> model = bs.models.rank_probit_copula(df, n_factors=3)
    >>> sorted(model.coords)
    ['factor', 'free_scale', 'latent', 'latent2', 'level', 'record']
    """
    schema = infer_schema(data) if schema is None else schema
    validate_data(data, schema)
    full_schema = schema
    # columns derived by formulas or fixed by rules are filled at synthesis, not modelled
    schema = modelled_schema(data, full_schema)
    if list(schema.names) != list(full_schema.names):
        data = data[list(schema.names)]
    priors = Priors("rank_probit_copula", priors, SWAPPABLE_PRIORS)
    if categorical_likelihood not in CATEGORICAL_LIKELIHOODS:
        raise InvalidParameterError(
            f"categorical_likelihood must be one of {CATEGORICAL_LIKELIHOODS}; got "
            f"{categorical_likelihood!r}.", column="categorical_likelihood")
    for label, value in (("nu", nu), ("a1", a1), ("a2", a2), ("a_sigma", a_sigma),
                         ("b_sigma", b_sigma), ("alpha_sigma", alpha_sigma)):
        if not (is_real(value) and value > 0):
            raise InvalidParameterError(f"{label} must be a positive number; got {value!r}.",
                                        column=label)
    layout = LatentLayout.from_data(
        data, schema, ordinal_threshold=ordinal_threshold, max_levels=max_levels,
        categorical_likelihood=categorical_likelihood, continuous=continuous,
    )
    p = layout.p_latent
    z0 = layout.initial_z()
    if n_factors is None:
        k = choose_n_factors(layout)
    else:
        if not (is_real(n_factors) and int(n_factors) == n_factors and 1 <= n_factors <= p):
            raise InvalidParameterError(
                f"n_factors must be an integer between 1 and the number of latent columns "
                f"({p}); got {n_factors!r}.", column="n_factors")
        k = int(n_factors)
    index = data.index if data.index.is_unique else pd.RangeIndex(len(data))
    free = layout.free_scale_columns
    coords = {
        "record": index.tolist(),
        "latent": layout.latent_names,
        "latent2": layout.latent_names,
        "free_scale": [layout.latent_names[j] for j in free],
        "factor": list(range(k)),
        "level": layout.level_names,
    }
    lvl = layout.level_columns
    with pm.Model(coords=coords) as model:
        def default_Lambda():
            delta = pm.Gamma("delta", alpha=np.r_[a1, np.full(k - 1, a2)], beta=1.0,
                             dims="factor")
            tau = pm.Deterministic("tau", pt.cumprod(delta), dims="factor")
            phi = pm.Gamma("phi", alpha=nu / 2.0, beta=nu / 2.0, dims=("latent", "factor"))
            return pm.Normal("Lambda", mu=0.0, sigma=1.0 / pt.sqrt(phi * tau[None, :]),
                             dims=("latent", "factor"))

        Lambda = priors.get("Lambda", "Lambda", ("latent", "factor"), default_Lambda)
        alpha_full = pt.zeros(p)
        alpha = None
        if len(lvl):
            alpha = priors.get("alpha", "alpha", ("level",), lambda: pm.Normal(
                "alpha", mu=alpha_mu, sigma=alpha_sigma, dims="level"))
            alpha_full = pt.set_subtensor(alpha_full[lvl], alpha)
        sigma_free = priors.get("sigma", "sigma_free", ("free_scale",), lambda: 1.0 / pt.sqrt(
            pm.Gamma("prec", alpha=a_sigma, beta=b_sigma, dims="free_scale")))
        sigma = pm.Deterministic("sigma", pt.set_subtensor(pt.ones(p)[free], sigma_free),
                                 dims="latent")
        eta = pm.Normal("eta", mu=0.0, sigma=1.0, dims=("record", "factor"))
        mu = alpha_full[None, :] + pt.dot(eta, Lambda.T)
        # N(mu, sigma) latent data whose default start is inside the rank constraints
        z = model.register_rv(
            LatentNormalRV(z0, dtype="float64")(mu, sigma[None, :], size=(len(data), p)),
            "z", dims=("record", "latent"))
        pm.Potential("rank_probit", RankProbitConstraint(layout)(z))
        omega = pt.dot(Lambda, Lambda.T) + pt.diag(sigma**2)
        d = pt.sqrt(pt.diag(omega))
        pm.Deterministic("C", omega / pt.outer(d, d), dims=("latent", "latent2"))
        if alpha is not None:
            pm.Deterministic("alpha_scaled", alpha / d[lvl], dims="level")
        # The table and schema the model was built from, for synthesizers that take this
        # model's posterior (CopulaSynthesizer.from_posterior): the estimated marginals need
        # the values themselves. Kept in memory with the model, never written to a trace.
        # (``full_schema``: with the derived and rule-fixed columns synthesis fills in.)
        attach_metadata("copula_source", {"data": data, "schema": schema,
                                          "full_schema": full_schema})
    return model
