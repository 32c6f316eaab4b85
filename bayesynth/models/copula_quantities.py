"""What synthesis from the rank-probit copula depends on, as functions of its parameters.

Synthesis draws latent records ``z = alpha + Lambda eta + eps`` and reads the categorical levels
off their categorical columns and the ordered values off ``z_j / sqrt(Omega_jj)``. So the
quantities that decide a synthetic table, and on which convergence should be judged, are

* the implied probability of every categorical level, ``P(y_v = h)``;
* the category-conditional means of every ordered column on the synthesis scale,
  ``E[z_j / sqrt(Omega_jj) | y_v = h]``;
* the copula correlations between variables, ``C`` (a deterministic of the model).

The first two depend only on the joint normal law of a variable's categorical columns u
(mean alpha_u, covariance Sigma_uu = Lambda_u Lambda_u' + diag(sigma_u^2)) and on its
covariance with the ordered column, Sigma_ut = Lambda_u lambda_t: with
beta = Sigma_uu^-1 Sigma_ut, ``E[z_t | y = h] = beta' (E[u | y = h] - alpha_u)``. They have no
closed form; :func:`implied_quantities` estimates ``P(y = h)`` and ``E[u | y = h]`` by Monte
Carlo with common random numbers pushed through the Cholesky factor of Sigma_uu (the same
standard normal draws for every posterior draw). Everything is then a smooth function of
rotation-invariant quantities: drawing the factor scores themselves would tie the Monte Carlo
error to the (unidentified) rotation of the loadings, which moves slowly and differs between
chains, and would show up as spurious R-hat.

Under the multinomial probit the level probabilities sum to one by construction. Under the
paper's rank-probit likelihood (``"rpl"``) only points with exactly one positive level column
are valid; the probabilities are normalised over them and ``valid_share`` reports their mass.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd

from bayesynth.models.layout import LatentLayout, mnp_levels

__all__ = ["CopulaBlocks", "implied_quantities", "synthesis_quantity_table", "N_MC",
           "BLOCKS_ATTR"]

#: Attribute of ``idata.posterior`` holding the copula's blocks (JSON), written by
#: :func:`bayesynth.sample`.
BLOCKS_ATTR = "copula_blocks"

#: Default Monte Carlo size of :func:`implied_quantities`.
N_MC = 2000


@dataclass(frozen=True)
class CopulaBlocks:
    """The part of a layout that :func:`implied_quantities` needs (JSON-friendly).

    Attributes
    ----------
    categorical : list of dict
        Per categorical variable: ``name``, ``latent`` (column indices), ``levels``,
        ``likelihood`` and ``reference``.
    ordered : list of dict
        Per ordered value column: ``name`` and ``latent``.
    """

    categorical: tuple
    ordered: tuple

    @classmethod
    def from_layout(cls, layout: LatentLayout) -> CopulaBlocks:
        """Extract the blocks of a :class:`~bayesynth.models.layout.LatentLayout`.

        Parameters
        ----------
        layout : LatentLayout
            Layout of a copula model (its categorical blocks and its ordered columns; only
            ordered columns of kind ``"value"`` are kept).

        Returns
        -------
        CopulaBlocks
        """
        cats = tuple({"name": b.name, "latent": [int(j) for j in b.latent],
                      "levels": [str(v) for v in b.levels], "likelihood": b.likelihood,
                      "reference": int(b.reference)} for b in layout.categorical)
        ords = tuple({"name": o.name, "latent": int(o.latent)} for o in layout.ordered
                     if o.kind == "value")
        return cls(cats, ords)

    def to_dict(self) -> dict:
        """JSON-ready form.

        Returns
        -------
        dict
            ``{"categorical": [...], "ordered": [...]}``, read back by :meth:`from_dict`.
        """
        return {"categorical": list(self.categorical), "ordered": list(self.ordered)}

    @classmethod
    def from_dict(cls, d: dict) -> CopulaBlocks:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        d : dict
            With keys ``"categorical"`` and ``"ordered"``, as written by :meth:`to_dict`.

        Returns
        -------
        CopulaBlocks
        """
        return cls(tuple(d["categorical"]), tuple(d["ordered"]))

    @property
    def category_labels(self) -> list[str]:
        """``"variable=level"`` for every level of every categorical variable."""
        return [f"{b['name']}={lev}" for b in self.categorical for lev in b["levels"]]

    @property
    def ordered_names(self) -> list[str]:
        """Names of the ordered value columns."""
        return [o["name"] for o in self.ordered]

    @property
    def pair_labels(self) -> list[str]:
        """``"a ~ b"`` for every pair of categorical variables.

        In the order of the pairs in :func:`implied_quantities`.
        """
        names = [b["name"] for b in self.categorical]
        return [f"{a} ~ {b}" for i, a in enumerate(names) for b in names[i + 1:]]


def _levels(block: dict, zb: np.ndarray) -> np.ndarray:
    """Level index of each row of a block's latent values; -1 where invalid (rpl)."""
    if block["likelihood"] == "mnp":
        pos = mnp_levels(zb)
        col_levels = np.array([h for h in range(len(block["levels"]))
                               if h != block["reference"]], dtype=np.int64)
        return np.where(pos >= 0, col_levels[np.maximum(pos, 0)], block["reference"])
    positive = zb > 0
    ok = positive.sum(axis=1) == 1
    return np.where(ok, positive.argmax(axis=1), -1)


def implied_quantities(
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    sigma: np.ndarray,
    blocks: CopulaBlocks,
    *,
    n_mc: int = N_MC,
    random_seed: int = 0,
    pairs: bool = True,
) -> dict[str, np.ndarray]:
    """Compute the implied level probabilities, pair associations and conditional means.

    Implied level probabilities, pairwise associations and category-conditional means, per
    posterior draw.

    All categorical columns are drawn jointly from their normal law N(alpha_c, Sigma_cc) by
    pushing common standard normal draws through the Cholesky factor of Sigma_cc; the level of
    each variable is read off its columns; the category-conditional mean of an ordered column t
    is ``beta_t' (E[u | y_v = h] - alpha_c) / sqrt(Omega_tt)`` with
    ``beta_t = Sigma_cc^-1 Sigma_ct`` (its residual averaged out analytically).

    Parameters
    ----------
    alpha_full : numpy.ndarray, shape (S, p*)
        Intercepts of all latent columns (zero for a column without one), per posterior draw.
    Lambda : numpy.ndarray, shape (S, p*, k)
        Loadings, per posterior draw.
    sigma : numpy.ndarray, shape (S, p*)
        Residual standard deviations, per posterior draw.
    blocks : CopulaBlocks
        Which latent columns belong to which categorical variable and ordered column.
    n_mc : int, default :data:`N_MC`
        Monte Carlo points (common to all draws).
    random_seed : int, default 0
        Seed of the common standard normal draws.
    pairs : bool, default True
        Also return the mutual information of every pair of categorical variables.

    Returns
    -------
    dict
        ``category_prob`` (S, n_categories); ``conditional_mean`` (S, n_categories,
        n_ordered), NaN where a level has no Monte Carlo point; ``pair_mi`` (S, n_pairs), the
        mutual information (nats) of each pair's implied two-way table; ``valid_share`` (S,
        n_variables): the mass of points that are some level (1 for the multinomial probit; for
        ``"rpl"`` the probabilities are normalised over the valid points).
    """
    S, p, k = Lambda.shape
    rng = np.random.default_rng(random_seed)
    cats = blocks.categorical
    n_cat = sum(len(b["levels"]) for b in cats)
    ord_cols = np.array([o["latent"] for o in blocks.ordered], dtype=np.int64)
    cat_cols = (np.concatenate([np.asarray(b["latent"]) for b in cats]).astype(np.int64)
                if cats else np.zeros(0, np.int64))
    offsets = np.cumsum([0] + [len(b["latent"]) for b in cats])
    pair_list = [(a, b) for a in range(len(cats)) for b in range(a + 1, len(cats))] if pairs \
        else []
    xi = rng.standard_normal((n_mc, len(cat_cols)))
    prob = np.zeros((S, n_cat))
    cmean = np.full((S, n_cat, len(ord_cols)), np.nan)
    valid = np.ones((S, len(cats)))
    pmi = np.zeros((S, len(pair_list)))
    if not cats:
        return {"category_prob": prob, "conditional_mean": cmean, "valid_share": valid,
                "pair_mi": pmi}
    for s in range(S):
        L, sig = Lambda[s], sigma[s]
        sd = np.sqrt((L**2).sum(axis=1) + sig**2)
        Lc = L[cat_cols]
        Scc = Lc @ Lc.T + np.diag(sig[cat_cols] ** 2)
        dev = xi @ np.linalg.cholesky(Scc).T  # u - alpha_c
        u = alpha_full[s, cat_cols] + dev
        beta = np.linalg.solve(Scc, Lc @ L[ord_cols].T) if len(ord_cols) else None
        levels = []
        start = 0
        for b_i, b in enumerate(cats):
            K = len(b["levels"])
            lev = _levels(b, u[:, offsets[b_i]:offsets[b_i + 1]])
            levels.append(lev)
            ok = lev >= 0
            counts = np.bincount(lev[ok], minlength=K)
            n_valid = counts.sum()
            valid[s, b_i] = n_valid / n_mc
            if n_valid:
                prob[s, start:start + K] = counts / n_valid
                if beta is not None:
                    sums = np.zeros((K, len(cat_cols)))
                    np.add.at(sums, lev[ok], dev[ok])
                    with np.errstate(invalid="ignore", divide="ignore"):
                        mean_dev = sums / counts[:, None]
                    cmean[s, start:start + K] = (mean_dev @ beta) / sd[ord_cols]
            start += K
        for r, (a, b) in enumerate(pair_list):
            la, lb = levels[a], levels[b]
            ok = (la >= 0) & (lb >= 0)
            Ka, Kb = len(cats[a]["levels"]), len(cats[b]["levels"])
            tab = np.bincount(la[ok] * Kb + lb[ok], minlength=Ka * Kb).reshape(Ka, Kb)
            tot = tab.sum()
            if tot:
                pj = tab / tot
                outer = pj.sum(1, keepdims=True) @ pj.sum(0, keepdims=True)
                nz = pj > 0
                pmi[s, r] = float((pj[nz] * np.log(pj[nz] / outer[nz])).sum())
    return {"category_prob": prob, "conditional_mean": cmean, "valid_share": valid,
            "pair_mi": pmi}


def labels(blocks: CopulaBlocks) -> tuple[list[str], list[str], list[str]]:
    """Coordinate labels: categories, ordered columns, categorical variables."""
    return blocks.category_labels, blocks.ordered_names, [b["name"] for b in blocks.categorical]


def between_variable_pairs(latent_names: Sequence[str], level_names: Sequence[str]
                           ) -> np.ndarray:
    """Upper-triangle mask of the correlations between different variables."""
    from bayesynth.models.layout import same_variable_level_pairs

    same = same_variable_level_pairs(list(latent_names), list(level_names))
    p = len(latent_names)
    return np.triu(~same & ~np.eye(p, dtype=bool), 1)


def _stacked(post, name: str) -> np.ndarray:
    return post[name].transpose("chain", "draw", ...).values


def synthesis_quantity_table(idata, *, max_draws: int = 1000, n_mc: int | None = None,
                             model=None) -> tuple[pd.DataFrame, int]:
    """Compute R-hat and ESS of every quantity synthesis uses.

    See :func:`bayesynth.evaluation.synthesis_diagnostics`.

    Parameters
    ----------
    idata : arviz.InferenceData
        With the blocks in ``posterior.attrs[BLOCKS_ATTR]`` (:func:`bayesynth.sample` puts them
        there), or give ``model``.
    max_draws : int, default 1000
        Draws used (evenly thinned per chain above this).
    n_mc : int, optional
        Monte Carlo points of :func:`implied_quantities` (default :data:`N_MC`).
    model : pymc.Model, optional
        The copula model, for a posterior from :func:`pymc.sample`.

    Returns
    -------
    (pandas.DataFrame, int)
        The table (index: quantity; columns kind, mean, sd, ess_bulk, ess_tail, r_hat) and
        the thinning factor.
    """
    post = idata.posterior
    if model is not None:
        from bayesynth.models.rank_probit_copula import get_layout

        blocks = CopulaBlocks.from_layout(get_layout(model))
    elif BLOCKS_ATTR in post.attrs:
        blocks = CopulaBlocks.from_dict(json.loads(post.attrs[BLOCKS_ATTR]))
    else:
        raise KeyError("The posterior carries no copula blocks: pass model= (or sample the "
                       "model with bayesynth.sample).")
    nc, nd = post.sizes["chain"], post.sizes["draw"]
    thin = max(1, int(np.ceil(nc * nd / max_draws)))
    sub = post.isel(draw=slice(None, None, thin))
    nd2 = sub.sizes["draw"]
    latent = [str(v) for v in post.coords["latent"].values]
    p = len(latent)
    Lam = _stacked(sub, "Lambda").reshape(nc * nd2, p, -1)
    sig = _stacked(sub, "sigma").reshape(nc * nd2, p)
    af = np.zeros((nc * nd2, p))
    if "alpha" in sub:
        lvl = [latent.index(str(v)) for v in sub.coords["level"].values]
        af[:, lvl] = _stacked(sub, "alpha").reshape(nc * nd2, -1)
    q = implied_quantities(af, Lam, sig, blocks, n_mc=n_mc or N_MC)
    parts: list[tuple[str, str, np.ndarray]] = []
    ords = blocks.ordered_names
    oidx = [latent.index(o) for o in ords]
    C = _stacked(sub, "C")
    for a in range(len(oidx)):
        for b in range(a + 1, len(oidx)):
            parts.append(("C (ordered)", f"C[{ords[a]}, {ords[b]}]",
                          C[:, :, oidx[a], oidx[b]]))
    cats = blocks.category_labels
    for h, lab in enumerate(cats):
        parts.append(("level probability", lab, q["category_prob"][:, h].reshape(nc, nd2)))
    for r, lab in enumerate(blocks.pair_labels):
        parts.append(("pair association", f"MI[{lab}]", q["pair_mi"][:, r].reshape(nc, nd2)))
    for h, lab in enumerate(cats):
        for j, o in enumerate(ords):
            x = q["conditional_mean"][:, h, j].reshape(nc, nd2)
            if np.all(np.isfinite(x)):
                parts.append(("conditional mean", f"E[{o} | {lab}]", x))
    cols = ["kind", "mean", "sd", "ess_bulk", "ess_tail", "r_hat"]
    if not parts:
        return pd.DataFrame(columns=cols), thin
    import xarray as xr

    arr = np.stack([x for _, _, x in parts], axis=-1)  # (chain, draw, quantity)
    ds = xr.Dataset({"x": (("chain", "draw", "quantity"), arr)})
    table = pd.DataFrame({
        "kind": [kd for kd, _, _ in parts],
        "mean": arr.mean(axis=(0, 1)),
        "sd": arr.std(axis=(0, 1)),
        "ess_bulk": az.ess(ds, method="bulk")["x"].values,
        "ess_tail": az.ess(ds, method="tail")["x"].values,
        "r_hat": az.rhat(ds)["x"].values if nc > 1 else np.full(arr.shape[-1], np.nan),
    }, index=pd.Index([lab for _, lab, _ in parts], name="quantity"))
    return table, thin

