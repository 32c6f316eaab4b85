"""Step methods for :func:`bayesynth.models.latent_class_dp.latent_class_dp_model`.

* :class:`TrueCountsMetropolis`: random-walk moves on each table's true counts that keep the
  total at n: pick an ordered pair of cells (a, b) and a step s uniform on 1..S, move s records
  from b to a. The proposal is symmetric, so the acceptance probability is the ratio of
  ``Multinomial(M | n, P) x prod geometric(noisy - M)`` (exact; compiled with numba). S follows
  the smaller of the noise scale and the multinomial scale of the table.
* :class:`LatentClassGibbs`: data augmentation. Given the true counts, each cell's records are
  allocated to classes, ``Multinomial(M_c, w)`` with ``w_h ~ pi_h prod_j psi_j[h, c_j]``; the
  full conditionals are then conjugate: ``v_h ~ Beta(1 + N_h, alpha + sum_{l>h} N_l)`` and
  ``psi_j[h] ~ Dirichlet(a + L_j[h])`` with N and L the allocated class and level counts summed
  over the tables (the composite likelihood treats each table as n records of its own).
  The prior parameters are read from the model, so a replaced prior that is still a Beta
  (for ``v``) or a Dirichlet (for a ``psi``) with fixed parameters keeps its Gibbs update; a
  variable with any other prior is left to PyMC's own step (:func:`latent_class_steps` warns),
  and the step still updates the others exactly given the allocation.
* :class:`NonCentredCountsMetropolis`: random-walk moves of (pi, psi) that carry the counts
  along (the counts as n uniforms per table cut at the cell probabilities, the uniforms held
  fixed), so that (pi, psi) are not confined to their narrow law given the counts.

The public R code (BayesLCM) updates pi by a Metropolis step; Gibbs needs no tuning and mixes
better. A slow reference for checking: ``pm.sample(step=[TrueCountsMetropolis(model=m)])``
lets PyMC's NUTS update ``v`` and ``psi`` with the same count moves.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import field

import numba
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.pytensorf import inputvars
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator
from pytensor.tensor.random.basic import BetaRV, DirichletRV

from bayesynth.errors import IncompatibleModelError
from bayesynth.models.latent_class_dp import latent_class_spec
from bayesynth.samplers.steps import (
    CopulaGibbsState,
    _constant,
    _dist_params,
    _is_constant,
    _uncovered_variables,
    initial_state,
    restore_state,
)

__all__ = ["TrueCountsMetropolis", "LatentClassGibbs", "NonCentredCountsMetropolis",
           "latent_class_steps", "count_moves", "joint_moves", "conjugate_priors"]


@numba.njit(cache=True)
def count_moves(M, logP, noisy, log_q, a_idx, b_idx, steps, log_u):  # pragma: no cover - jit
    """Make Metropolis moves of s records from cell b to cell a, in place.

    Move i proposes moving ``steps[i]`` records from cell ``b_idx[i]`` to cell ``a_idx[i]``
    (skipped when cell b holds fewer) and accepts it when ``log_u[i]`` is below the log ratio of
    ``Multinomial(M | n, P) x prod geometric(noisy - M)``.

    Parameters
    ----------
    M : numpy.ndarray of int64
        The table's true counts, updated in place.
    logP : numpy.ndarray
        Log cell probabilities.
    noisy : numpy.ndarray
        The noisy counts.
    log_q : float
        Log of the geometric mechanism's parameter q.
    a_idx, b_idx : numpy.ndarray of int
        Receiving and giving cell of each proposal.
    steps : numpy.ndarray of int
        Records moved by each proposal.
    log_u : numpy.ndarray
        Log uniforms, one per proposal.

    Returns
    -------
    int
        The number of moves accepted.
    """
    accepted = 0
    for i in range(len(a_idx)):
        a = a_idx[i]
        b = b_idx[i]
        s = steps[i]
        ma = M[a]
        mb = M[b]
        if mb < s:
            continue
        d = (math.lgamma(ma + 1.0) + math.lgamma(mb + 1.0) - math.lgamma(ma + s + 1.0)
             - math.lgamma(mb - s + 1.0) + s * (logP[a] - logP[b])
             + log_q * (abs(noisy[a] - ma - s) - abs(noisy[a] - ma)
                        + abs(noisy[b] - mb + s) - abs(noisy[b] - mb)))
        if log_u[i] < d:
            M[a] = ma + s
            M[b] = mb - s
            accepted += 1
    return accepted


class _LatentClassStep(BlockedStep):
    name = "latent_class"
    default_blocked = True
    stats_dtypes_shapes = {"tune": (bool, []), "accept_rate": (float, [])}
    _state_class = CopulaGibbsState  # the same state: a tune flag

    def __init__(self, vars=None, *, model=None, rng=None, blocked: bool = True):
        model = modelcontext(model)
        self.spec = latent_class_spec(model)
        if self.spec is None:
            raise IncompatibleModelError(
                f"{type(self).__name__} needs a model from latent_class_dp_model.")
        self.rng = get_random_generator(rng)
        self.tune = True
        self.vars = [model.rvs_to_values[model[name]] for name in self._targets(model)]
        self._setup(model)
        self._initial_state = initial_state(self)

    def reset_tuning(self) -> None:
        """Start each chain from the state the step was built in.

        See :meth:`bayesynth.samplers.steps.CopulaGibbsStep.reset_tuning`.
        """
        restore_state(self, self._initial_state)

    def _targets(self, model) -> list[str]:
        raise NotImplementedError

    def _outputs(self) -> list[str]:
        """Model quantities the update reads (compiled once as a function of v and psi)."""
        raise NotImplementedError

    def _setup(self, model) -> None:
        outs = model.replace_rvs_by_values([model[name] for name in self._outputs()])
        used = set(inputvars(outs))  # v and psi, or whatever replaced priors depend on
        inputs = [x for x in model.value_vars if x in used]
        self._input_keys = [x.name for x in inputs]
        fn = model.compile_fn(outs, inputs=inputs, point_fn=False)
        self._probs = lambda point: fn(*[point[k] for k in self._input_keys])

    @staticmethod
    def competence(var, has_grad):
        """Refuse automatic assignment: :func:`latent_class_steps` assigns these steps."""
        return Competence.INCOMPATIBLE

    def step(self, point):
        """Update the step's variables; return the new point and ``tune``/``accept_rate``."""
        new = dict(point)
        rate = self._update(new)
        return new, [{"tune": self.tune, "accept_rate": rate}]


class TrueCountsMetropolis(_LatentClassStep):
    """Exact Metropolis moves on every table's true counts ``M_t<i>`` (totals stay n).

    Parameters
    ----------
    moves_per_cell : int, default 4
        Proposals per iteration per cell of each table.
    """

    name = "true_counts_metropolis"

    def __init__(self, vars=None, *, model=None, rng=None, moves_per_cell: int = 4,
                 blocked: bool = True):
        self.moves_per_cell = int(moves_per_cell)
        super().__init__(vars, model=model, rng=rng, blocked=blocked)

    def _targets(self, model):
        return [f"M_t{i}" for i in range(len(self.spec.tables))]

    def _outputs(self):
        return [f"P_t{i}" for i in range(len(self.spec.tables))]

    def _setup(self, model):
        super()._setup(model)
        self._keys = [model.rvs_to_values[model[f"M_t{i}"]].name
                      for i in range(len(self.spec.tables))]
        self._noise_sd = [math.sqrt(2 * math.exp(lq)) / (1 - math.exp(lq))
                          for lq in self.spec.log_q]

    def _update(self, point):
        spec = self.spec
        P_all = self._probs(point)
        tried = accepted = 0
        for i, key in enumerate(self._keys):
            M = np.array(point[key], dtype=np.int64, copy=True)
            P = np.maximum(np.asarray(P_all[i], dtype=np.float64), 1e-300)
            cells = len(M)
            if cells < 2:
                continue
            scale = min(self._noise_sd[i], math.sqrt(spec.n * float(np.mean(P * (1 - P)))))
            S = max(1, int(round(scale)))
            r = self.moves_per_cell * cells
            a = self.rng.integers(0, cells, size=r)
            b = (a + 1 + self.rng.integers(0, cells - 1, size=r)) % cells
            steps = self.rng.integers(1, S + 1, size=r)
            log_u = np.log(self.rng.random(r))
            accepted += count_moves(M, np.log(P), spec.noisy[i], spec.log_q[i], a, b, steps,
                                    log_u)
            tried += r
            point[key] = M
        return accepted / max(tried, 1)


def _forward(model, rv):
    """Compiled map from a variable's value to its transformed (sampler) value."""
    tr = model.rvs_to_transforms.get(rv)
    x = pt.tensor(dtype="float64", shape=(None,) * rv.ndim)
    if tr is None:
        return lambda v: v
    fn = pytensor.function([x], tr.forward(x, *rv.owner.inputs))
    return lambda v: fn(np.asarray(v, dtype=np.float64))


def conjugate_priors(model: pm.Model) -> tuple[dict[str, tuple], dict[str, str]]:
    """Split a latent class model's ``v`` and ``psi_<var>`` by whether their prior is conjugate.

    Conjugate for :class:`LatentClassGibbs`: ``v`` a Beta and each ``psi_<var>`` a Dirichlet,
    free variables with fixed parameters of the right shape (the defaults, or replacements
    through ``priors=`` of the same families).

    Parameters
    ----------
    model : pymc.Model
        A model from :func:`~bayesynth.models.latent_class_dp.latent_class_dp_model`.

    Returns
    -------
    params : dict
        Variable name to its prior parameters: ``(a, b)`` of shape ``(k - 1,)`` for ``v``,
        ``(a,)`` of shape ``(k, levels)`` for ``psi_<var>``.
    reasons : dict
        Variable name to why its prior is not conjugate.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        If the model was not built by ``latent_class_dp_model``.
    """
    spec = latent_class_spec(model)
    if spec is None:
        raise IncompatibleModelError("conjugate_priors needs a model from latent_class_dp_model.")
    wanted = {f"psi_{v}": (DirichletRV, "Dirichlet", (spec.k, len(spec.levels[v])))
              for v in spec.variables}
    if spec.k > 1:
        wanted = {"v": (BetaRV, "Beta", (spec.k - 1,)), **wanted}
    params: dict[str, tuple] = {}
    reasons: dict[str, str] = {}
    for name, (op, family, shape) in wanted.items():
        rv = model[name]
        why = f"'{name}' has a prior other than a {family} with fixed parameters"
        if (rv not in model.free_RVs or not isinstance(rv.owner.op, op)
                or not all(_is_constant(g) for g in _dist_params(rv))):
            reasons[name] = why
            continue
        try:
            params[name] = tuple(np.broadcast_to(_constant(g), shape).copy()
                                 for g in _dist_params(rv))
        except ValueError:
            reasons[name] = f"{why} of shape {shape}"
    return params, reasons


class LatentClassGibbs(_LatentClassStep):
    """Data-augmentation Gibbs step for the weights ``v`` (hence ``pi``) and every ``psi``.

    Only the variables whose prior is conjugate (:func:`conjugate_priors`) are updated, with
    the prior parameters read from the model; the allocation uses every current ``psi`` and
    ``pi`` whatever their priors.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        When no variable has a conjugate prior.
    """

    name = "latent_class_gibbs"

    def _targets(self, model):
        self._params, self.skipped = conjugate_priors(model)
        if not self._params:
            raise IncompatibleModelError(
                "LatentClassGibbs needs a Beta prior with fixed parameters on 'v' or a "
                "Dirichlet prior with fixed parameters on some psi_<var>; here "
                + "; ".join(self.skipped.values()) + ".")
        return list(self._params)

    def _outputs(self):
        return ["pi"] + [f"psi_{v}" for v in self.spec.variables]

    def _setup(self, model):
        super()._setup(model)
        spec = self.spec
        self._keys = {name: model.rvs_to_values[model[name]].name for name in self._params}
        self._fwd = {name: _forward(model, model[name]) for name in self._params}
        self._M_keys = [model.rvs_to_values[model[f"M_t{i}"]].name
                        for i in range(len(spec.tables))]
        # level code of every cell of every table, per variable of the table
        self._cell_codes = []
        for t in spec.tables:
            shape = [len(spec.levels[v]) for v in t]
            grid = np.array(np.unravel_index(np.arange(int(np.prod(shape))), shape))
            self._cell_codes.append(grid)

    def _update(self, point):
        spec = self.spec
        out = self._probs(point)
        params = self._params
        pi = np.asarray(out[0], dtype=np.float64)
        psi = {v: np.asarray(p, dtype=np.float64) for v, p in zip(spec.variables, out[1:])}
        N = np.zeros(spec.k)
        L = {v: np.zeros((spec.k, len(spec.levels[v]))) for v in spec.variables}
        for i, t in enumerate(spec.tables):
            codes = self._cell_codes[i]
            w = np.broadcast_to(pi[:, None], (spec.k, codes.shape[1])).copy()
            for j, v in enumerate(t):
                w *= psi[v][:, codes[j]]
            w /= w.sum(0, keepdims=True)
            M = np.asarray(point[self._M_keys[i]], dtype=np.int64)
            alloc = self.rng.multinomial(M, w.T)  # cells x classes
            N += alloc.sum(0)
            for j, v in enumerate(t):
                np.add.at(L[v].T, codes[j], alloc)
        if "v" in params:
            a, b = params["v"]
            tail = np.cumsum(N[::-1])[::-1]  # sum_{l >= h} N_l
            v_new = self.rng.beta(a + N[:-1], b + tail[1:])
            v_new = np.clip(v_new, 1e-12, 1 - 1e-12)
            point[self._keys["v"]] = self._fwd["v"](v_new)
        for v in spec.variables:
            if f"psi_{v}" in params:
                draw = _dirichlet_rows(self.rng, params[f"psi_{v}"][0] + L[v])
                point[self._keys[f"psi_{v}"]] = self._fwd[f"psi_{v}"](draw)
        return 1.0


def _dirichlet_rows(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """Draw one Dirichlet vector per row of ``a``.

    Normalised gammas, floored to stay in the open simplex.
    """
    g = np.maximum(rng.standard_gamma(a), 1e-300)
    return g / g.sum(1, keepdims=True)


def latent_class_steps(model: pm.Model | None = None, *, reference: bool = False,
                       non_centred: bool = True) -> list[BlockedStep]:
    """Build the steps :func:`bayesynth.sample` assigns to a latent class model.

    Gibbs for pi and psi (:class:`LatentClassGibbs`), Metropolis for the counts
    (:class:`TrueCountsMetropolis`) and, with the default prior families, the non-centred
    joint moves (:class:`NonCentredCountsMetropolis`). A variable whose prior was replaced
    by a non-conjugate one (:func:`conjugate_priors`) is left out of the Gibbs step (which
    is not used at all when none is left); PyMC's own step samples it.

    Parameters
    ----------
    model : pymc.Model, optional
        A model from :func:`~bayesynth.models.latent_class_dp.latent_class_dp_model`; the one
        in context when omitted.
    reference : bool, default False
        Only the count moves (PyMC then gives NUTS to pi and psi: the slow reference sampler).
    non_centred : bool, default True
        Add :class:`NonCentredCountsMetropolis` (when every prior is of the default family).

    Returns
    -------
    list of BlockedStep

    Warns
    -----
    UserWarning
        When a replaced prior takes variables out of :class:`LatentClassGibbs`; the message
        names them and what samples them instead.
    """
    model = modelcontext(model)
    steps: list[BlockedStep] = [TrueCountsMetropolis(model=model)]
    if reference:
        return steps
    params, reasons = conjugate_priors(model)
    if params:
        steps.insert(0, LatentClassGibbs(model=model))
    if not reasons and non_centred:
        steps.append(NonCentredCountsMetropolis(model=model))
    if reasons:
        leftover = _uncovered_variables(model, steps)
        what = (f"LatentClassGibbs does not update {list(reasons)}" if params
                else "LatentClassGibbs is not used")
        warnings.warn(
            f"{what} ({'; '.join(reasons.values())}); PyMC's own step (NUTS "
            f"for continuous variables) samples {leftover} instead; the count moves "
            "(TrueCountsMetropolis) still apply.", UserWarning, stacklevel=3)
    return steps


# ------------------------------------------------------------------ the non-centred joint move


@numba.njit(cache=True)
def _theta_from_y(y, k, levels, psi_off, a_v, b_v, alpha):  # pragma: no cover - jit
    """Class weights, level probabilities and log prior density of unconstrained ``y``.

    ``y`` holds logit(v) (k - 1 entries), then, per variable and class, the additive log
    ratios log(psi_l / psi_last) of its levels. The density is the prior's in these
    coordinates (Jacobians included): Beta(a, b) on v gives v^a (1 - v)^b, a Dirichlet(alpha)
    row gives prod_l psi_l^alpha_l.
    """
    pi = np.empty(k)
    rest = 1.0
    lp = 0.0
    for h in range(k - 1):
        t = y[h]
        # log v and log(1 - v) without overflow
        if t >= 0:
            log_v = -math.log1p(math.exp(-t))
            log_1v = -t + log_v
        else:
            log_1v = -math.log1p(math.exp(t))
            log_v = t + log_1v
        v = math.exp(log_v)
        pi[h] = rest * v
        rest = rest * (1.0 - v)
        lp += a_v[h] * log_v + b_v[h] * log_1v
    pi[k - 1] = rest
    psi = np.empty(alpha.shape[0])
    pos = k - 1
    for j in range(len(levels)):
        L = levels[j]
        for h in range(k):
            base = psi_off[j] + h * L
            mx = 0.0
            for el in range(L - 1):
                if y[pos + el] > mx:
                    mx = y[pos + el]
            tot = math.exp(-mx)
            for el in range(L - 1):
                tot += math.exp(y[pos + el] - mx)
            log_tot = mx + math.log(tot)
            for el in range(L - 1):
                lg = y[pos + el] - log_tot
                psi[base + el] = math.exp(lg)
                lp += alpha[base + el] * lg
            psi[base + L - 1] = math.exp(-log_tot)
            lp += alpha[base + L - 1] * (-log_tot)
            pos += L - 1
    return pi, psi, lp


@numba.njit(cache=True)
def _table_probs(pi, psi, k, t_vars, t_ndim, codes, n_cells, psi_off, levels,
                 out):  # pragma: no cover - jit
    """Cell probabilities of every table (rows of ``out``) from pi and psi."""
    for t in range(len(n_cells)):
        for c in range(n_cells[t]):
            s = 0.0
            for h in range(k):
                w = pi[h]
                for d in range(t_ndim[t]):
                    j = t_vars[t, d]
                    w *= psi[psi_off[j] + h * levels[j] + codes[t, c, d]]
                s += w
            out[t, c] = s


@numba.njit(cache=True)
def _split_counts(M, P_old, P_new, n_cells, out):  # pragma: no cover - jit
    """Draw one table's new counts when its records' uniforms stay and the cell bounds move.

    Cell c holds the M[c] records whose uniform lies in [F_{c-1}, F_c) (cumulative sums of
    ``P_old``, the last bound 1); given the counts those uniforms are independent and uniform
    on their cell, so the numbers that fall in the new cells [F'_{c'-1}, F'_{c'}) are
    multinomial with the overlap lengths over the cell's length. Returns False when a cell
    holding records has length 0.
    """
    for c in range(n_cells):
        out[c] = 0
    lo = 0.0
    for c in range(n_cells):
        hi = 1.0 if c == n_cells - 1 else lo + P_old[c]
        m = M[c]
        if m > 0:
            mass = hi - lo
            if mass <= 0.0:
                return False
            nlo = 0.0
            last = -1
            for c2 in range(n_cells):
                nhi = 1.0 if c2 == n_cells - 1 else nlo + P_new[c2]
                ov = min(hi, nhi) - max(lo, nlo)
                if ov > 0.0 and m > 0:
                    last = c2
                    x = m if ov >= mass else np.random.binomial(m, ov / mass)
                    out[c2] += x
                    m -= x
                    mass -= ov
                nlo = nhi
            if m > 0:  # rounding left records unplaced: the last overlapping cell takes them
                out[last if last >= 0 else n_cells - 1] += m
        lo = hi
    return True


@numba.njit(cache=True)
def _seed_numba(seed):  # pragma: no cover - jit
    np.random.seed(seed)


@numba.njit(cache=True)
def joint_moves(y, M, noisy, log_q, chol, z, log_u, k, levels, psi_off, a_v, b_v, alpha,
                t_vars, t_ndim, codes, n_cells):  # pragma: no cover - jit
    """Metropolis moves of (pi, psi) that carry every table's true counts along.

    The counts of table t are those of n uniforms U_t cut at the cumulative cell
    probabilities. With the U_t held fixed, a move of y = (logit v, log ratios of psi) to
    y + chol z moves the cuts and so the counts (:func:`_split_counts` draws the U_t's
    positions given the counts), and the target of (y, U) is prior(y) x prod_t
    geometric(noisy_t - M_t(y, U_t)): the multinomial law of the counts is the uniforms'
    law, so the acceptance ratio has only the prior and the noise. Updates ``y`` and ``M`` in
    place and returns the number of moves accepted.
    """
    T = len(n_cells)
    cmax = M.shape[1]
    P = np.empty((T, cmax))
    Pn = np.empty((T, cmax))
    Mn = np.empty((T, cmax), dtype=np.int64)
    pi, psi, lp = _theta_from_y(y, k, levels, psi_off, a_v, b_v, alpha)
    _table_probs(pi, psi, k, t_vars, t_ndim, codes, n_cells, psi_off, levels, P)
    accepted = 0
    d = len(y)
    for i in range(z.shape[0]):
        yn = y.copy()
        for a in range(d):
            s = 0.0
            for b in range(a + 1):
                s += chol[a, b] * z[i, b]
            yn[a] += s
        pin, psin, lpn = _theta_from_y(yn, k, levels, psi_off, a_v, b_v, alpha)
        _table_probs(pin, psin, k, t_vars, t_ndim, codes, n_cells, psi_off, levels, Pn)
        ok = True
        dl = lpn - lp
        for t in range(T):
            if not _split_counts(M[t], P[t], Pn[t], n_cells[t], Mn[t]):
                ok = False
                break
            for c in range(n_cells[t]):
                dl += log_q[t] * (abs(noisy[t, c] - Mn[t, c]) - abs(noisy[t, c] - M[t, c]))
        if ok and log_u[i] < dl:
            y[:] = yn
            lp = lpn
            for t in range(T):
                for c in range(n_cells[t]):
                    M[t, c] = Mn[t, c]
                    P[t, c] = Pn[t, c]
            accepted += 1
    return accepted


@dataclass_state
class NonCentredState(StepMethodState):
    """Sampling state of :class:`NonCentredCountsMetropolis`.

    The tune flag and the adaptation (proposal shape, scale, tuning history), so that PyMC
    restores it for every chain and chains run one after the other adapt independently, as
    in parallel.
    """

    tune: bool = field(default=True)
    _chol: np.ndarray
    _log_scale: float
    _history: list
    _iteration: int


class NonCentredCountsMetropolis(_LatentClassStep):
    """Random-walk moves of (pi, psi) that carry the true counts along (non-centred).

    The other two steps alternate between the counts given (pi, psi) and (pi, psi) given the
    counts. The composite likelihood treats every table as n records, so (pi, psi) given the
    counts is far narrower than their posterior when the noise is larger than the
    multinomial's spread, and that alternation moves in small steps. This step writes each
    table's counts as those of n uniforms cut at the cumulative cell probabilities and moves
    (pi, psi) with the uniforms fixed (:func:`joint_moves`): the counts follow the cells, and
    the acceptance ratio has only the prior and the geometric noise, so the steps are on the
    scale of the posterior (Papaspiliopoulos, Roberts & Sköld 2007 on centred and
    non-centred parametrisations). The uniforms are never stored: each move draws their
    positions given the counts.

    Coordinates: logit of the stick-breaking fractions v and additive log ratios of each
    class's level probabilities; the proposal is Gaussian, its covariance the chain's
    empirical covariance during tuning (from tuning iteration 100, every 50) times a
    scale tuned throughout tuning to an acceptance rate of 0.234; both are fixed after
    tuning. Needs the default prior families (a Beta on v, a Dirichlet on each psi, fixed
    parameters).

    Parameters
    ----------
    moves : int, default 50
        Proposals per iteration.
    """

    name = "non_centred_counts_metropolis"
    _state_class = NonCentredState
    stats_dtypes_shapes = {"tune": (bool, []), "accept_rate": (float, []),
                           "scale": (float, [])}
    target_accept = 0.234

    def __init__(self, vars=None, *, model=None, rng=None, moves: int = 50,
                 blocked: bool = True):
        self.moves = int(moves)
        super().__init__(vars, model=model, rng=rng, blocked=blocked)

    def _targets(self, model):
        self._params, reasons = conjugate_priors(model)
        if reasons:
            raise IncompatibleModelError(
                "NonCentredCountsMetropolis needs the default prior families: "
                + "; ".join(reasons.values()) + ".")
        spec = latent_class_spec(model)
        return (["v"] if spec.k > 1 else []) + [f"psi_{v}" for v in spec.variables] + [
            f"M_t{i}" for i in range(len(spec.tables))]

    def _outputs(self):
        return (["v"] if self.spec.k > 1 else []) + [f"psi_{v}" for v in self.spec.variables]

    def _setup(self, model):
        super()._setup(model)
        spec = self.spec
        k = spec.k
        names = self._outputs()
        self._keys = {name: model.rvs_to_values[model[name]].name for name in names}
        self._fwd = {name: _forward(model, model[name]) for name in names}
        self._M_keys = [model.rvs_to_values[model[f"M_t{i}"]].name
                        for i in range(len(spec.tables))]
        self._levels = np.array([len(spec.levels[v]) for v in spec.variables], dtype=np.int64)
        self._psi_off = np.concatenate([[0], np.cumsum(k * self._levels)[:-1]]).astype(np.int64)
        if k > 1:
            self._a_v, self._b_v = (np.asarray(x, dtype=np.float64) for x in self._params["v"])
        else:
            self._a_v = self._b_v = np.zeros(0)
        self._alpha = np.concatenate([np.asarray(self._params[f"psi_{v}"][0],
                                                 dtype=np.float64).reshape(-1)
                                      for v in spec.variables])
        index = {v: j for j, v in enumerate(spec.variables)}
        T = len(spec.tables)
        dmax = max(len(t) for t in spec.tables)
        self._n_cells = np.array([len(x) for x in spec.noisy], dtype=np.int64)
        cmax = int(self._n_cells.max())
        self._t_vars = np.zeros((T, dmax), dtype=np.int64)
        self._t_ndim = np.array([len(t) for t in spec.tables], dtype=np.int64)
        self._codes = np.zeros((T, cmax, dmax), dtype=np.int64)
        self._noisy = np.zeros((T, cmax), dtype=np.int64)
        for i, t in enumerate(spec.tables):
            self._t_vars[i, :len(t)] = [index[v] for v in t]
            shape = [len(spec.levels[v]) for v in t]
            grid = np.array(np.unravel_index(np.arange(int(np.prod(shape))), shape))
            self._codes[i, :grid.shape[1], :len(t)] = grid.T
            self._noisy[i, :len(spec.noisy[i])] = spec.noisy[i]
        self._log_q = np.asarray(spec.log_q, dtype=np.float64)
        self._dim = (k - 1) + int(np.sum(k * (self._levels - 1)))
        self._chol = np.eye(self._dim) * 0.01
        self._log_scale = 0.0
        self._history: list[np.ndarray] = []
        self._iteration = 0

    def _y(self, values) -> np.ndarray:
        """Unconstrained coordinates of the current v and psi."""
        k = self.spec.k
        parts = []
        rest = list(values)
        if k > 1:
            v = np.clip(np.asarray(rest.pop(0), dtype=np.float64), 1e-300, 1 - 1e-16)
            parts.append(np.log(v) - np.log1p(-v))
        for p in rest:
            p = np.maximum(np.asarray(p, dtype=np.float64), 1e-300)
            parts.append((np.log(p[:, :-1]) - np.log(p[:, -1:])).reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0)

    def _update(self, point):
        spec = self.spec
        k = spec.k
        y = self._y(self._probs(point))
        T = len(spec.tables)
        M = np.zeros((T, self._noisy.shape[1]), dtype=np.int64)
        for i, key in enumerate(self._M_keys):
            M[i, :self._n_cells[i]] = point[key]
        d = self._dim
        z = self.rng.standard_normal((self.moves, d))
        log_u = np.log(self.rng.random(self.moves))
        _seed_numba(int(self.rng.integers(2**31 - 1)))
        chol = self._chol * math.exp(self._log_scale)
        acc = joint_moves(y, M, self._noisy, self._log_q, chol, z, log_u, k, self._levels,
                          self._psi_off, self._a_v, self._b_v, self._alpha, self._t_vars,
                          self._t_ndim, self._codes, self._n_cells)
        rate = acc / max(self.moves, 1)
        if self.tune:
            self._adapt(y, rate)
        pi, psi, _ = _theta_from_y(y, k, self._levels, self._psi_off, self._a_v, self._b_v,
                                   self._alpha)
        if k > 1:
            v = 1.0 / (1.0 + np.exp(-y[:k - 1]))
            point[self._keys["v"]] = self._fwd["v"](np.clip(v, 1e-12, 1 - 1e-12))
        for j, var in enumerate(spec.variables):
            L = int(self._levels[j])
            rows = psi[self._psi_off[j]:self._psi_off[j] + k * L].reshape(k, L)
            rows = np.maximum(rows, 1e-300)
            point[self._keys[f"psi_{var}"]] = self._fwd[f"psi_{var}"](rows / rows.sum(1,
                                                                                   keepdims=True))
        for i, key in enumerate(self._M_keys):
            point[key] = M[i, :self._n_cells[i]].copy()
        return rate

    def _adapt(self, y: np.ndarray, rate: float) -> None:
        """Tune the scale toward the target acceptance rate.

        Every 50 iterations from the 100th the proposal's shape becomes the empirical
        covariance of the later half of the tuning iterations so far.
        """
        self._iteration += 1
        self._history.append(y.copy())
        self._log_scale += (rate - self.target_accept) / math.sqrt(self._iteration / 10 + 1)
        it = self._iteration
        if it >= 100 and it % 50 == 0:
            window = np.array(self._history[it // 2:])
            cov = np.cov(window, rowvar=False).reshape(self._dim, self._dim)
            cov = cov * 2.38**2 / self._dim + 1e-10 * np.eye(self._dim)
            try:
                chol = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:
                return
            self._chol = chol

    def step(self, point):
        """Update v, psi and the counts; return the point and the step's statistics."""
        new = dict(point)
        rate = self._update(new)
        return new, [{"tune": self.tune, "accept_rate": rate,
                      "scale": math.exp(self._log_scale)}]
