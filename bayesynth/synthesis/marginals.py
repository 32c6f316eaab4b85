"""Estimated marginal distributions F_j of the ordered columns, and their inverses.

The copula synthesizer maps latent normals back to the data scale with
``y = F_hat^-1(Phi(z / sd(z)))`` (Feldman & Kowal 2022, section 4.3):

* binary and ordinal columns, any column with at most 50 distinct values, and any column
  whose values that are not atoms lie between its atoms (ages in whole years: the smooth part
  would put at least 2% of its draws on the atoms' values once rounded,
  :func:`share_on_atoms`; see :func:`fit_marginal`) use the empirical CDF, whose inverse
  returns observed values only (:class:`DiscreteMarginal`);
* other count and continuous columns use a smoothed CDF (counts rounded to
  whole numbers) restricted to the observed range, so that synthetic values are not copies of
  real ones before rounding (:class:`SmoothMarginal`; after rounding to the data's precision,
  see below). The smoothing is a Gaussian kernel in normal-score space: each distinct value v
  gets the score t_v = Phi^-1 of its mid-rank, the scores are smoothed with bandwidth h = 0.9
  n^-1/5 (Silverman's rule for a standard normal sample; centres shrunk by (1 + h^2)^-1/2,
  which leaves the smoothed scores' variance at 1 + h^4 / (1 + h^2), within 0.7% of 1 for n >=
  300), and mapped back by a piecewise-linear quantile function through *nodes*: the sorted
  values are cut into groups of k consecutive ones (k = 10 from 300 values up, fewer below, 1
  below 60: :func:`node_group_size`), each group's mean is a node at the mean of its values'
  normal scores, a value tied across whole groups is one node, within k / 2n of its mid-rank,
  and the minimum and the maximum are the end nodes at their own mid-ranks (a node not
  strictly inside them gives way). The smoothed scores' law stays close to the standard
  normal, so the CDF follows the empirical CDF to within the groups' width: at each real value
  within 1.5 (k + 1) / n plus about 2/n plus the table's interpolation over one grid cell
  (about 0.0014; tested), with no systematic shift (tested). Why groups: with nodes at the
  values themselves (``group=1``, the marginal until 2026-12-06) each gap between neighbouring
  real values got about 1/n of the probability whatever its width, so synthetic values
  followed the sample's own clustering, and rounded to the data's precision they equalled a
  real value 1.43 times as often as a second sample of the population did on the demo's
  continuous columns (2.24 times with 600 values, 2.76 with 300). With groups the ratio is
  1.03 (1.03 with 600 values, 1.13 with 300; 1.00-1.06 on simulated normal columns, 1.06-1.22
  on lognormal ones), with the same distance to a held-out half and the same spread
  (``benchmarks/marginal_copies.py``). The costs: between two clusters of values the quantile
  function bridges the gap over at most two groups' probability, 2 (k + 1) / n, plus a grid
  cell on either side (of a two-cluster column of 4,000 values, 0.44% of the draws where the
  gap falls between groups and about 0.7% where it falls inside one, against 0.14% and about
  0.3% with nodes at the values); and in a strongly skewed tail of a short column a group's
  mean is pulled out by its largest values (the 99th percentile of lognormal(0, 1) samples of
  300 came out 12% above the sample's on average, 2% with nodes at the values, and 0.3% above
  at 2,000; 1.006 and 1.000 times the data's on SD2011's and CE's incomes). (A single
  value-space bandwidth, Silverman's rule on the values, biased the CDF of skewed columns by
  up to 0.058 in the sup norm on the shared real tables (SD2011 income; CE income 0.04), and
  moved mass across gaps between clusters of values.) The smoothed CDF is tabulated on a grid
  of 2048 points uniform in score and inverted by linear interpolation. The table runs through
  the nodes at their known scores, so the nodes can be read back from a saved marginal: the
  minimum and the maximum, the groups' means (means of fewer values in columns shorter than
  300, the values themselves below 60), and values tied across whole groups (with nodes at the
  values, a test reconstruction recovered 218 of 268 incomes to the cent, the top outliers
  included). Atoms and discrete columns are stored at their real values: a saved model is as
  confidential as the data;
* a continuous column with point masses (a value held by at least 1% of the records: zeros,
  heaping at round numbers, top codes) gets an :class:`AtomMarginal`: the atoms at their exact
  values and frequencies, and the smooth CDF of the other values over their own range, so that
  synthesis never invents values outside the range of the smooth part; integer columns come
  back rounded, other columns at their number of decimal places.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from scipy.special import ndtri

from bayesynth.errors import check_integer
from bayesynth.schema import round_to

__all__ = ["DiscreteMarginal", "SmoothMarginal", "AtomMarginal", "fit_marginal",
           "marginal_from_dict", "silverman_bandwidth", "normal_score_bandwidth",
           "node_group_size", "share_on_atoms", "ATOM_SHARE", "NODE_GROUP", "ON_ATOMS",
           "DISCRETE_VALUES"]

#: A value held by at least this share of a continuous column's records is an atom (a point
#: mass reproduced exactly).
ATOM_SHARE = 0.01
#: A numeric column with at most this many distinct values (codes aside) gets its empirical
#: distribution: only observed values come back.
DISCRETE_VALUES = 50
#: A numeric column whose smooth part would put at least this share of its draws on the
#: atoms' values once rounded gets its empirical distribution: see :func:`share_on_atoms` and
#: :func:`fit_marginal`.
ON_ATOMS = 0.02

GRID_SIZE = 1024
#: The quantile function of a smooth marginal runs through the means of groups of this many
#: consecutive sorted values (fewer for short columns: :func:`node_group_size`), not through
#: the values themselves.
NODE_GROUP = 10


@dataclass(frozen=True)
class DiscreteMarginal:
    """Empirical distribution of a discrete column.

    Attributes
    ----------
    values : numpy.ndarray
        Distinct observed values (or level codes), increasing.
    cdf : numpy.ndarray
        Empirical CDF at each value (last entry 1).
    """

    values: np.ndarray
    cdf: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> DiscreteMarginal:
        """Fit to the non-missing values ``x``.

        Parameters
        ----------
        x : numpy.ndarray
            The values (or level codes), without missing ones.

        Returns
        -------
        DiscreteMarginal
        """
        values, counts = np.unique(x, return_counts=True)
        cdf = np.cumsum(counts) / counts.sum()
        cdf[-1] = 1.0
        return cls(values=values, cdf=cdf)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Quantile function: the smallest value whose CDF is at least ``u``.

        Parameters
        ----------
        u : numpy.ndarray
            Probabilities (clipped to [0, 1]).

        Returns
        -------
        numpy.ndarray
            One value per entry of ``u``.
        """
        idx = np.searchsorted(self.cdf, np.clip(u, 0.0, 1.0), side="left")
        return self.values[np.minimum(idx, len(self.values) - 1)]

    def to_dict(self) -> dict[str, Any]:
        """Return the marginal as a JSON-ready dict (read back by :func:`marginal_from_dict`).

        Returns
        -------
        dict
            The fields, with ``kind`` "discrete".
        """
        return {"kind": "discrete", "values": self.values.tolist(), "cdf": self.cdf.tolist()}


def silverman_bandwidth(x: np.ndarray) -> float:
    """Silverman's rule of thumb, ``0.9 min(sd, IQR/1.34) n^(-1/5)``, with fallbacks.

    The spread is the sd when the IQR is zero, and the range (or 1) when it is still zero.

    Parameters
    ----------
    x : numpy.ndarray
        The values, without missing ones.

    Returns
    -------
    float
        The kernel bandwidth.
    """
    n = len(x)
    sd = float(np.std(x, ddof=1)) if n > 1 else 0.0
    q75, q25 = np.percentile(x, [75, 25])
    spread = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
    if spread <= 0:
        spread = float(np.ptp(x)) or 1.0
    return 0.9 * spread * n ** (-0.2)


@numba.njit(cache=True)
def _smoothed_cdf(xs, w, grid, h):  # pragma: no cover - compiled
    """sum_i w_i Phi((g - x_i)/h) / sum_i w_i for sorted xs and grid, in an 8.3 h window."""
    n = xs.shape[0]
    total = 0.0
    for i in range(n):
        total += w[i]
    out = np.empty(grid.shape[0])
    lo = 0
    hi = 0
    below = 0.0  # weight of the points far below g: each contributes its weight
    width = 8.3 * h
    c = 1.0 / (h * math.sqrt(2.0))
    for gi in range(grid.shape[0]):
        g = grid[gi]
        while lo < n and xs[lo] < g - width:
            below += w[lo]
            lo += 1
        while hi < n and xs[hi] <= g + width:
            hi += 1
        acc = below
        for i in range(lo, hi):
            acc += w[i] * 0.5 * math.erfc(-(g - xs[i]) * c)
        out[gi] = acc / total
    return out


def normal_score_bandwidth(n: int) -> float:
    """Silverman's rule for a standard normal sample of size ``n``: ``0.9 n^(-1/5)``.

    The bandwidth of :class:`SmoothMarginal`, in normal-score units.

    Parameters
    ----------
    n : int
        Number of values.

    Returns
    -------
    float
    """
    return 0.9 * max(int(n), 1) ** -0.2


def node_group_size(n: int) -> int:
    """Sorted values averaged into each node of a smooth marginal: ``min(10, n // 30)``, at least 1.

    Ten (:data:`NODE_GROUP`) from 300 values up, so that a column of n values keeps at least
    30 nodes.

    Parameters
    ----------
    n : int
        Number of values.

    Returns
    -------
    int
    """
    return int(max(1, min(NODE_GROUP, int(n) // 30)))


def _node_means(xs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Means of consecutive groups of about ``k`` sorted values, and the scores they sit at.

    The n values are cut into ``n // k`` groups of consecutive values, their sizes as even as
    the division allows (k or k + 1 for the default k). Each group gives its mean, at the mean
    of its values' normal scores ``Phi^-1((i - 1/2) / n)`` (where the values are a linear
    function of their scores, as for normal data, the mean of the values is that function at
    the mean of the scores; the score of the group's middle rank is nearer the centre than
    that, and would push the quantile function out in the tails, where a group's mean is
    pulled out by its most extreme values). A group of one tied value gives that value
    exactly, and consecutive groups of the same value give one node at the score of the middle
    of their ranks, so that a value tied across groups sits within k / 2n of its mid-rank (at
    it without groups).
    """
    n = len(xs)
    edges = np.round(np.linspace(0, n, max(n // k, 1) + 1)).astype(np.int64)
    sizes = np.diff(edges)
    lo, hi = xs[edges[:-1]], xs[edges[1:] - 1]
    tied = lo == hi
    means = np.where(tied, lo, np.add.reduceat(xs, edges[:-1]) / sizes)
    means = np.clip(np.maximum.accumulate(means), lo, hi)  # inside each group, rounding aside
    t_mean = np.add.reduceat(ndtri((np.arange(n) + 0.5) / n), edges[:-1]) / sizes
    p_mid = (edges[:-1] + edges[1:]) / (2.0 * n)
    nodes, first = np.unique(means, return_index=True)  # means are sorted
    last = np.r_[first[1:], len(means)] - 1
    t_run = ndtri(0.5 * (p_mid[first] + p_mid[last]))
    return np.where(tied[first], t_run, t_mean[first]), nodes


@dataclass(frozen=True)
class SmoothMarginal:
    """Kernel-smoothed CDF of a continuous column, restricted to its observed range.

    Attributes
    ----------
    grid : numpy.ndarray
        Increasing abscissae from the minimum to the maximum observed value.
    cdf : numpy.ndarray
        Smoothed CDF on the grid, rescaled to run from 0 at the minimum to 1 at the maximum.
    bandwidth : float
        Kernel standard deviation in normal-score units (see the module docstring).
    integer : bool
        Round synthetic values to integers (for an integer-typed source column).
    """

    grid: np.ndarray
    cdf: np.ndarray
    bandwidth: float
    integer: bool = False

    @classmethod
    def fit(cls, x: np.ndarray, *, bandwidth: float | None = None,
            integer: bool = False, group: int | None = None) -> SmoothMarginal:
        """Fit to the non-missing values ``x`` (smoothing in normal-score space).

        Parameters
        ----------
        x : numpy.ndarray
            The values, without missing ones.
        bandwidth : float, optional
            Kernel standard deviation in normal-score units; default
            :func:`normal_score_bandwidth` of the number of values.
        integer : bool
            Round values drawn from it.
        group : int, optional
            Sorted values averaged into each node of the quantile function; default
            :func:`node_group_size` of the number of values. 1 runs it through the values
            themselves (at their mid-ranks, ties once).

        Returns
        -------
        SmoothMarginal
        """
        xs = np.sort(np.asarray(x, dtype=float))
        values, counts = np.unique(xs, return_counts=True)
        n = int(counts.sum())
        h = float(bandwidth) if bandwidth is not None else normal_score_bandwidth(n)
        if len(values) < 2:  # one value: a point mass
            return cls(grid=np.repeat(values, 2), cdf=np.array([0.0, 1.0]), bandwidth=h,
                       integer=integer)
        k = node_group_size(n) if group is None else check_integer(group, "group", 1)
        t = ndtri((np.cumsum(counts) - 0.5 * counts) / n)  # mid-rank scores
        # the quantile function's nodes: the values at their mid-ranks, or the groups' means
        # at theirs (one group, if group is more than half the values: the values again)
        t_node, v_node = (t, values) if k == 1 else _node_means(xs, k)
        if len(v_node) < 2:
            t_node, v_node = t, values
        # the ends: the minimum and the maximum at their own mid-ranks, as without groups (a
        # group's mean is not the sample's extreme: stopping at the first and last node would
        # cut about k / 2n of the probability off each tail); a node that is not strictly
        # inside them (a tied extreme's run, a group mostly made of it) gives way to them
        inner = ((v_node > values[0]) & (v_node < values[-1])
                 & (t_node > t[0]) & (t_node < t[-1]))
        t_node = np.r_[t[0], t_node[inner], t[-1]]
        v_node = np.r_[values[0], v_node[inner], values[-1]]
        tg = np.linspace(t[0], t[-1], 2 * GRID_SIZE)
        shrink = 1.0 / math.sqrt(1.0 + h * h)
        F = _smoothed_cdf(shrink * t, counts.astype(np.float64), tg, h)
        F = (F - F[0]) / (F[-1] - F[0])
        grid = np.interp(tg, t_node, v_node)
        # Strictly increasing for interpolation (the kernel CDF is, up to rounding).
        F = np.maximum.accumulate(F)
        keep = np.concatenate([[True], (np.diff(F) > 0) & (np.diff(grid) > 0)])
        keep[-1] = True
        grid, F = grid[keep], F[keep]
        F[-1] = 1.0
        return cls(grid=grid, cdf=F, bandwidth=h, integer=integer)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Quantile function by linear interpolation of the tabulated CDF.

        Parameters
        ----------
        u : numpy.ndarray
            Probabilities (clipped to [0, 1]).

        Returns
        -------
        numpy.ndarray
            One value per entry of ``u`` (rounded when ``integer``).
        """
        x = np.interp(np.clip(u, 0.0, 1.0), self.cdf, self.grid)
        return np.round(x) if self.integer else x

    def cdf_at(self, x: np.ndarray) -> np.ndarray:
        """Evaluate the smoothed CDF at ``x`` (for tests and plots).

        Parameters
        ----------
        x : numpy.ndarray
            Points.

        Returns
        -------
        numpy.ndarray
            The CDF by linear interpolation (0 below the grid, 1 above it).
        """
        return np.interp(x, self.grid, self.cdf)

    def to_dict(self) -> dict[str, Any]:
        """Return the marginal as a JSON-ready dict (read back by :func:`marginal_from_dict`).

        Returns
        -------
        dict
            The fields, with ``kind`` "smooth".
        """
        return {
            "kind": "smooth",
            "grid": self.grid.tolist(),
            "cdf": self.cdf.tolist(),
            "bandwidth": self.bandwidth,
            "integer": self.integer,
        }


def marginal_from_dict(d: dict[str, Any]) -> DiscreteMarginal | SmoothMarginal | AtomMarginal:
    """Rebuild a marginal from its ``to_dict`` form (the inverse of the marginals' ``to_dict``).

    Parameters
    ----------
    d : dict
        The output of a marginal's ``to_dict``; its ``kind`` picks the class.

    Returns
    -------
    DiscreteMarginal, SmoothMarginal or AtomMarginal
    """
    if d["kind"] == "atoms":
        return AtomMarginal(np.asarray(d["atoms"], float), np.asarray(d["probs"], float),
                            None if d["smooth"] is None else marginal_from_dict(d["smooth"]),
                            bool(d["integer"]), d.get("decimals"))
    if d["kind"] == "discrete":
        return DiscreteMarginal(values=np.asarray(d["values"]), cdf=np.asarray(d["cdf"], float))
    return SmoothMarginal(grid=np.asarray(d["grid"], float), cdf=np.asarray(d["cdf"], float),
                          bandwidth=float(d["bandwidth"]), integer=bool(d["integer"]))


@dataclass(frozen=True)
class AtomMarginal:
    """A mixture of point masses (atoms) and a smoothed continuous part.

    ``F(x) = sum_{a <= x} p_a + (1 - sum p) S(x)``, where S is a :class:`SmoothMarginal` of the
    values that are not atoms. The quantile function returns an atom exactly when u falls in
    its jump, and otherwise interpolates the smooth part; it is increasing, as the copula
    requires.

    Attributes
    ----------
    atoms : numpy.ndarray
        Atom values, increasing.
    probs : numpy.ndarray
        Their probabilities.
    smooth : SmoothMarginal or None
        The rest (None when everything is an atom).
    integer : bool
        Round values of the smooth part to integers.
    decimals : int or None
        Round values of the smooth part to this many decimal places.
    """

    atoms: np.ndarray
    probs: np.ndarray
    smooth: SmoothMarginal | None
    integer: bool = False
    decimals: int | None = None

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Breakpoints x, left and right CDF values, and whether each is an atom."""
        w = 1.0 - float(self.probs.sum())
        if self.smooth is not None and w > 0:
            grid, S = self.smooth.grid, self.smooth.cdf
        else:
            grid, S = np.zeros(0), np.zeros(0)
        xs = np.union1d(grid, self.atoms)
        Sx = np.interp(xs, grid, S, left=0.0, right=1.0) if len(grid) else np.zeros(len(xs))
        below = np.searchsorted(self.atoms, xs, side="left")  # atoms strictly below
        cum = np.concatenate([[0.0], np.cumsum(self.probs)])
        is_atom = np.isin(xs, self.atoms)
        Fl = cum[below] + w * Sx
        if len(self.probs):
            Fr = Fl + np.where(is_atom, self.probs[np.minimum(below, len(self.probs) - 1)], 0.0)
        else:
            Fr = Fl.copy()
        return xs, Fl, Fr, is_atom

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Quantile function.

        Parameters
        ----------
        u : numpy.ndarray
            Probabilities (clipped to [0, 1]).

        Returns
        -------
        numpy.ndarray
            One value per entry of ``u``: an atom when ``u`` falls in its jump, else an
            interpolated (and rounded, if set) value of the smooth part.
        """
        xs, Fl, Fr, is_atom = self._table()
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        i = np.minimum(np.searchsorted(Fr, u, side="left"), len(xs) - 1)
        in_jump = is_atom[i] & (u >= Fl[i])
        prev = np.maximum(i - 1, 0)
        span = Fl[i] - Fr[prev]
        t = np.where(span > 0, (u - Fr[prev]) / np.where(span > 0, span, 1.0), 1.0)
        x = round_to(xs[prev] + np.clip(t, 0.0, 1.0) * (xs[i] - xs[prev]),
                     integer=self.integer, decimals=self.decimals)
        return np.where(in_jump | (i == 0), xs[i], x)

    def to_dict(self) -> dict[str, Any]:
        """Return the marginal as a JSON-ready dict (read back by :func:`marginal_from_dict`).

        Returns
        -------
        dict
            The fields, with ``kind`` "atoms".
        """
        return {"kind": "atoms", "atoms": self.atoms.tolist(), "probs": self.probs.tolist(),
                "smooth": None if self.smooth is None else self.smooth.to_dict(),
                "integer": self.integer, "decimals": self.decimals}


def share_on_atoms(smooth: SmoothMarginal, atoms: np.ndarray, *,
                   decimals: int | None = None, digits: int | None = None) -> float:
    """Share of a smooth part's draws that rounding puts on an atom's value.

    Evaluated at 4,096 evenly spaced probabilities (a quadrature, no random draws), rounded as
    :class:`AtomMarginal` rounds them (to whole numbers when ``smooth.integer``, else to
    ``decimals`` places), or as the synthetic table's columns are rounded afterwards (to
    ``digits`` significant digits; both through :func:`bayesynth.schema.round_to`). Where it is
    large, the values that are not atoms lie between atoms
    and the smooth part misplaces their mass (:func:`fit_marginal`).

    Parameters
    ----------
    smooth : SmoothMarginal
        The smooth part.
    atoms : numpy.ndarray
        The atoms' values.
    decimals : int, optional
        Decimal places kept (for a non-integer column).
    digits : int, optional
        Significant digits kept (for a non-integer column without ``decimals``).

    Returns
    -------
    float
        In [0, 1].
    """
    y = round_to(smooth.ppf((np.arange(4096) + 0.5) / 4096), integer=smooth.integer,
                 decimals=decimals, digits=digits)
    return float(np.mean(np.isin(y, np.asarray(atoms, dtype=float))))


def fit_marginal(x: np.ndarray, *, continuous: bool, integer: bool = False,
                 decimals: int | None = None, atom_share: float = ATOM_SHARE,
                 group: int | None = None, digits: int | None = None
                 ) -> DiscreteMarginal | SmoothMarginal | AtomMarginal:
    """Fit the marginal of an ordered column's (non-missing, non-code) values.

    A column with at most :data:`DISCRETE_VALUES` distinct values, any non-continuous column,
    and a column whose values that are not atoms lie between its atoms get their empirical
    distribution (only observed values come back). Any other column gets the kernel-smoothed
    CDF, with its atoms (values held by at least ``atom_share`` of the records) kept as point
    masses.

    *Values between atoms*: the smooth part of the values that are not atoms would put at
    least :data:`ON_ATOMS` (2%) of its draws on the atoms' values once rounded
    (:func:`share_on_atoms`). Ages in years, heights and weights in whole units, hours a week
    and test scores are often like this: most of their values are atoms and the rest fall in
    the gaps between them, so a smooth part spread their mass over the gaps, and rounding put
    it on the atoms (adult's ages are not: those below the atom share are the oldest, beyond
    every atom; share 0.000). Fitted to all of SD2011's ages, the 16-year-olds (0.44% of the
    records, below the atom share) came back at 0.003% of the draws and the 67-year-olds at 0.15%
    against 0.82%; the smooth marginals of such columns were 0.012-0.066 from the data in
    total variation (SD2011's weight 0.066, the demo's ``bwtpctl`` 0.125), against 0 for the
    empirical distribution, and rounded to whole numbers almost every smooth draw was a real
    value anyway (``benchmarks/dense_grid.py``). Their shares on atoms are 0.06-0.28 on the
    shared tables and the demo; heaped incomes, a zero atom and a few atoms inside a long
    smooth range give at most 0.007 and stay smooth, as do columns without atoms (nothing to
    land on: the demo's temperatures at any n). Which values are atoms decides the share: on
    random halves of adult's records, age 41 or 44 (about 1% each) crossing the atom share
    turned its ages empirical in 3 of 40.

    The cost: drawn independently, a value held by one record appears in a synthetic column of
    the same size with probability 0.63, as in a bootstrap, against 0.17-0.97 with the smooth
    part (``1-record``: 0.17 for SD2011's ages, 0.45-0.54 for adult's ``fnlwgt``, SD2011's
    heights, weights and years of marriage and CE's ages, 0.97 for adult's hours). Where the
    copula synthesizer reads a column off ranks (a column with missing values, special codes or
    records a rule fixes: evenly spaced probabilities), every real value comes back with its
    count scaled to the synthetic records that show a value, so a synthetic table that shows as
    many values as the training table holds the training column's values exactly (SD2011's
    heights and weights: total variation 0.001 from the training column, against 0.043 and 0.065
    with the smooth part). A column written with significant ``digits`` is rounded to them
    after the marginal, with the rest of the synthetic table; give ``digits`` so that the rule
    sees that rounding too.

    Parameters
    ----------
    x : numpy.ndarray
    continuous : bool
    integer : bool
        Values are whole numbers: synthetic ones are rounded.
    decimals : int, optional
        Decimal places kept.
    atom_share : float, default :data:`ATOM_SHARE`
    group : int, optional
        Values averaged into each node of the smooth part (:meth:`SmoothMarginal.fit`);
        default :func:`node_group_size` of their number.
    digits : int, optional
        Significant digits the synthetic values will be rounded to afterwards
        (``ColumnSchema.digits``); only the values-between-atoms rule uses it.

    Returns
    -------
    DiscreteMarginal, SmoothMarginal or AtomMarginal
    """
    x = np.asarray(x, dtype=float)
    values, counts = np.unique(x, return_counts=True)
    if not continuous or len(values) <= DISCRETE_VALUES:
        return DiscreteMarginal.fit(x)
    is_atom = counts >= atom_share * len(x)
    rest = x[~np.isin(x, values[is_atom])]
    if not is_atom.any():
        return AtomMarginal(np.zeros(0), np.zeros(0),
                            SmoothMarginal.fit(x, integer=integer, group=group),
                            integer, decimals)
    smooth = (SmoothMarginal.fit(rest, integer=integer, group=group)
              if len(np.unique(rest)) >= 2 else None)
    atoms, probs = values[is_atom], counts[is_atom] / len(x)
    if smooth is None:  # the rest is one or no value: make it an atom too
        return DiscreteMarginal.fit(x)
    if share_on_atoms(smooth, atoms, decimals=decimals, digits=digits) >= ON_ATOMS:
        return DiscreteMarginal.fit(x)  # the rest lies between the atoms
    return AtomMarginal(atoms, probs, smooth, integer, decimals)
