"""One protocol for every synthesizer: fit, from_posterior, sample, save and load.

Every method of :mod:`bayesynth.synthesis` is a subclass of :class:`Synthesizer`, in the shape
scikit-learn and SDV use: ``__init__`` only stores parameters, :meth:`Synthesizer.fit` sets the
fitted attributes (names ending in ``_``), :meth:`Synthesizer.sample` returns a list of
DataFrames, one per synthetic dataset, each from its own posterior draw where the method has a
posterior ("proper" synthesis). The base class holds what the methods share:

* validation of ``m``, ``n_rows`` and ``random_seed`` (:func:`check_sample_args`), and the
  :class:`~bayesynth.errors.NotFittedError` before ``fit``;
* the choice of posterior draws for the synthetic datasets (:func:`select_draws`);
* persistence: :meth:`Synthesizer.save` writes a directory holding ``meta.json`` (class, format
  version, parameters, bayesynth version) and the method's netCDF files, atomically;
  :meth:`Synthesizer.load` reads ``meta.json`` and hands the directory to the class it names,
  so ``Synthesizer.load(path)`` returns a fitted object of the right class. No pickle: a saved
  directory holds only JSON and netCDF, and loading never imports a module named in a file
  (classes are looked up among the subclasses already defined).
"""

from __future__ import annotations

import abc
import inspect
import json
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr

from bayesynth._io import atomic_write_dir
from bayesynth.errors import (
    BayesynthError,
    InvalidParameterError,
    NoPosteriorError,
    NotFittedError,
    SchemaError,
)
from bayesynth.schema import Schema

__all__ = [
    "Synthesizer",
    "check_sample_args",
    "select_draws",
    "draw_positions",
    "META_FILE",
    "FORMAT",
]

META_FILE = "meta.json"
"""Name of the file that describes a saved synthesizer."""

FORMAT = "bayesynth-synthesizer"
"""Value of ``format`` in :data:`META_FILE`."""

_REGISTRY: dict[tuple[str, str], type[Synthesizer]] = {}


# ------------------------------------------------------------------------------ validation


def _is_integer(x: Any) -> bool:
    if isinstance(x, bool | np.bool_):
        return False
    if isinstance(x, numbers.Integral):
        return True
    return isinstance(x, float | np.floating) and float(x).is_integer()


def check_sample_args(m: Any = 1, n_rows: Any = None, random_seed: Any = None
                      ) -> tuple[int, int | None]:
    """Validate the arguments every :meth:`Synthesizer.sample` takes.

    Parameters
    ----------
    m : int
        Number of synthetic datasets: an integer, at least 1.
    n_rows : int or None
        Records per dataset: ``None`` (the method's default, usually the training size) or an
        integer, at least 1.
    random_seed : None, int, numpy.random.SeedSequence or numpy.random.Generator
        A seed: ``None``, a non-negative integer, a ``SeedSequence`` or a ``Generator``.

    Returns
    -------
    (int, int or None)
        ``m`` and ``n_rows`` as Python integers.

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        Naming the parameter, the value given and the valid range.

    Examples
    --------
    >>> from bayesynth.synthesis import check_sample_args
    >>> check_sample_args(2, None, 1)
    (2, None)
    >>> check_sample_args(0)
    Traceback (most recent call last):
    ...
    bayesynth.errors.InvalidParameterError: m must be an integer >= 1 (the number of synthetic \
datasets); got 0.
    """
    if not _is_integer(m) or m < 1:
        raise InvalidParameterError(
            f"m must be an integer >= 1 (the number of synthetic datasets); got {m!r}.",
            column="m")
    if n_rows is not None and (not _is_integer(n_rows) or n_rows < 1):
        raise InvalidParameterError(
            "n_rows must be None (the method's default size) or an integer >= 1 (records per "
            f"dataset); got {n_rows!r}.", column="n_rows")
    ok_seed = (random_seed is None or isinstance(random_seed, np.random.Generator
                                                 | np.random.SeedSequence)
               or (_is_integer(random_seed) and random_seed >= 0
                   and not isinstance(random_seed, float | np.floating)))
    if not ok_seed:
        raise InvalidParameterError(
            "random_seed must be None, an integer >= 0, a numpy SeedSequence or a numpy "
            f"Generator; got {random_seed!r}.", column="random_seed")
    return int(m), None if n_rows is None else int(n_rows)


# ------------------------------------------------------------------------------ draws


def _n_draws(posterior: Any) -> tuple[int, int]:
    """Return (chains, draws per chain) of a posterior, or (1, S) for a count S."""
    if _is_integer(posterior):
        return 1, int(posterior)
    post = getattr(posterior, "posterior", posterior)
    if not isinstance(post, xr.Dataset | xr.DataArray) or not {"chain", "draw"} <= set(
            post.dims):
        raise InvalidParameterError(
            "posterior must be an InferenceData, an xarray object with dims chain and draw, or "
            f"a number of draws; got {type(posterior).__name__}.", column="posterior")
    return int(post.sizes["chain"]), int(post.sizes["draw"])


def select_draws(posterior: Any, m: int, random_seed: Any = None, *,
                 distinct: str = "where_possible", spacing: str = "random") -> np.ndarray:
    """Choose the posterior draws of ``m`` synthetic datasets, one draw per dataset.

    Draws are numbered in the order of ``posterior.stack(sample=("chain", "draw"))`` (chain by
    chain); :func:`draw_positions` turns the numbers into (chain, draw) positions. The Bayesian
    synthesizers (copula, pseudo posterior, latent class, rank likelihood) all choose their
    draws here, so that the same seed picks the same draws whichever way the synthesizer was
    made (``fit``, ``from_posterior`` or ``load``).

    Parameters
    ----------
    posterior : arviz.InferenceData, xarray.Dataset or int
        The posterior (its ``chain`` and ``draw`` sizes are used), or the number of draws.
    m : int
        Number of synthetic datasets.
    random_seed : None, int, SeedSequence or numpy.random.Generator
        With ``spacing="random"``: the seed, or a generator that is advanced (the synthesizer's
        own, so that later draws depend on the same seed).
    distinct : {"where_possible", "required"}, default "where_possible"
        ``"where_possible"``: distinct draws, repeated only when ``m`` exceeds the number of
        draws. ``"required"``: distinct draws, else an error.
    spacing : {"random", "even"}, default "random"
        ``"random"``: a uniformly random choice (``rng.choice(S, m, replace=m > S)``).
        ``"even"``: evenly spaced over all draws, first and last included (no randomness;
        thins an autocorrelated chain).

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
        Positions in the stacked draws.

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        When ``m`` is not a positive integer, or exceeds the number of draws with
        ``distinct="required"`` or ``spacing="even"``; or an unknown option.

    Examples
    --------
    >>> from bayesynth.synthesis import select_draws
    >>> select_draws(100, 3, random_seed=1).tolist() == select_draws(100, 3, 1).tolist()
    True
    >>> select_draws(5, 3, spacing="even").tolist()
    [0, 2, 4]
    """
    check_sample_args(m)
    if distinct not in ("where_possible", "required"):
        raise InvalidParameterError(f"distinct must be 'where_possible' or 'required'; got "
                                    f"{distinct!r}.", column="distinct")
    if spacing not in ("random", "even"):
        raise InvalidParameterError(f"spacing must be 'random' or 'even'; got {spacing!r}.",
                                    column="spacing")
    chains, draws = _n_draws(posterior)
    S = chains * draws
    m = int(m)
    if S < 1:
        raise InvalidParameterError("The posterior holds no draws.", column="posterior")
    if m > S and (distinct == "required" or spacing == "even"):
        raise InvalidParameterError(
            f"m = {m} datasets need {m} distinct posterior draws; the posterior has {S} "
            f"({chains} chains x {draws} draws). Ask for m <= {S} or sample more draws.",
            column="m")
    if spacing == "even":
        return np.linspace(0, S - 1, m).round().astype(np.int64)
    rng = np.random.default_rng(random_seed)
    return np.asarray(rng.choice(S, size=m, replace=m > S), dtype=np.int64)


def draw_positions(posterior: Any, picks: np.ndarray) -> np.ndarray:
    """Turn positions from :func:`select_draws` into (chain, draw) positions.

    Parameters
    ----------
    posterior : arviz.InferenceData, xarray.Dataset or int
        The posterior the positions refer to.
    picks : numpy.ndarray of int
        Positions in the stacked draws.

    Returns
    -------
    numpy.ndarray of int64, shape (len(picks), 2)
        Integer positions (not labels) along ``chain`` and ``draw``.
    """
    _, draws = _n_draws(posterior)
    picks = np.asarray(picks, dtype=np.int64)
    return np.column_stack([picks // draws, picks % draws])


# ------------------------------------------------------------------------------ JSON


def json_ready(value: Any, name: str = "value") -> Any:
    """Return ``value`` in a form :func:`json.dumps` writes and :func:`from_json` restores.

    Numbers, strings, booleans, None, lists, tuples (as lists), dicts with string keys, numpy
    scalars and arrays (as lists) and :class:`~bayesynth.schema.Schema` objects are accepted.

    Parameters
    ----------
    value : object
    name : str
        The parameter, for the error message.

    Returns
    -------
    object

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        For anything else (a callable, a model ...), naming ``name``.
    """
    if value is None or isinstance(value, bool | str | int | float):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [json_ready(v, name) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [json_ready(v, name) for v in value]
    if isinstance(value, Schema):
        return {"__schema__": value.to_dict()}
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: json_ready(v, f"{name}[{k!r}]") for k, v in value.items()}
    raise InvalidParameterError(
        f"{name} = {value!r} cannot be written as JSON (save() keeps no pickle).", column=name)


def from_json(value: Any) -> Any:
    """Restore what :func:`json_ready` wrote (schemas; lists stay lists).

    Parameters
    ----------
    value : object
        Parsed JSON.

    Returns
    -------
    object
    """
    if isinstance(value, dict):
        if set(value) == {"__schema__"}:
            return Schema.from_dict(value["__schema__"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def _version() -> str:
    from bayesynth import __version__

    return __version__


# ------------------------------------------------------------------------------ the protocol


class Synthesizer(abc.ABC):
    """Base class of every synthesizer: one protocol for every method.

    Subclasses implement :meth:`fit` and :meth:`sample`; a Bayesian method also implements
    :meth:`from_posterior`, and a method that can be saved implements ``_write`` and
    ``_read`` (the files besides ``meta.json``). Everything else is shared.

    Notes
    -----
    ============================  =========================================
    method                        class
    ============================  =========================================
    rank-probit copula (+ BART)   :class:`~bayesynth.synthesis.CopulaSynthesizer`
    pseudo posterior              :class:`~bayesynth.synthesis.PseudoPosteriorSynthesizer`
    saturated count models        :class:`~bayesynth.synthesis.SaturatedCountSynthesizer`
    latent class (private counts) :class:`~bayesynth.synthesis.LatentClassSynthesizer`
    baselines                     :class:`~bayesynth.synthesis.RankLikelihoodSynthesizer`,
                                  :class:`~bayesynth.synthesis.CartSynthesizer`,
                                  :class:`~bayesynth.synthesis.PerturbedHistogramSynthesizer`
    ============================  =========================================

    Examples
    --------
    >>> import bayesynth as bs
    >>> df = bs.datasets.simulate_child_health(n=100, random_seed=0)[["m_race", "mage"]]
    >>> syn = bs.CartSynthesizer(random_seed=1).fit(df)
    >>> out = syn.sample(m=2, n_rows=50, random_seed=2)
    >>> [x.shape for x in out]
    [(50, 2), (50, 2)]
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = bs.synthesis.Synthesizer.load(syn.save(d + "/cart"))
    >>> type(back).__name__
    'CartSynthesizer'
    """

    format_version: ClassVar[int] = 1
    """Version of the files ``save`` writes for this class; ``load`` refuses newer ones."""

    _fitted_attribute: ClassVar[str] = "idata_"
    _no_posterior: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[(cls.__module__, cls.__name__)] = cls

    # -------------------------------------------------------------------------- protocol

    @abc.abstractmethod
    def fit(self, data: Any) -> Synthesizer:
        """Fit the method to the real data and keep what synthesis needs.

        Parameters
        ----------
        data : object
            The real data (a DataFrame for most methods).

        Returns
        -------
        Synthesizer
            ``self``.
        """

    @abc.abstractmethod
    def sample(self, m: int = 1, n_rows: int | None = None,
               random_seed: Any = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets.

        Parameters
        ----------
        m : int, default 1
            Number of synthetic datasets (each from its own posterior draw, where the method
            has a posterior).
        n_rows : int, optional
            Records per dataset (the method's default when omitted).
        random_seed : int, optional
            The same seed gives the same datasets.

        Returns
        -------
        list of pandas.DataFrame
        """

    @classmethod
    def from_posterior(cls, model: Any, idata: Any, **params: Any) -> Synthesizer:
        """Make a synthesizer that draws from a posterior you sampled and inspected; no refit.

        Parameters
        ----------
        model : pymc.Model
            The model the posterior belongs to.
        idata : arviz.InferenceData
            Its posterior.
        **params
            Synthesis settings of the constructor.

        Returns
        -------
        Synthesizer

        Raises
        ------
        bayesynth.errors.NoPosteriorError
            For methods without a posterior to synthesize from (the message says why).
        """
        why = cls._no_posterior or "it does not synthesize from a posterior"
        raise NoPosteriorError(f"{cls.__name__}.from_posterior is not available: {why}.")

    def get_params(self) -> dict[str, Any]:
        """Return the constructor's parameters, as scikit-learn's ``get_params`` does.

        Returns
        -------
        dict
            Parameter name -> the value stored by ``__init__``.
        """
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name, p in sig.parameters.items()
                if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                and hasattr(self, name)}

    # -------------------------------------------------------------------------- shared checks

    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attribute):
            name = type(self).__name__
            raise NotFittedError(
                f"This {name} is not fitted yet. Call fit(data) (or {name}.load(path)"
                f"{'' if self._no_posterior else f', {name}.from_posterior(model, idata)'}) "
                "before sample().")

    def _sample_args(self, m: Any, n_rows: Any, random_seed: Any) -> tuple[int, int | None]:
        """Check that the synthesizer is fitted and validate the arguments of :meth:`sample`."""
        self._check_fitted()
        return check_sample_args(m, n_rows, random_seed)

    # -------------------------------------------------------------------------- persistence

    #: Constructor parameters that only :meth:`fit` uses and that are not saved (callables
    #: such as swapped priors); :meth:`load` leaves them at their defaults.
    _fit_only: ClassVar[tuple[str, ...]] = ()

    def _json_params(self) -> dict[str, Any]:
        """Return the parameters written to ``meta.json`` (override to leave some out)."""
        return {k: json_ready(v, k) for k, v in self.get_params().items()
                if k not in self._fit_only}

    @classmethod
    def _params_from_json(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        return {k: from_json(v) for k, v in params.items()}

    def _write(self, directory: Path) -> None:
        """Write the fitted state (besides ``meta.json``) into ``directory``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be saved.")

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], **kwargs: Any) -> Synthesizer:
        """Rebuild a fitted synthesizer from ``directory`` and its ``meta.json``."""
        raise NotImplementedError(f"{cls.__name__} cannot be loaded.")

    @classmethod
    def _legacy_meta(cls, directory: Path) -> dict[str, Any] | None:
        """Return the meta of a directory saved before ``meta.json`` existed, else None."""
        return None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted synthesizer to the directory ``path``, atomically; no pickle.

        The directory holds ``meta.json`` (``format``, ``format_version``, ``class``,
        ``module``, ``params``, ``bayesynth_version``) and the method's own netCDF and JSON
        files. A reader never sees a half-written directory; an existing one is replaced once
        the new one is complete. The files hold summaries of the confidential data (and for
        some methods the data themselves, as each class documents): keep them as confidential
        as the data.

        Parameters
        ----------
        path : path-like
            The directory.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        bayesynth.errors.NotFittedError
            Before :meth:`fit`.
        """
        self._check_fitted()
        meta = {
            "format": FORMAT,
            "format_version": int(self.format_version),
            "class": type(self).__name__,
            "module": type(self).__module__,
            "params": self._json_params(),
            "bayesynth_version": _version(),
        }
        text = json.dumps(meta, indent=1)  # fails before anything is written

        def write(tmp: Path) -> None:
            self._write(tmp)
            (tmp / META_FILE).write_text(text)

        return atomic_write_dir(path, write)

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs: Any) -> Synthesizer:
        """Read a synthesizer written by :meth:`save`, as an object of the class it was.

        ``Synthesizer.load(path)`` returns whatever class was saved;
        ``CopulaSynthesizer.load(path)`` also checks that it is a copula synthesizer.

        Parameters
        ----------
        path : path-like
            The directory :meth:`save` wrote.
        **kwargs
            Passed to the class's reader (for example ``factory=`` for a pseudo-posterior
            synthesizer whose model factory is not part of bayesynth).

        Returns
        -------
        Synthesizer
            Fitted, ready to :meth:`sample`.

        Raises
        ------
        bayesynth.errors.SchemaError
            If ``path`` does not hold a saved synthesizer, holds another class than ``cls``,
            was written by a newer format, or names a class that is not defined (import the
            module that defines it first).
        bayesynth.errors.InvalidParameterError
            A keyword the class's reader does not take.
        """
        import bayesynth.synthesis  # noqa: F401  (defines and so registers every built-in class)

        path = Path(path)
        meta = cls._read_meta(path)
        key = (str(meta.get("module", "")), str(meta.get("class", "")))
        target = _REGISTRY.get(key)
        if target is None:  # a class moved between modules: match the name alone
            named = [c for (_, n), c in _REGISTRY.items() if n == key[1]]
            target = named[0] if len(named) == 1 else None
        if target is None:
            raise SchemaError(f"'{path}' holds a {key[1]!r} from module {key[0]!r}, which is not "
                              "defined: import the module that defines it, then load again.")
        if not issubclass(target, cls):
            raise SchemaError(f"'{path}' holds a {target.__name__}, not a {cls.__name__}: load "
                              f"it with {target.__name__}.load or Synthesizer.load.")
        version = int(meta.get("format_version", 1))
        if version > target.format_version:
            raise SchemaError(f"'{path}' was written in format version {version} of "
                              f"{target.__name__} (by bayesynth {meta.get('bayesynth_version')})"
                              f"; this bayesynth reads up to version {target.format_version}. "
                              "Upgrade bayesynth.")
        accepted = inspect.signature(target._read).parameters
        unknown = [k for k in kwargs if k not in accepted or accepted[k].kind in (
            inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
        if unknown:
            raise InvalidParameterError(f"{target.__name__}.load takes no keyword {unknown[0]!r}; "
                                        f"got {sorted(kwargs)}.", column=unknown[0])
        try:
            return target._read(path, meta, **kwargs)
        except BayesynthError:  # already says what is wrong
            raise
        except (ValueError, KeyError, IndexError, TypeError, OSError) as err:
            # a damaged or hand-edited file: say which and what to do, not a raw traceback
            raise SchemaError(f"'{path}' could not be read as a {target.__name__} "
                              f"({type(err).__name__}: {err}); a file in it is damaged or was "
                              "edited. Save the synthesizer again from the fitted object."
                              ) from err

    @classmethod
    def _read_meta(cls, path: Path) -> dict[str, Any]:
        meta_path = path / META_FILE
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text())
            except json.JSONDecodeError as err:
                raise SchemaError(f"'{meta_path}' is not valid JSON: {err}.") from err
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise SchemaError(f"'{meta_path}' is not a bayesynth synthesizer file.")
            return meta
        if path.is_dir():
            for klass in list(_REGISTRY.values()):
                legacy = klass._legacy_meta(path)
                if legacy is not None:
                    return legacy
        raise SchemaError(f"'{path}' is not a saved synthesizer (no {META_FILE}).")


def read_json(directory: Path, name: str) -> Any:
    """Read the JSON file ``name`` of a saved directory (a clear error when it is absent).

    Parameters
    ----------
    directory : pathlib.Path
    name : str

    Returns
    -------
    object
    """
    p = Path(directory) / name
    if not p.is_file():
        raise SchemaError(f"'{directory}' is incomplete: {name} is missing.")
    return json.loads(p.read_text())


def write_json(directory: Path, name: str, value: Any) -> None:
    """Write ``value`` as the JSON file ``name`` of a directory being saved.

    Parameters
    ----------
    directory : pathlib.Path
    name : str
    value : object
        Anything :func:`json_ready` accepts.
    """
    (Path(directory) / name).write_text(json.dumps(json_ready(value, name), indent=1))


def read_netcdf(directory: Path, name: str) -> xr.Dataset:
    """Read the netCDF file ``name`` of a saved directory fully into memory (file closed).

    Parameters
    ----------
    directory : pathlib.Path
    name : str

    Returns
    -------
    xarray.Dataset
    """
    p = Path(directory) / name
    if not p.is_file():
        raise SchemaError(f"'{directory}' is incomplete: {name} is missing.")
    with xr.open_dataset(p, engine="h5netcdf") as ds:
        return ds.load()


def read_idata(directory: Path, name: str = "posterior.nc") -> Any:
    """Read an InferenceData saved as ``name`` fully into memory.

    Parameters
    ----------
    directory : pathlib.Path
    name : str, default "posterior.nc"

    Returns
    -------
    arviz.InferenceData
    """
    import arviz as az

    p = Path(directory) / name
    if not p.is_file():
        raise SchemaError(f"'{directory}' is incomplete: {name} is missing.")
    with az.rc_context({"data.load": "eager"}):  # read now and close: a later save may
        return az.from_netcdf(str(p), engine="h5netcdf")  # replace the file
