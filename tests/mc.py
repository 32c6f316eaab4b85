"""Shared Monte Carlo helpers for the statistical tests.

Tolerances are Monte Carlo standard errors, never hand-loosened constants: a chain's mean is
compared with a known value at ``z`` standard errors, the standard error computed from the
chain's effective sample size (ArviZ's bulk ESS).
"""

from __future__ import annotations

import arviz as az
import numpy as np

#: Standard errors a Monte Carlo estimate may be from its known value (a two-sided test at
#: about 7e-6 per comparison, so a suite of a few hundred comparisons rarely fails by chance).
Z = 4.5


def mcse_mean(chain: np.ndarray) -> float:
    """Return the Monte Carlo standard error of the mean of a chain (ESS-based).

    Parameters
    ----------
    chain : numpy.ndarray, shape (draws,) or (chains, draws)
        Draws of one scalar quantity.

    Returns
    -------
    float
        ``sd / sqrt(ESS)``.
    """
    x = np.atleast_2d(np.asarray(chain, dtype=float))
    ess = float(az.ess(x))
    return float(np.std(x)) / np.sqrt(ess)


def assert_mc_close(chain: np.ndarray, value: float, *, sd: float | None = None,
                    z: float = Z, extra: float = 0.0) -> None:
    """Assert that the mean of ``chain`` is within ``z`` Monte Carlo standard errors of ``value``.

    Parameters
    ----------
    chain : numpy.ndarray, shape (draws,) or (chains, draws)
        Draws of one scalar quantity.
    value : float
        The known answer.
    sd : float, optional
        The known posterior sd (the chain's sd is used otherwise).
    z : float
        Number of standard errors allowed.
    extra : float
        An additional, separately justified error (e.g. quadrature error of the known value).
    """
    x = np.atleast_2d(np.asarray(chain, dtype=float))
    ess = float(az.ess(x))
    s = float(np.std(x)) if sd is None else sd
    se = s / np.sqrt(ess)
    err = abs(float(x.mean()) - value)
    assert err <= z * se + extra, (
        f"mean {x.mean():.6g} vs known {value:.6g}: error {err:.3g} > {z} x MCSE {se:.3g}"
        f" + {extra:.3g} (ESS {ess:.0f})"
    )


# ------------------------------------------------------------ simulation-based calibration
# Set-ups of every model factory for bayesynth.evaluation.simulation_based_calibration, shared
# by tests/statistical/test_sbc.py (small) and benchmarks/sbc.py (larger).

#: Family-wise level of an SBC run's uniformity tests (Bonferroni over its quantities). Seeds
#: are fixed, so a run passes or fails deterministically; with a new seed a correct sampler
#: fails with probability at most this.
SBC_LEVEL = 0.001

#: Factories with an SBC set-up in :func:`sbc_problem`.
SBC_FACTORIES = ("rank_probit_copula", "negative_binomial", "linear_regression",
                 "beta_mixture", "saturated_pig", "latent_class_dp", "bart_rank_regression")

#: Extra sampler arguments per factory (BART's f has a record dim, left out of traces unless
#: asked for).
SBC_SAMPLE_KWARGS = {"bart_rank_regression": {"keep_latent": True}}


def sbc_problem(factory: str, *, n: int = 30, mutate: float = 1.0, seed: int = 0):
    """Return the :class:`~bayesynth.evaluation.calibration.SBCProblem` of one factory.

    Parameters
    ----------
    factory : str
        One of :data:`SBC_FACTORIES`.
    n : int
        Records (rows) of each simulated dataset.
    mutate : float
        Multiply the prior scales of the *simulation* (not of the fitted model) by this: 1 is
        the correct set-up; 2 doubles them, a miscalibration the test should find where the
        prior matters. Copula: intercept and residual scales; negative binomial: log mu and
        dispersion scales; regression: all three; Beta mixture: the log shapes; saturated PIG:
        the sd of the cell multipliers; latent class: the Dirichlet level probabilities
        (concentration divided by mutate^2); BART: the leaf sd.
    seed : int
        Seed of the template table (covariates, the copula's template).

    Returns
    -------
    SBCProblem
    """
    import pandas as pd
    import pymc as pm

    from bayesynth.evaluation.calibration import SBCProblem, copula_sbc_problem
    from bayesynth.models import (
        latent_class_dp_model,
        saturated_count_model,
    )
    from bayesynth.models.pseudo_posterior import (
        beta_mixture,
        linear_regression,
        negative_binomial,
    )
    from bayesynth.privacy import NoisyMarginal

    r = np.random.default_rng(seed)
    k = float(mutate)
    if factory == "rank_probit_copula":
        df = pd.DataFrame({"a": r.normal(size=n), "b": r.normal(size=n),
                           "c": (r.random(n) < 0.3).astype(int)})  # level 0 the reference
        good = copula_sbc_problem(df, n_factors=2)
        if k == 1:
            return good
        bad = copula_sbc_problem(df, n_factors=2, alpha_sigma=k, b_sigma=0.3 * k**2)
        return good._replace(model=bad.model)
    if factory == "negative_binomial":
        def cond(d):
            return negative_binomial(d["y"])
        return SBCProblem(negative_binomial(np.arange(n), log_mu_sigma=2.0 * k,
                                            alpha_sigma=10.0 * k), cond, ["log_mu", "alpha"])
    if factory == "linear_regression":
        X = pd.DataFrame({"x": r.normal(size=n), "y": 0.0})
        kw = dict(response="y", predictors=["x"])

        def cond(d):
            return linear_regression(X.assign(y=d["y"]), intercept_sigma=2.0, beta_sigma=2.0,
                                     sigma_sigma=1.0, **kw)
        return SBCProblem(linear_regression(X, intercept_sigma=2.0 * k, beta_sigma=2.0 * k,
                                            sigma_sigma=1.0 * k, **kw),
                          cond, ["intercept", "beta", "sigma"])
    if factory == "beta_mixture":
        # One component: with two, pi and the shapes are identified only up to label switching.
        def cond(d):
            # Beta draws with small shapes can round to exactly 0 or 1 in double precision.
            return beta_mixture(np.clip(d["x"], 1e-12, 1 - 1e-12), n_components=1)
        return SBCProblem(beta_mixture(np.full(n, 0.5), n_components=1, shape_sigma=1.5 * k),
                          cond, ["log_a", "log_b"])
    if factory == "saturated_pig":
        # The only family with a parameter to infer: each cell's multiplier nu (Wald, mean 1,
        # variance sigma); the others have no unknowns given the table.
        table = np.array([[5, 0, 2], [1, 7, 3]])
        fit = saturated_count_model(table, family="pig", sigma=0.5, alpha=0.5)
        if k == 1:
            return SBCProblem(fit, ["counts"], ["nu"])
        sim = saturated_count_model(table, family="pig", sigma=0.5 * k**2, alpha=0.5)
        return SBCProblem(sim, lambda d: pm.observe(fit, {"counts": d["counts"]}), ["nu"])
    if factory == "latent_class_dp":
        domain = {"a": [0, 1], "b": [0, 1]}

        def build(noisy, psi_prior=1.0):
            table = NoisyMarginal(("a", "b"), np.asarray(noisy).reshape(2, 2), 2.0, 2.0)
            return latent_class_dp_model([table], domain=domain, n=n, k=2,
                                         psi_prior=psi_prior)
        # the true counts M_t0 are a multinomial draw: SBC ranks the cell probabilities
        return SBCProblem(build(np.zeros(4, int), psi_prior=1.0 / k**2),
                          lambda d: build(d["noisy_t0"]), ["P_t0"])
    if factory == "bart_rank_regression":
        return _bart_problem(n, k, r)
    raise ValueError(f"unknown factory {factory!r}; one of {SBC_FACTORIES}")


def _bart_problem(n: int, k: float, r: np.random.Generator, m: int = 20):
    """SBC set-up of the BART rank regression with a hand-written BART prior simulator.

    pymc-bart cannot draw from its prior (its random draws are the mean of Y before fitting),
    so trees are grown here by the prior of Chipman et al. (2010) as pymc-bart states it: a node
    at depth d splits with probability 0.95 (1 + d)^-2 at a value drawn uniformly among the
    node's covariate values, leaves are N(0, leaf_sd^2) with pymc-bart's initial
    leaf_sd = sd(Y) / sqrt(m) (Y: normal scores, sd about 1). This is an approximation of what
    pymc-bart samples: it adapts leaf_sd and the split-variable weights during tuning, and draws
    leaf values as the mean residual / m plus N(0, leaf_sd^2) rather than from their conditional
    posterior. The response is tied in groups of three so that the rank likelihood applies
    (untied values get the normal-scores plug-in), and the rank likelihood with ties is itself
    not the likelihood of tied data. A failing run therefore points at one of these
    approximations as much as at bayesynth's latent-data step.
    """
    import pandas as pd

    from bayesynth.evaluation.calibration import SBCProblem
    from bayesynth.models import bart_rank_regression

    x = np.sort(r.uniform(-2.0, 2.0, n))
    leaf_sd = k / np.sqrt(m)
    a_sigma, b_sigma = 1.0, 0.3

    def grow(idx, depth, rng, f):
        if len(idx) >= 2 and rng.random() < 0.95 * (1.0 + depth) ** -2.0:
            values = np.unique(x[idx])
            if len(values) >= 2:
                cut = values[rng.integers(len(values) - 1)]
                grow(idx[x[idx] <= cut], depth + 1, rng, f)
                grow(idx[x[idx] > cut], depth + 1, rng, f)
                return
        f[idx] += rng.normal(0.0, leaf_sd)

    def simulate(rng):
        f = np.zeros(n)
        for _ in range(m):
            grow(np.arange(n), 0, rng, f)
        prec = rng.gamma(a_sigma, 1.0 / b_sigma)
        z = f + rng.normal(0.0, prec**-0.5, n)
        y = np.argsort(np.argsort(z)) // 3  # rank groups of three: fewer than half distinct
        return {"f": f, "sigma": np.asarray(prec**-0.5)}, pd.DataFrame({"x": x, "y": y})

    def condition(df):
        return bart_rank_regression(df, "y", ["x"], m=m, a_sigma=a_sigma, b_sigma=b_sigma)

    def quantities(v):
        # The rank likelihood pins the latent scale down only through the prior, and pymc-bart
        # adapts its leaf sd while tuning, so sigma and f themselves are not comparable with
        # the simulation's; rank scale-free quantities: the signal share R2 and f on the
        # standardised latent scale (what synthesis maps back through the marginal).
        f, s = np.asarray(v["f"]), np.asarray(v["sigma"])
        var_f = f.var(axis=1)
        sd = np.sqrt(var_f + s**2)
        centred = f - f.mean(axis=1, keepdims=True)
        return {"R2": var_f / sd**2, "f_std[x low]": centred[:, n // 4] / sd,
                "f_std[x high]": centred[:, 3 * n // 4] / sd}

    return SBCProblem(simulate, condition, quantities)


def assert_calibrated(result, level: float = SBC_LEVEL) -> None:
    """Assert that an SBC run's ranks are uniform for every quantity (Bonferroni at ``level``).

    Parameters
    ----------
    result : bayesynth.evaluation.SBCResult
    level : float
    """
    failures = result.failures(level)
    assert not failures, (f"SBC ranks not uniform at family-wise level {level} for "
                          f"{failures}:\n{result.summary()}")
