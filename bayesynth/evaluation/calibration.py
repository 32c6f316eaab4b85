"""Simulation-based calibration (SBC) of a model factory and its sampler (Talts et al. 2018).

If parameters are drawn from the prior, a dataset is drawn from the likelihood given them, and
L draws are taken from the exact posterior given that dataset, then the rank of the true value of
any scalar function of the parameters among the L posterior draws is uniform on {0, ..., L}. A
rank histogram that is not flat shows that the posterior the sampler returns is not the posterior
of the model that simulated the data: a bug in a log-density, in a custom Gibbs step, in a
prior's implementation, or a chain that has not converged or is too autocorrelated (thin it).
The shape says which: a U shape means the posterior is too narrow (or the chain too
autocorrelated), a hump too wide, a slope biased.

:class:`SBCResult` tests each quantity three ways (Pearson's chi-square over bins, the
Kolmogorov-Smirnov distance of the ECDF, and a dispersion test aimed at the U and hump shapes)
and combines them by Bonferroni. SBC's power grows with the replicates, not with L: a few dozen
replicates find gross errors (a reversed ordering, a prior at the wrong scale where the prior
matters, a log-density off by a factor); a posterior too narrow by a factor of 1.4 needs about a
hundred. Where the data dominate the prior, an error in a prior scale barely changes the
posterior, and no affordable SBC run sees it.

:func:`simulation_based_calibration` is the generic loop; :func:`copula_sbc_problem` sets the
loop up for :func:`bayesynth.models.rank_probit_copula`, whose data enter the model through its
latent layout rather than through an observed variable.

References
----------
Talts, S., Betancourt, M., Simpson, D., Vehtari, A. and Gelman, A. (2018). Validating Bayesian
inference algorithms with simulation-based calibration. arXiv:1804.06788.
Säilynoja, T., Bürkner, P.-C. and Vehtari, A. (2022). Graphical test for discrete uniformity and
its applications in goodness-of-fit evaluation and multiple sample comparison. *Statistics and
Computing*, 32, 32.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
from scipy import stats

from bayesynth.errors import BayesynthError, InvalidParameterError

#: R-hat above which :meth:`SBCResult.summary` counts a replicate as badly mixed (Vehtari et
#: al. 2021's threshold, as :func:`bayesynth.sample`'s own check).
RHAT_LIMIT = 1.01

__all__ = [
    "simulation_based_calibration",
    "SBCResult",
    "SBCProblem",
    "copula_sbc_problem",
    "copula_table",
    "N_DISPERSION_NULL",
]

#: A function of named parameter arrays (each with a leading draw axis of length S) returning
#: scalar quantities, each an array of shape (S,), by label.
QuantityFunction = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


#: Monte Carlo draws of the null distribution of the dispersion statistic.
N_DISPERSION_NULL = 100_000


@functools.lru_cache(maxsize=32)
def _dispersion_null(n_sims: int) -> np.ndarray:
    """Sorted null draws of mean((u - 1/2)^2) over ``n_sims`` uniforms (fixed seed 0)."""
    rng = np.random.default_rng(0)
    chunk = max(1, 2_000_000 // max(n_sims, 1))
    out = []
    for start in range(0, N_DISPERSION_NULL, chunk):
        size = min(chunk, N_DISPERSION_NULL - start)
        out.append(((rng.random((size, n_sims)) - 0.5) ** 2).mean(axis=1))
    return np.sort(np.concatenate(out))


# ------------------------------------------------------------------------------------ result


@dataclass
class SBCResult:
    """Ranks of the true values among posterior draws, replicate by replicate, and their tests.

    Attributes
    ----------
    ranks : pandas.DataFrame
        One row per replicate, one column per scalar quantity: the number of the ``n_draws``
        kept posterior draws below the true value (ties broken at random), in 0 .. n_draws.
    n_draws : int
        L, the kept posterior draws per replicate (all chains, after thinning).
    pit : pandas.DataFrame
        Randomised fractional ranks ``(rank + U) / (L + 1)`` with U ~ Uniform(0, 1): exactly
        Uniform(0, 1) when the ranks are uniform, so continuous tests apply without a
        correction for the discreteness of the ranks.
    truth, posterior_mean, posterior_sd : pandas.DataFrame
        The true value of each quantity and its posterior mean and sd, per replicate (for
        z-scores ``(mean - truth) / sd`` and posterior contraction).
    ess : pandas.DataFrame
        Bulk effective sample size of the kept draws, per replicate and quantity. Well below
        ``n_draws`` means autocorrelated draws, which bend the rank histogram into a U shape
        whatever the posterior: thin more.
    replicates : pandas.DataFrame
        Per replicate: the sampler's seed, seconds, divergences (when the sampler reports
        them) and ``max_rhat``, the largest rank-normalised R-hat of the quantities over the
        kept draws (NaN with one chain). SBC judges the sampler over all replicates; these
        columns show which replicates it mixed badly on, where a per-replicate warning would
        not.
    n_rejected : int
        Simulated datasets the conditioning step rejected (see
        :func:`simulation_based_calibration`).
    settings : dict
        The arguments of the run.
    """

    ranks: pd.DataFrame
    n_draws: int
    pit: pd.DataFrame
    truth: pd.DataFrame
    posterior_mean: pd.DataFrame
    posterior_sd: pd.DataFrame
    ess: pd.DataFrame
    replicates: pd.DataFrame
    n_rejected: int = 0
    settings: dict = field(default_factory=dict)

    @property
    def quantities(self) -> list[str]:
        """Labels of the scalar quantities tested."""
        return list(self.ranks.columns)

    @property
    def n_sims(self) -> int:
        """Number of replicates."""
        return len(self.ranks)

    def default_bins(self) -> int:
        """Bins of the chi-square test and the histograms: ``n_sims / 5``, between 2 and 20.

        About five expected replicates per bin. When the number does not divide the L + 1 rank
        values evenly the bins differ in width by one rank value, and each bin's expected count
        is its exact share (see :meth:`chi2_test`; the histograms draw the expected counts as a
        line).

        Returns
        -------
        int
        """
        return int(max(2, min(20, self.n_sims // 5, self.n_draws + 1)))

    def _bin_probabilities(self, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """Bin edges over the integer ranks 0..L and each bin's probability under uniformity."""
        edges = np.unique(np.floor(np.linspace(0, self.n_draws + 1, bins + 1)).astype(int))
        probs = np.diff(edges) / (self.n_draws + 1)
        return edges, probs

    def chi2_test(self, bins: int | None = None) -> pd.DataFrame:
        """Pearson's chi-square test of uniform ranks, per quantity.

        The ranks 0..L are grouped into ``bins`` bins of (nearly) equal width; each bin's
        expected count is ``n_sims`` times its exact share of the L + 1 rank values.

        Parameters
        ----------
        bins : int, optional
            Default :meth:`default_bins`.

        Returns
        -------
        pandas.DataFrame
            Columns ``chi2``, ``df`` and ``p_chi2``, one row per quantity.
        """
        edges, probs = self._bin_probabilities(bins or self.default_bins())
        out = {}
        for q in self.quantities:
            counts = np.histogram(self.ranks[q].to_numpy(), bins=edges)[0]
            expected = self.n_sims * probs
            chi2 = float(((counts - expected) ** 2 / expected).sum())
            dof = len(probs) - 1
            out[q] = {"chi2": chi2, "df": dof, "p_chi2": float(stats.chi2.sf(chi2, dof))}
        return pd.DataFrame(out).T.astype({"chi2": float, "df": int, "p_chi2": float})

    def ecdf_test(self) -> pd.Series:
        """Kolmogorov-Smirnov test of the randomised fractional ranks, per quantity.

        The largest difference between the empirical CDF of :attr:`pit` and the uniform CDF,
        with the exact p-value (SciPy): the ECDF-difference view of Säilynoja et al. (2022) as
        a single number per quantity, sensitive to a shifted or a too wide or too narrow
        posterior, which a coarse histogram may miss.

        Returns
        -------
        pandas.Series
            The p-value of each quantity.
        """
        return pd.Series({q: float(stats.kstest(self.pit[q].to_numpy(), "uniform").pvalue)
                          for q in self.quantities}, name="p_ecdf")

    def dispersion_test(self) -> pd.DataFrame:
        """Test of the spread of the ranks, the commonest failure's signature.

        A posterior too narrow (or draws too autocorrelated) puts the true values in the tails
        of the draws, a U-shaped histogram; one too wide puts them in the middle, a hump. The
        statistic is ``12 mean((u - 1/2)^2)`` over the randomised fractional ranks u
        (:attr:`pit`): 1 under uniformity, above 1 for a U shape, below 1 for a hump. Its
        two-sided p-value comes from the exact null distribution, estimated once per
        ``n_sims`` from :data:`N_DISPERSION_NULL` simulated samples (fixed seed), so it is
        valid for any number of replicates (resolution about 1e-5). Against this alternative
        it is much more powerful than the chi-square and ECDF tests, which spread their power
        over every shape.

        Returns
        -------
        pandas.DataFrame
            Columns ``dispersion`` (the statistic) and ``p_dispersion``, one row per quantity.
        """
        null = _dispersion_null(self.n_sims)
        N = len(null)
        out = {}
        for q in self.quantities:
            m = float(((self.pit[q].to_numpy() - 0.5) ** 2).mean())
            upper = N - np.searchsorted(null, m, side="left")
            lower = np.searchsorted(null, m, side="right")
            p = min(1.0, 2 * (min(upper, lower) + 1) / (N + 1))
            out[q] = {"dispersion": 12 * m, "p_dispersion": p}
        return pd.DataFrame(out).T.astype(float)

    def table(self, bins: int | None = None) -> pd.DataFrame:
        """Summarise every quantity: rank moments, both tests and mixing.

        Parameters
        ----------
        bins : int, optional
            Bins of the chi-square test (default :meth:`default_bins`).

        Returns
        -------
        pandas.DataFrame
            One row per quantity: ``mean_rank`` and ``sd_rank`` of ``rank / L`` (0.5 and about
            0.289 under uniformity; a small sd means too wide a posterior, a large one too
            narrow), ``chi2``, ``p_chi2``, ``p_ecdf``, ``dispersion`` and ``p_dispersion``
            (:meth:`dispersion_test`), ``p`` (the smallest of the three p-values times 3, a
            Bonferroni correction over the three tests), ``mean_z`` (mean posterior z-score of
            the truth), ``contraction`` (1 - posterior variance / prior variance of the truths)
            and ``ess_ratio`` (median ESS of the kept draws over L).
        """
        scaled = self.ranks / max(self.n_draws, 1)
        chi = self.chi2_test(bins)
        p_ecdf = self.ecdf_test()
        disp = self.dispersion_test()
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (self.posterior_mean - self.truth) / self.posterior_sd
            prior_var = self.truth.var(ddof=1)
            contraction = 1 - (self.posterior_sd ** 2).mean() / prior_var
        out = pd.DataFrame({
            "mean_rank": scaled.mean(),
            "sd_rank": scaled.std(ddof=1),
            "chi2": chi["chi2"],
            "p_chi2": chi["p_chi2"],
            "p_ecdf": p_ecdf,
            "dispersion": disp["dispersion"],
            "p_dispersion": disp["p_dispersion"],
        })
        out["p"] = np.minimum(1.0, 3 * out[["p_chi2", "p_ecdf", "p_dispersion"]].min(axis=1))
        out["mean_z"] = z.mean()
        out["contraction"] = contraction
        out["ess_ratio"] = self.ess.median() / max(self.n_draws, 1)
        return out

    def failures(self, level: float = 0.001, bins: int | None = None) -> list[str]:
        """Quantities whose ranks are not uniform at family-wise ``level``.

        A quantity fails when its combined p-value (:meth:`table`, column ``p``) is below
        ``level / n_quantities`` (Bonferroni over the quantities): under a correct posterior
        the chance that any quantity fails is at most ``level``.

        Parameters
        ----------
        level : float, default 0.001
        bins : int, optional

        Returns
        -------
        list of str
            Empty when the ranks are consistent with uniformity.
        """
        p = self.table(bins)["p"]
        return [q for q in self.quantities if p[q] < level / len(self.quantities)]

    def summary(self, bins: int | None = None) -> str:
        """Return a printable summary: settings, then :meth:`table`.

        Parameters
        ----------
        bins : int, optional

        Returns
        -------
        str
        """
        s = self.settings
        head = (f"SBC: {self.n_sims} replicates, L = {self.n_draws} draws each "
                f"(thin {s.get('thin')}, tune {s.get('tune')}, chains {s.get('chains')}), "
                f"{self.n_rejected} datasets rejected, "
                f"{self.replicates['seconds'].sum():.1f} s sampling")
        rhat = self.replicates.get("max_rhat")
        if rhat is not None and rhat.notna().any():
            head += (f", {int((rhat > RHAT_LIMIT).sum())} replicates with a quantity's R-hat "
                     f"above {RHAT_LIMIT} (largest {rhat.max():.3f})")
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            return head + "\n" + self.table(bins).round(4).to_string()

    def plot(self, bins: int | None = None, *, ncols: int = 4, band: float = 0.99):
        """Draw a rank histogram per quantity with the band a uniform histogram stays in.

        The grey band is the central ``band`` interval of each bin's count under uniform ranks
        (binomial), as in Talts et al. (2018, figure 3): about ``1 - band`` of the bins of a
        calibrated quantity fall outside it by chance.

        Parameters
        ----------
        bins : int, optional
            Default :meth:`default_bins`.
        ncols : int, default 4
        band : float, default 0.99

        Returns
        -------
        matplotlib.figure.Figure
        """
        import matplotlib.pyplot as plt

        edges, probs = self._bin_probabilities(bins or self.default_bins())
        qs = self.quantities
        ncols = max(1, min(ncols, len(qs)))
        nrows = int(np.ceil(len(qs) / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.4 * nrows),
                                 squeeze=False)
        p = self.table(bins)["p"]
        lo = stats.binom.ppf((1 - band) / 2, self.n_sims, probs)
        hi = stats.binom.ppf(1 - (1 - band) / 2, self.n_sims, probs)
        for ax, q in zip(axes.ravel(), qs):
            counts = np.histogram(self.ranks[q].to_numpy(), bins=edges)[0]
            ax.fill_between(edges, np.r_[lo, lo[-1]], np.r_[hi, hi[-1]], step="post",
                            color="0.85", lw=0)
            ax.stairs(counts, edges, fill=True, color="#6fa8dc", alpha=0.9)
            ax.stairs(self.n_sims * probs, edges, color="0.4", lw=0.8)
            ax.set_title(f"{q}\np = {p[q]:.3g}", fontsize=8)
            ax.set_xlim(0, self.n_draws + 1)
            ax.tick_params(labelsize=7)
        for ax in axes.ravel()[len(qs):]:
            ax.set_visible(False)
        fig.supxlabel(f"rank of the true value among L = {self.n_draws} posterior draws",
                      fontsize=8)
        fig.tight_layout()
        return fig

    def __repr__(self) -> str:
        return (f"SBCResult({self.n_sims} replicates, L={self.n_draws}, "
                f"{len(self.quantities)} quantities, failures at 0.001: "
                f"{self.failures(0.001)})")


# ------------------------------------------------------------------------------- main loop


def _labels(name: str, dims: Sequence[str], coords: Mapping[str, Sequence], shape: tuple
            ) -> list[str]:
    """Label every element of a variable in C order, e.g. ``C[a, b]``."""
    if not shape:
        return [name]
    axes = []
    for d, size in zip(dims, shape):
        values = list(coords[d]) if d in coords and len(coords[d]) == size else range(size)
        axes.append([str(v) for v in values])
    grid = np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(shape), -1).T
    return [f"{name}[{', '.join(row)}]" for row in grid]


def _named_quantities(names: Sequence[str], dims: Mapping[str, Sequence[str]],
                      coords: Mapping[str, Sequence]) -> QuantityFunction:
    """Every scalar element of each named variable, labelled by its coordinates."""
    def f(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for name in names:
            if name not in values:
                raise InvalidParameterError(
                    f"quantity '{name}' is not among the variables ({sorted(values)}); is it "
                    "stored in the trace (bayesynth.sample leaves out per-record variables "
                    "unless keep_latent=True)?", column="quantities")
            arr = np.asarray(values[name], dtype=float)
            flat = arr.reshape(arr.shape[0], -1)
            labels = _labels(name, dims.get(name, ()), coords, arr.shape[1:])
            out.update(zip(labels, flat.T))
        return out

    return f


def _default_sampler(model, *, draws, tune, chains, random_seed, **kwargs):
    from bayesynth.samplers import sample

    kwargs.setdefault("progressbar", False)
    # SBC judges the sampler over every replicate (ranks, ESS and R-hat per replicate are in
    # the result); a warning per replicate would be noise, and its judgement costs time
    kwargs.setdefault("check_convergence", False)
    return sample(model, draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                  **kwargs)


@contextlib.contextmanager
def _quiet():
    """Silence PyMC's per-run log lines and its note that potentials are not sampled."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Pp]otential.*")
            warnings.filterwarnings("ignore", message=".*ArviZ is undergoing.*")
            yield
    finally:
        logger.setLevel(level)


def _prior_simulator(model: pm.Model) -> tuple[Callable, dict, dict]:
    """Draw (truth, data) pairs from a model's prior predictive, a batch at a time."""
    dims = {k: tuple(v or ()) for k, v in model.named_vars_to_dims.items()}
    coords = {k: list(v) for k, v in model.coords.items() if v is not None}

    def batches(rng: np.random.Generator, size: int):
        while True:
            with _quiet():
                idata = pm.sample_prior_predictive(draws=size, model=model, random_seed=rng)
            groups = [idata[g] for g in ("prior", "prior_predictive") if g in idata.groups()]
            for d in range(size):
                values = {}
                for ds in groups:
                    for name, da in ds.data_vars.items():
                        values[name] = np.asarray(da.values[0, d])
                yield values, values

    return batches, dims, coords


def simulation_based_calibration(
    model: pm.Model | Callable[[np.random.Generator], tuple[Mapping[str, Any], Any]],
    condition: Sequence[str] | Callable[[Any], pm.Model | None],
    quantities: Sequence[str] | QuantityFunction,
    *,
    n_sims: int = 100,
    draws: int = 99,
    thin: int = 1,
    tune: int = 500,
    chains: int = 1,
    sampler: Callable[..., az.InferenceData] | None = None,
    sample_kwargs: Mapping[str, Any] | None = None,
    max_rejections: int | None = None,
    random_seed: int | None = None,
    progress: bool = False,
) -> SBCResult:
    """Run simulation-based calibration: rank true parameters among posterior draws.

    For each of ``n_sims`` replicates: draw parameters and a dataset from the prior
    predictive distribution, condition the model on that dataset, sample its posterior
    (``chains`` chains of ``draws * thin`` draws after ``tune``, every ``thin``-th kept: L =
    ``chains * draws`` draws), and record, for every scalar quantity, the number of kept draws
    below the true value. Under a correct model implementation and sampler the ranks are
    uniform on 0..L (Talts et al. 2018); :class:`SBCResult` tests that and plots them.

    How the model is conditioned on a simulated dataset depends on how the factory takes its
    data, so it is an argument:

    * **Observe** (``condition`` a list of variable names): the simulated values of those
      *free* variables are observed with :func:`pymc.observe` on ``model`` itself. For models
      whose data is a free variable of the generative model, e.g. the synthetic table
      ``counts`` of :func:`bayesynth.models.saturated_count_model`, whose ``pig`` family has a
      latent multiplier ``nu`` per cell to infer.
    * **Rebuild** (``condition`` a function): the factory is called again on the simulated
      dataset. Needed where the data do not enter as a free variable: an observed variable
      whose data are a constant (the pseudo-posterior base models, the latent class model), or
      data that shape the model's structure (the copula, whose ranks and levels become the
      constraint set of its latent data; see :func:`copula_sbc_problem`). The function may
      return ``None`` to reject a dataset it cannot, or should not, be fitted to (a constant
      column; a dataset whose most frequent level differs, which would change the copula's
      reference level and so the meaning of its parameters). A rejection that depends on the
      data alone leaves the ranks uniform: the posterior given the data is unchanged, only the
      distribution of the datasets is restricted.

    Parameters
    ----------
    model : pymc.Model or callable
        The generative model: its prior predictive distribution (:func:`pymc.sample_prior_
        predictive`, drawn in batches) gives the true values and the dataset, both as the dict
        of every variable's value in one draw (potentials are not sampled there: right where
        the potential is the likelihood, as in the copula, wrong where it shapes the prior). Or
        a simulator ``f(rng) -> (truth, data)``, where ``truth`` maps names to true values
        and ``data`` is passed to ``condition`` (for a prior PyMC cannot draw from, such as
        BART's trees).
    condition : sequence of str or callable
        Names of free variables of ``model`` to observe, or ``condition(data) -> pymc.Model or
        None`` (see above).
    quantities : sequence of str or callable
        Names of variables in the truth and the posterior (every scalar element of each is a
        quantity, labelled ``name[coord, ...]``), or a function ``f(values) -> {label:
        array}`` mapping variable arrays with a leading draw axis of length S to arrays of
        shape (S,): use it for functions of several variables and for the identified
        quantities of a model with unidentified parameters (never rank the copula's loadings,
        whose rotation is free).
    n_sims : int, default 100
        Replicates.
    draws : int, default 99
        Kept draws per chain after thinning (L = chains x draws; with 99 the ranks take 100
        values, which divide into 5, 10, 20 ... bins evenly).
    thin : int, default 1
        Keep every ``thin``-th draw; choose it so that the kept draws are roughly independent
        (:attr:`SBCResult.ess` close to L), as Talts et al. require.
    tune : int, default 500
        Tuning or burn-in iterations per chain.
    chains : int, default 1
    sampler : callable, optional
        ``sampler(model, draws=, tune=, chains=, random_seed=, **sample_kwargs)`` returning
        an InferenceData with a ``posterior`` group; default :func:`bayesynth.sample` (the
        copula's Gibbs steps, pymc-bart's for BART, the latent class steps, PyMC's NUTS
        elsewhere), without a progress bar.
    sample_kwargs : mapping, optional
        More keyword arguments for the sampler (``keep_latent=True`` to rank per-record
        variables).
    max_rejections : int, optional
        Most datasets ``condition`` may reject before the run stops (default ``10 * n_sims``).
    random_seed : int, optional
        Seeds the simulation, the samplers (one seed per replicate) and the tie-breaking: the
        same seed gives the same result.
    progress : bool, default False
        Print one line per replicate.

    Returns
    -------
    SBCResult

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        Bad arguments, too many rejections, or quantities whose labels change between
        replicates (the conditioned model's parameterisation changed: reject such datasets).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesynth.models.pseudo_posterior import negative_binomial
    >>> template = negative_binomial(np.arange(20))
    >>> result = simulation_based_calibration(
    ...     template, lambda d: negative_binomial(d["y"]), ["log_mu", "alpha"],
    ...     n_sims=5, draws=19, thin=2, tune=100, random_seed=1)  # doctest: +SKIP
    >>> result.failures(level=0.001)  # doctest: +SKIP
    []
    """
    for label, value, low in (("n_sims", n_sims, 1), ("draws", draws, 1), ("thin", thin, 1),
                              ("chains", chains, 1), ("tune", tune, 0)):
        if int(value) != value or value < low:
            raise InvalidParameterError(f"{label} must be an integer of at least {low}; got "
                                        f"{value!r}.", column=label)
    max_rejections = 10 * n_sims if max_rejections is None else int(max_rejections)
    seeds = np.random.SeedSequence(random_seed)
    sim_ss, sampler_ss, tie_ss = seeds.spawn(3)
    sim_rng = np.random.default_rng(sim_ss)
    sampler_seeds = np.random.default_rng(sampler_ss).integers(0, 2**31 - 1, size=n_sims)
    tie_rng = np.random.default_rng(tie_ss)
    sampler = _default_sampler if sampler is None else sampler
    kwargs = dict(sample_kwargs or {})

    if isinstance(model, pm.Model):
        batches, dims, coords = _prior_simulator(model)
        stream = batches(sim_rng, n_sims)
        simulate = lambda: next(stream)  # noqa: E731
    elif callable(model):
        dims, coords = {}, {}
        simulate = lambda: model(sim_rng)  # noqa: E731
    else:
        raise InvalidParameterError("model must be a pymc.Model or a simulator function "
                                    "f(rng) -> (truth, data).", column="model")
    if isinstance(condition, str) or not callable(condition):
        names = [condition] if isinstance(condition, str) else list(condition)
        if not isinstance(model, pm.Model):
            raise InvalidParameterError("Observing by name needs model to be a pymc.Model; "
                                        "give condition as a function.", column="condition")
        free = {rv.name for rv in model.free_RVs}
        bad = [n for n in names if n not in free]
        if bad:
            raise InvalidParameterError(
                f"condition names {bad}, which are not free variables of the model (free: "
                f"{sorted(free)}); observed data must be replaced by rebuilding the model: give "
                "condition as a function.", column="condition")

        def observe(values, _names=tuple(names)):
            return pm.observe(model, {n: values[n] for n in _names})

        condition = observe

    rows: list[dict] = []
    labels: list[str] | None = None
    out = {k: [] for k in ("ranks", "truth", "mean", "sd", "ess")}
    rejected = 0
    i = 0
    start = time.perf_counter()
    while len(rows) < n_sims:
        truth_values, data = simulate()
        with _quiet():
            cond = condition(data)
        if cond is None:
            rejected += 1
            if rejected > max_rejections:
                raise InvalidParameterError(
                    f"condition rejected {rejected} simulated datasets (max_rejections="
                    f"{max_rejections}) after {len(rows)} replicates; simulate datasets it "
                    "accepts more often.", column="condition")
            continue
        if not isinstance(quantities, str) and not callable(quantities):
            qdims = {**dims, **{k: tuple(v or ()) for k, v in
                                cond.named_vars_to_dims.items()}}
            qcoords = {**coords, **{k: list(v) for k, v in cond.coords.items()
                                    if v is not None}}
            qfun = _named_quantities(list(quantities), qdims, qcoords)
        elif isinstance(quantities, str):
            qfun = _named_quantities([quantities], dims, coords)
        else:
            qfun = quantities
        seed = int(sampler_seeds[i])
        i += 1
        t0 = time.perf_counter()
        with _quiet():
            idata = sampler(cond, draws=draws * thin, tune=tune, chains=chains,
                            random_seed=seed, **kwargs)
        seconds = time.perf_counter() - t0
        post = idata.posterior.isel(draw=slice(thin - 1, None, thin))
        n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
        pvals = {name: np.asarray(da.transpose("chain", "draw", ...).values).reshape(
            n_chain * n_draw, *da.shape[2:]) for name, da in post.data_vars.items()}
        tvals = {name: np.asarray(v)[None, ...] for name, v in truth_values.items()}
        q_true = {k: np.asarray(v, dtype=float).reshape(-1) for k, v in qfun(tvals).items()}
        q_post = {k: np.asarray(v, dtype=float).reshape(-1) for k, v in qfun(pvals).items()}
        if labels is None:
            labels = list(q_true)
            if not labels:
                raise InvalidParameterError("quantities gave no scalar quantity.",
                                            column="quantities")
        if list(q_true) != labels or list(q_post) != labels:
            raise InvalidParameterError(
                f"The quantities' labels changed in replicate {len(rows)} ({list(q_post)[:5]} "
                f"... instead of {labels[:5]} ...): the conditioned model is parameterised "
                "differently for this dataset; make condition reject such datasets.",
                column="quantities")
        L = n_chain * n_draw
        ranks, ess, rhat = {}, {}, []
        for q in labels:
            x, t = q_post[q], float(q_true[q][0])
            below = int(np.sum(x < t))
            ties = int(np.sum(x == t))
            ranks[q] = below + (int(tie_rng.integers(0, ties + 1)) if ties else 0)
            chain_x = x.reshape(n_chain, n_draw)
            ess[q] = float(az.ess(chain_x)) if n_draw >= 4 and np.ptp(x) > 0 else np.nan
            if n_chain >= 2 and n_draw >= 4 and np.ptp(x) > 0:
                rhat.append(float(az.rhat(chain_x)))
        div = (int(idata.sample_stats["diverging"].sum()) if "sample_stats" in idata.groups()
               and "diverging" in idata.sample_stats else 0)
        rows.append({"seed": seed, "seconds": seconds, "divergences": div,
                     # an R-hat that could not be computed counts as the worst
                     "max_rhat": max((np.inf if np.isnan(v) else v for v in rhat),
                                     default=np.nan), "L": L})
        out["ranks"].append(ranks)
        out["truth"].append({q: float(q_true[q][0]) for q in labels})
        out["mean"].append({q: float(q_post[q].mean()) for q in labels})
        out["sd"].append({q: float(q_post[q].std(ddof=1)) if L > 1 else np.nan for q in labels})
        out["ess"].append(ess)
        if progress:
            print(f"SBC replicate {len(rows)}/{n_sims}: {seconds:.1f} s, {rejected} rejected "
                  f"so far", flush=True)
    Ls = {r["L"] for r in rows}
    if len(Ls) != 1:
        raise InvalidParameterError(f"The sampler returned different numbers of draws {Ls}.",
                                    column="sampler")
    L = Ls.pop()
    ranks = pd.DataFrame(out["ranks"], columns=labels).astype(int)
    u = tie_rng.random(ranks.shape)
    pit = (ranks + u) / (L + 1)
    return SBCResult(
        ranks=ranks,
        n_draws=L,
        pit=pit,
        truth=pd.DataFrame(out["truth"], columns=labels),
        posterior_mean=pd.DataFrame(out["mean"], columns=labels),
        posterior_sd=pd.DataFrame(out["sd"], columns=labels),
        ess=pd.DataFrame(out["ess"], columns=labels),
        replicates=pd.DataFrame(rows).drop(columns="L"),
        n_rejected=rejected,
        settings={"n_sims": n_sims, "draws": draws, "thin": thin, "tune": tune,
                  "chains": chains, "random_seed": random_seed,
                  "seconds_total": time.perf_counter() - start,
                  "sample_kwargs": dict(kwargs)},
    )


# ----------------------------------------------------------------------------------- copula


class SBCProblem(NamedTuple):
    """A generative model, its conditioning step and its quantities.

    In the order :func:`simulation_based_calibration` takes them:
    ``simulation_based_calibration(*problem, n_sims=...)``.

    Attributes
    ----------
    model : pymc.Model or callable
        The generative model, or a simulator ``f(rng) -> (truth, data)``.
    condition : sequence of str or callable
    quantities : sequence of str or callable
    """

    model: pm.Model | Callable[[np.random.Generator], tuple[Mapping[str, Any], Any]]
    condition: Sequence[str] | Callable[[Any], pm.Model | None]
    quantities: Sequence[str] | QuantityFunction


def copula_table(layout, z: np.ndarray, template: pd.DataFrame) -> pd.DataFrame:
    """Turn latent data of the copula into the table they imply.

    Ordered columns take the latent values themselves (any increasing transform would do: the
    rank likelihood sees only their order); a multinomial-probit variable takes the level whose
    utility is largest, the reference level where none is positive.

    Parameters
    ----------
    layout : bayesynth.models.LatentLayout
        The layout of the model that drew ``z``.
    z : numpy.ndarray, shape (n, p*)
        Latent data.
    template : pandas.DataFrame
        A table with the model's columns (for their order and dtypes).

    Returns
    -------
    pandas.DataFrame
    """
    from bayesynth.models.layout import mnp_levels

    out = {}
    for o in layout.ordered:
        out[o.name] = z[:, o.latent]
    for b in layout.categorical:
        pos = mnp_levels(z[:, b.latent])
        col_levels = np.asarray(b.column_levels)
        codes = np.where(pos >= 0, col_levels[np.maximum(pos, 0)], b.reference)
        values = np.asarray(b.levels, dtype=object)[codes]
        out[b.name] = pd.Series(values).astype(template[b.name].dtype).to_numpy()
    return pd.DataFrame({c: out[c] for c in template.columns})


def copula_sbc_problem(data: pd.DataFrame, schema=None, *, level_probabilities: bool = True,
                       n_mc: int = 2000, **factory_kwargs: Any) -> SBCProblem:
    """Set up simulation-based calibration of :func:`bayesynth.models.rank_probit_copula`.

    The copula's data are not an observed variable: the ranks of the ordered columns and the
    levels of the categorical ones define the constraint set of the latent data ``z``
    (a potential). So the generative model is the copula built on ``data`` (its prior
    predictive draws the parameters and latent data from the factor model, ignoring the
    constraint, which is the likelihood), each simulated dataset is the table those latent data
    imply (:func:`copula_table`), and conditioning rebuilds the copula on that table with the
    same settings (the same number of factors). A dataset is rejected when the rebuilt model's
    latent columns differ from the template's (a categorical variable whose most frequent level,
    the multinomial probit's reference, changed, or a level that did not occur), so that the
    parameters mean the same thing in the truth and in the posterior.

    The rank likelihood is the exact likelihood of the ranks only for untied values, and the
    default ``continuous="normal_scores"`` replaces it by a plug-in for columns of mostly
    distinct values; so ordered columns are simulated untied (continuous) and
    ``continuous="rank"`` is the default here. Only continuous and unordered categorical or
    binary columns (multinomial probit) are supported.

    The quantities are the identified ones synthesis uses: the correlations ``C`` between
    latent columns of different variables and (``level_probabilities``) each categorical
    variable's implied probability of every level but its reference, computed by Monte Carlo
    with common random numbers (:func:`bayesynth.models.copula_quantities.implied_quantities`,
    a fixed function of the parameters). The loadings are never ranked: their rotation is not
    identified.

    Parameters
    ----------
    data : pandas.DataFrame
        A template table: its columns, types, levels (the most frequent level of each
        categorical variable is the reference) and number of rows.
    schema : Schema, optional
        Inferred when omitted.
    level_probabilities : bool, default True
    n_mc : int, default 2000
        Monte Carlo points of the level probabilities.
    **factory_kwargs
        Passed to :func:`~bayesynth.models.rank_probit_copula` on the template and on every
        simulated table (``n_factors`` defaults to the template model's choice, so that it is
        the same for every replicate; ``continuous`` defaults to ``"rank"``).

    Returns
    -------
    SBCProblem

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        A column type the simulation does not support.
    """
    from bayesynth.models import get_layout, rank_probit_copula
    from bayesynth.models.copula_quantities import (
        CopulaBlocks,
        between_variable_pairs,
        implied_quantities,
    )
    from bayesynth.schema import infer_schema

    schema = infer_schema(data) if schema is None else schema
    factory_kwargs.setdefault("continuous", "rank")
    if factory_kwargs.get("categorical_likelihood", "mnp") != "mnp":
        raise InvalidParameterError(
            "copula_sbc_problem supports the multinomial probit only: the 'rpl' likelihood is "
            "not a probability model of the levels (its regions do not cover the latent "
            "space), so no dataset can be simulated from it.", column="categorical_likelihood")
    if schema.rules or schema.derived:
        raise InvalidParameterError(
            "copula_sbc_problem simulates tables without rules or derived columns (a rule's "
            "records and a formula's column are not modelled); give a schema without them.",
            column="schema")
    for name in schema.names:
        col = schema[name]
        missing = bool(data[name].isna().any())
        ok = col.type in ("continuous", "categorical", "binary") and not col.special_codes
        if not ok or missing:
            what = f"{col.type}, with missing values" if missing else col.type
            raise InvalidParameterError(
                f"Column '{name}' ({what}) is not supported: simulated ordered columns are "
                "untied continuous values (the rank likelihood with ties is not the likelihood "
                "of the tied data) and no values are missing. Use continuous and unordered "
                "categorical or binary columns.", column=name)
    template = rank_probit_copula(data, schema, **factory_kwargs)
    factory_kwargs.setdefault("n_factors", len(template.coords["factor"]))
    layout = get_layout(template)
    names = list(layout.latent_names)

    def condition(values: Mapping[str, np.ndarray]) -> pm.Model | None:
        table = copula_table(layout, np.asarray(values["z"]), data)
        try:
            model = rank_probit_copula(table, schema, **factory_kwargs)
        except BayesynthError:  # e.g. a constant column
            return None
        return model if list(get_layout(model).latent_names) == names else None

    pair_mask = between_variable_pairs(names, list(layout.level_names))
    pairs = list(zip(*np.nonzero(pair_mask)))
    blocks = CopulaBlocks.from_layout(layout)
    lvl = layout.level_columns
    flat = [(f"P[{b['name']}={lev}]", start + h)
            for start, b in zip(np.cumsum([0] + [len(b["levels"]) for b in blocks.categorical]),
                                blocks.categorical)
            for h, lev in enumerate(b["levels"]) if h != b["reference"]]

    def quantities(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        C = np.asarray(values["C"])
        out = {f"C[{names[a]}, {names[b]}]": C[:, a, b] for a, b in pairs}
        if level_probabilities and len(lvl):
            Lam = np.asarray(values["Lambda"])
            alpha_full = np.zeros((Lam.shape[0], Lam.shape[1]))
            alpha_full[:, lvl] = np.asarray(values["alpha"])
            prob = implied_quantities(alpha_full, Lam, np.asarray(values["sigma"]), blocks,
                                      n_mc=n_mc, pairs=False)["category_prob"]
            out.update({label: prob[:, j] for label, j in flat})
        return out

    return SBCProblem(template, condition, quantities)
