"""Intercepts of a multinomial-probit variable that give it prescribed level probabilities.

A categorical variable under the multinomial probit has level probabilities
``P(argmax(0, alpha + x) = h)``, ``x ~ N(0, Sigma)``. Given Monte Carlo points ``x_m`` and target
shares ``p_h``, :func:`calibrate_block` finds the intercepts whose points fall into the levels in
those proportions. It solves the smooth convex problem (the dual of assigning the points to
levels in the given proportions)

    minimise  tau * mean_m log(1 + sum_h exp((a_h + x_mh) / tau)) - sum_h p_h a_h,

whose gradient is the softmax share of each level minus its target, by Newton's method. With
``tau`` a hundredth of the utilities' spread the hard (argmax) shares of the points match the
targets to about 1e-3. The problem is solved for a decreasing sequence of ``tau`` (0.3, 0.1,
0.03, then 0.01 of the spread), each from the previous solution: at the final ``tau`` alone the
softmax is nearly a step function, so from a distant start some levels get no mass, the Hessian is
singular and Newton's steps run away (measured with 28 levels and 2,000 points from zero
intercepts: hard shares off by up to 0.95 after 3.5 s of iterations), while the sequence reaches
the same minimiser in 10-14 Newton steps. A Newton step is
at most one sd of the utilities long (:data:`MAX_STEP`): a level with almost no mass near a
boundary makes the Hessian near singular and the raw step hundreds or millions of spreads long,
which the line search used to halve ten times and give up on. A step that
cannot decrease the objective (rounding level reached) ends the level. Where Newton's
direction fails before that, a share-inversion step is taken instead (the contraction of
Berry, Levinsohn & Pakes 1995 for mixed-logit shares). Over 40 random problems (1 to 28
utility columns, 2,000 or 20,000 points, targets down to 10 points, starts up to 15 from
zero; ``benchmarks/level_calibration.py``) the hard shares end within 2.1e-3 of the targets,
with no solve short of its tolerance, in 1.2-1.3 s in all (before the cap: 303 s, one
problem 184 s, and five stopped at the step limit and warned). A solve that ends short of its
tolerance warns. A start already within :data:`START_CLOSE` of the targets goes to the final
level directly.

Each evaluation of the objective and the shares is one pass over the points: NumPy's
vectorised exponentials over all of them, their exponents clamped at -60 (with scipy's
``logsumexp`` and ``softmax`` the same solve took 4-5 times longer), except at the final level
for variables with :data:`COMPILED_MIN_COLUMNS` or more utility columns, where a compiled pass
(:func:`_smoothed_pass`) also forms the Hessian and leaves out a point's terms below exp(-40)
of its largest: most of a many-level variable's there (SD2011's 28-level variable, at the
judge's 8,000 points from the previous draw's solution: about 12 ms a solve, against 25 ms
with the clamped NumPy pass and 55 ms without the clamp; ``benchmarks/README.md``).
A two-level variable (one utility column) needs no smoothing: its intercept is minus the
points' quantile at one minus the target share.

The synthesizer (:mod:`bayesynth.synthesis.level_margins`) and the convergence diagnostics
(:func:`bayesynth.models.copula_quantities.implied_quantities`) both use it, so that convergence
is judged on the calibrated quantities that synthesis reads.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np

__all__ = ["calibrate_block", "TAU_STAGES"]

#: Smoothing levels, as shares of the median spread of the utilities, solved in turn; the last
#: one defines the solution.
TAU_STAGES = (0.3, 0.1, 0.03, 0.01)

#: A start whose shares are all within this of the targets goes straight to the final level
#: (the usual case in synthesis, which starts from the draw's own intercepts, and in the
#: convergence check, which starts from the previous draw's solution). 0.01 until 2026-12-07;
#: with Newton's steps capped (:data:`MAX_STEP`) 0.03 is as safe and halves the demo check's
#: evaluations of the shares (``benchmarks/README.md``).
START_CLOSE = 0.03

#: Longest Newton step (the largest change of any intercept), in units of the largest sd of
#: the utility columns (of the median one, the smoothing's unit, columns on scales 100 times
#: apart took ten times the steps).
MAX_STEP = 1.0


#: A level's term in a point's softmax is left out below exp(-SKIP) of the point's largest:
#: it changes the shares by less than 1e-17 of the largest, and most of a many-level
#: variable's terms are that small at the final smoothing level.
SKIP = 40.0

#: Variables with at least this many utility columns are solved at the final smoothing level
#: with the compiled pass :func:`_smoothed_pass`; fewer, and the earlier levels (where fewer
#: terms are negligible), with NumPy's vectorised exponentials, which are faster there.
COMPILED_MIN_COLUMNS = 6


@numba.njit(cache=True, nogil=True)
def _smoothed_pass(a, x, tau, target):  # pragma: no cover - compiled
    """Compute the smoothed objective, the mean softmax shares (d,) and the Hessian at ``a``.

    One pass over the points (rows of ``x``); the reference level's utility is 0. Per
    point, the terms within exp(-SKIP) of its largest utility enter the log-sum-exp, the
    shares and the Hessian ``(diag(sum_m s_m) - sum_m s_m s_m') / (n tau)``.
    """
    n, d = x.shape
    mean = np.zeros(d)
    H = np.zeros((d, d))
    z = np.empty(d)
    near = np.empty(d, np.int64)
    s = np.empty(d)
    lse = 0.0
    for m in range(n):
        top = 0.0  # the reference level
        for h in range(d):
            v = (a[h] + x[m, h]) / tau
            z[h] = v
            if v > top:
                top = v
        tot = math.exp(-top) if top < SKIP else 0.0
        c = 0
        for h in range(d):
            u = z[h] - top
            if u > -SKIP:
                e = math.exp(u)
                near[c] = h
                s[c] = e
                c += 1
                tot += e
        lse += top + math.log(tot)
        for i in range(c):
            si = s[i] / tot
            s[i] = si
            mean[near[i]] += si
            for j in range(i + 1):
                H[near[i], near[j]] -= si * s[j]
    value = tau * lse / n
    for h in range(d):
        value -= target[h] * a[h]
        H[h, h] += mean[h]
    scale = 1.0 / (n * tau)
    for h in range(d):
        for j in range(h):
            H[h, j] *= scale
            H[j, h] = H[h, j]
        H[h, h] *= scale
        mean[h] /= n
    return value, mean, H


def calibrate_block(alpha: np.ndarray, x: np.ndarray, target: np.ndarray, *,
                    tol: float = 1e-8, max_iter: int = 1000) -> np.ndarray:
    """Find the intercepts whose implied level shares over ``x`` equal ``target``.

    Parameters
    ----------
    alpha : numpy.ndarray, shape (d,)
        Starting intercepts of the variable's d utility columns (the reference level's
        utility is 0). The solution does not depend on them (the problem is strictly convex);
        a start near it saves Newton steps.
    x : numpy.ndarray, shape (M, d)
        Monte Carlo draws of the utilities' deviations from their means.
    target : numpy.ndarray, shape (d,)
        Wanted share of each column's level; the reference level gets ``1 - target.sum()``.
    tol : float, default 1e-8
        Stop when every smoothed share is this close to its target (at the final smoothing
        level; the earlier levels stop at 1e-3).
    max_iter : int, default 1000
        Most steps per smoothing level (Newton's, or share-inversion steps where Newton's
        direction fails; from starts far from the solution, with levels that get no mass,
        the latter can take hundreds).

    Returns
    -------
    numpy.ndarray, shape (d,)
        The intercepts.
    """
    target = np.asarray(target, dtype=float)
    x = np.asarray(x, dtype=float)
    a = np.array(alpha, dtype=float, copy=True)
    n, d = x.shape
    if d == 1:  # two levels: the hard solution directly, P(a + x > 0) = target over the points
        return np.array([-np.quantile(x[:, 0], 1.0 - float(target[0]))])
    xt = np.ascontiguousarray(x.T)
    sds = xt.std(axis=1)
    spread = float(np.median(sds))
    if not (np.isfinite(spread) and spread > 0):
        raise ValueError(f"The Monte Carlo points' median sd is {spread}: calibration needs "
                         "finite points that vary in at least half of the utility columns.")
    reach = MAX_STEP * float(sds.max())  # the longest step
    zt = np.empty((d + 1, n))  # utilities by row: reductions over levels run along rows

    def vectorised(a, tau):
        # The objective, the mean shares and the points' shares from one pass of vectorised
        # exponentials (scipy's logsumexp and softmax each redo it, with overheads that
        # dominated this solve); the Hessian only where a step is taken.
        zt[0] = 0.0
        np.add(a[:, None], xt, out=zt[1:])
        np.divide(zt[1:], tau, out=zt[1:])
        top = zt.max(axis=0)
        np.subtract(zt, top, out=zt)
        # e^-60 of a point's largest term changes nothing at double precision, and NumPy's
        # exponential is slow where its results underflow (subnormal): 17.6 against 0.18 ms
        # for 28 x 8,000 values at -720 and at -60
        np.maximum(zt, -60.0, out=zt)
        np.exp(zt, out=zt)
        tot = zt.sum(axis=0)
        value = tau * float(np.mean(top + np.log(tot))) - float(target @ a)
        shares = zt[1:] / tot  # (d, n)
        return value, shares.mean(axis=1), shares

    def vectorised_hessian(part, tau):
        shares = part[2]
        return (np.diag(shares.sum(axis=1)) - shares @ shares.T) / (n * tau)

    if d >= COMPILED_MIN_COLUMNS:  # the final level: most terms negligible, the compiled pass
        xc = np.ascontiguousarray(x)

        def final(a, tau):
            return _smoothed_pass(a, xc, tau, target)

        def final_hessian(part, tau):
            return part[2]
    else:
        final, final_hessian = vectorised, vectorised_hessian

    stages = TAU_STAGES
    first = final(a, TAU_STAGES[-1] * spread)
    if np.max(np.abs(first[1] - target)) < START_CLOSE:
        stages = TAU_STAGES[-1:]  # already close (the draw's own intercepts): final level only
    for stage, share in enumerate(stages):
        tau = share * spread
        last = stage == len(stages) - 1
        stop = tol if last else 1e-3
        parts, hessian = (final, final_hessian) if last else (vectorised, vectorised_hessian)
        part = first if len(stages) == 1 else parts(a, tau)
        for _ in range(max_iter):
            g = part[1] - target
            if np.max(np.abs(g)) < stop:
                break
            step = np.linalg.solve(hessian(part, tau) + 1e-12 * np.eye(d), -g)
            # At most one sd per step: a level with almost no mass near a boundary makes the
            # Hessian near singular and Newton's step hundreds to 5e8 spreads long (measured on
            # SD2011's variables); the line search then halved it ten times, failed, and left
            # the solve to share-inversion steps of a hundredth of a spread.
            longest = float(np.max(np.abs(step)))
            if longest > reach:
                step *= reach / longest
            t = 1.0
            while True:  # backtracking: the objective is convex
                trial = parts(a + t * step, tau)
                if trial[0] <= part[0] + 1e-4 * t * float(g @ step):
                    break
                t *= 0.5
                if t < 1e-3:
                    break
            if t >= 1e-3:
                a, part = a + t * step, trial
                continue
            if np.max(np.abs(g)) < 1e-6:  # no descent left: rounding level reached
                break
            # Newton's direction fails where levels have (almost) no mass and the Hessian is
            # near singular: take a share-inversion step instead, the contraction of Berry,
            # Levinsohn & Pakes (1995) for mixed-logit shares, which moves every level's
            # intercept by tau times the log ratio of its target to its share.
            a = a + tau * (np.log(target) - np.log(np.maximum(part[1], 1e-300)))
            part = parts(a, tau)
    gap = float(np.max(np.abs(part[1] - target)))
    if gap > max(tol, 1e-4):
        warnings.warn(f"Level calibration stopped after {max_iter} steps with a share off its "
                      f"target by {gap:.2g}; the calibrated margins are that far from the data's.",
                      RuntimeWarning, stacklevel=2)
    return a
