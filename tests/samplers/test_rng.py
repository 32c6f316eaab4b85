"""The inlined generator of the compiled kernels: distributions and seeding."""

from __future__ import annotations

import numba
import numpy as np
from scipy import stats

from bayesynth.samplers.rng import exponential, new_state, normal, standard_normal, uniform

N = 200_000


@numba.njit
def _draw(st, sp, kind, n):
    out = np.empty(n)
    for i in range(n):
        if kind == 0:
            out[i] = uniform(st)
        elif kind == 1:
            out[i] = normal(st, sp)
        else:
            out[i] = exponential(st)
    return out


def test_uniform(rng):
    st, sp = new_state(rng)
    x = _draw(st, sp, 0, N)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert stats.kstest(x, "uniform").pvalue > 1e-3
    # consecutive pairs are not correlated
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 4 / np.sqrt(N)


def test_normal_ziggurat(rng):
    st, sp = new_state(rng)
    x = _draw(st, sp, 1, N)
    assert stats.kstest(x, "norm").pvalue > 1e-3
    # the tail beyond the base strip (|x| > 3.654) has the right mass
    tail = np.mean(np.abs(x) > 3.6541528853610088)
    p = 2 * stats.norm.sf(3.6541528853610088)
    assert abs(tail - p) < 4 * np.sqrt(p / N)


def test_exponential_ziggurat(rng):
    st, sp = new_state(rng)
    x = _draw(st, sp, 2, N)
    assert x.min() > 0
    assert stats.kstest(x, "expon").pvalue > 1e-3
    tail = np.mean(x > 7.69711747013104972)
    p = np.exp(-7.69711747013104972)
    assert abs(tail - p) < 5 * np.sqrt(p / N) + 1e-6


def test_seeded_from_generator(seed):
    a = standard_normal(np.random.default_rng(seed), (3, 4))
    b = standard_normal(np.random.default_rng(seed), (3, 4))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 4)
