"""Intercepts that give a multinomial-probit variable prescribed level shares."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayesynth.models import level_calibration
from bayesynth.models.level_calibration import calibrate_block


def _hard_shares(a, x):
    u = np.column_stack([np.zeros(len(x)), a + x])
    return np.bincount(u.argmax(axis=1), minlength=x.shape[1] + 1)[1:] / len(x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_levels_from_a_distant_start_reach_the_target_shares(seed):
    """28 levels (SD2011's eduspec has 28), correlated utilities, some levels rare, started at
    zero intercepts: the hard shares of the points match the targets up to the smoothing
    (a single smoothing level at its final value ran away here: shares off by up to 0.95)."""
    rng = np.random.default_rng(seed)
    d, M = 27, 2000
    A = rng.standard_normal((d, d))
    S = A @ A.T / d + np.eye(d)
    x = rng.standard_normal((M, d)) @ np.linalg.cholesky(S).T
    target = rng.dirichlet(np.full(d + 1, 2.0))[1:]
    a = calibrate_block(np.zeros(d), x, target)
    # the smoothed shares meet the target to 1e-8; the hard ones differ by the points that
    # sit within tau of a boundary: a few per thousand
    assert np.max(np.abs(_hard_shares(a, x) - target)) < 3e-3


def test_the_solution_does_not_depend_on_the_start():
    rng = np.random.default_rng(5)
    d, M = 4, 5000
    x = rng.standard_normal((M, d)) * np.array([1.0, 0.5, 2.0, 1.3])
    target = np.array([0.1, 0.3, 0.05, 0.2])
    a1 = calibrate_block(np.zeros(d), x, target)
    a2 = calibrate_block(rng.normal(scale=3.0, size=d), x, target)
    np.testing.assert_allclose(a1, a2, atol=1e-6)
    a3 = calibrate_block(a1 + 0.01, x, target)  # close: straight to the final smoothing
    np.testing.assert_allclose(a1, a3, atol=1e-6)


def test_two_levels_get_the_exact_quantile():
    rng = np.random.default_rng(3)
    x = 1.7 * rng.standard_normal((4000, 1))
    for p in (0.02, 0.3, 0.9):
        a = calibrate_block(np.array([5.0]), x, np.array([p]))
        assert abs(np.mean(a[0] + x[:, 0] > 0) - p) <= 1.0 / len(x)


def test_far_starts_with_empty_levels_still_reach_the_targets():
    """From a start far from the solution some levels get no mass and Newton's direction
    fails (errors up to 0.9 before the share-inversion fallback); a step budget too small to
    finish warns instead of returning wrong margins silently."""
    rng = np.random.default_rng(26)
    d, M = 26, 2000
    A = rng.standard_normal((d, d))
    S = A @ A.T / d + 0.3 * np.eye(d)
    x = rng.standard_normal((M, d)) @ np.linalg.cholesky(S).T
    t = rng.dirichlet(np.full(d + 1, 0.5))
    t = np.maximum(t, 20 / M)
    target = (t / t.sum())[1:]
    start = rng.normal(scale=4.0, size=d)
    a = calibrate_block(start, x, target)
    assert np.max(np.abs(_hard_shares(a, x) - target)) < 3e-3
    with pytest.warns(RuntimeWarning, match="Level calibration stopped"):
        calibrate_block(start, x, target, max_iter=3)


def _rare_levels_problem(seed, d=20, M=2000):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d))
    S = A @ A.T / d + 0.3 * np.eye(d)
    x = rng.standard_normal((M, d)) @ np.linalg.cholesky(S).T
    t = rng.dirichlet(np.full(d + 1, 0.5))
    t = np.maximum(t, 10 / M)  # some levels with ten points of the 2,000
    return x, (t / t.sum())[1:], rng.normal(scale=5.0, size=d)


@pytest.mark.parametrize("seed", [0, 6, 9])
def test_far_starts_with_rare_levels_finish_within_a_hundred_steps(seed):
    """Newton's steps are at most one spread long. Uncapped, a level with almost no mass near
    a boundary made them hundreds of spreads long; the line search then failed and the
    share-inversion steps crawled: 25 of 30 such problems warned with 100 steps per level
    (2026-12-07), none does now."""
    x, target, start = _rare_levels_problem(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the step limit's warning fails the test
        a = calibrate_block(start, x, target, max_iter=100)
    assert np.max(np.abs(_hard_shares(a, x) - target)) < 3e-3
    np.testing.assert_allclose(a, calibrate_block(np.zeros(len(target)), x, target), atol=1e-6)
    # in the utilities' own units: the same solve on a 25 times wider scale
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wide = calibrate_block(25.0 * start, 25.0 * x, target, max_iter=100)
    np.testing.assert_allclose(wide, 25.0 * a, atol=25.0 * 1e-6)


@pytest.mark.parametrize("tau", [0.01, 0.3])
def test_the_compiled_pass_equals_the_smoothed_objective_by_scipy(tau):
    """Value, mean softmax shares and Hessian of tau * mean log(1 + sum exp((a + x) / tau))
    - target'a, against scipy's log-sum-exp and softmax over every term (the pass leaves out
    the terms below exp(-40) of a point's largest)."""
    from scipy.special import logsumexp, softmax

    rng = np.random.default_rng(11)
    n, d = 3000, 9
    x = rng.standard_normal((n, d)) * rng.uniform(0.5, 2.0, d)
    a = rng.normal(scale=0.7, size=d)
    target = rng.dirichlet(np.ones(d + 1))[1:]
    u = np.column_stack([np.zeros(n), (a + x) / tau])
    value = tau * logsumexp(u, axis=1).mean() - target @ a
    s = softmax(u, axis=1)[:, 1:]
    H = (np.diag(s.sum(axis=0)) - s.T @ s) / (n * tau)
    got_value, got_shares, got_H = level_calibration._smoothed_pass(a, x, tau, target)
    assert got_value == pytest.approx(value, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(got_shares, s.mean(axis=0), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(got_H, H, rtol=1e-9, atol=1e-12 * np.abs(H).max())


def test_the_compiled_and_the_vectorised_solves_agree(monkeypatch):
    x, target, start = _rare_levels_problem(4, d=9)
    monkeypatch.setattr(level_calibration, "COMPILED_MIN_COLUMNS", 100)
    vectorised = calibrate_block(start, x, target)
    monkeypatch.setattr(level_calibration, "COMPILED_MIN_COLUMNS", 2)
    np.testing.assert_allclose(calibrate_block(start, x, target), vectorised, atol=1e-7)


def test_the_share_inversion_steps_reach_the_targets_where_newton_fails(monkeypatch):
    """Without the step cap, Newton's direction fails from this far start (a level with no
    mass makes the Hessian near singular) and the share-inversion fallback takes over: its
    hundreds of steps still end at the targets, without a warning."""
    monkeypatch.setattr(level_calibration, "MAX_STEP", np.inf)
    x, target, start = _rare_levels_problem(0, d=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = calibrate_block(start, x, target)
    assert np.max(np.abs(_hard_shares(a, x) - target)) < 3e-3


@pytest.mark.parametrize("d", [4, 9])
def test_a_start_at_the_solution_is_the_solution(d):
    """The start is judged at the final smoothing level: from the solution no step is needed
    (with no steps allowed, a start judged at another level would warn or move)."""
    x, target, _ = _rare_levels_problem(3, d=d)
    a = calibrate_block(np.zeros(d), x, target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = calibrate_block(a, x, target, max_iter=0)
    np.testing.assert_array_equal(again, a)


def test_points_without_spread_are_refused():
    x = np.zeros((500, 6))
    x[:, 0] = np.random.default_rng(0).standard_normal(500)  # five of six columns constant
    with pytest.raises(ValueError, match="median sd"):
        calibrate_block(np.zeros(6), x, np.full(6, 0.1))
