"""BART rank-likelihood regression for key outcomes (Feldman & Kowal 2022, section 5).

Latent ``z_i = f(x_i) + eps_i``, ``eps_i ~ N(0, sigma^2)``, f a sum of regression trees
(pymc-bart's BART). For a binary, ordinal or count response (and a continuous one with
``continuous="rank"`` in the layout) ``z`` obeys the rank likelihood of the observed response:
its order follows the order of ``y`` and ties share a level. A response with mostly distinct
values has ``z`` fixed at its normal scores (the copula's default, ``continuous=
"normal_scores"``), which the rank-likelihood step then leaves in place. Synthetic values are
recovered by ``y = F_hat^-1(G(z))`` with the response's marginal F_hat and the model's marginal
CDF G of the latent values (see :mod:`bayesynth.synthesis.targeted`).

PyMC detail: pymc-bart's particle sampler weighs trees by the model's *observed* log-likelihood,
so the latent ``z`` is a data container (``pm.Data("z", ...)``) observed by
``z_obs ~ N(f, sigma)``; the rank-likelihood step of :mod:`bayesynth.samplers.bart_steps`
redraws it in place each iteration with the copula's truncated-normal kernel. The rank
constraints are registered with the model (:func:`~bayesynth.models.layout.register_layout`)
rather than added as a potential, which pymc-bart would evaluate for every particle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt

from bayesynth.errors import IncompatibleModelError, SchemaError
from bayesynth.models.layout import LatentLayout, register_layout
from bayesynth.models.metadata import attach_metadata, model_metadata
from bayesynth.models.priors import PriorFactory, Priors
from bayesynth.schema import Schema, encode_levels, infer_schema, validate_data

__all__ = ["bart_rank_regression", "BartDesign", "training_matrix", "SWAPPABLE_PRIORS"]

#: Names whose prior a user may replace through ``priors=`` (see :func:`bart_rank_regression`),
#: with their defaults.
SWAPPABLE_PRIORS: dict[str, str] = {
    "sigma": "sigma = prec^-1/2 with prec ~ Gamma(a_sigma, b_sigma), a scalar (conjugate: "
             "the Gibbs step of bayesynth.samplers.bart_steps.RankRegressionGibbs)",
}


@dataclass(frozen=True)
class BartDesign:
    """How a table's predictors become BART's covariate matrix.

    Attributes
    ----------
    predictors : tuple of str
        Source columns, in order.
    kinds : tuple of str
        ``"numeric"`` (values as they are; NaN allowed), ``"categorical"`` (integer codes of
        the schema levels, split by pymc-bart's one-hot rule: one level against the rest) or
        ``"ordered"`` (ordinal and binary columns: level codes in order, split as numbers).
    levels : tuple
        The schema levels of each categorical predictor (``None`` for numeric ones).
    fills : tuple of float, optional
        The value standing for a missing predictor value, set from the training data
        (:meth:`with_fills`): below every observed value (numeric: the minimum less a tenth
        of the range, at least 1; level codes: -1), so that trees can split the records
        with the value missing off from the others, and fitting and synthesis treat them
        alike. pymc-bart itself leaves a record whose split variable is missing out of both
        children and predicts it from whatever its last fit left; the forest sent it right.
        ``None`` (designs saved before) keeps missing values as NaN.
    """

    predictors: tuple[str, ...]
    kinds: tuple[str, ...]
    levels: tuple
    fills: tuple | None = None

    def with_fills(self, df: pd.DataFrame) -> BartDesign:
        """Return the design with the missing-value fills of training table ``df``.

        Parameters
        ----------
        df : pandas.DataFrame
            The training table.

        Returns
        -------
        BartDesign
        """
        raw = BartDesign(self.predictors, self.kinds, self.levels).matrix(df)
        fills = []
        for j, kind in enumerate(self.kinds):
            x = raw[:, j][~np.isnan(raw[:, j])]
            if kind != "numeric":
                fills.append(-1.0)
            elif len(x):
                fills.append(float(np.floor(x.min() - max(1.0, 0.1 * (x.max() - x.min())))))
            else:
                fills.append(0.0)
        return BartDesign(self.predictors, self.kinds, self.levels, tuple(fills))

    @classmethod
    def from_schema(cls, schema: Schema, predictors: Sequence[str]) -> BartDesign:
        """Make the design of ``predictors`` from their types in ``schema``.

        Parameters
        ----------
        schema : Schema
            Column types and levels.
        predictors : sequence of str
            Columns of ``schema``, in the order of the covariate matrix.

        Returns
        -------
        BartDesign
        """
        kinds, levels = [], []
        for p in predictors:
            col = schema[p]
            if col.type in ("categorical", "ordinal", "binary"):
                kinds.append("categorical" if col.type == "categorical" else "ordered")
                levels.append(tuple(col.levels))
            else:
                kinds.append("numeric")
                levels.append(None)
        return cls(tuple(predictors), tuple(kinds), tuple(levels))

    def matrix(self, df: pd.DataFrame) -> np.ndarray:
        """Build the covariate matrix of ``df`` (levels as codes, ordered ones by their rank).

        Parameters
        ----------
        df : pandas.DataFrame
            A table with the predictor columns.

        Returns
        -------
        numpy.ndarray
            Shape ``(len(df), len(predictors))``, float; missing values, and levels the
            design does not know (absent when the target was fitted), are the fills (NaN
            without them).
        """
        out = np.empty((len(df), len(self.predictors)))
        for j, (p, kind, lev) in enumerate(zip(self.predictors, self.kinds, self.levels)):
            if kind == "numeric":
                out[:, j] = df[p].to_numpy(dtype=float, na_value=np.nan)
            else:
                from bayesynth.schema import ColumnSchema, _plain

                # a level the design does not know (absent when the target was fitted) is
                # treated as a missing value
                known = df[p].map(lambda v, lev=set(lev): v if _plain(v) in lev else None)
                codes = encode_levels(known, ColumnSchema(p, "ordinal", lev)).astype(float)
                codes[codes < 0] = np.nan
                out[:, j] = codes
        if self.fills is not None:
            out = np.where(np.isnan(out), np.asarray(self.fills, dtype=float), out)
        return out

    def split_rules(self) -> list:
        """Return pymc-bart's split rule for each predictor.

        Returns
        -------
        list
            ``pymc_bart.OneHotSplitRule`` for categorical predictors,
            ``pymc_bart.ContinuousSplitRule`` for the others.
        """
        import pymc_bart as pmb

        return [pmb.OneHotSplitRule if k == "categorical" else pmb.ContinuousSplitRule
                for k in self.kinds]

    def to_dict(self) -> dict:
        """Return the design as a JSON-ready dict (read back by :meth:`from_dict`).

        Returns
        -------
        dict
            Keys ``predictors``, ``kinds``, ``levels`` and ``fills`` (lists).
        """
        return {"predictors": list(self.predictors), "kinds": list(self.kinds),
                "levels": [list(v) if v is not None else None for v in self.levels],
                "fills": None if self.fills is None else list(self.fills)}

    @classmethod
    def from_dict(cls, d: dict) -> BartDesign:
        """Rebuild a design from :meth:`to_dict`'s output.

        Parameters
        ----------
        d : dict
            Keys ``predictors``, ``kinds`` and ``levels`` (and ``fills``, absent from
            designs saved before).

        Returns
        -------
        BartDesign
        """
        fills = d.get("fills")
        return cls(tuple(d["predictors"]), tuple(d["kinds"]),
                   tuple(tuple(v) if v is not None else None for v in d["levels"]),
                   None if fills is None else tuple(float(v) for v in fills))


def bart_rank_regression(
    data: pd.DataFrame,
    response: str,
    predictors: Sequence[str],
    schema: Schema | None = None,
    *,
    m: int = 200,
    alpha: float = 0.95,
    beta: float = 2.0,
    a_sigma: float = 1.0,
    b_sigma: float = 0.3,
    priors: Mapping[str, PriorFactory] | None = None,
) -> pm.Model:
    """Build the BART rank-likelihood regression of ``response`` on ``predictors``.

    Parameters
    ----------
    data : pandas.DataFrame
        The table (not modified). Rows with a missing response are left out of the fit.
    response : str
        An ordered column (binary, ordinal, count or continuous).
    predictors : sequence of str
        Any columns; categorical ones enter BART as integer codes split one level against the
        rest (pymc-bart's ``OneHotSplitRule``), ordinal and binary ones by their rank, numeric
        ones as they are (missing values allowed).
    schema : Schema, optional
        Inferred when omitted.
    m : int, default 200
        Number of trees.
    alpha, beta : float
        Tree-depth prior of Chipman et al. (2010): a node at depth d splits with probability
        ``alpha (1 + d)^-beta``.
    a_sigma, b_sigma : float
        Shape and rate of the Gamma prior on ``prec = sigma^-2`` (conjugate: a Gibbs step).
    priors : mapping, optional
        Replacement priors by name (:mod:`bayesynth.models.priors`). Swappable name:
        ``"sigma"``, the residual scale (a positive scalar, called with dims ``()``; default
        ``sigma = prec^-1/2`` with ``prec ~ Gamma(a_sigma, b_sigma)``). With a replaced
        ``sigma`` the model has no ``prec``; the latent-data step still redraws ``z`` exactly
        and PyMC's own step (NUTS) samples the scale (:func:`bayesynth.steps` warns).

    Returns
    -------
    pymc.Model
        Data ``z`` (record), the BART variable ``f`` (record), ``prec`` (default prior only)
        and ``sigma``, and the observed ``z_obs``. The covariates are :func:`training_matrix`
        of the model.

    References
    ----------
    Feldman & Kowal (2022), section 5; Chipman, George & McCulloch (2010), BART, *Annals of
    Applied Statistics* 4(1); Quiroga et al. (2022), pymc-bart.
    """
    priors = Priors("bart_rank_regression", priors, SWAPPABLE_PRIORS)
    import pymc_bart as pmb

    schema = infer_schema(data) if schema is None else schema
    validate_data(data, schema)
    predictors = list(predictors)
    if response not in schema:
        raise SchemaError(f"response '{response}' is not a column of the table.",
                          column=response)
    if schema[response].type == "categorical":
        raise SchemaError(
            f"response '{response}' is unordered categorical; the rank likelihood needs an "
            "ordered response (binary, ordinal, count or continuous).", column=response)
    if schema[response].special_codes:
        raise SchemaError(
            f"response '{response}' has special codes {list(schema[response].special_codes)}; "
            "a BART target models one ordered value. Leave the column in the copula (which "
            "gives its codes a categorical variable of their own), or remove the codes from "
            "its schema.", column=response)
    bad = [p for p in predictors if p not in schema or p == response]
    if bad or not predictors:
        raise SchemaError(f"predictors must be other columns of the table; got {bad or '[]'}.")
    keep = data[response].notna().to_numpy()
    df = data.loc[keep]
    # Every response is an ordered column whose latent value rises with y: ordinal ones stay
    # ordered (ordinal_threshold=0), and a binary one is a two-level rank-likelihood column
    # (with categorical_likelihood="mnp" it would be a probit block whose reference is its most
    # frequent level, and its latent value could fall as y rises).
    layout = LatentLayout.from_data(df[[response]], Schema([schema[response]]),
                                    ordinal_threshold=0, categorical_likelihood="rpl")
    design = BartDesign.from_schema(schema, predictors).with_fills(df)
    X = design.matrix(df)
    z0 = layout.initial_z()[:, 0].copy()
    coords = {"record": np.arange(len(df)), "predictor": predictors}
    with pm.Model(coords=coords) as model:
        z = pm.Data("z", z0, dims="record")
        # X is a plain array (missing values filled below the observed ones).
        f = pmb.BART("f", X=X.copy(), Y=z0, m=m, alpha=alpha, beta=beta,
                     split_rules=design.split_rules(), dims="record")

        def default_sigma():
            prec = pm.Gamma("prec", alpha=a_sigma, beta=b_sigma)
            return pm.Deterministic("sigma", 1.0 / pt.sqrt(prec))

        sigma = priors.get("sigma", "sigma", None, default_sigma)
        pm.Normal("z_obs", mu=f, sigma=sigma, observed=z, dims="record")
    register_layout(model, layout)
    attach_metadata("bart_design", X, model)
    # what a synthesizer needs to use this posterior (CopulaSynthesizer.from_posterior)
    attach_metadata("bart_source", {"response": response, "predictors": predictors,
                                    "schema": schema, "design": design,
                                    "values": df[response].copy()}, model)
    return model


def training_matrix(model: pm.Model) -> np.ndarray:
    """Return the covariate matrix a BART rank regression was built with.

    The matrix is as built. (pymc-bart jitters tied whole-number values when PGBART is built;
    bayesynth's PGBART grows its trees on this exact matrix instead, the values synthesis
    predicts at.)

    Parameters
    ----------
    model : pymc.Model
        A model from :func:`bart_rank_regression`.

    Returns
    -------
    numpy.ndarray
        One row per fitted record, one column per predictor.

    Raises
    ------
    bayesynth.errors.IncompatibleModelError
        If the model was not built by :func:`bart_rank_regression`.
    """
    X = model_metadata(model, "bart_design")
    if X is None:
        raise IncompatibleModelError("This model was not built by bart_rank_regression.")
    return X
