"""Estimated marginal distributions F_j of the ordered columns, and their inverses.

The copula synthesizer maps latent normals back to the data scale with
``y = F_hat^-1(Phi(z / sd(z)))`` (Feldman & Kowal 2022, section 4.3):

* binary, ordinal and count columns use the empirical CDF, whose inverse returns observed
  values only (:class:`DiscreteMarginal`);
* continuous columns use a Gaussian-kernel-smoothed CDF restricted to the observed range, so
  that synthetic values are not copies of real ones (:class:`SmoothMarginal`). The smoothed CDF is
  tabulated on a grid (uniform over the range, plus the empirical quantiles at 1024 levels) and
  inverted by linear interpolation; the real values themselves are not stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

__all__ = ["DiscreteMarginal", "SmoothMarginal", "marginal_from_dict", "silverman_bandwidth"]

GRID_SIZE = 1024


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
        """Fit to the non-missing values ``x``."""
        values, counts = np.unique(x, return_counts=True)
        cdf = np.cumsum(counts) / counts.sum()
        cdf[-1] = 1.0
        return cls(values=values, cdf=cdf)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Quantile function: the smallest value whose CDF is at least ``u``."""
        idx = np.searchsorted(self.cdf, np.clip(u, 0.0, 1.0), side="left")
        return self.values[np.minimum(idx, len(self.values) - 1)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "discrete", "values": self.values.tolist(), "cdf": self.cdf.tolist()}


def silverman_bandwidth(x: np.ndarray) -> float:
    """Silverman's rule of thumb, ``0.9 min(sd, IQR/1.34) n^(-1/5)``, with fallbacks."""
    n = len(x)
    sd = float(np.std(x, ddof=1)) if n > 1 else 0.0
    q75, q25 = np.percentile(x, [75, 25])
    spread = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
    if spread <= 0:
        spread = float(np.ptp(x)) or 1.0
    return 0.9 * spread * n ** (-0.2)


@numba.njit(cache=True)
def _smoothed_cdf(xs, grid, h):  # pragma: no cover - compiled
    """mean_i Phi((g - x_i)/h) for sorted xs and sorted grid, using an 8.3 h window."""
    n = xs.shape[0]
    out = np.empty(grid.shape[0])
    lo = 0
    hi = 0
    width = 8.3 * h
    c = 1.0 / (h * math.sqrt(2.0))
    for gi in range(grid.shape[0]):
        g = grid[gi]
        while lo < n and xs[lo] < g - width:
            lo += 1
        while hi < n and xs[hi] <= g + width:
            hi += 1
        acc = float(lo)  # points far below g contribute 1 each
        for i in range(lo, hi):
            acc += 0.5 * math.erfc(-(g - xs[i]) * c)
        out[gi] = acc / n
    return out


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
        Kernel standard deviation.
    integer : bool
        Round synthetic values to integers (for an integer-typed source column).
    """

    grid: np.ndarray
    cdf: np.ndarray
    bandwidth: float
    integer: bool = False

    @classmethod
    def fit(cls, x: np.ndarray, *, bandwidth: float | None = None,
            integer: bool = False) -> SmoothMarginal:
        """Fit to the non-missing values ``x``.

        Parameters
        ----------
        bandwidth : float, optional
            Kernel standard deviation; Silverman's rule when omitted.
        integer : bool
            Round values drawn from it.
        """
        xs = np.sort(np.asarray(x, dtype=float))
        h = float(bandwidth) if bandwidth is not None else silverman_bandwidth(xs)
        lo, hi = xs[0], xs[-1]
        grid = np.union1d(np.linspace(lo, hi, GRID_SIZE),
                          np.quantile(xs, np.linspace(0.0, 1.0, GRID_SIZE + 1)))
        F = _smoothed_cdf(xs, grid, h)
        F = (F - F[0]) / (F[-1] - F[0])
        # Strictly increasing for interpolation (the kernel CDF is, up to rounding).
        F = np.maximum.accumulate(F)
        keep = np.concatenate([[True], np.diff(F) > 0])
        keep[-1] = True
        grid, F = grid[keep], F[keep]
        F[-1] = 1.0
        return cls(grid=grid, cdf=F, bandwidth=h, integer=integer)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Quantile function by linear interpolation of the tabulated CDF."""
        x = np.interp(np.clip(u, 0.0, 1.0), self.cdf, self.grid)
        return np.round(x) if self.integer else x

    def cdf_at(self, x: np.ndarray) -> np.ndarray:
        """The smoothed CDF at ``x`` (for tests and plots)."""
        return np.interp(x, self.grid, self.cdf)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "smooth",
            "grid": self.grid.tolist(),
            "cdf": self.cdf.tolist(),
            "bandwidth": self.bandwidth,
            "integer": self.integer,
        }


def marginal_from_dict(d: dict[str, Any]) -> DiscreteMarginal | SmoothMarginal:
    """Inverse of the marginals' ``to_dict``."""
    if d["kind"] == "discrete":
        return DiscreteMarginal(values=np.asarray(d["values"]), cdf=np.asarray(d["cdf"], float))
    return SmoothMarginal(grid=np.asarray(d["grid"], float), cdf=np.asarray(d["cdf"], float),
                          bandwidth=float(d["bandwidth"]), integer=bool(d["integer"]))
