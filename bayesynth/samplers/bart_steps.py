"""Step methods for the BART rank-likelihood regression.

* :class:`RankRegressionGibbs` draws the latent data ``z`` (a data container the BART likelihood
  observes) from its truncated normals under the rank constraints (a response fixed at its
  normal scores keeps them), then the residual precision
  from its gamma full conditional. When the ``sigma`` prior was replaced (no conjugate
  ``prec ~ Gamma``), it redraws ``z`` only and PyMC's own step samples the scale.
* :class:`SeededPGBART` is pymc-bart's particle Gibbs sampler, seeded per chain: PGBART draws from
  NumPy's global random state, so without this two chains (or two runs) with the same
  ``random_seed`` would not give the same draws.
"""

from __future__ import annotations

import warnings

import numba
import numpy as np
import pymc as pm
import pymc_bart as pmb
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator
from pymc_bart.bart import BARTRV

from bayesynth.errors import IncompatibleModelError
from bayesynth.models.layout import registered_layout
from bayesynth.samplers.kernels import draw_z
from bayesynth.samplers.steps import (
    _compile_point_fn,
    _fixed_gamma,
    _uncovered_variables,
    _ValueIO,
    initial_state,
    restore_state,
)

__all__ = ["RankRegressionGibbs", "SeededPGBART", "has_bart", "bart_steps"]


def has_bart(model: pm.Model) -> bool:
    """Tell whether ``model`` has a pymc-bart BART variable.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model.

    Returns
    -------
    bool
        True when one of its free variables is a pymc-bart ``BART``.
    """
    return any(isinstance(rv.owner.op, BARTRV) for rv in model.free_RVs)


@numba.njit
def _seed_numba(seed):  # pragma: no cover - compiled
    np.random.seed(seed)


#: PGBART attributes that change while it samples; restored at the start of every chain.
_PGBART_STATE = ("sum_trees", "sum_trees_noi", "all_particles", "all_trees", "alpha_vec", "ssv",
                 "leaf_sd", "running_sd", "lower", "iter", "a_tree")


class SeededPGBART(pmb.PGBART):
    """pymc-bart's PGBART, seeded per chain and restarted for every chain.

    NumPy's (and numba's) global random state, from which PGBART draws, is seeded per chain
    from the chain's generator, so that ``random_seed`` makes BART runs reproducible. Chains of
    a BART model run one after the other in one process; PGBART's forest, particles, tuned
    split probabilities and leaf scales would carry over from one chain to the next (chain 2
    would start where chain 1 ended, and R-hat would compare a chain with its own
    continuation). The state right after construction is kept and restored at the start of
    every chain, so the chains are independent.
    """

    def __init__(self, *args, **kwargs):
        from bayesynth.models.bart_rank import training_matrix

        model = modelcontext(kwargs.get("model"))
        super().__init__(*args, **kwargs)
        # PGBART adds noise to repeated values of every whole-number predictor (counts, codes,
        # binary columns) and grows its trees on the noisy copy, but synthesis evaluates the
        # forest at the exact values: the fitted f and the synthesized f then differed for 88%
        # of records in a small test. Grow the trees on the exact values (a split at the
        # largest value then leaves one child empty, which PGBART handles).
        self.X = training_matrix(model).copy()
        self.bart.X = self.X
        self._initial_state = initial_state(self, _PGBART_STATE)

    def set_rng(self, rng):
        """Set the step's generator and seed NumPy's and numba's global state from it.

        Parameters
        ----------
        rng : RandomGenerator
            The chain's generator (anything :func:`pymc.util.get_random_generator` accepts).
        """
        super().set_rng(rng)
        seed = int(get_random_generator(rng).integers(2**32 - 1))
        np.random.seed(seed)
        _seed_numba(seed)

    def reset_tuning(self):
        """Start the next chain from the initial state, tuning again.

        PGBART keeps trees only after tuning; without this a second chain would also store its
        burn-in.
        """
        restore_state(self, self._initial_state)
        self.tune = True


@dataclass_state
class RankRegressionState(StepMethodState):
    tune: bool = True


class RankRegressionGibbs(BlockedStep):
    """Latent data and residual precision of the BART rank-likelihood regression.

    Updates the data container ``z`` (n,) by one sweep of truncated normals given ``f`` and
    ``sigma`` (rank constraints of the response), then ``prec`` ~ Gamma(a + n/2, b + SSE/2).
    The gamma update needs the default prior, ``sigma = prec^-1/2`` with
    ``prec ~ Gamma(a, b)`` of fixed parameters (read from the graph). With any other prior on
    ``sigma`` (``priors={"sigma": ...}`` of
    :func:`~bayesynth.models.bart_rank.bart_rank_regression`) the step redraws ``z`` only, still
    exactly, and leaves the scale's variables to another step (:attr:`conjugate_scale` is
    False and :attr:`reason` says why).

    Parameters
    ----------
    vars : list, optional
        Ignored: the step updates ``[prec]`` (none without the conjugate prior).
    model : pymc.Model, optional
    rng : RandomGenerator, optional

    Attributes
    ----------
    conjugate_scale : bool
        Whether the step also draws ``prec`` from its gamma full conditional.
    reason : str or None
        Why it does not (None when it does).
    """

    name = "rank_regression_gibbs"
    default_blocked = True
    stats_dtypes_shapes = {"tune": (bool, [])}
    _state_class = RankRegressionState

    def __init__(self, vars=None, *, model=None, rng=None, blocked: bool = True):
        model = modelcontext(model)
        self.layout = registered_layout(model)
        if (self.layout is None or "z" not in model.named_vars or "f" not in model.named_vars
                or "sigma" not in model.named_vars):
            raise IncompatibleModelError(
                "RankRegressionGibbs needs a model built by bayesynth.models.bart_rank_regression."
            )
        self._z = model["z"]  # the shared data container
        # Each run starts from the normal scores of the ranks, whatever an earlier run left.
        self._z.set_value(self.layout.initial_z()[:, 0].copy())
        self._f_key = model.rvs_to_values[model["f"]].name
        self._sigma = _compile_point_fn(model, model["sigma"])  # whatever its prior
        self.reason = self._conjugate_precision(model)
        self.conjugate_scale = self.reason is None
        if self.conjugate_scale:
            prec = model["prec"]
            self._prec = _ValueIO(model, prec)
            shape, rate = _fixed_gamma(model, "prec", "RankRegressionGibbs")
            self._a, self._b = float(np.ravel(shape)[0]), float(np.ravel(rate)[0])
            self.vars = [model.rvs_to_values[prec]]
        else:
            self.vars = []
        self.rng = get_random_generator(rng)
        self.tune = True

    def _conjugate_precision(self, model) -> str | None:
        """None when ``sigma = prec^-1/2`` with a fixed gamma prior on ``prec``; else why not."""
        why = ("the prior of 'sigma' was replaced; the gamma update needs sigma = prec^-1/2 "
               "with prec ~ Gamma of fixed parameters")
        prec = model.named_vars.get("prec")
        if prec is None or prec not in model.free_RVs or model["sigma"] in model.free_RVs:
            return why
        try:
            _fixed_gamma(model, "prec", "RankRegressionGibbs")
            io = _ValueIO(model, prec)
        except IncompatibleModelError as err:
            return f"{why} ({err})"
        if tuple(prec.shape.eval()) != ():
            return why
        point = dict(model.initial_point())
        for x in (0.37, 2.9):  # check the graph: sigma must be prec^-1/2
            io.put(point, np.asarray(x))
            if not np.allclose(self._sigma(point), x ** -0.5, rtol=1e-10):
                return why
        return None

    def reset_tuning(self):
        """Start the next chain's latent data from the normal scores of the ranks."""
        self._z.set_value(self.layout.initial_z()[:, 0].copy())
        self.tune = True

    def step(self, point):
        """Redraw the latent data ``z`` (in its data container), then ``prec`` (if conjugate).

        Parameters
        ----------
        point : dict
            The current values of the model's value variables.

        Returns
        -------
        new_point : dict
            ``point`` with the new ``prec`` (unchanged without the conjugate prior).
        stats : list of dict
            ``[{"tune": ...}]``.
        """
        new = dict(point)
        f = np.asarray(point[self._f_key], dtype=float).ravel()
        if self.conjugate_scale:
            sd = float(self._prec.get(point)) ** -0.5
        else:
            sd = float(np.asarray(self._sigma(point)))
        z = np.asarray(self._z.get_value(), dtype=float)[:, None]
        z = draw_z(self.rng, z, f[:, None], np.array([sd]), self.layout)[:, 0]
        self._z.set_value(z)
        if not self.conjugate_scale:
            return new, [{"tune": self.tune}]
        resid = z - f
        n = len(z)
        prec = self.rng.gamma(self._a + 0.5 * n, 1.0 / (self._b + 0.5 * resid @ resid))
        self._prec.put(new, np.asarray(prec))
        return new, [{"tune": self.tune}]

    @staticmethod
    def competence(var, has_grad):
        """Refuse automatic assignment: :func:`bart_steps` assigns this step explicitly.

        Parameters
        ----------
        var : TensorVariable
            A model variable.
        has_grad : bool
            Whether the model has gradients.

        Returns
        -------
        Competence
            Always ``Competence.INCOMPATIBLE``.
        """
        return Competence.INCOMPATIBLE


def bart_steps(model: pm.Model, random_seed=None, **pgbart_kwargs) -> list:
    """Build the step methods of a BART rank-likelihood model.

    A seeded PGBART, then the latent data and precision (:class:`RankRegressionGibbs`). Trees
    stored by an earlier run of the same model are discarded, and NumPy's global state is
    seeded from ``random_seed`` before PGBART is built. PGBART's jitter of tied covariate
    values is undone (:class:`SeededPGBART` grows its trees on the exact values).

    Parameters
    ----------
    model : pymc.Model
        A model from :func:`bayesynth.models.bart_rank_regression`.
    random_seed : int or numpy.random.Generator, optional
        Seeds NumPy's and numba's global state before PGBART is built.
    **pgbart_kwargs
        Passed to :class:`SeededPGBART` (pymc-bart's ``PGBART``).

    Returns
    -------
    list
        ``[SeededPGBART, RankRegressionGibbs]``.

    Warns
    -----
    UserWarning
        When the ``sigma`` prior was replaced: :class:`RankRegressionGibbs` then redraws the
        latent data only, and the message names the variables PyMC's own step samples instead.
    """
    from bayesynth.models.bart_rank import training_matrix

    op = model["f"].owner.op
    del op.all_trees[:]
    # PGBART jitters tied covariate values in place: give every run a pristine copy.
    op.X = training_matrix(model).copy()
    if random_seed is not None:
        if isinstance(random_seed, np.random.Generator):
            seed = int(random_seed.integers(2**32 - 1))
        else:
            seed = int(np.random.SeedSequence(random_seed).generate_state(1)[0])
        np.random.seed(seed)
        _seed_numba(seed)
    found = [SeededPGBART([model["f"]], model=model, **pgbart_kwargs),
             RankRegressionGibbs(model=model)]
    if not found[1].conjugate_scale:
        leftover = _uncovered_variables(model, found)
        warnings.warn(
            f"RankRegressionGibbs updates only the latent data z, not the residual scale "
            f"({found[1].reason}); PyMC's own step (NUTS for continuous variables) samples "
            f"{leftover} instead.", UserWarning, stacklevel=3)
    return found
