"""PyMC step methods for the rank-probit copula factor model.

Each class is a thin :class:`pymc.step_methods.compound.BlockedStep` around one kernel of
:mod:`bayesynth.samplers.kernels`: it reads the current values from the point, calls the kernel
with ``self.rng`` and writes the draw back. At construction it checks that the model has the
structure the kernel assumes (names, conjugate priors, and the form of the latent mean, checked
numerically) and raises :class:`~bayesynth.errors.IncompatibleModelError` otherwise, so that
:func:`bayesynth.sample` can hand that variable to PyMC's own samplers.

==================================  ===========================  ==================================
step                                updates                      full conditional
==================================  ===========================  ==================================
:class:`FactorScoresGibbs`          ``eta``                      normal per record (rpl level
                                                                 columns integrated out: exact MH)
:class:`LatentGibbs`                ``z``                        truncated normals (rank likelihood,
                                                                 multinomial probit or rpl)
:class:`LoadingsGibbs`              ``Lambda``                   element by element, phi
                                                                 integrated out (slice; MGP
                                                                 prior), else normal per row
:class:`ShrinkageGibbs`             ``phi``, ``delta``           gamma (MGP prior)
:class:`PrecisionGibbs`             ``prec``                     gamma
:class:`InterceptGibbs`             ``alpha``, ``Lambda``,       categorical intercepts, latent
                                    ``z``, ``eta``               values integrated out (slice);
                                                                 rare levels' rows jointly
                                                                 (exact MH)
:class:`ColumnScaleMove`            ``z``, ``Lambda``, ``prec``, scale of each free-scale column
                                    ``alpha``                    (exact MH along the orbit)
:class:`UtilityScaleMove`           ``z``, ``Lambda``, ``alpha`` joint scale of each multinomial-
                                                                 probit block (exact Gibbs, gamma)
:class:`UtilityTransportScaleMove`  ``z``, ``Lambda``,           scale of each multinomial-
                                    ``alpha``, ``phi``           probit block, its utilities
                                                                 transported (exact MH)
:class:`UtilityTransportLocationMove` ``z``, ``alpha``         location of each multinomial-
                                                                 probit intercept, its utilities
                                                                 transported (exact MH; not in
                                                                 the default sweep)
:class:`TranslationMove`            ``z``                        location of each rank-
                                                                 likelihood column
                                                                 (exact Gibbs, normal)
:class:`WarpMove`                   ``z``                        monotone warp of ordered columns
                                                                 with more than two values
                                                                 (exact generalised Gibbs)
:class:`ScoreTranslationMove`       ``eta``, ``z``, ``alpha``    common shift of every record's
                                                                 scores (exact Gibbs, normal)
:class:`FactorScaleMove`            ``eta``, ``Lambda``          scale of each factor (exact, GIG)
:class:`RotationMove`               ``Lambda``, ``eta``, ``phi`` rotation of each pair of factors
                                                                 (exact MH, phi integrated out)
:class:`MarginalLoadingsHMC`        ``Lambda``, ``prec``,        loadings and precisions with the
                                    ``eta``                      scores integrated out (HMC)
==================================  ===========================  ==================================
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pymc as pm
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation
from pymc.util import get_random_generator
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import GammaRV, NormalRV

from bayesynth.errors import IncompatibleModelError
from bayesynth.models.layout import LatentLayout
from bayesynth.models.rank_probit_copula import get_layout
from bayesynth.samplers.kernels import (
    draw_alpha_collapsed,
    draw_categorical_rows,
    draw_column_scale,
    draw_eta,
    draw_eta_collapsed,
    draw_factor_scale,
    draw_Lambda,
    draw_Lambda_marginal_phi,
    draw_loadings_hmc,
    draw_mgp,
    draw_prec,
    draw_rotation,
    draw_score_translation,
    draw_translation,
    draw_utility_location_transport,
    draw_utility_scale,
    draw_utility_scale_transport,
    draw_warp,
    draw_z,
    factor_mean,
    redraw_unconstrained,
    row_step_columns,
    unconstrained_patterns,
)

__all__ = [
    "CopulaGibbsStep",
    "LatentGibbs",
    "FactorScoresGibbs",
    "LoadingsGibbs",
    "ShrinkageGibbs",
    "PrecisionGibbs",
    "InterceptGibbs",
    "ColumnScaleMove",
    "UtilityScaleMove",
    "UtilityTransportScaleMove",
    "UtilityTransportLocationMove",
    "TranslationMove",
    "WarpMove",
    "ScoreTranslationMove",
    "FactorScaleMove",
    "RotationMove",
    "MarginalLoadingsHMC",
    "COPULA_STEPS",
    "OPTIONAL_COPULA_STEPS",
]


# ------------------------------------------------------------------------- model inspection


def _free_rv(model: pm.Model, name: str):
    try:
        rv = model[name]
    except KeyError:
        return None
    return rv if rv in model.free_RVs else None


def _dist_params(rv) -> list:
    node = rv.owner
    return list(node.op.dist_params(node))


def _is_constant(graph) -> bool:
    return all(isinstance(v, Constant) for v in graph_inputs([graph]))


def _constant(graph) -> np.ndarray:
    return np.asarray(graph.eval(), dtype=float)


def _normal_prior(model: pm.Model, name: str, step: str, *, zero_mean: bool = False):
    """Return the (mu, sigma) graphs of a normal prior on ``name``; refuse any other prior."""
    rv = model[name]
    if not isinstance(rv.owner.op, NormalRV):
        raise IncompatibleModelError(f"{step} needs a normal prior on '{name}'.")
    mu, sd = _dist_params(rv)
    if zero_mean and (not _is_constant(mu) or np.any(_constant(mu) != 0.0)):
        raise IncompatibleModelError(f"{step} needs a zero-mean normal prior on '{name}'.")
    return mu, sd


def _fixed_gamma(model: pm.Model, name: str, step: str) -> tuple[np.ndarray, np.ndarray]:
    """(shape, rate) of a gamma prior with constant parameters on ``name``."""
    rv = model[name]
    if not isinstance(rv.owner.op, GammaRV) or not all(
        _is_constant(g) for g in _dist_params(rv)
    ):
        raise IncompatibleModelError(f"{step} needs a gamma prior with fixed parameters on "
                                     f"'{name}'.")
    shape, scale = (_constant(g) for g in _dist_params(rv))
    return shape, 1.0 / scale


class _ValueIO:
    """Read and write a free variable's value in a point (handles the log transform)."""

    def __init__(self, model: pm.Model, rv):
        self.name = rv.name
        value = model.rvs_to_values[rv]
        self.key = value.name
        tr = model.rvs_to_transforms.get(rv)
        if tr is None:
            self.log = False
        elif type(tr).__name__ == "LogTransform":
            self.log = True
        else:
            raise IncompatibleModelError(
                f"Variable '{rv.name}' uses the {type(tr).__name__} transform; the copula "
                "Gibbs steps support untransformed or log-transformed variables only."
            )

    def get(self, point: dict[str, np.ndarray]) -> np.ndarray:
        v = point[self.key]
        return np.exp(v) if self.log else v

    def put(self, point: dict[str, np.ndarray], x: np.ndarray) -> None:
        point[self.key] = np.asarray(np.log(x) if self.log else x, dtype=float)


@dataclass
class CopulaStructure:
    """What the copula steps need to know about a model, found and checked once per model."""

    layout: LatentLayout
    io: dict[str, _ValueIO]
    sd_fn: Any
    level_cols: np.ndarray
    p: int
    k: int
    #: Results of prior checks shared by several steps (computed once per model).
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def free(self) -> np.ndarray:
        """Columns whose residual scale is a parameter (``prec``)."""
        return self.layout.free_scale_columns

    def value(self, point: dict[str, np.ndarray], name: str) -> np.ndarray:
        return self.io[name].get(point)

    def alpha_full(self, point: dict[str, np.ndarray]) -> np.ndarray:
        out = np.zeros(self.p)
        if "alpha" in self.io:
            out[self.level_cols] = self.io["alpha"].get(point)
        return out

    def sd(self, point: dict[str, np.ndarray]) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.sd_fn(point), dtype=float).ravel(), (self.p,))

    def unconstrained_patterns(self) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Return the records grouped by their unconstrained latent columns (computed once).

        See :func:`~bayesynth.samplers.kernels.unconstrained_patterns`.
        """
        if "patterns" not in self.checks:
            lay = self.layout
            self.checks["patterns"] = unconstrained_patterns(lay.n, self.p,
                                                             lay.unconstrained_records)
        return self.checks["patterns"]


def _mgp_nu(model: pm.Model, structure: CopulaStructure, step: str) -> float:
    """Return nu of the multiplicative gamma process prior on ``Lambda``, checked once per model.

    The prior must be ``Lambda ~ N(0, 1/(phi cumprod(delta)))`` with ``phi ~ Gamma(nu/2,
    rate=nu/2)`` (fixed parameters); the form of the loadings' sd is checked numerically at a
    random point.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        Naming ``step``, when the model has another prior.
    """
    cached = structure.checks.get("mgp_nu")
    if cached is None:
        cached = structure.checks["mgp_nu"] = _find_mgp_nu(model, structure)
    if isinstance(cached, str):
        raise IncompatibleModelError(f"{step} needs {cached}.")
    return cached


def _find_mgp_nu(model: pm.Model, s: CopulaStructure) -> float | str:
    if "phi" not in s.io or "delta" not in s.io:
        return "free variables phi and delta (the multiplicative gamma process prior)"
    try:
        shape, rate = _fixed_gamma(model, "phi", "MGP")
        _, lam_sd = _normal_prior(model, "Lambda", "MGP", zero_mean=True)
    except IncompatibleModelError:
        return "phi ~ Gamma(nu/2, rate=nu/2) and a zero-mean normal prior on Lambda"
    if np.ptp(shape) > 0 or not np.allclose(shape, rate, rtol=1e-6):
        return "phi ~ Gamma(nu/2, rate=nu/2)"
    sd_fn = _compile_point_fn(model, lam_sd)
    rng = np.random.default_rng(7)
    test = dict(model.initial_point())
    phi_t = rng.gamma(2.0, size=(s.p, s.k))
    delta_t = rng.gamma(2.0, size=s.k)
    s.io["phi"].put(test, phi_t)
    s.io["delta"].put(test, delta_t)
    want = 1.0 / np.sqrt(phi_t * np.cumprod(delta_t)[None, :])
    if not np.allclose(np.broadcast_to(sd_fn(test), (s.p, s.k)), want, rtol=1e-8):
        return "Lambda ~ N(0, 1/(phi * cumprod(delta)))"
    return float(2.0 * np.ravel(shape)[0])


_STRUCTURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_copula_latent(var) -> bool:
    from bayesynth.models.rank_probit_copula import LatentNormalRV

    return var.owner is not None and isinstance(var.owner.op, LatentNormalRV)


def _alpha_prior(s: CopulaStructure, mu_fn, sd_fn, point) -> tuple[np.ndarray, np.ndarray]:
    """Return the intercepts' normal prior mean and sd per latent column (0 and 1 elsewhere).

    ``mu_fn`` and ``sd_fn`` are the compiled prior parameters of ``alpha``; None when the model
    has no categorical columns.
    """
    mu, sd = np.zeros(s.p), np.ones(s.p)
    if mu_fn is not None:
        mu[s.level_cols] = np.broadcast_to(mu_fn(point), (len(s.level_cols),))
        sd[s.level_cols] = np.broadcast_to(sd_fn(point), (len(s.level_cols),))
    return mu, sd


def _uncovered_variables(model: pm.Model, steps: list) -> list[str]:
    """Return the names of the model's free variables that none of ``steps`` updates.

    PyMC's own step samples these when ``steps`` is passed to :func:`pymc.sample`; the
    warnings about swapped priors name them.
    """
    covered = {v.name for st in steps for v in st.vars}
    return [model.values_to_rvs[v].name for v in model.value_vars if v.name not in covered]


def _has_mnp_blocks(layout: LatentLayout) -> bool:
    """Whether ``layout`` has a multinomial-probit categorical variable."""
    return len(layout.k_mnp_off) > 1


def _mnp_groups(layout: LatentLayout, per_column: bool) -> list[tuple[int, np.ndarray | None]]:
    """Return the groups the transport steps move, in turn, as (block, positions).

    Each multinomial-probit block as a whole (positions None), then, with ``per_column``, each
    column of a block with several.
    """
    groups: list[tuple[int, np.ndarray | None]] = []
    for b in range(len(layout.k_mnp_off) - 1):
        groups.append((b, None))
        m = int(layout.k_mnp_off[b + 1] - layout.k_mnp_off[b])
        if per_column and m > 1:
            groups.extend((b, np.array([j])) for j in range(m))
    return groups


def _owned_z(z: np.ndarray) -> np.ndarray:
    """Return ``z`` itself when the kernels may update it in place, else a Fortran copy."""
    if z.flags.f_contiguous and z.flags.writeable:
        return z
    return np.array(z, order="F", dtype=np.float64, copy=True)


def _constrained_records(layout: LatentLayout, cols: np.ndarray,
                         collapse: bool) -> list[np.ndarray] | None:
    """Per column of ``cols``, the records whose latent value the data constrain.

    None when ``collapse`` is off or no column of ``cols`` has an unconstrained record (every
    record then takes part).
    """
    free = dict(layout.unconstrained_records) if collapse else {}
    if not any(int(j) in free for j in cols):
        return None
    out = []
    for j in cols:
        keep = np.ones(layout.n, dtype=bool)
        keep[free.get(int(j), np.zeros(0, dtype=np.int64))] = False
        out.append(np.flatnonzero(keep))
    return out


def _draw_scores(step: CopulaGibbsStep, point: dict[str, np.ndarray], alpha: np.ndarray,
                 Lam: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Draw the factor scores from their conditional and put them in ``point``.

    With :attr:`FactorScoresGibbs.collapse_unconstrained` (the default) the latent values the
    data leave unconstrained are integrated out of the scores' conditional and then redrawn
    given the new scores (in ``point``'s ``z``): one exact block for (eta, z_U); see
    :func:`~bayesynth.samplers.kernels.draw_eta`. Otherwise the plain block given every value.
    """
    s = step.structure
    key = s.io["z"].key
    prec = 1.0 / sd**2
    unc = s.layout.unconstrained_records
    if not (FactorScoresGibbs.collapse_unconstrained and unc):
        eta = draw_eta(step.rng, point[key], alpha, Lam, prec)
    else:
        z = _owned_z(point[key])
        eta = draw_eta(step.rng, z, alpha, Lam, prec, patterns=s.unconstrained_patterns())
        redraw_unconstrained(step.rng, z, alpha, Lam, eta, sd, unc)
        point[key] = z
    s.io["eta"].put(point, eta)
    return eta


def _dual_average(initial_step: float, target_accept: float) -> DualAverageAdaptation:
    """Dual-averaging adaptation of a step size (Hoffman & Gelman 2014), Stan's settings."""
    return DualAverageAdaptation(initial_step, target_accept, gamma=0.05, k=0.75, t0=10)


def _compile_point_fn(model: pm.Model, graph):
    """Return ``point -> value of graph`` at a point of ``model``'s value variables.

    The function takes only the value variables the graph depends on (a PyTensor function
    checks each input at every call, and the copula's steps call these every iteration). A
    graph of constants alone (a fixed prior parameter) is evaluated once here and returned
    read-only at every call.
    """
    [graph] = model.replace_rvs_by_values([graph])
    leaves = set(graph_inputs([graph]))
    inputs = [v for v in model.value_vars if v in leaves]
    names = [v.name for v in inputs]
    if all(isinstance(v, Constant) for v in leaves):
        value = np.array(model.compile_fn(graph, inputs=[], point_fn=False)())
        value.setflags(write=False)
        return lambda point: value
    fn = model.compile_fn(graph, inputs=inputs, point_fn=False)
    return lambda point: fn(*[point[name] for name in names])


def copula_structure(model: pm.Model) -> CopulaStructure:
    """Find and check the rank-probit copula structure of ``model`` (cached per model).

    Checks: a :class:`~bayesynth.models.rank_probit_copula.RankProbitConstraint` potential on a
    free normal variable ``z``; free variables ``eta`` (standard normal) and ``Lambda``; and that
    the mean of ``z`` equals ``alpha_full + eta @ Lambda.T``, verified by evaluating it at random
    values of ``alpha``, ``Lambda`` and ``eta``.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
    """
    cached = _STRUCTURES.get(model)
    if cached is not None:
        return cached
    layout = get_layout(model)
    rvs = {name: _free_rv(model, name) for name in ("z", "eta", "Lambda", "alpha")}
    for name in ("z", "eta", "Lambda"):
        if rvs[name] is None:
            raise IncompatibleModelError(
                f"The copula steps need a free variable '{name}'; this model has none. Build "
                "the model with bayesynth.models.rank_probit_copula."
            )
    z, eta = rvs["z"], rvs["eta"]
    if not isinstance(z.owner.op, NormalRV):
        raise IncompatibleModelError("The latent variable 'z' must be normal given its mean.")
    if not isinstance(eta.owner.op, NormalRV) or not all(
        _is_constant(g) for g in _dist_params(eta)
    ):
        raise IncompatibleModelError("The factor scores 'eta' must have a N(0, 1) prior.")
    e_mu, e_sd = (_constant(g) for g in _dist_params(eta))
    if np.any(e_mu != 0.0) or np.any(e_sd != 1.0):
        raise IncompatibleModelError("The factor scores 'eta' must have a N(0, 1) prior.")
    mu_graph, sd_graph = _dist_params(z)
    point = model.initial_point()
    io = {name: _ValueIO(model, rv) for name, rv in rvs.items() if rv is not None}
    for extra in ("prec", "phi", "delta"):
        rv = _free_rv(model, extra)
        if rv is not None:
            io[extra] = _ValueIO(model, rv)
    p = layout.p_latent
    k = int(np.shape(point[io["Lambda"].key])[1])
    struct = CopulaStructure(layout=layout, io=io, sd_fn=_compile_point_fn(model, sd_graph),
                             level_cols=layout.level_columns, p=p, k=k)
    # Check the latent mean numerically at a random point.
    rng = np.random.default_rng(12345)
    test = dict(point)
    for name in ("eta", "Lambda", "alpha"):
        if name in io:
            shape = np.shape(point[io[name].key])
            io[name].put(test, np.abs(rng.normal(size=shape)) + 0.1)
    mu_fn = _compile_point_fn(model, mu_graph)
    got = np.broadcast_to(mu_fn(test), (layout.n, p))
    want = factor_mean(struct.alpha_full(test), struct.value(test, "Lambda"),
                       struct.value(test, "eta"))
    if not np.allclose(got, want, rtol=1e-8, atol=1e-8):
        raise IncompatibleModelError(
            "The mean of 'z' is not alpha + eta @ Lambda.T (checked at a random point); the "
            "copula Gibbs steps do not fit this model."
        )
    _STRUCTURES[model] = struct
    return struct


# --------------------------------------------------------------------------------- base step


_FIXED_ATTRS = frozenset({"structure", "rng", "vars", "tune", "stats_dtypes",
                          "stats_dtypes_shapes", "_BlockedStep__newargs", "_initial_state"})


def initial_state(step: Any, names: Sequence[str] | None = None) -> dict[str, Any]:
    """Copy what a step changes while it runs (adaptation, caches, acceptance rates).

    With ``names``, those attributes; otherwise every attribute but the compiled functions
    and the model structure, which do not change.
    """
    import copy

    if names is not None:
        return {k: copy.deepcopy(getattr(step, k)) for k in names}
    return {k: copy.deepcopy(v) for k, v in vars(step).items()
            if k not in _FIXED_ATTRS and not callable(v) and type(v).__name__ != "PointFunc"}


def restore_state(step: Any, state: dict[str, Any]) -> None:
    """Put back a copy of what :func:`initial_state` saved."""
    import copy

    for k, v in state.items():
        setattr(step, k, copy.deepcopy(v))


@dataclass_state
class CopulaGibbsState(StepMethodState):
    tune: bool = field(default=True)


class CopulaGibbsStep(BlockedStep):
    """Base class: a Gibbs update of a fixed block of the copula model.

    Parameters
    ----------
    vars : list, optional
        The variables of the block (by default :attr:`targets`; given explicitly they must be
        exactly those).
    model : pymc.Model, optional
        Taken from the context when omitted.
    rng : RandomGenerator, optional
        Seed or generator; :func:`pymc.sample` replaces it per chain.
    """

    name = "copula_gibbs"
    default_blocked = True
    targets: ClassVar[tuple[str, ...]] = ()
    stats_dtypes_shapes = {"tune": (bool, [])}
    _state_class = CopulaGibbsState

    #: The variables this step is the Gibbs block of (PyMC's automatic assignment gives them
    #: to it); empty for the extra group moves, which only :func:`bayesynth.steps` adds.
    primary: ClassVar[tuple[str, ...]] = ()

    def __init__(self, vars=None, *, model=None, rng=None, blocked: bool = True,
                 **pymc_kwargs: Any):
        # pymc_kwargs: what PyMC's automatic assignment passes (initial_point, compile_kwargs)
        model = modelcontext(model)
        self.structure = copula_structure(model)
        rvs = [_free_rv(model, n) for n in self.targets]
        missing = [n for n, rv in zip(self.targets, rvs) if rv is None]
        if missing:
            raise IncompatibleModelError(
                f"{type(self).__name__} updates {list(self.targets)}, but the model has no free "
                f"variable(s) {missing} (was the prior replaced?)."
            )
        value_vars = [model.rvs_to_values[rv] for rv in rvs]
        if vars is not None:
            given = {getattr(v, "name", str(v)) for v in vars}
            allowed = {v.name for v in value_vars} | set(self.targets)
            all_names = {v.name for v in model.value_vars}
            if given != all_names and not given <= allowed:
                raise IncompatibleModelError(
                    f"{type(self).__name__} updates exactly {list(self.targets)}; "
                    f"got {sorted(given)}."
                )
        self.vars = value_vars
        self.rng = get_random_generator(rng)
        self.tune = True
        self._setup(model)
        self._initial_state = initial_state(self)

    def reset_tuning(self) -> None:
        """Start a chain from the state the step was built in (PyMC calls this per chain).

        Chains run one after the other in one process (``cores=1``) would otherwise carry the
        adaptation (step sizes, proposal scales, Newton starts) from one chain into the next,
        so the same seed gave other draws than with a process per chain.
        """
        restore_state(self, self._initial_state)

    @classmethod
    def applies(cls, layout: LatentLayout) -> bool:
        """Whether a model with this layout has the block the step moves.

        :func:`~bayesynth.samplers.assign_copula_steps` leaves a step out silently where its
        block is absent (the categorical moves on a table without categorical variables) and
        with a warning where the block is there but its prior does not fit.
        """
        return True

    def _setup(self, model: pm.Model) -> None:  # pragma: no cover - trivial default
        """Subclass hook: check priors and compile what the update needs."""

    def _update(self, point: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def step(self, point):
        """Apply this step's update to a shallow copy of ``point``.

        Parameters
        ----------
        point : dict of str to numpy.ndarray
            Current values of the model's value variables, keyed by name.

        Returns
        -------
        new_point : dict of str to numpy.ndarray
            The point after the update.
        stats : list of dict
            One dict of sampler statistics, as declared in ``stats_dtypes_shapes``: ``tune``,
            whether the step is tuning, and any a subclass adds through :meth:`_stats`.
        """
        new = dict(point)
        self._update(new)
        return new, [{"tune": self.tune, **self._stats()}]

    def _stats(self) -> dict[str, Any]:
        """Return the step's own statistics after an update (beyond ``tune``); none here."""
        return {}

    @classmethod
    def competence(cls, var, has_grad):
        """Rate how well this step fits ``var`` for PyMC's automatic step assignment.

        IDEAL for the variables this step is the Gibbs block of, in a copula model whose
        structure and priors it was written for; INCOMPATIBLE otherwise.

        The copula's latent data are recognised by their op alone; the other blocks need the
        model, which PyMC's automatic assignment does not pass: it is read from the model
        context (``with model: pm.sample()``).

        Parameters
        ----------
        var : TensorVariable
            A free random variable of the model.
        has_grad : bool
            Whether gradients are available (unused).

        Returns
        -------
        pymc.step_methods.compound.Competence
            ``Competence.IDEAL`` or ``Competence.INCOMPATIBLE``.
        """
        name = getattr(var, "name", None)
        if name not in cls.primary:
            return Competence.INCOMPATIBLE
        try:
            model = modelcontext(None)
        except TypeError:
            model = None
        if model is None or name not in model.named_vars or model[name] is not var:
            if cls is LatentGibbs and _is_copula_latent(var):
                return Competence.IDEAL
            return Competence.INCOMPATIBLE
        try:
            copula_structure(model)
            cls(model=model)
        except IncompatibleModelError:
            return Competence.INCOMPATIBLE
        return Competence.IDEAL


# -------------------------------------------------------------------------------- the blocks


class LatentGibbs(CopulaGibbsStep):
    """Latent data ``z`` by truncated normals under the rank-probit constraints (compiled)."""

    name = "latent_gibbs"
    targets = ("z",)
    primary = ("z",)

    def _setup(self, model):
        self._last: np.ndarray | None = None
        self._key = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        z = point[self._key]
        if z is not self._last or not z.flags.f_contiguous:
            z = np.array(z, order="F", dtype=np.float64, copy=True)
        mu = factor_mean(s.alpha_full(point), s.value(point, "Lambda"), s.value(point, "eta"))
        draw_z(self.rng, z, mu, s.sd(point), s.layout, out=z)
        point[self._key] = z
        self._last = z


class FactorScoresGibbs(CopulaGibbsStep):
    """Factor scores ``eta``.

    With ``"rpl"`` level columns in the model and ``collapse_levels=True`` each record's
    scores are updated with those columns' latent values integrated out, by an exact
    Metropolis-Hastings step (:func:`~bayesynth.samplers.kernels.draw_eta_collapsed`); the
    z step that follows redraws those latent values given the new scores. Otherwise the scores
    come from their multivariate normal full conditional (the paper's block), by default with
    the latent values the data leave unconstrained integrated out and then redrawn
    (:attr:`collapse_unconstrained`).

    Parameters
    ----------
    vars, model, rng
        As in :class:`CopulaGibbsStep`.
    blocked : bool, default True
        Accepted for PyMC's step interface; not used.
    collapse_levels : bool, default False
        Integrate the ``"rpl"`` level columns out of the update, as above.
    """

    name = "factor_scores_gibbs"
    targets = ("eta", "z")
    primary = ("eta",)
    stats_dtypes_shapes = {"tune": (bool, []), "accept": (float, [])}
    #: Integrate the latent values the data leave unconstrained (missing values, special
    #: codes, rule-fixed records) out of the scores' conditional, then redraw them given the
    #: new scores: an exact block for (eta, z_U) (see
    #: :func:`~bayesynth.samplers.kernels.draw_eta`). Also used where the Hamiltonian move
    #: and the row move redraw the scores. Off: the paper's block given every value.
    collapse_unconstrained: ClassVar[bool] = True

    def __init__(self, vars=None, *, model=None, rng=None, blocked: bool = True,
                 collapse_levels: bool = False, **pymc_kwargs: Any):
        self.collapse_levels = collapse_levels
        super().__init__(vars, model=model, rng=rng, blocked=blocked, **pymc_kwargs)

    def _setup(self, model):
        s = self.structure
        rpl = s.layout.rpl_columns
        self._collapsed = bool(self.collapse_levels and len(rpl) and len(rpl) < s.p)
        self._accept = 1.0

    @property
    def collapsed(self) -> bool:
        """Whether the update integrates the ``"rpl"`` level columns out (an MH step)."""
        return self._collapsed

    def _update(self, point):
        s = self.structure
        prec = 1.0 / s.sd(point) ** 2
        z, alpha, Lam = s.value(point, "z"), s.alpha_full(point), s.value(point, "Lambda")
        if self._collapsed:
            eta, self._accept = draw_eta_collapsed(
                self.rng, z, alpha, Lam, prec, s.value(point, "eta"), s.layout.rpl_columns,
                s.layout.k_lvl_sign)
            s.io["eta"].put(point, eta)
        else:
            _draw_scores(self, point, alpha, Lam, s.sd(point))

    def _stats(self) -> dict[str, Any]:
        """Return ``accept``: acceptance rate of the latest update (1 for the plain block)."""
        return {"accept": self._accept}


class LoadingsGibbs(CopulaGibbsStep):
    """Loadings ``Lambda``, element by element under the MGP prior, else row by row.

    Under the default multiplicative gamma process one element at a time with the local
    shrinkage ``phi`` integrated out (slice sampling, see
    :func:`~bayesynth.samplers.kernels.draw_Lambda_marginal_phi`); for any other zero-mean
    normal prior, row by row from the multivariate normal full conditional.
    """

    name = "loadings_gibbs"
    targets = ("Lambda", "z")
    primary = ("Lambda",)
    #: Integrate the latent values the data leave unconstrained (missing values, special
    #: codes, rule-fixed records) out of each row's conditional, then redraw them: an exact
    #: partially collapsed block (see :func:`~bayesynth.samplers.kernels.
    #: observed_cross_products`). Off: the plain Gibbs block given every record.
    collapse_unconstrained: ClassVar[bool] = True

    def _setup(self, model):
        _, sd = _normal_prior(model, "Lambda", "LoadingsGibbs", zero_mean=True)
        self._prior_sd = _compile_point_fn(model, sd)
        try:
            self._nu = _mgp_nu(model, self.structure, "LoadingsGibbs")
        except IncompatibleModelError:
            self._nu = None  # any other zero-mean normal prior: row by row
        self._free = (self.structure.layout.unconstrained_records
                      if self.collapse_unconstrained else [])
        self._zkey = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        sd = s.sd(point)
        prec = 1.0 / sd**2
        z, alpha, eta = point[self._zkey], s.alpha_full(point), s.value(point, "eta")
        if self._nu is not None:
            tau = np.cumprod(s.value(point, "delta"))
            Lam = draw_Lambda_marginal_phi(self.rng, z, alpha, eta, prec,
                                           s.value(point, "Lambda"), tau, self._nu, self._free)
        else:
            prior_prec = np.broadcast_to(1.0 / np.asarray(self._prior_sd(point)) ** 2,
                                         (s.p, s.k))
            Lam = draw_Lambda(self.rng, z, alpha, eta, prec, prior_prec, self._free)
        s.io["Lambda"].put(point, Lam)
        if self._free:
            z = _owned_z(z)
            redraw_unconstrained(self.rng, z, alpha, Lam, eta, sd, self._free)
            point[self._zkey] = z


class ShrinkageGibbs(CopulaGibbsStep):
    """Local and global shrinkage ``phi`` and ``delta`` of the multiplicative gamma process."""

    name = "shrinkage_gibbs"
    targets = ("phi", "delta")
    primary = ("phi", "delta")

    def _setup(self, model):
        d_shape, d_rate = _fixed_gamma(model, "delta", "ShrinkageGibbs")
        self._nu = _mgp_nu(model, self.structure, "ShrinkageGibbs")
        k = self.structure.k
        self._delta_shape = np.broadcast_to(d_shape, (k,)).astype(float)
        self._delta_rate = np.broadcast_to(d_rate, (k,)).astype(float)

    def _update(self, point):
        s = self.structure
        phi, delta = draw_mgp(self.rng, s.value(point, "Lambda"), s.value(point, "delta"),
                              self._nu, self._delta_shape, self._delta_rate)
        s.io["phi"].put(point, phi)
        s.io["delta"].put(point, delta)


class PrecisionGibbs(CopulaGibbsStep):
    """Residual precisions ``prec`` = sigma^-2 of the free-scale columns.

    Drawn from their gamma full conditional; multinomial-probit utility columns keep
    sigma = 1.
    """

    name = "precision_gibbs"
    targets = ("prec", "z")
    primary = ("prec",)
    #: As :attr:`LoadingsGibbs.collapse_unconstrained`, for the residual precisions.
    collapse_unconstrained: ClassVar[bool] = True

    def _setup(self, model):
        shape, rate = _fixed_gamma(model, "prec", "PrecisionGibbs")
        s = self.structure
        nf = len(s.free)
        self._a = np.broadcast_to(shape, (nf,)).astype(float)
        self._b = np.broadcast_to(rate, (nf,)).astype(float)
        test = dict(model.initial_point())
        prec_t = np.random.default_rng(3).gamma(2.0, size=nf)
        s.io["prec"].put(test, prec_t)
        want = np.ones(s.p)
        want[s.free] = prec_t**-0.5
        if not np.allclose(s.sd(test), want, rtol=1e-8):
            raise IncompatibleModelError("PrecisionGibbs needs z ~ N(., prec^-1/2) on the "
                                         "free-scale columns and sd 1 elsewhere.")
        free_records = (s.layout.unconstrained_records if self.collapse_unconstrained
                        else [])
        pos = {int(j): c for c, j in enumerate(s.free)}
        self._free_local = [(pos[j], U) for j, U in free_records if j in pos]
        self._free_full = [(j, U) for j, U in free_records if j in pos]
        self._zkey = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        f = s.free
        z, alpha, Lam, eta = (point[self._zkey], s.alpha_full(point), s.value(point, "Lambda"),
                              s.value(point, "eta"))
        prec = draw_prec(self.rng, z[:, f], alpha[f], Lam[f], eta, self._a, self._b,
                         self._free_local)
        s.io["prec"].put(point, prec)
        if self._free_full:
            z = _owned_z(z)
            redraw_unconstrained(self.rng, z, alpha, Lam, eta, s.sd(point), self._free_full)
            point[self._zkey] = z


class InterceptGibbs(CopulaGibbsStep):
    """Intercepts of the categorical columns, with their latent values integrated out.

    For the categorical columns of the rarest levels (those with at most ``rare_share`` of
    the records, as many as ``row_budget`` affords), intercept and loadings jointly by an
    exact Metropolis-Hastings step with the latent values and the factor scores integrated out
    (:func:`~bayesynth.samplers.kernels.draw_categorical_rows`); for every categorical
    column, the intercept alone with the column's latent values integrated out (slice
    sampling, :func:`~bayesynth.samplers.kernels.draw_alpha_collapsed`), before the joint
    move. Both redraw the column's latent values afterwards: exact partially collapsed
    blocks. Until 2026-12-06 the joint move was an independence sampler, which rejects every
    proposal from a state far in its target's tail; the slice, which moves from where the
    chain is, brought the intercept back from there (on SD2011 the row moves of two rare
    levels accepted 0 and 0.5% of proposals without it, 26% and 49% with it). Since then a
    column whose level has enough records (``kernels.ROW_STEP_RECORDS`` per parameter,
    :func:`~bayesynth.samplers.kernels.row_step_columns`) has the joint move propose by a
    Fisher-scoring step from the current value instead, which also moves from where the
    chain is, and has no slice (``slice_stepped`` gives it one again); the rarest levels
    (SD2011's) keep the independence proposal and the slice. Needs a normal prior
    on ``alpha`` and, for the joint move, a zero-mean normal prior on ``Lambda`` (without it
    every column has its intercept collapsed).

    The plain Gibbs updates move a categorical column's intercept and loadings by O(1/sqrt(n))
    per iteration whatever their posterior spread; for rare levels, whose parameters are
    uncertain, that makes them mix very slowly; so do the strongly correlated utilities of an
    ordinal variable treated as unordered. The joint move costs O(n k^2) per column (two
    evaluations of the target with its derivatives, at the current and the proposed value,
    for a Fisher-scoring step; two Newton searches to a mode, 3-5 evaluations each, for the
    independence proposal), so it is given to the columns in order of rarity while their
    total cost n (k + 1)^2
    (number of columns) stays below ``row_budget`` (5e7). Measured on one core (2026-12-06,
    ``benchmarks/copula_gibbs.py --per-step``): 13 columns at n = 20,000, k = 8 (cost
    2.1e7) take 0.053 s an iteration, all with the Fisher-scoring step and so without slices
    (0.086 s with the 13 slices too, 0.170 s with the mode's proposal for every column).
    With more than ``max_columns`` columns without the joint move, a random subset of that
    many of them has its intercept updated each iteration (a random scan of exact moves); the
    row-moved columns that have the slice always do.
    """

    name = "intercept_gibbs"
    targets = ("alpha", "Lambda", "z", "eta")
    primary = ("alpha",)
    stats_dtypes_shapes = {"tune": (bool, []), "accept_rows": (float, [])}
    rare_share: ClassVar[float] = 1.0
    #: Integrate the factor scores out of the rare levels' row move too (see
    #: :func:`~bayesynth.samplers.kernels.draw_categorical_rows`).
    integrate_eta: ClassVar[bool] = True
    row_budget: ClassVar[float] = 5e7
    max_columns: ClassVar[int] = 32
    #: Also slice the intercept of the columns whose row move takes the Fisher-scoring step.
    slice_stepped: ClassVar[bool] = False

    @classmethod
    def applies(cls, layout: LatentLayout) -> bool:
        """Whether the table has a categorical variable."""
        return bool(layout.categorical)

    def _setup(self, model):
        mu, sd = _normal_prior(model, "alpha", "InterceptGibbs")
        self._mu = _compile_point_fn(model, mu)
        self._sd = _compile_point_fn(model, sd)
        self._lam_sd = None
        try:
            _, lam_sd = _normal_prior(model, "Lambda", "InterceptGibbs", zero_mean=True)
            self._lam_sd = _compile_point_fn(model, lam_sd)
        except IncompatibleModelError:
            pass
        lay = self.structure.layout
        share = []  # per categorical column in kernel order: its level's share of records
        mnp = [b for b in lay.categorical if b.likelihood == "mnp"]
        rpl = [b for b in lay.categorical if b.likelihood == "rpl"]
        for b in mnp + rpl:
            counts = np.bincount(b.codes[b.codes >= 0], minlength=len(b.levels))
            freq = counts / max(counts.sum(), 1)
            share.extend(freq[b.column_levels])
        share = np.asarray(share, dtype=float)
        s = self.structure
        # the rarest columns first, as many as the budget allows
        per_column = lay.n * (s.k + 1) ** 2
        n_afford = int(self.row_budget // per_column)
        self._rare = np.zeros(len(share), dtype=bool)
        order = np.argsort(share, kind="stable")
        order = order[share[order] <= self.rare_share][:n_afford]
        self._rare[order] = True
        self._zkey = model.rvs_to_values[model["z"]].name
        self._accept = 1.0
        self._modes = np.zeros((len(share), s.k + 1))  # Newton starts of the row moves
        self._rows = self._lam_sd is not None and bool(self._rare.any())
        # The intercept-only slice runs on every column, the row-moved ones included (before
        # their row move). A rare level's row move is an independence sampler: from a state
        # far in its target's tail (the block scale moves carry a rare level's intercept and
        # loadings there: on SD2011 the utility transport scale move took edu[NA]'s
        # intercept, 4 of 4,000 records, from -2.9 to -10 in 60 iterations while its
        # conditional mode stayed near -3) its proposals are all rejected, and the slice,
        # which moves from where the chain is, brings the intercept back. (Levels with the
        # records for it have a Fisher-scoring step instead, kernels.ROW_STEP_RECORDS.)
        # which row moves propose by the Fisher-scoring step: fixed by the data, so read once
        # here for both the slices and the kernel
        self._stepped = row_step_columns(lay, s.k)
        self._alpha_cols = np.ones(len(share), dtype=bool)
        if self._rows and not self.slice_stepped:
            # the Fisher-scoring step moves from where the chain is, so its columns need no
            # slice to come back from a tail (see the class docstring)
            self._alpha_cols &= ~(self._rare & self._stepped)

    def _update(self, point):
        s = self.structure
        z = point[self._zkey]
        z = _owned_z(z)
        pm_, ps = _alpha_prior(s, self._mu, self._sd, point)
        Lam, eta, sd = s.value(point, "Lambda"), s.value(point, "eta"), s.sd(point)
        cols = self._alpha_cols
        free = np.flatnonzero(cols & ~self._rare)
        if len(free) > self.max_columns:  # a random subset (a copy: the mask stays whole)
            cols = cols & self._rare  # the row-moved columns that have the slice every time
            cols[self.rng.choice(free, self.max_columns, replace=False)] = True
        alpha = s.alpha_full(point)
        if cols.any():
            alpha = draw_alpha_collapsed(self.rng, z, alpha, Lam, eta, sd, s.layout, pm_, ps,
                                         columns=cols)
        if self._rows:
            lam_pp = np.broadcast_to(1.0 / np.asarray(self._lam_sd(point)) ** 2, (s.p, s.k))
            alpha, Lam, self._accept = draw_categorical_rows(
                self.rng, z, alpha, Lam, eta, sd, s.layout, pm_, ps, lam_pp, columns=self._rare,
                integrate_eta=self.integrate_eta, mode_cache=self._modes,
                step_columns=self._stepped)
            s.io["Lambda"].put(point, Lam)
        point[self._zkey] = z
        if self._rows and self.integrate_eta:  # the scores were integrated out: redraw them
            _draw_scores(self, point, alpha, Lam, sd)
        s.io["alpha"].put(point, alpha[s.level_cols])

    def _stats(self) -> dict[str, Any]:
        """Return ``accept_rows``: share of row-move proposals accepted (1 before any)."""
        return {"accept_rows": self._accept}


class ColumnScaleMove(CopulaGibbsStep):
    """Parameter-expansion move: rescale each rescalable latent column and its parameters.

    Each column is rescaled jointly with its parameters (rank-likelihood ordered columns and
    ``"rpl"`` level columns).

    Not a block of the paper's sampler but an exact extra move (see
    :func:`bayesynth.samplers.kernels.draw_column_scale`) that removes the slow random walk of
    each latent column's unidentified scale. It needs the default conjugate priors: a fixed
    gamma prior on ``prec``, a zero-mean normal prior on ``Lambda`` and on ``alpha``.
    """

    name = "column_scale_move"
    targets = ("z", "Lambda", "prec")

    def _setup(self, model):
        s = self.structure
        lay = s.layout
        self._cols = lay.rescalable_columns
        if not len(self._cols):
            raise IncompatibleModelError("ColumnScaleMove needs rescalable columns.")
        self._pos = np.searchsorted(s.free, self._cols)  # their places in prec
        nf = len(s.free)
        shape, rate = _fixed_gamma(model, "prec", "ColumnScaleMove")
        self._a = np.broadcast_to(shape, (nf,)).astype(float)[self._pos]
        self._b = np.broadcast_to(rate, (nf,)).astype(float)[self._pos]
        _, lam_sd = _normal_prior(model, "Lambda", "ColumnScaleMove", zero_mean=True)
        self._lam_sd = _compile_point_fn(model, lam_sd)
        self._alpha_sd = None
        self._rpl_local = np.searchsorted(self._cols, lay.rpl_columns)
        if "alpha" in s.io:
            _, a_sd = _normal_prior(model, "alpha", "ColumnScaleMove", zero_mean=True)
            self._alpha_sd = _compile_point_fn(model, a_sd)
            self.vars = self.vars + [model.rvs_to_values[model["alpha"]]]
        self._zkey = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        f = self._cols
        Lam = s.value(point, "Lambda")
        prior_prec = np.broadcast_to(1.0 / np.asarray(self._lam_sd(point)) ** 2, (s.p, s.k))
        prec = np.array(s.value(point, "prec"), dtype=float, copy=True)
        alpha_full = s.alpha_full(point)
        alpha_prior_prec = 1.0
        if self._alpha_sd is not None:
            a_pp = np.zeros(s.p)
            a_pp[s.level_cols] = 1.0 / np.asarray(self._alpha_sd(point)) ** 2
            alpha_prior_prec = a_pp[f]
        c_sub = draw_column_scale(self.rng, Lam[f], prior_prec[f], prec[self._pos], self._a,
                                  self._b, alpha_full[f], self._rpl_local, alpha_prior_prec)
        c = np.ones(s.p)
        c[f] = c_sub
        z = point[self._zkey]
        if z.flags.f_contiguous and z.flags.writeable:
            z *= c  # in place: the z step owns this buffer
        else:
            z = z * c
        point[self._zkey] = z
        s.io["Lambda"].put(point, Lam * c[:, None])
        prec[self._pos] /= c_sub**2
        s.io["prec"].put(point, prec)
        if "alpha" in s.io:
            s.io["alpha"].put(point, alpha_full[s.level_cols] * c[s.level_cols])


class UtilityScaleMove(CopulaGibbsStep):
    """Joint scale move of each multinomial-probit block.

    Its utilities, intercepts and loading rows are multiplied by c, c^2 drawn exactly from its
    gamma conditional (see :func:`bayesynth.samplers.kernels.draw_utility_scale`). Needs
    zero-mean normal priors on ``Lambda`` and ``alpha``.
    """

    name = "utility_scale_move"
    targets = ("z", "Lambda", "alpha")

    @classmethod
    def applies(cls, layout: LatentLayout) -> bool:
        """Whether the table has a multinomial-probit categorical variable."""
        return _has_mnp_blocks(layout)

    def _setup(self, model):
        s = self.structure
        lay = s.layout
        self._blocks = [np.asarray(lay.k_mnp_cols[lay.k_mnp_off[b]:lay.k_mnp_off[b + 1]])
                        for b in range(len(lay.k_mnp_off) - 1)]
        if not self._blocks:
            raise IncompatibleModelError("UtilityScaleMove needs multinomial-probit blocks.")
        _, lam_sd = _normal_prior(model, "Lambda", "UtilityScaleMove", zero_mean=True)
        self._lam_sd = _compile_point_fn(model, lam_sd)
        _, a_sd = _normal_prior(model, "alpha", "UtilityScaleMove", zero_mean=True)
        self._alpha_sd = _compile_point_fn(model, a_sd)
        self._zkey = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        Lam = s.value(point, "Lambda")
        prior_prec = np.broadcast_to(1.0 / np.asarray(self._lam_sd(point)) ** 2, (s.p, s.k))
        alpha_full = s.alpha_full(point)
        a_pp = np.zeros(s.p)
        a_pp[s.level_cols] = 1.0 / np.asarray(self._alpha_sd(point)) ** 2
        z = point[self._zkey]
        c = draw_utility_scale(self.rng, z, alpha_full, Lam, s.value(point, "eta"),
                               s.sd(point), prior_prec, a_pp, self._blocks)
        if z.flags.f_contiguous and z.flags.writeable:
            z *= c
        else:
            z = z * c
        point[self._zkey] = z
        s.io["Lambda"].put(point, Lam * c[:, None])
        s.io["alpha"].put(point, alpha_full[s.level_cols] * c[s.level_cols])


class UtilityTransportScaleMove(CopulaGibbsStep):
    """Scale move of each multinomial-probit block along its ridge, its utilities transported.

    Multiplies a categorical variable's intercepts and loadings by c (and, with
    ``column_moves``, then each of its utility columns' by its own c_j), carrying the latent
    utilities along by their conditional CDFs so that the move is not pinned by them (see
    :func:`~bayesynth.samplers.kernels.draw_utility_scale_transport`); the local shrinkage of
    the block's loadings is integrated out of the move and redrawn after it. This is the
    direction in which CE's chains stayed apart (marital status: sum of squared loadings 44 on
    one chain, 12 on the other, with only the exact moves that keep the utilities).
    The sd of each log c is adapted during tuning by dual averaging towards an acceptance
    rate of ``target_accept`` (at most ``max_step``) and frozen when tuning stops. Needs a
    normal prior on ``alpha`` and the multiplicative gamma process prior on ``Lambda``.
    """

    name = "utility_transport_scale_move"
    targets = ("z", "Lambda", "alpha", "phi")
    stats_dtypes_shapes = {"tune": (bool, []), "accept_utility_scale": (float, [])}
    #: Acceptance rate that tuning aims at (the optimum of a one-dimensional random walk).
    target_accept: ClassVar[float] = 0.44
    #: Largest sd of log c.
    max_step: ClassVar[float] = 1.0
    #: Proposals per block and iteration (each costs 4 n m evaluations of log Phi or its
    #: inverse for a block of m columns). One since 2026-12-04: against two, CE's survey
    #: schema mixed no worse over two seeds (max R-hat 1.066 and 1.084 against 1.125 and
    #: 1.097) and the demo table alike, in 7-11% less sampling time (benchmarks/README.md).
    tries: ClassVar[int] = 1
    #: Also scale each utility column of a block on its own (off: on SD2011 these moves made
    #: a fit of 2 x 2,000 iterations take more than 40 minutes instead of 13).
    column_moves: ClassVar[bool] = False

    @classmethod
    def applies(cls, layout: LatentLayout) -> bool:
        """Whether the table has a multinomial-probit categorical variable."""
        return _has_mnp_blocks(layout)

    def _setup(self, model):
        s = self.structure
        lay = s.layout
        self._n_blocks = len(lay.k_mnp_off) - 1
        if not _has_mnp_blocks(lay):
            raise IncompatibleModelError(
                "UtilityTransportScaleMove needs multinomial-probit blocks.")
        mu, sd = _normal_prior(model, "alpha", "UtilityTransportScaleMove")
        self._mu = _compile_point_fn(model, mu)
        self._sd = _compile_point_fn(model, sd)
        _fixed_gamma(model, "delta", "UtilityTransportScaleMove")
        self._nu = _mgp_nu(model, s, "UtilityTransportScaleMove")
        self._zkey = model.rvs_to_values[model["z"]].name
        # each block as a whole, then (with column_moves) each of its columns
        self._groups = _mnp_groups(lay, self.column_moves)
        self._adapt = [_dual_average(0.1, self.target_accept) for _ in self._groups]
        self._accept = 1.0

    def _steps(self) -> np.ndarray:
        return np.array([min(float(a.current(self.tune)), self.max_step) for a in self._adapt])

    def _update(self, point):
        s = self.structure
        lay = s.layout
        z = _owned_z(point[self._zkey])
        pm_, ps = _alpha_prior(s, self._mu, self._sd, point)
        alpha = s.alpha_full(point)
        Lam = np.array(s.value(point, "Lambda"), dtype=float)
        eta = s.value(point, "eta")
        tau = np.cumprod(s.value(point, "delta"))
        phi = np.array(s.value(point, "phi"), dtype=float)
        n_acc = np.zeros(len(self._groups))
        for t in range(self.tries):
            steps = self._steps()
            # phi is integrated out of every try and redrawn after the last
            c, acc = draw_utility_scale_transport(
                self.rng, z, alpha, Lam, eta, lay, pm_, ps, tau, self._nu, steps, self._groups,
                phi=phi if t == self.tries - 1 else None)
            alpha *= c
            Lam *= c[:, None]
            n_acc += acc
            if self.tune:
                for a, ok in zip(self._adapt, acc):
                    a.update(float(ok), True)
        point[self._zkey] = z
        s.io["Lambda"].put(point, Lam)
        s.io["alpha"].put(point, alpha[s.level_cols])
        s.io["phi"].put(point, phi)
        self._accept = float(n_acc.sum() / (self.tries * len(self._groups)))

    def _stats(self) -> dict[str, Any]:
        """Return ``accept_utility_scale``: share of this iteration's proposals accepted."""
        return {"accept_utility_scale": self._accept}


class UtilityTransportLocationMove(CopulaGibbsStep):
    """Shift of multinomial-probit intercepts, the block's utilities transported.

    For each multinomial-probit block, one proposal shifts all its intercepts by a common d
    (the reference level's share) and one shifts each of its columns' alone, carrying every
    utility of the block along by its conditional CDF
    (:func:`~bayesynth.samplers.kernels.draw_utility_location_transport`), so that the
    utilities of the other levels do not pin the intercepts as they do in the Gibbs and
    collapsed updates. On CE, marital status's intercepts had bulk ESS 7-28 of 2,000 draws
    without it. The sd of each shift is adapted during tuning by dual
    averaging towards an acceptance rate of ``target_accept`` and frozen when tuning stops.
    Needs a normal prior on ``alpha``.

    Not in the default sweep (:data:`COPULA_STEPS`; it is in :data:`OPTIONAL_COPULA_STEPS`):
    measured on 2026-12-02 it did not pay for its time. On CE marital status's intercepts had
    ESS 12-28 with it (tuned shifts 0.06-0.12 against posterior sds of 0.12-0.65): what is
    slow there is each utility column's intercept and loadings together (their scale), not
    the intercept given the loadings. On the demo table it cost 6% more time for no gain
    (minimum bulk ESS of what synthesis reads 658 with it, 716 without, one run each).
    """

    name = "utility_transport_location_move"
    targets = ("z", "alpha")
    stats_dtypes_shapes = {"tune": (bool, []), "accept_utility_location": (float, [])}
    #: Acceptance rate that tuning aims at (the optimum of a one-dimensional random walk).
    target_accept: ClassVar[float] = 0.44
    #: Largest sd of a shift.
    max_step: ClassVar[float] = 2.0

    @classmethod
    def applies(cls, layout: LatentLayout) -> bool:
        """Whether the table has a multinomial-probit categorical variable."""
        return _has_mnp_blocks(layout)

    def _setup(self, model):
        lay = self.structure.layout
        if not _has_mnp_blocks(lay):
            raise IncompatibleModelError(
                "UtilityTransportLocationMove needs multinomial-probit blocks.")
        mu, sd = _normal_prior(model, "alpha", "UtilityTransportLocationMove")
        self._mu = _compile_point_fn(model, mu)
        self._sd = _compile_point_fn(model, sd)
        self._zkey = model.rvs_to_values[model["z"]].name
        # each block as a whole, then each of its columns when it has several
        self._groups = _mnp_groups(lay, True)
        self._adapt = [_dual_average(0.1, self.target_accept) for _ in self._groups]
        self._accept = 1.0

    def _update(self, point):
        s = self.structure
        z = _owned_z(point[self._zkey])
        pm_, ps = _alpha_prior(s, self._mu, self._sd, point)
        steps = np.array([min(float(a.current(self.tune)), self.max_step) for a in self._adapt])
        alpha, acc = draw_utility_location_transport(
            self.rng, z, s.alpha_full(point), s.value(point, "Lambda"), s.value(point, "eta"),
            s.layout, pm_, ps, steps, self._groups)
        if self.tune:
            for a, ok in zip(self._adapt, acc):
                a.update(float(ok), True)
        point[self._zkey] = z
        s.io["alpha"].put(point, alpha[s.level_cols])
        self._accept = float(acc.mean())

    def _stats(self) -> dict[str, Any]:
        """Return ``accept_utility_location``: share of this iteration's proposals accepted."""
        return {"accept_utility_location": self._accept}


class TranslationMove(CopulaGibbsStep):
    """Location move of each rank-likelihood ordered latent column.

    z_.j += b_j with b_j drawn exactly from its normal conditional (see
    :func:`bayesynth.samplers.kernels.draw_translation`).
    """

    name = "translation_move"
    targets = ("z",)

    def _setup(self, model):
        self._cols = np.asarray(self.structure.layout.rank_columns, dtype=np.int64)
        if not len(self._cols):
            raise IncompatibleModelError("TranslationMove needs rank-likelihood columns.")
        self._zkey = model.rvs_to_values[model["z"]].name

    def _update(self, point):
        s = self.structure
        z = point[self._zkey]
        mu = factor_mean(s.alpha_full(point), s.value(point, "Lambda"), s.value(point, "eta"))
        b = draw_translation(self.rng, z, mu, s.sd(point), self._cols)
        z = _owned_z(z)
        z[:, self._cols] += b
        point[self._zkey] = z


class WarpMove(CopulaGibbsStep):
    """Monotone warp of each ordered column with more than two values (not fixed ones).

    A sinh-arcsinh flow at a random record's value; an exact generalised Gibbs step, see
    :func:`~bayesynth.samplers.kernels.draw_warp`.
    """

    name = "warp_move"
    targets = ("z",)
    #: Warp each column on its constrained records only, leaving the latent values the data
    #: leave unconstrained as they are (see :func:`~bayesynth.samplers.kernels.draw_warp`).
    #: Off: every record is warped.
    collapse_unconstrained: ClassVar[bool] = True

    def _setup(self, model):
        lay = self.structure.layout
        self._cols = np.array([o.latent for o in lay.ordered
                               if o.n_groups > 2 and not o.fixed], dtype=np.int64)
        if not len(self._cols):
            raise IncompatibleModelError("WarpMove needs ordered columns with more than two "
                                         "values.")
        self._zkey = model.rvs_to_values[model["z"]].name
        self._records = _constrained_records(lay, self._cols, self.collapse_unconstrained)
        if self._records is not None:
            # a column unconstrained everywhere has nothing to warp: leave it out
            ok = [len(r) > 0 for r in self._records]
            self._cols = self._cols[ok]
            self._records = [r for r, k in zip(self._records, ok) if k]

    def _update(self, point):
        s = self.structure
        z = point[self._zkey]
        z = _owned_z(z)
        Lam = s.value(point, "Lambda")
        sd = s.sd(point)
        mu = factor_mean(s.alpha_full(point), Lam, s.value(point, "eta"))
        draw_warp(self.rng, z, mu, sd, np.sqrt((Lam**2).sum(axis=1) + sd**2), self._cols,
                  self._records)
        point[self._zkey] = z


class ScoreTranslationMove(CopulaGibbsStep):
    """Translation of every record's factor scores, with the intercepts and columns following.

    ``eta_i += d``, categorical intercepts ``alpha_j -= lambda_j' d`` and rank-likelihood
    columns ``z_.j += lambda_j' d``, with d drawn exactly from its normal conditional (see
    :func:`~bayesynth.samplers.kernels.draw_score_translation`). Needs a normal prior on
    ``alpha`` (when the model has categorical columns).
    """

    name = "score_translation_move"
    targets = ("eta", "z")

    def _setup(self, model):
        self._mu = self._sd = None
        if "alpha" in model.named_vars:
            mu, sd = _normal_prior(model, "alpha", "ScoreTranslationMove")
            self._mu = _compile_point_fn(model, mu)
            self._sd = _compile_point_fn(model, sd)
            self.vars = [*self.vars, model.rvs_to_values[model["alpha"]]]
        self._zkey = model.rvs_to_values[model["z"]].name
        self._rank = np.asarray(self.structure.layout.rank_columns, dtype=np.int64)

    def _update(self, point):
        s = self.structure
        pm_, ps = _alpha_prior(s, self._mu, self._sd, point)
        z = point[self._zkey]
        Lam, eta, alpha = s.value(point, "Lambda"), s.value(point, "eta"), s.alpha_full(point)
        d = draw_score_translation(self.rng, z, alpha, Lam, eta, s.sd(point), s.layout, pm_, ps)
        s.io["eta"].put(point, eta + d)
        if self._mu is not None:
            s.io["alpha"].put(point, (alpha - Lam @ d)[s.level_cols])
        if len(self._rank):
            z = _owned_z(z)
            z[:, self._rank] += Lam[self._rank] @ d
            point[self._zkey] = z


class FactorScaleMove(CopulaGibbsStep):
    """Parameter-expansion move on each factor.

    Its scores times c, its loadings divided by c, c^2 drawn exactly from its generalised
    inverse Gaussian conditional (see :func:`~bayesynth.samplers.kernels.draw_factor_scale`).
    Needs a zero-mean normal prior on ``Lambda``.
    """

    name = "factor_scale_move"
    targets = ("eta", "Lambda")

    def _setup(self, model):
        _, lam_sd = _normal_prior(model, "Lambda", "FactorScaleMove", zero_mean=True)
        self._lam_sd = _compile_point_fn(model, lam_sd)

    def _update(self, point):
        s = self.structure
        Lam = s.value(point, "Lambda")
        eta = s.value(point, "eta")
        prior_prec = np.broadcast_to(1.0 / np.asarray(self._lam_sd(point)) ** 2, (s.p, s.k))
        c = draw_factor_scale(self.rng, eta, Lam, prior_prec)
        s.io["eta"].put(point, eta * c)
        s.io["Lambda"].put(point, Lam / c)


class RotationMove(CopulaGibbsStep):
    """Exact Metropolis rotations of each pair of factors (loadings and scores together).

    The local shrinkage is integrated out and then redrawn (see
    :func:`~bayesynth.samplers.kernels.draw_rotation`). The sd of the random-walk angle is
    adapted during tuning by dual averaging towards an acceptance rate of 0.44 of those
    proposals (at most ``max_step`` = pi) and frozen when tuning stops; the sampler stats
    ``accept_rotation_walk`` and ``step_rotation`` show both (a fixed 0.3 radians had 10% of
    all proposals accepted on the demo and 5% on SD2011). Needs the multiplicative gamma
    process prior, ``Lambda ~ N(0, 1/(phi cumprod(delta)))`` with ``phi ~ Gamma(nu/2, nu/2)``.
    """

    name = "rotation_move"
    targets = ("Lambda", "eta", "phi")
    #: Sweeps over the pairs of factors per iteration (each costs O(p* k^2 + accepted n)).
    rounds: ClassVar[int] = 3
    #: Acceptance rate of the random-walk angles that tuning aims at (the optimum of a
    #: one-dimensional random walk Metropolis).
    target_accept: ClassVar[float] = 0.44
    #: Largest sd of the random-walk angle: the target repeats every pi radians (a rotation by
    #: pi flips the signs of a pair's loadings and scores), so a wider walk is as good as a
    #: uniform angle; where even uniform angles are accepted more often than
    #: ``target_accept`` (loosely identified factors) dual averaging would otherwise push the
    #: sd up without bound.
    max_step: ClassVar[float] = float(np.pi)
    stats_dtypes_shapes = {"tune": (bool, []), "accept_rotation": (float, []),
                           "accept_rotation_walk": (float, []), "step_rotation": (float, [])}

    def _setup(self, model):
        _fixed_gamma(model, "delta", "RotationMove")  # as ShrinkageGibbs, which redraws it
        self._nu = _mgp_nu(model, self.structure, "RotationMove")
        self._accept = 1.0
        self._accept_walk = 1.0
        # the random-walk angle's sd, adapted during tuning and frozen after it
        self._adapt = _dual_average(0.3, self.target_accept)

    def _update(self, point):
        s = self.structure
        tau = np.cumprod(s.value(point, "delta"))
        counts = np.zeros(2, dtype=np.int64)
        Lam, eta, phi, self._accept = draw_rotation(
            self.rng, s.value(point, "Lambda"), s.value(point, "eta"), tau, self._nu,
            step=self._step(), rounds=self.rounds, counts=counts)
        s.io["Lambda"].put(point, Lam)
        s.io["eta"].put(point, eta)
        s.io["phi"].put(point, phi)
        n_walk = self.rounds * s.k * (s.k - 1) // 2
        if n_walk:
            self._accept_walk = counts[0] / n_walk
            if self.tune:
                self._adapt.update(self._accept_walk, True)

    def _stats(self) -> dict[str, Any]:
        """Return ``accept_rotation``, ``accept_rotation_walk`` and ``step_rotation``.

        The share of all rotation proposals accepted, the share of the random-walk proposals
        accepted (what tuning aims at 0.44), and the random-walk angle's sd for the next move.
        """
        return {"accept_rotation": self._accept, "accept_rotation_walk": self._accept_walk,
                "step_rotation": self._step()}

    def _step(self) -> float:
        return min(float(self._adapt.current(self.tune)), self.max_step)


class MarginalLoadingsHMC(CopulaGibbsStep):
    """Hamiltonian move on the loadings and residual precisions, the factor scores integrated out.

    Hamiltonian move on the loadings and residual precisions with the factor scores
    integrated out, then the scores redrawn (see
    :func:`~bayesynth.samplers.kernels.draw_loadings_hmc`).

    The diagonal inverse mass matrix holds the local scales of the coordinates, their
    conditional variances given the scores: ``1 / (n / sigma_j^2 + prior_prec_jh)`` for a
    loading and ``2 / n`` for a log precision. The prior precision matters where a factor is
    shrunk hard (on SD2011 a tenth of the loadings had ``prior_prec > 4.5 n``; with
    ``sigma_j^2 / n`` alone those coordinates forced a step size of 0.004 on one chain). The
    prior precisions come from ``phi`` and ``delta``, which this move conditions on and does
    not change, so the transition stays reversible for each of their values; the free-scale
    columns' ``sigma_j^2`` (which the move does change) follow the state during tuning and are
    frozen when it stops. The step size is adapted during tuning towards an acceptance rate of
    0.8 by dual averaging (Hoffman & Gelman 2014, PyMC's ``DualAverageAdaptation``), which
    forgets a poor start; the average it converges to is used once tuning stops. Needs a
    zero-mean normal prior on ``Lambda`` and a gamma prior with fixed parameters on ``prec``.

    References
    ----------
    Hoffman, M. D. and Gelman, A. (2014). The No-U-Turn sampler: adaptively setting path
    lengths in Hamiltonian Monte Carlo. *Journal of Machine Learning Research*, 15,
    1593-1623.
    """

    name = "marginal_loadings_hmc"
    targets = ("Lambda", "prec", "eta", "z")
    stats_dtypes_shapes = {"tune": (bool, []), "accept_hmc": (float, []),
                           "step_size_hmc": (float, [])}
    #: Leapfrog steps per trajectory.
    n_steps: ClassVar[int] = 16
    #: Target acceptance rate during tuning.
    target_accept: ClassVar[float] = 0.8
    #: Step size the adaptation starts from.
    initial_step: ClassVar[float] = 0.3

    def _setup(self, model):
        _, lam_sd = _normal_prior(model, "Lambda", "MarginalLoadingsHMC", zero_mean=True)
        self._lam_sd = _compile_point_fn(model, lam_sd)
        shape, rate = _fixed_gamma(model, "prec", "MarginalLoadingsHMC")
        if np.ptp(shape) or np.ptp(rate):
            raise IncompatibleModelError("MarginalLoadingsHMC needs one gamma prior shared by "
                                         "all residual precisions.")
        self._a, self._b = float(np.ravel(shape)[0]), float(np.ravel(rate)[0])
        self._adapt = _dual_average(self.initial_step, self.target_accept)
        self._d_mass: np.ndarray | None = None
        self._accept = 1.0

    def _update(self, point):
        s = self.structure
        f = s.free
        z, alpha = s.value(point, "z"), s.alpha_full(point)
        Lam = np.asarray(s.value(point, "Lambda"), dtype=float)
        prec_f = np.asarray(s.value(point, "prec"), dtype=float)
        n = z.shape[0]
        d = s.sd(point) ** 2
        R = z - alpha
        S = R.T @ R
        if self.tune or self._d_mass is None:
            # the residual variances the local scales use, frozen with tuning (the move
            # changes those of the free-scale columns)
            self._d_mass = d.copy()
        prior_prec = np.broadcast_to(1.0 / np.asarray(self._lam_sd(point)) ** 2, (s.p, s.k))
        # local scales: the conditional variances given the scores (the state's own variance
        # would be useless: the unidentified rotation inflates it)
        inv_mass = np.concatenate([(1.0 / (n / self._d_mass[:, None] + prior_prec)).ravel(),
                                   np.full(len(f), 2.0 / n)])
        Lam, theta, self._accept = draw_loadings_hmc(
            self.rng, S, n, Lam, np.log(prec_f), d, f, prior_prec, self._a, self._b,
            step_size=float(self._adapt.current(self.tune)), n_steps=self.n_steps,
            inv_mass=inv_mass)
        prec_f = np.exp(theta)
        prec_all = 1.0 / d
        prec_all[f] = prec_f
        s.io["Lambda"].put(point, Lam)
        s.io["prec"].put(point, prec_f)
        _draw_scores(self, point, alpha, Lam, prec_all**-0.5)
        if self.tune:
            self._adapt.update(self._accept, True)

    def _stats(self) -> dict[str, Any]:
        """Return ``accept_hmc`` and ``step_size_hmc`` (before its jitter) of the next move."""
        return {"accept_hmc": self._accept,
                "step_size_hmc": float(self._adapt.current(self.tune))}


#: The copula steps in the order of one Gibbs sweep (``assign_copula_steps`` leaves out the
#: first, the plain factor-score block, when the last, the Hamiltonian move, ends with that
#: same draw).
COPULA_STEPS: tuple[type[CopulaGibbsStep], ...] = (
    FactorScoresGibbs,
    LatentGibbs,
    LoadingsGibbs,
    ShrinkageGibbs,
    PrecisionGibbs,
    InterceptGibbs,
    ColumnScaleMove,
    UtilityScaleMove,
    UtilityTransportScaleMove,
    TranslationMove,
    WarpMove,
    ScoreTranslationMove,
    FactorScaleMove,
    RotationMove,
    MarginalLoadingsHMC,
)

#: Exact moves that are not in the default sweep: measured, they did not pay for their time
#: (``benchmarks/README.md``); add them to a sweep with ``copula_mixing.py --add``.
OPTIONAL_COPULA_STEPS: tuple[type[CopulaGibbsStep], ...] = (UtilityTransportLocationMove,)
