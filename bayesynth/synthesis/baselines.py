"""The two baselines Feldman & Kowal compare against, with the synthesizers' fit/sample interface.

* :class:`RankLikelihoodSynthesizer`: Hoff's (2007) semiparametric Gaussian copula with the
  extended rank likelihood and an inverse-Wishart prior (R's ``sbgcop``), categorical variables
  one-hot coded as k - 1 binary columns.
* :class:`CartSynthesizer`: iterative CART synthesis (synthpop's default; Reiter 2005).

Both follow the protocol of :class:`bayesynth.synthesis.Synthesizer` and save as netCDF + JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import ndtr
from scipy.stats import invwishart

from bayesynth.errors import InvalidParameterError, SchemaError, check_integer, is_real
from bayesynth.models.layout import LatentLayout, OrderedColumn
from bayesynth.samplers.kernels import draw_z
from bayesynth.schema import (
    Schema,
    as_numbers,
    encode_levels,
    infer_schema,
    round_values,
    validate_data,
)
from bayesynth.synthesis._output import _restore, finish, not_modelled
from bayesynth.synthesis.base import (
    Synthesizer,
    read_idata,
    read_json,
    read_netcdf,
    select_draws,
    write_json,
)
from bayesynth.synthesis.marginals import (
    DISCRETE_VALUES,
    DiscreteMarginal,
    marginal_from_dict,
    silverman_bandwidth,
)

__all__ = ["RankLikelihoodSynthesizer", "CartSynthesizer"]


class RankLikelihoodSynthesizer(Synthesizer):
    """Hoff's rank-likelihood Gaussian copula (sbgcop), as the paper's "RL" baseline.

    Every column is an ordered latent column under the extended rank likelihood; an unordered
    categorical variable with k levels is coded as k - 1 binary columns (the first level the
    base), an ordinal one by its level order. The copula correlation has Hoff's prior: the
    covariance Sigma ~ inverse-Wishart(p + 2, (p + 2) I), rescaled to a correlation each sweep.
    Gibbs sampler as in sbgcop: each latent column from its truncated conditional normal given
    the others, then Sigma from its inverse-Wishart full conditional. Missing values leave their
    latent values unconstrained.

    Synthesis as Hoff does: z ~ N(0, C) from one posterior draw of C per dataset, each column
    through its empirical quantile function. A synthetic record whose one-hot columns hold
    several ones is *multiply classified*: its categorical value is set missing (not dropped),
    and the counts per variable are in ``frame.attrs["multiply_classified"]`` and in
    :attr:`multiply_classified_`. The empirical quantile functions hold the observed values
    only, so, as in sbgcop, synthetic records have no missing values of their own (a column
    12% missing in the data is complete in the synthetic data): the only missing values are
    the multiply classified records' categories. The copula and CART synthesizers keep the
    missing-value pattern instead.

    Parameters
    ----------
    schema : Schema, optional
    draws, tune : int
        Kept and burn-in sweeps (one chain).
    thin : int, default 1
    random_seed : int, optional
    ordinal_as_categorical : bool, default False
        Code ordinal columns as one-hot categorical instead of ordered (the paper treats the
        few-level ordinal both ways).

    Attributes
    ----------
    C_ : numpy.ndarray, shape (draws, p, p)
        The kept draws of the copula correlation (columns ``columns_``).
    idata_ : arviz.InferenceData
        The same draws as a posterior (variable ``C``, dims ``column`` and ``column_``), to
        inspect with ArviZ.
    schema_ : Schema
    n_rows_ : int

    Notes
    -----
    ``from_posterior`` is not available (it raises :class:`~bayesynth.errors.NoPosteriorError`):
    the posterior is sampled by bayesynth's own sbgcop Gibbs sampler inside :meth:`fit`, not
    from a PyMC model, so there is no model and posterior that a user could sample and hand
    over; the marginals that decode a synthetic record also come from the data at ``fit``.
    Inspect the posterior of C in ``idata_`` instead. :meth:`sample` draws each dataset from
    its own draw of C (:func:`~bayesynth.synthesis.select_draws`). :meth:`save` writes
    ``posterior.nc`` (``idata_``) and ``rank_likelihood.json`` (schema, one-hot levels and the
    empirical marginals: every distinct real value of every column, to be kept as confidential
    as the data).

    References
    ----------
    Hoff, P. D. (2007). Extending the rank likelihood for semiparametric copula estimation.
    *Annals of Applied Statistics*, 1(1), 265-283.
    """

    _fitted_attribute = "C_"
    _no_posterior = ("its posterior is sampled by bayesynth's own sbgcop Gibbs sampler inside "
                     "fit(), not from a PyMC model, and its marginals come from the data; fit "
                     "it and inspect idata_ (the posterior of C) with ArviZ")

    def __init__(self, schema: Schema | None = None, *, draws: int = 1000, tune: int = 1000,
                 thin: int = 1, random_seed: int | None = None,
                 ordinal_as_categorical: bool = False):
        self.schema = schema
        self.draws = draws
        self.tune = tune
        self.thin = thin
        self.random_seed = random_seed
        self.ordinal_as_categorical = ordinal_as_categorical

    def _encode(self, df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
        cols: dict[str, Any] = {}
        self._onehot: dict[str, list] = {}
        for name in schema.names:
            col = schema[name]
            onehot = col.type == "categorical" or (
                col.type == "ordinal" and self.ordinal_as_categorical)
            if onehot:
                codes = encode_levels(df[name], col)
                observed = [lev for i, lev in enumerate(col.levels) if np.any(codes == i)]
                self._onehot[name] = observed
                for lev in observed[1:]:
                    v = (df[name].astype(object) == lev).astype(float)
                    v[df[name].isna().to_numpy()] = np.nan
                    cols[f"{name}[{lev}]"] = v.to_numpy()
            elif col.type in ("binary", "ordinal"):
                codes = encode_levels(df[name], col).astype(float)
                codes[codes < 0] = np.nan
                cols[name] = codes
            else:
                cols[name] = df[name].to_numpy(dtype=float, na_value=np.nan)
        return pd.DataFrame(cols)

    def fit(self, df: pd.DataFrame) -> RankLikelihoodSynthesizer:
        """Run the Gibbs sampler on ``df`` (not modified).

        Parameters
        ----------
        df : pandas.DataFrame
            The real data; the schema is inferred from it when none was given.

        Returns
        -------
        RankLikelihoodSynthesizer
            ``self``, with the kept correlation draws ``C_``, the marginals and ``schema_``.
        """
        for name, least in (("draws", 1), ("tune", 0), ("thin", 1)):
            check_integer(getattr(self, name), name, least)
        schema = self.schema if self.schema is not None else infer_schema(df)
        validate_data(df, schema)
        df = as_numbers(df)  # dates as days, as sample() reads them back
        # derived columns and columns a rule fixes everywhere are not modelled: sample() adds
        # them back, computes the formulas and enforces the rules (as the other synthesizers)
        skipped = set(not_modelled(df, schema))
        enc = self._encode(df, Schema([schema[c] for c in schema.names if c not in skipped]))
        n, p = enc.shape
        ords = []
        for j, c in enumerate(enc.columns):
            x = enc[c].to_numpy()
            miss = np.isnan(x)
            codes = np.full(n, -1, dtype=np.int64)
            uniq, inv = np.unique(x[~miss], return_inverse=True)
            codes[~miss] = inv
            ords.append(OrderedColumn(c, j, "value", codes, len(uniq)))
        names = list(enc.columns)
        layout = LatentLayout._with_kernel_arrays(n, names, [], ords)
        # one single-column layout per column: the sweep updates one column at a time
        single = [LatentLayout._with_kernel_arrays(n, names, [], [o]) for o in ords]
        rng = np.random.default_rng(self.random_seed)
        z = layout.initial_z()  # Fortran order: columns are updated in place
        mu = np.zeros((n, p), order="F")
        sd = np.ones(p)
        n0 = p + 2
        S0 = n0 * np.eye(p)
        kept = []
        for it in range(self.tune + self.draws * self.thin):
            sigma = invwishart.rvs(df=n0 + n, scale=S0 + z.T @ z, random_state=rng)
            d = np.sqrt(np.diag(sigma))
            C = sigma / np.outer(d, d)
            for j in range(p):
                others = np.r_[0:j, j + 1:p]
                w = np.linalg.solve(C[np.ix_(others, others)], C[others, j])
                mu[:, j] = z[:, others] @ w
                sd[j] = np.sqrt(max(C[j, j] - C[j, others] @ w, 1e-12))
                draw_z(rng, z, mu, sd, single[j], out=z)
            if it >= self.tune and (it - self.tune) % self.thin == 0:
                kept.append(C)
        self.C_ = np.array(kept)
        self.columns_ = list(enc.columns)
        self.idata_ = _correlation_idata(self.C_, self.columns_)
        self.marginals_ = [DiscreteMarginal.fit(enc[c].dropna().to_numpy()) for c in enc]
        self.schema_ = schema
        self.n_rows_ = n
        return self

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: int | None = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets, each from a different posterior draw of C.

        Parameters
        ----------
        m : int, default 1
            Number of datasets.
        n_rows : int, optional
            Records per dataset; the size of the real data by default.
        random_seed : int, optional
            Seed of the draws.

        Returns
        -------
        list of pandas.DataFrame
            ``m`` tables; each records its multiply classified counts in
            ``attrs["multiply_classified"]``.

        Raises
        ------
        bayesynth.errors.NotFittedError
            If :meth:`fit` has not been called.
        bayesynth.errors.InvalidParameterError
            ``m`` or ``n_rows`` below 1, or a bad ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        rng = np.random.default_rng(random_seed)
        n_rows = self.n_rows_ if n_rows is None else n_rows
        picks = select_draws(len(self.C_), m, rng)  # distinct draws where possible
        out = []
        self.multiply_classified_ = []
        for s in picks:
            L = np.linalg.cholesky(self.C_[s] + 1e-12 * np.eye(len(self.columns_)))
            z = rng.standard_normal((n_rows, len(self.columns_))) @ L.T
            enc = {c: self.marginals_[j].ppf(ndtr(z[:, j])) for j, c in enumerate(self.columns_)}
            frame, multi = self._decode(enc, n_rows)
            frame = finish(frame, self.schema_)  # rules, formulas, unmodelled columns
            frame.attrs["multiply_classified"] = multi
            self.multiply_classified_.append(multi)
            out.append(frame)
        return out

    def _decode(self, enc: dict[str, np.ndarray], n_rows: int) -> tuple[pd.DataFrame, dict]:
        cols, multi = {}, {}
        for name in self.schema_.names:
            col = self.schema_[name]
            if name not in self._onehot and name not in enc:
                continue  # not modelled (derived, or fixed by a rule): finish() adds it
            if name in self._onehot:
                levels = self._onehot[name]
                ones = np.column_stack([enc[f"{name}[{lev}]"] for lev in levels[1:]]) > 0.5 \
                    if len(levels) > 1 else np.zeros((n_rows, 0), dtype=bool)
                count = ones.sum(axis=1)
                vals = np.array([levels[0]] * n_rows, dtype=object)
                single = count == 1
                vals[single] = np.array(levels[1:], dtype=object)[ones[single].argmax(axis=1)]
                vals[count > 1] = None
                multi[name] = int((count > 1).sum())
            elif col.type in ("binary", "ordinal"):
                vals = np.array(col.levels, dtype=object)[enc[name].astype(np.int64)]
            else:
                vals = enc[name]
            cols[name] = _restore(vals, col)
        return pd.DataFrame(cols), multi

    # ---------------------------------------------------------------------------- save/load

    def _json_params(self) -> dict[str, Any]:
        params = super()._json_params()
        params["schema"] = None  # the fitted schema is in rank_likelihood.json
        return params

    def _write(self, directory: Path) -> None:
        """Write ``posterior.nc`` and ``rank_likelihood.json``."""
        self.idata_.to_netcdf(str(directory / "posterior.nc"), engine="h5netcdf")
        write_json(directory, "rank_likelihood.json", {
            "schema": self.schema_.to_dict(), "n_rows": self.n_rows_,
            "columns": self.columns_, "onehot": self._onehot,
            "marginals": [mg.to_dict() for mg in self.marginals_]})

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any
              ) -> RankLikelihoodSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        state = read_json(directory, "rank_likelihood.json")
        params = cls._params_from_json(meta["params"])
        params["schema"] = Schema.from_dict(state["schema"])
        obj = cls(**params)
        obj.schema_ = params["schema"]
        obj.n_rows_ = int(state["n_rows"])
        obj.columns_ = list(state["columns"])
        obj._onehot = {k: list(v) for k, v in state["onehot"].items()}
        obj.marginals_ = [marginal_from_dict(d) for d in state["marginals"]]
        obj.idata_ = read_idata(directory, "posterior.nc")
        C = obj.idata_.posterior["C"].transpose("chain", "draw", "column", "column_").values
        obj.C_ = C.reshape(-1, *C.shape[2:])
        return obj


def _correlation_idata(C: np.ndarray, columns: list[str]) -> az.InferenceData:
    """Wrap the draws of C (draws, p, p) as a one-chain posterior with named columns."""
    post = xr.Dataset(
        {"C": (("chain", "draw", "column", "column_"), C[None])},
        coords={"chain": [0], "draw": np.arange(len(C)), "column": list(columns),
                "column_": list(columns)})
    return az.InferenceData(posterior=post)


@dataclass(frozen=True)
class _Tree:
    """The arrays of a fitted scikit-learn tree that :meth:`apply` needs (no pickle).

    ``apply`` follows scikit-learn's ``Tree.apply`` exactly: inputs as float32, a record goes
    left when its value is at most the threshold, and a missing value goes where the node's
    ``missing_go_to_left`` says.
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray

    @classmethod
    def from_sklearn(cls, tree: Any) -> _Tree:
        t = tree.tree_
        missing = getattr(t, "missing_go_to_left", np.zeros(t.node_count, dtype=np.uint8))
        return cls(np.asarray(t.children_left, np.int64), np.asarray(t.children_right, np.int64),
                   np.asarray(t.feature, np.int64), np.asarray(t.threshold, np.float64),
                   np.asarray(missing, np.uint8))

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Return the leaf (node index) of each row of ``X``, as scikit-learn's ``apply``."""
        X = np.asarray(X, dtype=np.float32)
        node = np.zeros(len(X), dtype=np.int64)
        active = np.flatnonzero(self.left[node] >= 0)
        while active.size:
            nd = node[active]
            x = X[active, self.feature[nd]].astype(np.float64)
            go_left = np.where(np.isnan(x), self.missing_left[nd] != 0, x <= self.threshold[nd])
            node[active] = np.where(go_left, self.left[nd], self.right[nd])
            active = active[self.left[node[active]] >= 0]
        return node

    def to_dataset(self, j: int) -> dict[str, tuple]:
        dim = f"node_{j}"
        return {f"tree{j}_{k}": (dim, getattr(self, k))
                for k in ("left", "right", "feature", "threshold", "missing_left")}

    @classmethod
    def from_dataset(cls, ds: xr.Dataset, j: int) -> _Tree:
        return cls(*(ds[f"tree{j}_{k}"].values for k in ("left", "right", "feature",
                                                           "threshold", "missing_left")))


def _level_column(schema: Schema, name: str) -> bool:
    return schema[name].type in ("categorical", "ordinal", "binary")


def _canonical(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Put the donor table in one form, whether built at fit or read back from netCDF.

    Level columns hold the schema's labels (None when missing), the others float64 (NaN when
    missing; dates as days).
    """
    out = {}
    for c in schema.names:
        col = schema[c]
        if _level_column(schema, c):
            codes = encode_levels(df[c], col)
            labels = np.array(list(col.levels) + [None], dtype=object)
            out[c] = labels[codes]  # code -1 picks the trailing None
        else:
            out[c] = df[c].to_numpy(dtype=float, na_value=np.nan)
    return pd.DataFrame(out)


class CartSynthesizer(Synthesizer):
    """Iterative (sequential) CART synthesis, synthpop's default method (Reiter 2005).

    Variables are synthesized one after another in a visit order. The first is a bootstrap
    sample of its real values; each later variable gets a classification or regression tree
    fitted to the real data on the variables before it (leaves of at least ``min_samples_leaf``
    records), and each synthetic record takes the value of a random real record in the leaf its
    synthetic predictors fall into (so missing values are synthesized like any other value).
    Categorical predictors enter the trees as integer codes.

    Numeric values drawn from a leaf are smoothed as synthpop's ``smoothing = "density"`` does
    (columns with more than 50 distinct values; others are discrete and keep their real values):
    once every leaf has been drawn from, each drawn value gets Gaussian noise with one
    bandwidth for the whole column, that of a kernel density estimate of the drawn values
    (synthpop's ``syn.smooth``), so that synthetic values are not copies of real ones. The
    bandwidth is Silverman's rule of thumb (R's ``bw.nrd0``: ``0.9 min(sd, IQR / 1.34)
    n^-1/5``) where synthpop uses Sheather and Jones's (``bw.SJ``, which neither SciPy nor
    statsmodels provides). Point masses are kept exact: missing values, special codes, and
    values held by at least ``atom_share`` of the records (zeros, round amounts, top codes) are
    not smoothed (synthpop keeps a value held by more than 70% of the records and a top code).
    The noise is truncated
    to the column's observed range (synthpop clips it, which copies the real minimum and
    maximum); drawn values that all share one value are smoothed with the real column's
    bandwidth. Smoothed values are rounded to whole numbers for integer columns (which then
    take real values, as integers must) and to the column's decimals otherwise. Rules stated
    in the schema are enforced on the synthetic records.

    Parameters
    ----------
    schema : Schema, optional
    visit_sequence : sequence of str, optional
        The order; by default a random permutation drawn from ``random_seed`` at :meth:`fit`
        (Feldman & Kowal compare many random orders).
    min_samples_leaf : int, default 5
        synthpop's ``minbucket``.
    smoothing : {"density", "none"}, default "density"
        Smoothing of numeric donor values (synthpop's ``smoothing``).
    atom_share : float, default 0.01
        Values held by at least this share of a column's records are not smoothed.
    random_seed : int, optional

    Attributes
    ----------
    visit_sequence_ : list of str
        The order used.

    Notes
    -----
    ``from_posterior`` raises :class:`~bayesynth.errors.NoPosteriorError`: CART is not a
    Bayesian model. :meth:`save` writes ``cart.nc`` (the trees' arrays from scikit-learn's
    ``tree_``: children, split features, thresholds and missing-value directions; the leaf of
    every training record; and the training records themselves, level columns as codes) and
    ``cart.json`` (schema, visit order, the values never smoothed and the smoothing ranges).
    No pickle: synthesis routes records through the saved arrays exactly as scikit-learn's
    ``apply`` does. CART draws synthetic values from real records, so the saved directory
    holds the confidential data: keep it as confidential as the data.

    References
    ----------
    Reiter, J. P. (2005). Using CART to generate partially synthetic public use microdata.
    *Journal of Official Statistics*, 21(3), 441-462. Nowok, Raab & Dibben (2016), synthpop.
    """

    _fitted_attribute = "_trees"
    _no_posterior = ("CART is not a Bayesian model: it has no posterior to synthesize from; "
                     "fit(df) grows its trees on the data")

    def __init__(self, schema: Schema | None = None, *,
                 visit_sequence: Sequence[str] | None = None, min_samples_leaf: int = 5,
                 smoothing: str = "density", atom_share: float = 0.01,
                 random_seed: int | None = None):
        self.schema = schema
        self.visit_sequence = visit_sequence
        self.min_samples_leaf = min_samples_leaf
        self.smoothing = smoothing
        self.atom_share = atom_share
        self.random_seed = random_seed

    def _matrix(self, df: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
        out = np.empty((len(df), len(cols)))
        for j, c in enumerate(cols):
            col = self.schema_[c]
            if col.type in ("categorical", "ordinal", "binary"):
                codes = encode_levels(df[c], col).astype(float)
                codes[codes < 0] = np.nan
                out[:, j] = codes
            else:
                out[:, j] = df[c].to_numpy(dtype=float, na_value=np.nan)
        return out

    def fit(self, df: pd.DataFrame) -> CartSynthesizer:
        """Fit one tree per variable after the first in the visit order.

        ``df`` is kept: synthetic values are drawn from its leaves.

        Parameters
        ----------
        df : pandas.DataFrame
            The real data; the schema is inferred from it when none was given.

        Returns
        -------
        CartSynthesizer
            ``self``, with ``visit_sequence_`` and ``schema_`` set.

        Raises
        ------
        bayesynth.errors.InvalidParameterError
            If ``smoothing`` is not "density" or "none", ``min_samples_leaf`` is not an integer
            of at least 1 or ``atom_share`` is not between 0 and 1.
        bayesynth.errors.SchemaError
            If ``visit_sequence`` does not list every modelled column exactly once.
        """
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        if self.smoothing not in ("density", "none"):
            raise InvalidParameterError(
                f"smoothing must be 'density' or 'none'; got {self.smoothing!r}.")
        check_integer(self.min_samples_leaf, "min_samples_leaf", 1)
        share = self.atom_share
        if not (is_real(share) and 0.0 <= share <= 1.0):
            raise InvalidParameterError(
                f"atom_share must be a share between 0 and 1 (0: every value an atom, no "
                f"smoothing); got {share!r}.", column="atom_share")
        schema = self.schema if self.schema is not None else infer_schema(df, suggest=False)
        validate_data(df, schema)
        self.schema_ = schema
        df = as_numbers(df)
        rng = np.random.default_rng(self.random_seed)
        modelled = [c for c in schema.names if c not in not_modelled(df, schema)]
        order = (list(self.visit_sequence) if self.visit_sequence is not None
                 else [str(c) for c in rng.permutation(modelled)])
        if sorted(order) != sorted(modelled):
            raise SchemaError("visit_sequence must list every modelled column (derived and "
                              "rule-fixed ones aside) exactly once; got "
                              f"{order}.")
        self.visit_sequence_ = order
        self._real = _canonical(df.reset_index(drop=True), schema)
        trees: list[_Tree | None] = [None]
        self._leaves: list[np.ndarray | None] = [None]
        self._leaf_members: list[dict[int, np.ndarray]] = [{}]
        for j in range(1, len(order)):
            target = order[j]
            X = self._matrix(self._real, order[:j])
            col = schema[target]
            if col.type in ("categorical", "ordinal", "binary"):
                y = encode_levels(self._real[target], col)  # -1 (missing) is its own class
                tree = DecisionTreeClassifier(min_samples_leaf=self.min_samples_leaf,
                                              random_state=int(rng.integers(2**31)))
            else:
                y = self._real[target].to_numpy(dtype=float, na_value=np.nan)
                y = np.where(np.isnan(y), np.nanmedian(y), y)  # splits only; donors keep NaN
                tree = DecisionTreeRegressor(min_samples_leaf=self.min_samples_leaf,
                                             random_state=int(rng.integers(2**31)))
            tree.fit(X, y)
            leaves = tree.apply(X).astype(np.int64)
            trees.append(_Tree.from_sklearn(tree))
            self._leaves.append(leaves)
            self._leaf_members.append(_members(leaves))
        self._trees = trees
        self._fixed = {}  # per numeric column: values never smoothed (codes, atoms)
        self._range = {}
        for c in schema.names:
            col = schema[c]
            if col.type not in ("count", "continuous"):
                continue
            x = self._real[c].to_numpy(dtype=float, na_value=np.nan)
            x = x[~np.isnan(x)]
            vals, counts = np.unique(x, return_counts=True)
            if len(vals) <= DISCRETE_VALUES:  # discrete: only real values come back
                continue
            atoms = vals[counts >= self.atom_share * max(len(x), 1)]
            self._fixed[c] = np.union1d(atoms, np.asarray(col.special_codes, dtype=float))
            rest = x[~np.isin(x, self._fixed[c])]
            self._range[c] = (rest.min(), rest.max()) if len(rest) else (np.nan, np.nan)
        return self

    def _smooth(self, rng: np.random.Generator, c: str, values: np.ndarray) -> np.ndarray:
        """Smooth the donor values drawn for one numeric column, as synthpop's ``syn.smooth``.

        One bandwidth for the whole column: Silverman's rule over the values drawn (those that
        are not atoms, codes or missing), as synthpop computes one bandwidth over the column's
        synthetic values after every leaf has been drawn from.
        """
        col = self.schema_[c]
        out = values.astype(float).copy()
        fixed = np.isnan(out) | np.isin(out, self._fixed[c])
        from scipy.stats import truncnorm

        lo, hi = self._range[c]
        v = out[~fixed]
        if len(v) > 1 and np.ptp(v) > 0:
            bw = silverman_bandwidth(v)
        else:
            # every drawn value the same (or one value): the real column's bandwidth, so that
            # a value that is not an atom does not come back as is
            pool = self._real[c].to_numpy(dtype=float, na_value=np.nan)
            whole = pool[~np.isnan(pool) & ~np.isin(pool, self._fixed[c])]
            bw = (silverman_bandwidth(whole) if len(whole) > 1 and np.ptp(whole) > 0
                  else 0.0)
        if len(v) and bw > 0 and hi > lo:
            # normal noise truncated to the observed range (clipping, as synthpop does, put
            # copies of the real minimum and maximum at the bounds)
            out[~fixed] = truncnorm.rvs((lo - v) / bw, (hi - v) / bw, loc=v, scale=bw,
                                        random_state=rng)
        out[~fixed] = round_values(out[~fixed], col)
        return out

    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: int | None = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets (each a fresh pass through the fitted trees).

        Parameters
        ----------
        m : int, default 1
            Number of datasets.
        n_rows : int, optional
            Records per dataset; the size of the real data by default.
        random_seed : int, optional
            Seed of the draws.

        Returns
        -------
        list of pandas.DataFrame
            ``m`` tables with every schema column, rules enforced and derived columns computed.

        Raises
        ------
        bayesynth.errors.NotFittedError
            If :meth:`fit` has not been called.
        bayesynth.errors.InvalidParameterError
            ``m`` or ``n_rows`` below 1, or a bad ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        rng = np.random.default_rng(random_seed)
        n_rows = len(self._real) if n_rows is None else n_rows
        out = []
        order = self.visit_sequence_
        for _ in range(m):
            syn = pd.DataFrame(index=range(n_rows))
            first = order[0]
            donors = rng.integers(len(self._real), size=n_rows)
            syn[first] = self._real[first].to_numpy()[donors]
            if self.smoothing == "density" and first in self._fixed:
                syn[first] = self._smooth(rng, first, syn[first].to_numpy(dtype=float))
            for j in range(1, len(order)):
                target = order[j]
                leaves = self._trees[j].apply(self._matrix(syn, order[:j]))
                donors = np.empty(n_rows, dtype=np.int64)
                for leaf in np.unique(leaves):
                    idx = np.flatnonzero(leaves == leaf)
                    pool = self._leaf_members[j][int(leaf)]
                    donors[idx] = pool[rng.integers(len(pool), size=len(idx))]
                syn[target] = self._real[target].to_numpy()[donors]
                if self.smoothing == "density" and target in self._fixed:
                    syn[target] = self._smooth(rng, target,
                                               syn[target].to_numpy(dtype=float))
            frame = pd.DataFrame({c: _restore(syn[c].to_numpy(), self.schema_[c])
                                  for c in order})
            out.append(finish(frame, self.schema_))
        return out

    # ---------------------------------------------------------------------------- save/load

    def _json_params(self) -> dict[str, Any]:
        params = super()._json_params()
        params["schema"] = None  # the fitted schema is in cart.json
        return params

    def _write(self, directory: Path) -> None:
        """Write ``cart.nc`` and ``cart.json`` (see the class)."""
        schema = self.schema_
        data: dict[str, tuple] = {}
        for i, c in enumerate(schema.names):
            if _level_column(schema, c):
                data[f"real_{i}"] = ("record", encode_levels(self._real[c], schema[c]))
            else:
                data[f"real_{i}"] = ("record", self._real[c].to_numpy(dtype=float))
        for j in range(1, len(self._trees)):
            data.update(self._trees[j].to_dataset(j))
            data[f"tree{j}_leaf"] = ("record", self._leaves[j])
        xr.Dataset(data).to_netcdf(directory / "cart.nc", engine="h5netcdf")

        def nan_free(x: np.ndarray) -> list:
            return [None if np.isnan(v) else float(v) for v in np.asarray(x, float)]

        write_json(directory, "cart.json", {
            "schema": schema.to_dict(), "visit_sequence": self.visit_sequence_,
            "n_trees": len(self._trees),
            "fixed": {c: nan_free(v) for c, v in self._fixed.items()},
            "range": {c: nan_free(v) for c, v in self._range.items()}})

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any) -> CartSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        state = read_json(directory, "cart.json")
        ds = read_netcdf(directory, "cart.nc")
        params = cls._params_from_json(meta["params"])
        schema = Schema.from_dict(state["schema"])
        params["schema"] = schema
        obj = cls(**params)
        obj.schema_ = schema
        obj.visit_sequence_ = list(state["visit_sequence"])
        labels = {}
        for i, c in enumerate(schema.names):
            v = ds[f"real_{i}"].values
            if _level_column(schema, c):
                labels[c] = np.array(list(schema[c].levels) + [None], dtype=object)[v]
            else:
                labels[c] = v.astype(float)
        obj._real = pd.DataFrame(labels, columns=schema.names)
        obj._trees = [None] + [_Tree.from_dataset(ds, j) for j in range(1, state["n_trees"])]
        obj._leaves = [None] + [ds[f"tree{j}_leaf"].values.astype(np.int64)
                                for j in range(1, state["n_trees"])]
        obj._leaf_members = [{}] + [_members(lv) for lv in obj._leaves[1:]]

        def nan_back(x: list) -> np.ndarray:
            return np.array([np.nan if v is None else v for v in x], dtype=float)

        obj._fixed = {c: nan_back(v) for c, v in state["fixed"].items()}
        obj._range = {c: tuple(nan_back(v)) for c, v in state["range"].items()}
        return obj


def _members(leaves: np.ndarray) -> dict[int, np.ndarray]:
    """Training records of each leaf."""
    return {int(leaf): np.flatnonzero(leaves == leaf) for leaf in np.unique(leaves)}
