"""The perturbed histogram: an epsilon-DP, non-Bayesian baseline for a bounded variable.

DP under change-one or add/remove neighbours (the synthesizer's ``neighbours``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesynth.errors import InvalidParameterError, PrivacyGuaranteeError
from bayesynth.privacy import Ledger, check_epsilon, check_neighbours
from bayesynth.privacy.geometric import _add_noise, _rate
from bayesynth.privacy.neighbours import histogram_sensitivity, release_rng
from bayesynth.synthesis.base import Synthesizer, read_json, read_netcdf, write_json

__all__ = ["PerturbedHistogramSynthesizer"]


class PerturbedHistogramSynthesizer(Synthesizer):
    """The perturbed histogram for a bounded continuous variable: epsilon-DP, non-Bayesian.

    After Dwork et al. (2006) and Wasserman & Zhou (2010).

    Bin counts on ``bins`` equal-width bins over the public ``bounds`` get exact two-sided
    geometric noise (the integer analogue of Laplace noise, sampled without floating point) of
    rate ``epsilon / sensitivity``, sensitivity 2 under change-one and 1 under add/remove
    neighbours. Synthetic values are bins drawn with probability proportional to the noisy
    counts clipped at 0, then uniform within the bin (post-processing, no further cost).

    Under change-one neighbours n is public: the synthetic datasets have n records and
    ``bins=None`` uses Wasserman & Zhou's rate ``n^(1/3)``. Under add/remove n is private: the
    default output size is the noisy total (post-processing) and ``bins`` must be a number.

    Parameters
    ----------
    epsilon : float
    bins : int or None, default 20
    bounds : (float, float), default (0, 1)
        Public bounds of the variable.
    neighbours : {"change_one", "add_remove"}, default "change_one"
    random_seed : int, optional
        ``None`` (default) draws the noise from fresh OS entropy; a fixed seed warns.

    Attributes
    ----------
    noisy_counts_ : numpy.ndarray of int64
        The released noisy histogram (may hold negative counts).
    edges_ : numpy.ndarray
    ledger_ : Ledger

    Notes
    -----
    The protocol of :class:`~bayesynth.synthesis.Synthesizer`; ``from_posterior`` raises
    :class:`~bayesynth.errors.NoPosteriorError` (the method is not Bayesian). :meth:`save`
    writes ``histogram.nc`` (the noisy counts and the bin edges: the release itself) and
    ``histogram.json`` (the column name, the public n under change-one neighbours, the
    ledger).
    """

    _fitted_attribute = "noisy_counts_"
    _no_posterior = ("the perturbed histogram is not a Bayesian model: it releases noisy "
                     "counts, not a posterior")

    def __init__(self, epsilon: float, *, bins: int | None = 20,
                 bounds: tuple[float, float] = (0.0, 1.0), neighbours: str = "change_one",
                 random_seed: int | None = None):
        self.epsilon = epsilon
        self.bins = bins
        self.bounds = bounds
        self.neighbours = neighbours
        self.random_seed = random_seed

    def fit(self, data) -> PerturbedHistogramSynthesizer:
        """Release the noisy histogram of ``data`` (a one-column DataFrame or an array).

        Parameters
        ----------
        data : DataFrame or array

        Returns
        -------
        PerturbedHistogramSynthesizer
        """
        eps = check_epsilon(self.epsilon)
        nb = check_neighbours(self.neighbours)
        if isinstance(data, pd.DataFrame) and data.shape[1] != 1:
            raise InvalidParameterError(
                f"PerturbedHistogramSynthesizer releases one column; got {data.shape[1]} "
                f"({list(data.columns)[:5]}). Pass one column, e.g. df[['{data.columns[0]}']]"
                if data.shape[1] else "PerturbedHistogramSynthesizer needs one column; got "
                "none.", column="data")
        x = np.asarray(data, dtype=float).ravel() if not isinstance(data, pd.DataFrame) else \
            data.iloc[:, 0].to_numpy(float)
        name = str(data.columns[0]) if isinstance(data, pd.DataFrame) else "x"
        lo, hi = self.bounds
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise InvalidParameterError(f"bounds must be finite with lower < upper; got "
                                        f"{self.bounds!r}.", column="bounds")
        if np.any(~np.isfinite(x)) or np.any((x < lo) | (x > hi)):
            raise InvalidParameterError(f"Values of '{name}' must lie within the public bounds "
                                        f"{self.bounds}; widen the bounds (from public "
                                        "knowledge, not the data).", column=name)
        if self.bins is None:
            if nb == "add_remove":
                raise PrivacyGuaranteeError(
                    "bins=None sets the number of bins from n, which is private under "
                    "add/remove neighbours: give bins (a public number).", column="bins")
            k = max(2, int(round(len(x) ** (1 / 3))))
        else:
            if int(self.bins) != self.bins or self.bins < 1:
                raise InvalidParameterError(f"bins must be a positive integer; got "
                                            f"{self.bins!r}.", column="bins")
            k = int(self.bins)
        rng, seeded = release_rng(self.random_seed, "PerturbedHistogramSynthesizer")
        edges = np.linspace(lo, hi, k + 1)
        counts, _ = np.histogram(x, bins=edges)
        sens = histogram_sensitivity(nb)
        self.noisy_counts_ = _add_noise(counts, _rate(eps, nb, sens), rng)
        self.edges_ = edges
        self._name = name
        self._n_public = len(x) if nb == "change_one" else None
        self.ledger_ = Ledger(nb)
        self.ledger_.record(f"noisy histogram of '{name}' ({k} bins)",
                            "geometric (exact discrete Laplace)", eps, sensitivity=float(sens),
                            why="public bounds and bins; one record is in one bin",
                            seeded=seeded)
        return self

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: int | None = None) -> list[pd.DataFrame]:
        """``m`` synthetic datasets drawn from the noisy histogram (post-processing).

        Parameters
        ----------
        m : int, default 1
        n_rows : int, optional
            Default: n under change-one neighbours, the noisy total under add/remove (rounded
            down; zero records, with a warning, when it is not positive).
        random_seed : int, optional

        Returns
        -------
        list of pandas.DataFrame

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit`.
        bayesynth.errors.InvalidParameterError
            ``m`` or ``n_rows`` below 1, or a bad ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        rng = np.random.default_rng(random_seed)
        if n_rows is None:
            n = (self._n_public if self._n_public is not None
                 else max(0, int(self.noisy_counts_.sum())))
            if n == 0:
                warnings.warn(
                    f"The noisy total of the released histogram is "
                    f"{float(self.noisy_counts_.sum()):.1f}, so the synthetic datasets have no "
                    "records (the noise swamps a table this small at this epsilon); pass "
                    "n_rows to choose their size.", RuntimeWarning, stacklevel=2)
        else:
            n = int(n_rows)
        pos = np.maximum(self.noisy_counts_, 0).astype(float)
        total = pos.sum()
        p = pos / total if total > 0 else np.full(len(pos), 1 / len(pos))
        out = []
        for _ in range(int(m)):
            b = rng.choice(len(p), size=n, p=p)
            x = self.edges_[b] + rng.random(n) * (self.edges_[b + 1] - self.edges_[b])
            out.append(pd.DataFrame({self._name: x}))
        return out

    def _write(self, directory: Path) -> None:
        """Write ``histogram.nc`` and ``histogram.json``."""
        xr.Dataset({"noisy_counts": ("bin", np.asarray(self.noisy_counts_, np.int64)),
                    "edges": ("edge", np.asarray(self.edges_, float))}).to_netcdf(
            directory / "histogram.nc", engine="h5netcdf")
        write_json(directory, "histogram.json", {
            "name": self._name, "n_public": self._n_public, "ledger": self.ledger_.to_dict()})

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any
              ) -> PerturbedHistogramSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        state = read_json(directory, "histogram.json")
        ds = read_netcdf(directory, "histogram.nc")
        params = cls._params_from_json(meta["params"])
        params["bounds"] = tuple(params["bounds"])
        obj = cls(**params)
        obj.noisy_counts_ = ds["noisy_counts"].values.astype(np.int64)
        obj.edges_ = ds["edges"].values.astype(float)
        obj._name = state["name"]
        obj._n_public = None if state["n_public"] is None else int(state["n_public"])
        obj.ledger_ = Ledger.from_dict(state["ledger"])
        return obj
