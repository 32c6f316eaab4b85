"""Direct samplers for saturated count synthesis, dense and sparse.

:func:`synthesize_table` never materialises the full table: it redraws the non-zero cells from their
count distributions, then decides how many random zeros become non-zero (one binomial draw),
which ones (uniformly, by rejection from random cell indices, never listing the zeros), and
their counts (zero-truncated draws with mean alpha). It handles tables of 10^9 cells.
:class:`SaturatedCountSynthesizer` puts it behind the protocol every synthesizer shares.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesynth.errors import InputTypeError, InvalidParameterError
from bayesynth.models.count_families import (
    cell_means,
    count_pmf,
    draw_counts,
    validate_parameters,
)
from bayesynth.synthesis.base import Synthesizer, json_ready, read_json, read_netcdf, write_json
from bayesynth.tables import (
    SparseTable,
    StructuralZeros,
    microdata_to_table,
    table_to_microdata,
    unique_sorted,
)

__all__ = ["synthesize_table", "synthesize_dense", "SaturatedCountSynthesizer"]

OUTPUTS = ("microdata", "table")


def _truncated_draws(rng: np.random.Generator, family: str, sigma: float, alpha: float,
                     size: int) -> np.ndarray:
    """Draw counts from the synthesis distribution with mean alpha, conditioned to be positive."""
    p = count_pmf(family, alpha, sigma)
    cdf = np.cumsum(p[1:])
    u = rng.random(size) * cdf[-1]
    return np.searchsorted(cdf, u, side="right").astype(np.int64) + 1


def _random_zero_cells(rng: np.random.Generator, table: SparseTable, need: int) -> np.ndarray:
    """``need`` distinct cells drawn uniformly among the random zeros (sorted)."""
    if need == 0:
        return np.zeros(0, dtype=np.int64)
    K = table.n_cells
    Z = table.n_random_zeros()
    if need > Z:
        raise ValueError("more cells requested than there are random zeros")
    got = np.zeros(0, dtype=np.int64)
    while len(got) < need:
        # a uniform cell is a random zero not yet taken with probability (Z - got) / K
        m = min(int((need - len(got)) * K / (Z - len(got)) * 1.1) + 64, 20_000_000)
        cand = unique_sorted(rng.integers(0, K, size=m, dtype=np.int64))
        pos = np.searchsorted(table.index, cand)
        pos = np.minimum(pos, max(len(table.index) - 1, 0))
        is_nonzero = (table.index[pos] == cand) if len(table.index) else np.zeros(len(cand),
                                                                                   bool)
        cand = cand[~is_nonzero]
        if table.structural.blocks:
            cand = cand[~table.structural.mask_codes(table.names, table.codes(cand))]
        got = unique_sorted(np.concatenate([got, cand]))
    if len(got) > need:
        got = np.sort(rng.choice(got, size=need, replace=False))
    return got


def synthesize_table(
    table: SparseTable,
    *,
    family: str = "poisson",
    sigma: float = 0.0,
    alpha: float = 0.0,
    random_seed: int | np.random.Generator | None = None,
) -> SparseTable:
    """One synthetic table from a saturated count model, sparse in and sparse out.

    Parameters
    ----------
    table : SparseTable
        The original table.
    family : {"poisson", "nbi", "pig", "dpo"}
    sigma : float
        Dispersion (variance f + sigma f^2 for nbi and pig) or, for ``dpo``, the precision
        theta (variance about f / theta).
    alpha : float
        Pseudocount: the mean of each random zero's synthetic count (Poisson, NBI, PIG). The
        double Poisson's mean at a small f is not f: far below it when theta > 1 (about 0.001
        at f = 0.02, theta = 2), far above it when theta < 1 (0.094 at f = 0.02, theta = 0.5).
        Structural zeros stay 0.
    random_seed : int or Generator, optional

    Returns
    -------
    SparseTable
        Same variables, levels and structural zeros.
    """
    validate_parameters(family, sigma, alpha)
    rng = np.random.default_rng(random_seed)
    table.check()
    y = draw_counts(rng, family, sigma, table.counts)
    keep = y > 0
    idx, cnt = table.index[keep], y[keep]
    if alpha > 0:
        Z = table.n_random_zeros()
        p_nonzero = 1.0 - count_pmf(family, alpha, sigma)[0]
        n_new = int(rng.binomial(Z, p_nonzero))
        new = _random_zero_cells(rng, table, n_new)
        idx = np.concatenate([idx, new])
        cnt = np.concatenate([cnt, _truncated_draws(rng, family, sigma, alpha, len(new))])
        order = np.argsort(idx, kind="stable")
        idx, cnt = idx[order], cnt[order]
    return SparseTable(table.names, table.levels, idx, cnt, table.structural)


def synthesize_dense(
    table: SparseTable,
    *,
    family: str = "poisson",
    sigma: float = 0.0,
    alpha: float = 0.0,
    random_seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Draw a synthetic table cell by cell over the full table (a reference for small tables).

    The same model as :func:`synthesize_table`, on a dense array.

    Parameters
    ----------
    table : SparseTable
        The original table (it must fit in memory densely).
    family : {"poisson", "nbi", "pig", "dpo"}
    sigma : float
        Dispersion, or precision theta for ``dpo``.
    alpha : float
        Pseudocount of random zeros; structural zeros stay 0.
    random_seed : int or Generator, optional

    Returns
    -------
    numpy.ndarray of int64
        The synthetic counts, shape ``table.shape``.
    """
    rng = np.random.default_rng(random_seed)
    f = cell_means(table.to_dense(), table.structural_mask(), alpha).reshape(-1)
    return draw_counts(rng, family, sigma, f).reshape(table.shape)


class SaturatedCountSynthesizer(Synthesizer):
    """Saturated count synthesis of a categorical table (Jackson et al. 2022).

    Every cell's synthetic count is drawn around its observed count (:func:`synthesize_table`:
    Poisson, NBI, PIG or the double Poisson), random zeros get the pseudocount ``alpha`` and
    structural zeros stay zero. The table is held sparsely, so it scales to census-sized
    tables.

    Parameters
    ----------
    variables : sequence of str, optional
        The table's variables when :meth:`fit` is given records (default: every column but
        ``count``).
    count : str, optional
        A column of counts, when :meth:`fit` is given one row per cell.
    structural : StructuralZeros or list of mappings, optional
        Structural zeros for records given to :meth:`fit`, as rules by level label (see
        :func:`bayesynth.tables.microdata_to_table`).
    family : {"poisson", "nbi", "pig", "dpo"}, default "poisson"
    sigma : float, default 0
        Dispersion (nbi, pig: variance f + sigma f^2) or the double Poisson's precision theta.
    alpha : float, default 0
        Pseudocount: the mean synthetic count of each random zero (Poisson, NBI, PIG; for the
        double Poisson far less when theta > 1 and far more when theta < 1).
    output : {"microdata", "table"}, default "microdata"
        What :meth:`sample` returns: records (one row per unit of count, categorical columns,
        :func:`~bayesynth.tables.table_to_microdata`) or the table (one row per non-zero cell
        with its ``count``, :meth:`SparseTable.to_frame`).
    shuffle : bool, default True
        Shuffle the records of ``"microdata"`` output (otherwise in cell order).

    Attributes
    ----------
    table_ : SparseTable
        The observed table.

    Notes
    -----
    The protocol of :class:`~bayesynth.synthesis.Synthesizer`, with two differences that
    follow from the method. ``from_posterior`` raises
    :class:`~bayesynth.errors.NoPosteriorError`: the model has no parameters to infer, each
    synthetic table is drawn directly around the observed counts (the PyMC form,
    :func:`~bayesynth.models.saturated_count_model`, is a prior-predictive model). And
    ``n_rows`` must be left ``None``: the size of a synthetic table is drawn with its counts
    (mean n plus alpha times the number of random zeros, for Poisson, NBI and PIG).
    :meth:`sample_tables` returns the synthetic tables themselves. :meth:`save` writes
    ``table.nc`` (non-zero cells and their counts: the confidential table) and ``table.json``
    (variables, levels, structural zeros).

    References
    ----------
    Jackson, J., Mitra, R., Francis, B. and Dove, I. (2022). Using saturated count models for
    user-friendly synthesis of large confidential administrative databases. *JRSS A*, 185(4).

    Examples
    --------
    >>> import pandas as pd
    >>> from bayesynth.synthesis import SaturatedCountSynthesizer
    >>> df = pd.DataFrame({"sex": ["f", "m", "m", "f", "f"], "area": ["a", "a", "b", "b", "b"]})
    >>> syn = SaturatedCountSynthesizer(family="nbi", sigma=0.5).fit(df)
    >>> out = syn.sample(m=2, random_seed=1)
    >>> list(out[0].columns)
    ['sex', 'area']
    """

    _fitted_attribute = "table_"
    _no_posterior = ("the saturated count model has no parameters to infer: each synthetic "
                     "table is drawn directly around the observed counts; use fit(table)")

    def __init__(self, variables: Sequence[str] | None = None, *, count: str | None = None,
                 structural: StructuralZeros | Sequence[Mapping[str, Sequence]] | None = None,
                 family: str = "poisson", sigma: float = 0.0, alpha: float = 0.0,
                 output: str = "microdata", shuffle: bool = True):
        self.variables = variables
        self.count = count
        self.structural = structural
        self.family = family
        self.sigma = sigma
        self.alpha = alpha
        self.output = output
        self.shuffle = shuffle

    def _check_params(self) -> None:
        validate_parameters(self.family, self.sigma, self.alpha)
        if self.output not in OUTPUTS:
            raise InvalidParameterError(f"output must be one of {OUTPUTS}; got "
                                        f"{self.output!r}.", column="output")

    def fit(self, data: pd.DataFrame | SparseTable) -> SaturatedCountSynthesizer:
        """Cross-tabulate the records (or take the table) that synthesis redraws.

        Parameters
        ----------
        data : pandas.DataFrame or SparseTable
            Records with categorical columns (or one row per cell with ``count``), or the
            table itself.

        Returns
        -------
        SaturatedCountSynthesizer
            ``self``, with ``table_``.

        Raises
        ------
        bayesynth.errors.InputTypeError
            For anything but a DataFrame or a SparseTable.
        bayesynth.errors.InvalidParameterError
            For an unknown family or output, or a dispersion or pseudocount out of range.
        """
        self._check_params()
        if isinstance(data, SparseTable):
            table = data
        elif isinstance(data, pd.DataFrame):
            table = microdata_to_table(data, self.variables, count=self.count,
                                       structural=self.structural)
        else:
            raise InputTypeError(f"fit takes a pandas DataFrame or a SparseTable; got "
                                 f"{type(data).__name__}.")
        table.check()
        self.table_ = table
        return self

    def sample_tables(self, m: int = 1, random_seed: Any = None) -> list[SparseTable]:
        """Draw ``m`` synthetic tables.

        Parameters
        ----------
        m : int, default 1
        random_seed : int, optional

        Returns
        -------
        list of SparseTable
            Same variables, levels and structural zeros as ``table_``.
        """
        m, _ = self._sample_args(m, None, random_seed)
        self._check_params()
        rng = np.random.default_rng(random_seed)
        return [self._one_table(rng) for _ in range(m)]

    def _one_table(self, rng: np.random.Generator) -> SparseTable:
        return synthesize_table(self.table_, family=self.family, sigma=self.sigma,
                                alpha=self.alpha, random_seed=rng)

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: Any = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets, as records or as tables (``output``).

        Parameters
        ----------
        m : int, default 1
        n_rows : None
            Must be None: the size of a synthetic table is drawn with its counts.
        random_seed : int, optional
            The same seed gives the same datasets (as ``bayesynth saturate --seed``).

        Returns
        -------
        list of pandas.DataFrame

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit`.
        bayesynth.errors.InvalidParameterError
            ``m`` below 1, any ``n_rows``, or a bad ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        if n_rows is not None:
            raise InvalidParameterError(
                "n_rows must be None for saturated count synthesis: the size of each synthetic "
                f"table is drawn with its counts; got {n_rows!r}.", column="n_rows")
        self._check_params()
        rng = np.random.default_rng(random_seed)
        out = []
        for _ in range(m):
            syn = self._one_table(rng)
            out.append(table_to_microdata(syn, shuffle=self.shuffle, random_seed=rng)
                       if self.output == "microdata" else syn.to_frame())
        return out

    # ---------------------------------------------------------------------------- save/load

    def _json_params(self) -> dict[str, Any]:
        params = self.get_params()
        try:  # rules by label; a StructuralZeros object is kept in the table itself
            params["structural"] = json_ready(self.structural, "structural")
        except InvalidParameterError:
            params["structural"] = None
        return {k: json_ready(v, k) for k, v in params.items()}

    def _write(self, directory: Path) -> None:
        """Write ``table.nc`` and ``table.json``."""
        t = self.table_
        xr.Dataset({"index": ("cell", np.asarray(t.index, np.int64)),
                    "counts": ("cell", np.asarray(t.counts, np.int64))}).to_netcdf(
            directory / "table.nc", engine="h5netcdf")
        write_json(directory, "table.json", {
            "names": list(t.names), "levels": {n: _levels_json(t.levels[n], n) for n in t.names},
            "structural": [{v: np.asarray(c).tolist() for v, c in b.items()}
                           for b in t.structural.blocks]})

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any
              ) -> SaturatedCountSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        state = read_json(directory, "table.json")
        ds = read_netcdf(directory, "table.nc")
        obj = cls(**cls._params_from_json(meta["params"]))
        blocks = [{v: np.asarray(c, dtype=np.int64) for v, c in b.items()}
                  for b in state["structural"]]
        obj.table_ = SparseTable(list(state["names"]), {n: _levels_from_json(v) for n, v in
                                                         state["levels"].items()},
                                 ds["index"].values.astype(np.int64),
                                 ds["counts"].values.astype(np.int64), StructuralZeros(blocks))
        return obj


def _levels_json(levels: Sequence[Any], name: str) -> Any:
    """Write a variable's levels for ``table.json``: dates as ISO text, tagged."""
    values = list(levels)
    if values and all(isinstance(v, np.datetime64 | pd.Timestamp | datetime.datetime)
                      for v in values):
        return {"__datetime__": [pd.Timestamp(v).isoformat() for v in values]}
    return json_ready(values, f"levels of '{name}'")


def _levels_from_json(value: Any) -> list:
    """Read what :func:`_levels_json` wrote."""
    if isinstance(value, dict) and "__datetime__" in value:
        return [pd.Timestamp(v) for v in value["__datetime__"]]
    return list(value)

