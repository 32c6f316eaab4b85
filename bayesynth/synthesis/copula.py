"""Posterior-predictive synthesis from the rank-probit copula (Feldman & Kowal 2022, section 4.3).

For each synthetic dataset one posterior draw (alpha, Lambda, sigma) is used (proper synthesis).
Every synthetic record is drawn jointly, with no variable ordering:

1. the combination of categorical levels, either from the fitted model itself
   (``categorical="model"``, the default) or from the joint frequencies of the real data
   (``categorical="empirical"``, the paper's choice);
2. the latent values of the categorical columns, together with the factor scores eta, exactly:
   eta ~ N(0, I) and z_cat ~ N(alpha + Lambda eta, Sigma). Under the multinomial probit every
   draw is at some level of each variable (the argmax rule), so in ``"model"`` mode the levels
   are read off the draw; under the rank-probit likelihood (``"rpl"``) a draw is kept when each
   variable has exactly one positive column. In ``"empirical"`` mode a draw is kept when it is at
   the given combination. Records still unmatched after ``max_tries`` proposals fall back to a
   Gibbs sampler over (eta, z_cat) that uses the factor structure;
3. the other latent columns from their conditional normal given eta, which is the conditional
   given z_cat under the factor model;
4. each ordered column mapped back through its estimated marginal,
   ``y = F_hat^-1(Phi(z / sqrt(Omega_jj)))``. A column the real data show for only some records
   (missing values, special codes, records a rule fixes) has F_hat estimated from those records,
   whose latent values follow the latent law *conditional on being shown*, not N(0, Omega_jj);
   its values are read off the ranks of the latent values among the synthetic records that show
   a value, ``y = F_hat^-1((rank - 1/2) / n_shown)``, as the rank likelihood reads the real ones;
5. special codes and missing values written where their latent variables say, and the schema's
   rules enforced.

So a synthetic table follows the correlations between ordered columns, the implied level
probabilities of every categorical variable and their joint law, and the category-conditional
means of the ordered columns, each over the records that show the column;
:func:`bayesynth.evaluation.synthesis_diagnostics` judges convergence on exactly those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import log_ndtr, ndtr
from scipy.stats import rankdata

from bayesynth.errors import (
    IncompatibleModelError,
    InvalidParameterError,
    SchemaError,
    check_integer,
)
from bayesynth.models.copula_quantities import CATEGORICAL_MARGINS, data_margins
from bayesynth.models.layout import MISSING_LEVEL, LatentLayout, mnp_levels
from bayesynth.models.rank_probit_copula import get_layout, rank_probit_copula
from bayesynth.rules import apply_rules, rule_mask
from bayesynth.samplers.kernels import draw_eta
from bayesynth.samplers.sampling import check_copula_convergence
from bayesynth.samplers.sampling import sample as bs_sample
from bayesynth.samplers.truncnorm import truncnorm
from bayesynth.schema import (
    Schema,
    as_numbers,
    encode_levels,
    infer_schema,
    modelled_schema,
    not_modelled,
    validate_data,
    value_part,
)
from bayesynth.synthesis._output import _restore, finish
from bayesynth.synthesis.base import Synthesizer, _version, read_idata, select_draws
from bayesynth.synthesis.level_margins import calibrated_intercepts
from bayesynth.synthesis.marginals import (
    AtomMarginal,
    DiscreteMarginal,
    SmoothMarginal,
    fit_marginal,
    marginal_from_dict,
)
from bayesynth.synthesis.targeted import (
    TARGET_DRAWS,
    TargetModel,
    fit_target,
    target_from_posterior,
)

__all__ = ["CopulaSynthesizer", "draw_latent", "CATEGORICAL_MODES"]

CATEGORICAL_MODES = ("empirical", "model")
_FORMAT = "bayesynth-copula-synthesizer"


@dataclass(frozen=True)
class _Block:
    name: str
    latent: np.ndarray
    levels: tuple
    likelihood: str = "rpl"
    reference: int = -1

    @property
    def column_levels(self) -> np.ndarray:
        idx = np.arange(len(self.levels))
        return idx[idx != self.reference] if self.likelihood == "mnp" else idx


@dataclass(frozen=True)
class _Ordered:
    name: str
    latent: int
    kind: str  # "value" or "missing"


def _block_levels(block, zb: np.ndarray) -> np.ndarray:
    """Level index of each row of a block's latent values (-1: no level, rpl only)."""
    if block.likelihood == "mnp":
        pos = mnp_levels(zb)
        return np.where(pos >= 0, block.column_levels[np.maximum(pos, 0)], block.reference)
    positive = zb > 0
    return np.where(positive.sum(axis=1) == 1, positive.argmax(axis=1), -1)


def _valid(z_cat: np.ndarray, blocks, offsets: np.ndarray, codes: np.ndarray | None) -> tuple:
    """Which rows are some level of every block (and, if given, the right one)."""
    ok = np.ones(len(z_cat), dtype=bool)
    found = np.zeros((len(z_cat), len(blocks)), dtype=np.int64)
    for b, block in enumerate(blocks):
        lev = _block_levels(block, z_cat[:, offsets[b]:offsets[b + 1]])
        ok &= lev >= 0
        found[:, b] = np.maximum(lev, 0)
    if codes is not None:  # a code of -1 leaves its block free (any level)
        ok &= np.all((found == codes) | (codes < 0), axis=1)
    return ok, found


def _gibbs_categorical(rng, a_c, L_c, s_c, blocks, offsets, n_rows, codes, n_sweeps):
    """Gibbs sampler over (eta, levels, z_cat) given the level codes (or drawing them)."""
    k = L_c.shape[1]
    fixed = codes is not None
    codes_out = codes.copy() if fixed else np.zeros((n_rows, len(blocks)), dtype=np.int64)
    # rows whose given code is -1 draw that block's level like unfixed rows
    free = codes_out < 0 if fixed else np.ones((n_rows, len(blocks)), dtype=bool)
    for b, block in enumerate(blocks):  # free rows start at a valid level
        codes_out[free[:, b], b] = block.reference if block.likelihood == "mnp" else 0
    prec_c = 1.0 / s_c**2
    eta = np.zeros((n_rows, k))
    z_cat = np.zeros((n_rows, len(a_c)))
    rows = np.arange(n_rows)
    for b, block in enumerate(blocks):  # a valid start
        sl = slice(offsets[b], offsets[b + 1])
        if block.likelihood == "mnp":
            z_cat[:, sl] = -0.5
            local = np.full(len(block.levels), -1)
            local[block.column_levels] = np.arange(len(block.column_levels))
            pos = local[codes_out[:, b]]
            z_cat[rows[pos >= 0], offsets[b] + pos[pos >= 0]] = 0.5
        else:
            z_cat[:, sl] = -0.5
            z_cat[rows, offsets[b] + codes_out[:, b]] = 0.5
    for _ in range(max(int(n_sweeps), 1)):
        mean = a_c + eta @ L_c.T
        for b, block in enumerate(blocks):
            sl = slice(offsets[b], offsets[b + 1])
            if free[:, b].any() and block.likelihood == "rpl":
                t = mean[:, sl] / s_c[sl]
                logit = log_ndtr(t) - log_ndtr(-t)
                gumbel = -np.log(-np.log(rng.random(logit.shape)))
                drawn = np.argmax(logit + gumbel, axis=1)
                codes_out[:, b] = np.where(free[:, b], drawn, codes_out[:, b])
            if block.likelihood == "mnp":
                if not fixed:  # the utilities are unconstrained: the level follows from them
                    z_cat[:, sl] = mean[:, sl] + s_c[sl] * rng.standard_normal(
                        (n_rows, sl.stop - sl.start))
                    codes_out[:, b] = _block_levels(block, z_cat[:, sl])
                    continue
                local = np.full(len(block.levels), -1)
                local[block.column_levels] = np.arange(len(block.column_levels))
                own = local[codes_out[:, b]]
                for c in range(sl.stop - sl.start):
                    j = offsets[b] + c
                    others = np.delete(z_cat[:, sl], c, axis=1)
                    best_other = np.maximum(others.max(axis=1) if others.shape[1] else
                                            np.full(n_rows, -np.inf), 0.0)
                    win = np.where(own >= 0, z_cat[rows, offsets[b] + np.maximum(own, 0)], 0.0)
                    lower = np.where(own == c, best_other, -np.inf)
                    upper = np.where(own == c, np.inf, np.where(own < 0, 0.0, win))
                    z_cat[:, j] = truncnorm(rng, mean[:, j], np.full(n_rows, s_c[j]), lower,
                                            upper)
                rel = free[:, b]
                if rel.any():  # free rows: unconstrained utilities, the level follows
                    z_cat[rel, sl] = mean[rel, sl] + s_c[sl] * rng.standard_normal(
                        (int(rel.sum()), sl.stop - sl.start))
                    codes_out[rel, b] = _block_levels(block, z_cat[rel, sl])
            else:
                positive = np.zeros((n_rows, sl.stop - sl.start), dtype=bool)
                positive[rows, codes_out[:, b]] = True
                lower = np.where(positive, 0.0, -np.inf)
                upper = np.where(positive, np.inf, 0.0)
                z_cat[:, sl] = truncnorm(rng, mean[:, sl], np.broadcast_to(s_c[sl], lower.shape),
                                         lower, upper)
        eta = draw_eta(rng, z_cat, a_c, L_c, prec_c)
    return eta, z_cat, codes_out


def draw_latent(
    rng: np.random.Generator,
    alpha_full: np.ndarray,
    Lambda: np.ndarray,
    sigma: np.ndarray,
    blocks: list,
    n_rows: int,
    *,
    codes: np.ndarray | None = None,
    max_tries: int = 2000,
    n_sweeps: int = 200,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw latent records from the copula, every categorical variable at one of its levels.

    The factor scores and the categorical columns' latent values are drawn together from the
    unconstrained factor model, eta ~ N(0, I), z_cat ~ N(alpha + Lambda eta, Sigma). Under the
    multinomial probit every draw is some level of each variable (the argmax rule), so in
    ``"model"`` mode nothing is rejected. Under the rank-probit likelihood (``"rpl"``) a draw is
    kept when every block has exactly one positive column; with ``codes`` (``"empirical"``
    mode) it is kept when every block is at the given level. A record drawn this way is an
    exact draw from the truncated multivariate normal, jointly with eta. Records still
    unmatched after ``max_tries`` proposals (combinations the model finds very unlikely) are
    drawn by a Gibbs sampler over (eta, z_cat) run for ``n_sweeps`` sweeps, which is
    approximate (a finite run from a fixed start). The other latent columns follow from
    their conditional normal given eta.

    Parameters
    ----------
    rng : numpy.random.Generator
    alpha_full, Lambda, sigma : numpy.ndarray
        One posterior draw: intercepts (p*,), loadings (p*, k), residual sds (p*,).
    blocks : list
        The categorical variables: objects with ``latent`` (column indices), ``levels``,
        ``likelihood`` ("mnp" or "rpl") and ``reference``; plain index arrays are read as
        ``"rpl"`` blocks with one column per level.
    n_rows : int
    codes : numpy.ndarray, shape (n_rows, len(blocks)), optional
        Given level of each record and block (the ``"empirical"`` mode).
    max_tries : int, default 2000
        Rejection proposals per record before the Gibbs fallback.
    n_sweeps : int, default 200
        Gibbs sweeps of the fallback.

    Returns
    -------
    z : numpy.ndarray, shape (n_rows, p*)
    codes : numpy.ndarray, shape (n_rows, len(blocks))
        The level of each record in each block.
    """
    blocks = [b if hasattr(b, "likelihood") else
              _Block(str(i), np.asarray(b), tuple(range(len(b)))) for i, b in enumerate(blocks)]
    p, k = Lambda.shape
    eta = rng.standard_normal((n_rows, k))
    codes_out = np.zeros((n_rows, len(blocks)), dtype=np.int64)
    if blocks:
        cat = np.concatenate([np.asarray(b.latent) for b in blocks])
        a_c, L_c, s_c = alpha_full[cat], Lambda[cat], sigma[cat]
        offsets = np.cumsum([0] + [len(b.latent) for b in blocks])
        z_cat = np.empty((n_rows, len(cat)))
        pending = np.arange(n_rows)
        for _ in range(int(max_tries)):
            if len(pending) == 0:
                break
            e = rng.standard_normal((len(pending), k))
            zc = a_c + e @ L_c.T + s_c * rng.standard_normal((len(pending), len(cat)))
            ok, found = _valid(zc, blocks, offsets, None if codes is None else codes[pending])
            done = pending[ok]
            eta[done], z_cat[done], codes_out[done] = e[ok], zc[ok], found[ok]
            pending = pending[~ok]
        if len(pending):
            e, zc, found = _gibbs_categorical(
                rng, a_c, L_c, s_c, blocks, offsets, len(pending),
                None if codes is None else codes[pending], n_sweeps)
            eta[pending], z_cat[pending], codes_out[pending] = e, zc, found
    z = alpha_full + eta @ Lambda.T + sigma * rng.standard_normal((n_rows, p))
    if blocks:
        z[:, cat] = z_cat
    return z, codes_out


def _ranks_within(u: np.ndarray, zj: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Return ``u`` with its ``mask`` entries replaced by the mid-ranks of ``zj`` there."""
    u = u.copy()
    u[mask] = (rankdata(zj[mask]) - 0.5) / mask.sum()
    return u


class CopulaSynthesizer(Synthesizer):
    """Fully synthetic data from the extended rank-probit Gaussian copula.

    Parameters
    ----------
    schema : Schema, optional
        Column types; inferred at :meth:`fit` when omitted. An inferred schema states no
        rules, so relations the data hold exactly (age groups of an age, a count coded -8 for
        non-smokers) come back only approximately: ``bayesynth.infer_schema(df)
        .suggested_rules`` lists them, and ``schema.with_rules(...)`` states those you accept
        (``bayesynth synthesize`` without ``--schema`` warns with the list).
    n_factors : int, optional
        Number of factors (default: Horn's parallel analysis on the data plus two; see
        :func:`bayesynth.models.choose_n_factors`).
    categorical : {"model", "empirical"}, default "model"
        How the combination of categorical levels of a synthetic record is drawn: from the
        fitted model (the default: combinations are drawn from the model, not copied from the
        real joint table, though a real combination, unique ones included, can come out by
        chance; no joint count of the real data is stored; see ``categorical_margins`` for
        the one-way frequencies, ``benchmarks/categorical_modes.py``) or from the joint frequencies
        of the real data (the paper: reproduces cross-tabulations exactly in expectation, but
        every synthetic combination is a real one, unique ones included, and :meth:`save`
        stores the exact joint table).
    categorical_margins : {"data", "model"}, default "data"
        In ``"model"`` mode, where each categorical variable's one-way level frequencies come
        from. ``"data"``: each posterior draw's intercepts are shifted so that its implied
        level probabilities equal the training data's frequencies, the dependence (loadings
        and residual scales) being the draw's, as the ordered columns take their marginals
        from the data (:mod:`bayesynth.synthesis.level_margins`). ``"model"``: the draw's
        own implied probabilities, which the posterior bends where the copula misfits a
        variable's dependence (SD2011: 0.58 married given the model, 0.60 in the data). Only
        multinomial-probit variables with a level for every record (no rule or missing value
        leaves a record without one) are shifted. :meth:`save` stores the one-way frequencies.
    categorical_likelihood : {"mnp", "rpl"}, default "mnp"
        See :func:`bayesynth.models.rank_probit_copula`.
    continuous : {"normal_scores", "rank"}, default "normal_scores"
        See :func:`bayesynth.models.rank_probit_copula`.
    draws, tune, chains : int
        MCMC settings passed to :func:`bayesynth.sample`.
    max_extensions : int, default 2
        When the closing convergence check fails (largest R-hat of the quantities synthesis
        uses above 1.01 but at most 1.1, judged with this synthesizer's
        ``categorical_margins``), continue the chains for ``draws`` more kept draws, at most
        this many times (see ``max_extensions`` of :func:`bayesynth.sample`; each
        extension is logged). ``0`` runs exactly ``tune + draws`` iterations per chain. A fit
        still unconverged after the last extension warns.
    random_seed : int, optional
        Seed of the MCMC run (``sample`` takes its own seed).
    max_tries : int, default 2000
        Rejection proposals per synthetic record for its categorical latent block before the
        Gibbs fallback (see :func:`draw_latent`).
    n_sweeps : int, default 200
        Sweeps of the Gibbs fallback.
    priors : mapping, optional
        Replacement priors of the copula by name (the names listed in
        ``bayesynth.models.rank_probit_copula``'s docstring), each a callable
        ``(name, dims) -> RV``; see :mod:`bayesynth.models.priors`. Used by :meth:`fit` only
        (not saved: the posterior they produced is).
    model_kwargs : dict, optional
        Extra keyword arguments of :func:`bayesynth.models.rank_probit_copula` (hyperparameters,
        ``ordinal_threshold`` ...).
    progressbar : bool, default True
    cores : int, optional
        Processes for parallel chains.
    targets : sequence of str, optional
        Key outcomes to synthesise by BART rank-likelihood regressions instead of the copula
        (Feldman & Kowal 2022, section 5). They are left out of the copula; each is regressed on
        the copula's columns and on the targets before it, so that the targets' mutual
        dependence survives. Targets must be ordered columns without missing values.
    target_draw : {"proper", "posterior_mean"}, default "proper"
        ``"proper"``: each synthetic dataset uses one posterior draw of each target's f and
        sigma, like the copula part (proper synthesis; the default, so that combining rules
        apply to every column). ``"posterior_mean"``: the posterior mean of f and sigma for
        every dataset, the paper's choice ("simplifies and stabilizes the data synthesis").
    bart_m : int, default 200
        Trees per target.
    bart_draws, bart_tune : int, optional
        MCMC settings of the target fits (default: ``draws`` and ``tune``).
    max_target_draws : int, default 200
        Posterior draws kept per target (evenly spaced).
    pgbart_kwargs : dict, optional
        Passed to pymc-bart's PGBART (e.g. ``{"batch": (1.0, 1.0)}``).
    target_priors : mapping, optional
        Replacement priors of every target's BART rank regression by name (``"sigma"``; see
        :func:`bayesynth.models.bart_rank_regression`). Used by :meth:`fit` only.
    marginal_group : int, optional
        Values averaged into each node of a smooth marginal (the ordered columns' and the
        targets'; ``group`` of :func:`bayesynth.synthesis.marginals.fit_marginal`). Default
        :func:`~bayesynth.synthesis.marginals.node_group_size`: 10 consecutive sorted values
        from 300 values up, fewer below, one below 60 (the end nodes are the minimum and the
        maximum whatever the group); 1 puts a node at every distinct value (the smooth CDF
        then passes through the data's, and synthetic values equal real ones more often than
        a second sample's do; ``benchmarks/marginal_copies.py``).

    Attributes
    ----------
    idata_ : arviz.InferenceData
        The copula posterior, set by :meth:`fit`.
    convergence_table_ : pandas.DataFrame or None
        Set by :meth:`fit`: the judgement that warned (or not) at the end of the fit, one row
        per quantity synthesis uses (``kind``, ``mean``, ``sd``, ``ess_bulk``, ``ess_tail``,
        ``r_hat``; :func:`bayesynth.samplers.check_copula_convergence`, with this
        synthesizer's ``categorical_margins``); None where there was nothing to judge (one
        chain), after :meth:`from_posterior` and :meth:`load` (judge those with
        :func:`bayesynth.evaluation.copula_diagnostics`).
    target_idata_ : dict
        The BART fits' traces, by target.
    schema_ : Schema
    n_rows_ : int
        Rows of the training table (the default size of synthetic tables).

    Notes
    -----
    The protocol of :class:`~bayesynth.synthesis.Synthesizer`. :meth:`sample` draws each
    dataset from its own posterior draw (:func:`~bayesynth.synthesis.select_draws`: distinct
    draws while there are enough). :meth:`save` writes ``meta.json``, ``posterior.nc`` (the
    InferenceData), ``target_<j>.nc`` (each BART target's trees as flat arrays) and
    ``synthesizer.json`` (parameters, schema, the estimated marginals, the categorical
    variables' one-way level frequencies and, in ``"empirical"`` mode, the categorical
    combination frequencies). These are summaries of the confidential
    data: keep the directory as confidential as the data. Directories saved before
    ``meta.json`` existed still load.

    Examples
    --------
    >>> import bayesynth as bs
    >>> df = bs.datasets.simulate_child_health(n=300, random_seed=0)
    >>> syn = bs.CopulaSynthesizer(n_factors=4, draws=30, tune=30, chains=1,
    ...                            random_seed=1, progressbar=False).fit(df)
    >>> out = syn.sample(m=2, random_seed=2)
    >>> len(out), out[0].shape == df.shape
    (2, True)
    """

    def __init__(
        self,
        schema: Schema | None = None,
        *,
        n_factors: int | None = None,
        categorical: str = "model",
        categorical_margins: str = "data",
        categorical_likelihood: str = "mnp",
        continuous: str = "normal_scores",
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        max_extensions: int = 2,
        random_seed: int | None = None,
        max_tries: int = 2000,
        n_sweeps: int = 200,
        priors: Mapping[str, Any] | None = None,
        model_kwargs: dict[str, Any] | None = None,
        progressbar: bool = True,
        cores: int | None = None,
        targets: Sequence[str] = (),
        target_draw: str = "proper",
        bart_m: int = 200,
        bart_draws: int | None = None,
        bart_tune: int | None = None,
        max_target_draws: int = 200,
        pgbart_kwargs: dict[str, Any] | None = None,
        target_priors: Mapping[str, Any] | None = None,
        marginal_group: int | None = None,
    ):
        self.schema = schema
        self.n_factors = n_factors
        self.categorical = categorical
        self.categorical_margins = categorical_margins
        self.categorical_likelihood = categorical_likelihood
        self.continuous = continuous
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.max_extensions = max_extensions
        self.random_seed = random_seed
        self.max_tries = max_tries
        self.n_sweeps = n_sweeps
        self.priors = priors
        self.model_kwargs = model_kwargs
        self.progressbar = progressbar
        self.cores = cores
        self.targets = targets
        self.target_draw = target_draw
        self.bart_m = bart_m
        self.bart_draws = bart_draws
        self.bart_tune = bart_tune
        self.max_target_draws = max_target_draws
        self.pgbart_kwargs = pgbart_kwargs
        self.target_priors = target_priors
        self.marginal_group = marginal_group

    # ---------------------------------------------------------------------------------- fit

    def _check_params(self) -> None:
        if self.categorical not in CATEGORICAL_MODES:
            raise InvalidParameterError(
                f"categorical must be one of {CATEGORICAL_MODES}; got {self.categorical!r}.",
                column="categorical")
        if self.categorical_margins not in CATEGORICAL_MARGINS:
            raise InvalidParameterError(
                f"categorical_margins must be one of {CATEGORICAL_MARGINS}; got "
                f"{self.categorical_margins!r}.", column="categorical_margins")
        check_integer(self.bart_m, "bart_m", 1)  # trees per BART target
        if self.marginal_group is not None:
            check_integer(self.marginal_group, "marginal_group", 1)
        if self.target_draw not in TARGET_DRAWS:
            raise InvalidParameterError(
                f"target_draw must be one of {TARGET_DRAWS}; got {self.target_draw!r}.",
                column="target_draw")

    def fit(self, df: pd.DataFrame) -> CopulaSynthesizer:
        """Fit the copula to ``df`` (not modified) and keep its posterior.

        Parameters
        ----------
        df : pandas.DataFrame
            The real data; the schema is inferred from it when none was given.

        Returns
        -------
        CopulaSynthesizer
            ``self``.
        """
        self._check_params()
        schema = self.schema if self.schema is not None else infer_schema(df, suggest=False)
        validate_data(df, schema)
        targets = [self.targets] if isinstance(self.targets, str) else list(self.targets)
        for t in targets:
            if t not in schema:
                raise SchemaError(f"target '{t}' is not a column of the table.", column=t)
            if schema[t].type == "categorical":
                raise SchemaError(f"target '{t}' is unordered categorical; BART targeting needs "
                                  "an ordered column.", column=t)
            if schema[t].special_codes:
                raise SchemaError(f"target '{t}' has special codes; BART targeting models one "
                                  "ordered value: leave it in the copula, or remove the codes "
                                  "from its schema.", column=t)
            if df[t].isna().any():  # checked again by fit_target; here before the copula runs
                raise SchemaError(
                    f"Target '{t}' has missing values; BART targeting needs a complete "
                    "response. Leave it in the copula (which models missingness) or impute it "
                    "first.", column=t)
        skipped = not_modelled(df, schema)  # derived by formulas, or fixed by rules
        clash = [t for t in targets if t in skipped]
        if clash:
            raise SchemaError(f"target '{clash[0]}' is derived by a formula or fixed by rules; "
                              "it cannot be a BART target.", column=clash[0])
        if all(c in targets or c in skipped for c in schema.names):
            raise SchemaError("Every column is a target; leave at least one in the copula.")
        cschema = modelled_schema(df, schema, exclude=targets)
        copula_cols = list(cschema.names)
        kw = {"categorical_likelihood": self.categorical_likelihood,
              "continuous": self.continuous, **(self.model_kwargs or {})}
        if self.priors is not None:
            if "priors" in kw:
                raise InvalidParameterError("priors are given twice (priors= and "
                                            "model_kwargs['priors']); give them once.",
                                            column="priors")
            kw["priors"] = self.priors
        df = as_numbers(df)  # dates as days since 1970-01-01 (a copy; the input is kept)
        model = rank_probit_copula(df[copula_cols], cschema, n_factors=self.n_factors, **kw)
        layout = get_layout(model)
        idata = bs_sample(model, draws=self.draws, tune=self.tune, chains=self.chains,
                          random_seed=self.random_seed, progressbar=self.progressbar,
                          cores=self.cores, check_convergence=False,
                          max_extensions=self.max_extensions,
                          categorical_margins=self.categorical_margins)
        # the check bs.sample would run, with this synthesizer's margins, its table kept
        self.convergence_table_ = check_copula_convergence(
            idata, self.categorical_margins, stacklevel=3)
        self.idata_ = idata
        self.schema_ = schema
        self.n_rows_ = len(df)
        self._set_decoder(layout, df[copula_cols], cschema)
        self.targets_: list[TargetModel] = []
        self.target_idata_ = {}
        seeds = np.random.SeedSequence(self.random_seed).generate_state(len(targets) + 1)
        for j, t in enumerate(targets):
            tm, tid = fit_target(
                df, schema, t, copula_cols + targets[:j], m=self.bart_m,
                draws=self.bart_draws or self.draws, tune=self.bart_tune or self.tune,
                chains=self.chains, random_seed=int(seeds[j + 1]),
                max_draws=self.max_target_draws, progressbar=self.progressbar,
                pgbart_kwargs=self.pgbart_kwargs, priors=self.target_priors,
                marginal_group=self.marginal_group)
            self.targets_.append(tm)
            self.target_idata_[t] = tid
        return self

    @classmethod
    def from_posterior(cls, model, idata: az.InferenceData, *,
                       targets: Sequence[tuple[Any, az.InferenceData]] = (),
                       **params: Any) -> CopulaSynthesizer:
        """Make a synthesizer that draws from a posterior you sampled yourself; no refit.

        Build the model with :func:`bayesynth.models.rank_probit_copula` (swap priors there),
        sample it (``bs.sample`` or ``pm.sample(model=model, step=bs.steps(model))``), inspect
        the posterior, and synthesize from that very posterior. Key outcomes left out of the
        copula come with their own sampled BART rank regressions
        (:func:`bayesynth.models.bart_rank_regression`), in synthesis order.

        Parameters
        ----------
        model : pymc.Model
            The copula model the posterior belongs to (or a copy of it).
        idata : arviz.InferenceData
            Its posterior (``Lambda``, ``sigma`` and, with categorical columns, ``alpha``).
        targets : sequence of (pymc.Model, arviz.InferenceData), optional
            One sampled BART rank regression per target column, in the order they are
            synthesised: each may use the copula's columns and the targets before it as
            predictors (as :meth:`fit` builds them), and its response must not be a column of
            the copula.
        **params
            Synthesis settings of the constructor (``categorical``, ``max_tries``,
            ``n_sweeps``, ``target_draw``, ``max_target_draws``, ``marginal_group``); fitting
            settings are ignored.

        Returns
        -------
        CopulaSynthesizer

        Raises
        ------
        bayesynth.errors.IncompatibleModelError
            The model was not built by :func:`~bayesynth.models.rank_probit_copula`, or the
            posterior lacks its variables.

        Examples
        --------
        >>> import bayesynth as bs
        >>> df = bs.datasets.simulate_child_health(n=150, random_seed=0)
        >>> model = bs.models.rank_probit_copula(df, n_factors=2)
        >>> idata = bs.sample(model, draws=20, tune=20, chains=1, random_seed=1,
        ...                   progressbar=False)  # doctest: +SKIP
        >>> syn = bs.CopulaSynthesizer.from_posterior(model, idata)  # doctest: +SKIP
        """
        from bayesynth.models.metadata import model_metadata

        source = model_metadata(model, "copula_source")
        if source is None:
            raise IncompatibleModelError(
                "from_posterior needs a model built by bayesynth.models.rank_probit_copula.")
        post = getattr(idata, "posterior", None)
        needed = ["Lambda", "sigma"] + (["alpha"] if "alpha" in model.named_vars else [])
        absent = [v for v in needed if post is None or v not in post]
        if absent:
            raise IncompatibleModelError(
                f"The posterior lacks {absent}: pass the InferenceData sampled from this model.")
        layout = get_layout(model)
        if int(post["Lambda"].shape[-2]) != layout.p_latent:
            raise IncompatibleModelError("The posterior belongs to another model (its Lambda "
                                         "has another number of latent columns).")
        data, schema = source["data"], source["schema"]
        full_schema = source.get("full_schema", schema)  # with the columns synthesis fills
        obj = cls(full_schema, categorical_likelihood=layout.categorical[0].likelihood
                  if layout.categorical else "mnp", **params)
        obj._check_params()
        obj.idata_ = idata
        obj.convergence_table_ = None
        obj.n_rows_ = len(data)
        obj._set_decoder(layout, as_numbers(data), schema)
        obj.targets_ = []
        obj.target_idata_ = {}
        available = list(schema.names)
        columns = [schema[c] for c in schema.names]
        for j, pair in enumerate(targets):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidParameterError(
                    f"targets[{j}] must be a (model, idata) pair of a sampled "
                    f"bart_rank_regression; got {type(pair).__name__}.", column="targets")
            tm = target_from_posterior(pair[0], pair[1], max_draws=obj.max_target_draws,
                                       marginal_group=obj.marginal_group)
            if tm.name in available:
                raise IncompatibleModelError(
                    f"target '{tm.name}' is already synthesised by the copula (or an earlier "
                    "target); build the copula without it.")
            unknown = [p for p in tm.design.predictors if p not in available]
            if unknown:
                raise IncompatibleModelError(
                    f"target '{tm.name}' is regressed on {unknown}, which neither the copula nor "
                    f"an earlier target synthesises; available: {available}.")
            obj.targets_.append(tm)
            obj.target_idata_[tm.name] = pair[1]
            available.append(tm.name)
            columns.append(model_metadata(pair[0], "bart_source")["schema"][tm.name])
        obj.targets = [tm.name for tm in obj.targets_]
        if obj.targets_:  # the derived and rule-fixed columns after the targets
            names = {c.name for c in columns}
            columns += [full_schema[c] for c in full_schema.names if c not in names]
            obj.schema_ = Schema(columns, full_schema.rules)
        else:
            obj.schema_ = full_schema
        return obj

    def _set_decoder(self, layout: LatentLayout, df: pd.DataFrame, schema: Schema) -> None:
        self.latent_names_ = list(layout.latent_names)
        self._blocks = [_Block(b.name, np.asarray(b.latent), tuple(b.levels), b.likelihood,
                               int(b.reference)) for b in layout.categorical]
        self._ordered = [_Ordered(o.name, int(o.latent), o.kind) for o in layout.ordered]
        self.marginals_: dict[str, DiscreteMarginal | SmoothMarginal | AtomMarginal] = {}
        self.partial_columns_ = [o.name for o in layout.ordered
                                 if o.kind == "value" and np.any(o.codes < 0)]
        for o in layout.ordered:
            col = schema[o.name]
            if o.kind == "missing":
                self.marginals_[f"{o.name}[missing]"] = DiscreteMarginal.fit(
                    o.codes[o.codes >= 0].astype(float))
            elif col.type in ("binary", "ordinal"):
                # Over level codes (indices into the schema's levels).
                full = encode_levels(df[o.name], col)
                keep = (full >= 0) & ~rule_mask(df, schema.rules, o.name)
                self.marginals_[o.name] = DiscreteMarginal.fit(
                    full[keep if keep.any() else full >= 0])
            else:
                # The value part: not missing, not a special code, not fixed by a rule.
                x = value_part(df[o.name], col).to_numpy(dtype=float, na_value=np.nan)
                keep = ~np.isnan(x) & ~rule_mask(df, schema.rules, o.name)
                if not keep.any():
                    keep = ~np.isnan(x)
                if not keep.any():
                    # Only codes. With two or more among the free records a code block
                    # decides every record; with one, no block exists and that code is
                    # every record's value.
                    raw = pd.to_numeric(df[o.name], errors="coerce").to_numpy(dtype=float)
                    free_raw = raw[~np.isnan(raw) & ~rule_mask(df, schema.rules, o.name)]
                    present = np.unique(free_raw if len(free_raw) else raw[~np.isnan(raw)])
                    x = present[:1] if len(present) else np.array([0.0])
                    keep = np.ones(len(x), dtype=bool)
                self.marginals_[o.name] = fit_marginal(
                    x[keep], continuous=True, integer=bool(col.integer) or col.type == "count",
                    decimals=col.decimals, digits=col.digits, group=self.marginal_group)
        # one-way level frequencies of the variables that show a level for every record
        self.level_margins_ = data_margins(layout)
        if self._blocks and self.categorical == "empirical":
            codes = np.column_stack([b.codes for b in layout.categorical])
            combos, counts = np.unique(codes, axis=0, return_counts=True)
            self.combos_ = combos
            self.combo_probs_ = counts / counts.sum()
        else:  # nothing of the real joint table is kept
            self.combos_ = None
            self.combo_probs_ = None

    # ------------------------------------------------------------------------------- sample

    def _posterior_draws(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        post = self.idata_.posterior
        p = len(self.latent_names_)
        Lam = post["Lambda"].stack(sample=("chain", "draw")).transpose("sample", ...).values
        sig = post["sigma"].stack(sample=("chain", "draw")).transpose("sample", ...).values
        S = Lam.shape[0]
        alpha_full = np.zeros((S, p))
        if "alpha" in post:
            a = post["alpha"].stack(sample=("chain", "draw")).transpose("sample", ...).values
            lvl = np.concatenate([b.latent for b in self._blocks])
            alpha_full[:, lvl] = a
        return alpha_full, Lam, sig

    def sample(
        self, m: int = 1, n_rows: int | None = None, random_seed: int | None = None
    ) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets, each from a different posterior draw.

        Parameters
        ----------
        m : int, default 1
            Number of synthetic datasets.
        n_rows : int, optional
            Rows of each (default: as many as the training table).
        random_seed : int, optional
            Seed; the same seed gives the same datasets.

        Returns
        -------
        list of pandas.DataFrame
            Same columns, dtypes and category labels as the training table.

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit`.
        bayesynth.errors.InvalidParameterError
            ``m`` or ``n_rows`` below 1, or a bad ``random_seed``.
        """
        m, n_rows = self._sample_args(m, n_rows, random_seed)
        self._check_params()
        n_rows = self.n_rows_ if n_rows is None else n_rows
        rng = np.random.default_rng(random_seed)
        alpha_full, Lam, sig = self._posterior_draws()
        picks = select_draws(Lam.shape[0], m, rng)  # distinct draws where possible
        margins = getattr(self, "level_margins_", {})
        calibrate = self.categorical == "model" and self.categorical_margins == "data" and margins
        out = []
        for s in picks:
            alpha = alpha_full[s]
            if calibrate:
                alpha = calibrated_intercepts(rng, alpha, Lam[s], sig[s], self._blocks, margins)
            out.append(self._one(rng, alpha, Lam[s], sig[s], int(n_rows)))
        return out

    def _one(self, rng: np.random.Generator, alpha_full: np.ndarray, Lam: np.ndarray,
             sig: np.ndarray, n_rows: int) -> pd.DataFrame:
        blocks = self._blocks
        codes = None
        if self._blocks and self.categorical == "empirical":
            if self.combos_ is None:
                raise SchemaError("categorical='empirical' needs the real data's level "
                                  "combinations, which were not kept: fit with "
                                  "categorical='empirical'.")
            pick = rng.choice(len(self.combo_probs_), size=n_rows, p=self.combo_probs_)
            codes = self.combos_[pick]
        z, codes = draw_latent(rng, alpha_full, Lam, sig, blocks, n_rows, codes=codes,
                               max_tries=self.max_tries, n_sweeps=self.n_sweeps)
        sd = np.sqrt((Lam**2).sum(axis=1) + sig**2)
        frame = self._decode(z, codes, sd)
        partial = [c for c in getattr(self, "partial_columns_", []) if c in frame]
        if partial:
            # A column observed for only some records (missing values, special codes, rules)
            # has its marginal estimated from those records, whose latent values are not a
            # N(0, Omega_jj) sample but that law conditional on being observed. So the values
            # shown are read off the ranks of the latent values among the synthetic records
            # that show a value, as the rank likelihood reads the real ones.
            # Likewise a missingness indicator of a column a rule fixes for some records is
            # read off its ranks among the records the rule leaves free.
            ruled = finish(frame, self.schema_)
            shown, free = {}, {}
            for c in partial:
                col = self.schema_[c]
                free[c] = ~rule_mask(ruled, self.schema_.rules, c)
                m = free[c].copy()
                if col.special_codes:
                    m &= ~ruled[c].isin(list(col.special_codes)).to_numpy()
                shown[c] = m  # missing values are taken out in _decode
            frame = self._decode(z, codes, sd, shown=shown, free=free)
        targets = getattr(self, "targets_", [])
        if targets:
            # The targets were fitted on the real table, where the rules hold and dates are
            # days: condition them on the released values, in the same units.
            pre = [r for r in self.schema_.rules if r.column in frame
                   and all(c in frame for c, _ in r.when)]
            if pre:
                frame = apply_rules(frame, pre)
        for tm in targets:
            vals = tm.synthesize(rng, as_numbers(frame), self.target_draw)
            col = self.schema_[tm.name]
            if col.type in ("binary", "ordinal"):
                vals = np.array(col.levels, dtype=object)[vals.astype(np.int64)]
            frame[tm.name] = _restore(vals, col)
        # rules enforced exactly, derived columns computed (the model leaves both out)
        return finish(frame, self.schema_)

    def _decode(self, z: np.ndarray, codes: np.ndarray, sd: np.ndarray,
                shown: dict[str, np.ndarray] | None = None,
                free: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
        cols: dict[str, Any] = {}
        special: dict[str, np.ndarray] = {}
        for b_i, b in enumerate(self._blocks):
            labels = np.array(list(b.levels) + [None], dtype=object)
            vals = labels[codes[:, b_i]]
            if b.name.endswith("[code]") and b.name[:-6] in self.schema_:
                special[b.name[:-6]] = vals  # "value" or the text of a special code
                continue
            vals[np.array([lv == MISSING_LEVEL for lv in b.levels])[codes[:, b_i]]] = None
            cols[b.name] = vals
        missing: dict[str, np.ndarray] = {}
        for o in self._ordered:  # missingness first: it decides which records show a value
            if o.kind != "missing":
                continue
            u = ndtr(z[:, o.latent] / sd[o.latent])
            r = None if free is None else free.get(o.name)
            if r is not None and r.any() and not r.all():
                u = _ranks_within(u, z[:, o.latent], r)
            missing[o.name] = self.marginals_[f"{o.name}[missing]"].ppf(u) > 0.5
        for o in self._ordered:
            if o.kind == "missing":
                continue
            u = ndtr(z[:, o.latent] / sd[o.latent])
            col = self.schema_[o.name]
            m = None if shown is None else shown.get(o.name)
            if m is not None and o.name in missing:
                m = m & ~missing[o.name]
            if m is not None and m.any():
                u = _ranks_within(u, z[:, o.latent], m)
            y = self.marginals_[o.name].ppf(u)
            if col.type in ("binary", "ordinal"):
                y = np.array(col.levels, dtype=object)[y.astype(np.int64)]
            elif o.name in special:
                y = np.asarray(y, dtype=float).copy()
                for c in col.special_codes:
                    y[special[o.name] == str(c)] = float(c)
            cols[o.name] = y
        out = {}
        for name in [n for n in self.schema_.names if n in cols]:
            v = cols[name]
            if name in missing:
                v = np.array(v, dtype=object if v.dtype == object else float)
                v[missing[name]] = None if v.dtype == object else np.nan
            out[name] = _restore(v, self.schema_[name])
        return pd.DataFrame(out)

    # ---------------------------------------------------------------------------- save/load

    def _state(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "bayesynth_version": _version(),
            "params": {
                "n_factors": self.n_factors,
                "categorical": self.categorical,
                "categorical_margins": self.categorical_margins,
                "categorical_likelihood": self.categorical_likelihood,
                "continuous": self.continuous,
                "draws": self.draws,
                "tune": self.tune,
                "chains": self.chains,
                "max_extensions": self.max_extensions,
                "random_seed": self.random_seed,
                "max_tries": self.max_tries,
                "n_sweeps": self.n_sweeps,
                "target_draw": self.target_draw,
                "bart_m": self.bart_m,
                "marginal_group": self.marginal_group,
            },
            "schema": self.schema_.to_dict(),
            "n_rows": self.n_rows_,
            "latent_names": self.latent_names_,
            "blocks": [{"name": b.name, "latent": b.latent.tolist(), "levels": list(b.levels),
                        "likelihood": b.likelihood, "reference": b.reference}
                       for b in self._blocks],
            "ordered": [{"name": o.name, "latent": o.latent, "kind": o.kind}
                        for o in self._ordered],
            "marginals": {k: v.to_dict() for k, v in self.marginals_.items()},
            "partial_columns": list(getattr(self, "partial_columns_", [])),
            "level_margins": dict(getattr(self, "level_margins_", {})),
            "combos": None if self.combos_ is None else self.combos_.tolist(),
            "combo_probs": None if self.combo_probs_ is None else self.combo_probs_.tolist(),
            "targets": [{"name": tm.name, "design": tm.design.to_dict(),
                         "marginal": tm.marginal.to_dict()}
                        for tm in getattr(self, "targets_", [])],
        }

    def _json_params(self) -> dict[str, Any]:
        return self._state()["params"]

    def _write(self, directory: Path) -> None:
        """Write ``posterior.nc``, ``target_<j>.nc`` and ``synthesizer.json`` (see the class)."""
        state = self._state()
        self.idata_.to_netcdf(str(directory / "posterior.nc"), engine="h5netcdf")
        for j, tm in enumerate(getattr(self, "targets_", [])):
            tm.to_dataset().to_netcdf(directory / f"target_{j}.nc", engine="h5netcdf")
        (directory / "synthesizer.json").write_text(json.dumps(state, indent=1))

    @classmethod
    def _legacy_meta(cls, directory: Path) -> dict[str, Any] | None:
        """Recognise a directory saved before ``meta.json`` (``synthesizer.json`` alone)."""
        p = directory / "synthesizer.json"
        if directory.is_dir() and not (directory / "meta.json").exists() and p.is_file():
            try:
                state = json.loads(p.read_text())
            except json.JSONDecodeError:
                return None
            if isinstance(state, dict) and state.get("format") == _FORMAT:
                return {"class": cls.__name__, "module": cls.__module__, "format_version": 1,
                        "params": state.get("params", {})}
        return None

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any) -> CopulaSynthesizer:
        """Rebuild the fitted synthesizer from the files :meth:`_write` wrote."""
        path = Path(directory)
        meta_path = path / "synthesizer.json"
        if not meta_path.exists():
            raise SchemaError(f"'{path}' is not a saved CopulaSynthesizer (no synthesizer.json).")
        state = json.loads(meta_path.read_text())
        if state.get("format") != _FORMAT:
            raise SchemaError(f"'{meta_path}' is not a CopulaSynthesizer file.")
        params = state["params"]
        obj = cls(
            Schema.from_dict(state["schema"]),
            n_factors=params["n_factors"],
            categorical=params["categorical"],
            # saved before the option existed: the model's own frequencies, as then
            categorical_margins=params.get("categorical_margins", "model"),
            categorical_likelihood=params.get("categorical_likelihood", "rpl"),
            continuous=params.get("continuous", "rank"),
            draws=params["draws"],
            tune=params["tune"],
            chains=params["chains"],
            max_extensions=params.get("max_extensions", 0),
            random_seed=params["random_seed"],
            max_tries=params.get("max_tries", 2000),
            n_sweeps=params["n_sweeps"],
            marginal_group=params.get("marginal_group"),
        )
        obj.idata_ = read_idata(path, "posterior.nc")
        obj.convergence_table_ = None
        obj.schema_ = obj.schema
        obj.n_rows_ = int(state["n_rows"])
        obj.latent_names_ = list(state["latent_names"])
        obj._blocks = [_Block(b["name"], np.asarray(b["latent"], dtype=np.int64),
                              tuple(b["levels"]), b.get("likelihood", "rpl"),
                              int(b.get("reference", -1))) for b in state["blocks"]]
        obj._ordered = [_Ordered(o["name"], int(o["latent"]), o["kind"])
                        for o in state["ordered"]]
        obj.marginals_ = {k: marginal_from_dict(v) for k, v in state["marginals"].items()}
        obj.partial_columns_ = list(state.get("partial_columns", []))
        obj.level_margins_ = dict(state.get("level_margins", {}))
        if state.get("combos") is None:
            obj.combos_ = obj.combo_probs_ = None
        else:
            obj.combos_ = np.asarray(state["combos"], dtype=np.int64).reshape(
                len(state["combo_probs"]), -1)
            obj.combo_probs_ = np.asarray(state["combo_probs"], float)
        obj.targets_ = []
        for j, t in enumerate(state.get("targets", [])):
            with xr.open_dataset(path / f"target_{j}.nc", engine="h5netcdf") as ds:
                obj.targets_.append(TargetModel.from_parts(
                    t["name"], t["design"], marginal_from_dict(t["marginal"]), ds.load()))
        obj.targets = [t.name for t in obj.targets_]
        obj.target_draw = params.get("target_draw", "proper")
        post = getattr(obj.idata_, "posterior", None)
        n_latent = len(obj.latent_names_)
        if post is None or "Lambda" not in post or int(post["Lambda"].shape[-2]) != n_latent:
            raise SchemaError(f"'{path}': posterior.nc does not belong to this synthesizer (it "
                              f"should have {n_latent} latent columns); save the synthesizer "
                              "again from the fitted object.")
        return obj
