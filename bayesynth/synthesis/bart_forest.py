"""The posterior draws of a BART function as flat arrays: extraction, prediction, persistence.

pymc-bart keeps the trees of every kept draw as Python objects in a multiprocessing list. A
synthesizer needs ``f(x)`` at new (synthetic) covariates, possibly for many draws, and must save
the fit without pickle; :class:`BartForest` stores each tree as a dense heap-ordered table
(node ``k`` has children ``2k + 1`` and ``2k + 2``: split variable, split value or leaf value)
and predicts with a compiled traversal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import xarray as xr

__all__ = ["BartForest"]

RULE_CONTINUOUS, RULE_ONEHOT = 0, 1


@numba.njit(cache=True)
def _predict(X, draws, n_trees, offsets, split_var, value, rules, out):  # pragma: no cover
    """out[d, i] = sum over the trees of draw draws[d] of the leaf reached by X[i]."""
    n = X.shape[0]
    for d in range(draws.shape[0]):
        s = draws[d]
        for t in range(n_trees):
            base = offsets[s * n_trees + t]
            for i in range(n):
                k = 0
                while True:
                    var = split_var[base + k]
                    if var < 0:
                        out[d, i] += value[base + k]
                        break
                    x = X[i, var]
                    if rules[var] == 0:
                        go_left = x <= value[base + k]
                    else:
                        go_left = x == value[base + k]
                    k = 2 * k + 1 if go_left else 2 * k + 2


@dataclass
class BartForest:
    """Sum-of-trees posterior: ``n_draws`` draws of ``n_trees`` trees each.

    Attributes
    ----------
    offsets : numpy.ndarray, shape (n_draws * n_trees,)
        Start of each tree's table in ``split_var``/``value``.
    split_var : numpy.ndarray
        Split variable of each heap node (-1 for a leaf; unused slots are -1 too).
    value : numpy.ndarray
        Split value of a split node, leaf value of a leaf.
    rules : numpy.ndarray, shape (n_predictors,)
        0: continuous split (left when x <= value); 1: one-hot split (left when x == value).
        NaN covariates go right (designs saved before missing values had fills,
        :class:`~bayesynth.models.bart_rank.BartDesign`).
    n_draws, n_trees : int
    """

    offsets: np.ndarray
    split_var: np.ndarray
    value: np.ndarray
    rules: np.ndarray
    n_draws: int
    n_trees: int

    @classmethod
    def from_model(cls, model) -> BartForest:
        """Collect the kept draws of the model's BART variable ``f`` after sampling.

        Parameters
        ----------
        model : pymc.Model
            A sampled model with a pymc-bart variable ``f``.

        Returns
        -------
        BartForest

        Raises
        ------
        RuntimeError
            If the BART variable has no stored draws.
        """
        import pymc_bart as pmb

        op = model["f"].owner.op
        draws = list(op.all_trees)
        if not draws:
            raise RuntimeError("The model's BART variable has no stored draws; sample it first.")
        rules = np.array([RULE_ONEHOT if r is pmb.OneHotSplitRule else RULE_CONTINUOUS
                          for r in (op.split_rules or [pmb.ContinuousSplitRule] * op.X.shape[1])],
                         dtype=np.int64)
        n_trees = len(draws[0][0])
        offsets, svs, vals = [], [], []
        pos = 0
        for trees in draws:
            for tree in trees[0]:
                nodes = tree.tree_structure
                size = max(nodes) + 1
                sv = np.full(size, -1, dtype=np.int64)
                vv = np.zeros(size)
                for k, node in nodes.items():
                    sv[k] = node.idx_split_variable
                    vv[k] = float(np.ravel(node.value)[0])
                offsets.append(pos)
                svs.append(sv)
                vals.append(vv)
                pos += size
        return cls(np.asarray(offsets, dtype=np.int64), np.concatenate(svs),
                   np.concatenate(vals), rules, len(draws), n_trees)

    def predict(self, X: np.ndarray, draws: np.ndarray | None = None) -> np.ndarray:
        """f(X) for each requested draw.

        Parameters
        ----------
        X : numpy.ndarray, shape (n, n_predictors)
        draws : array of int, optional
            Draw indices (default: all).

        Returns
        -------
        numpy.ndarray, shape (len(draws), n)
        """
        X = np.ascontiguousarray(X, dtype=float)
        draws = np.arange(self.n_draws) if draws is None else np.atleast_1d(draws)
        draws = np.asarray(draws, dtype=np.int64)
        out = np.zeros((len(draws), len(X)))
        _predict(X, draws, self.n_trees, self.offsets, self.split_var, self.value, self.rules,
                 out)
        return out

    def to_dataset(self) -> xr.Dataset:
        """Return the flat arrays as a netCDF-ready dataset (read back by :meth:`from_dataset`).

        Returns
        -------
        xarray.Dataset
            Variables ``offsets``, ``split_var``, ``value`` and ``rules``; attributes
            ``n_draws`` and ``n_trees``.
        """
        return xr.Dataset(
            {"offsets": ("tree", self.offsets), "split_var": ("node", self.split_var),
             "value": ("node", self.value), "rules": ("predictor", self.rules)},
            attrs={"n_draws": self.n_draws, "n_trees": self.n_trees},
        )

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> BartForest:
        """Rebuild a forest from :meth:`to_dataset`'s output.

        Parameters
        ----------
        ds : xarray.Dataset
            As written by :meth:`to_dataset`.

        Returns
        -------
        BartForest
        """
        return cls(ds["offsets"].values.astype(np.int64), ds["split_var"].values.astype(np.int64),
                   ds["value"].values.astype(float), ds["rules"].values.astype(np.int64),
                   int(ds.attrs["n_draws"]), int(ds.attrs["n_trees"]))
