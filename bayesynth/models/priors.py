"""Priors swappable by name: one mechanism for every model factory.

Each factory documents its swappable names and their defaults, and takes ``priors=``, a mapping
from a name to a callable ``(name, dims) -> random variable`` that builds the replacement inside
the model being built::

    import pymc as pm
    bs.models.rank_probit_copula(df, priors={
        "alpha": lambda name, dims: pm.StudentT(name, nu=4, mu=0, sigma=1, dims=dims)})

A name the factory does not know is an error that lists the valid ones. bayesynth's conjugate
steps apply to the default priors only; where a replacement turns one off,
:func:`bayesynth.steps` says so and PyMC's own step methods sample that variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pymc as pm

from bayesynth.errors import InvalidParameterError

__all__ = ["PriorFactory", "Priors"]

#: ``(name, dims) -> random variable``, called inside the model being built.
PriorFactory = Callable[[str, tuple[str, ...]], Any]


class Priors:
    """The prior replacements given to one factory, checked against its swappable names.

    Parameters
    ----------
    factory : str
        The factory's name (for messages).
    given : mapping of str to callable, optional
        The user's ``priors=``.
    swappable : mapping of str to str
        Each swappable name and a description of its default prior.

    Raises
    ------
    bayesynth.errors.InvalidParameterError
        A name the factory does not know (the message lists the valid ones and their
        defaults), or a replacement that is not callable.
    """

    def __init__(self, factory: str, given: Mapping[str, PriorFactory] | None,
                 swappable: Mapping[str, str]):
        self.factory = factory
        self.swappable = dict(swappable)
        self.given = dict(given or {})
        unknown = sorted(set(self.given) - set(self.swappable))
        if unknown:
            valid = "; ".join(f"{k}: {v}" for k, v in self.swappable.items()) or "none"
            raise InvalidParameterError(
                f"{factory}: priors= names {unknown}, which it does not have. Swappable "
                f"priors (and their defaults): {valid}.", column="priors")
        for name, fn in self.given.items():
            if not callable(fn):
                raise InvalidParameterError(
                    f"{factory}: priors['{name}'] must be a callable (name, dims) -> random "
                    f"variable; got {type(fn).__name__}.", column="priors")

    def __contains__(self, name: object) -> bool:
        return name in self.given

    def get(self, name: str, rv_name: str, dims: tuple[str, ...] | str | None,
            default: Callable[[], Any]) -> Any:
        """Return the prior of ``name``: the user's replacement or ``default()``.

        Call it inside the model's context.

        Parameters
        ----------
        name : str
            The swappable prior's name.
        rv_name : str
            Name the replacement must give its model variable.
        dims : str, tuple of str or None
            Dims passed to the replacement (as a tuple).
        default : callable
            Builds the default prior (called with no arguments) when ``name`` was not replaced.

        Returns
        -------
        object
            The replacement's random variable, or whatever ``default()`` returns.

        Raises
        ------
        bayesynth.errors.InvalidParameterError
            The replacement did not create a model variable called ``rv_name``.
        """
        if name not in self.given:
            return default()
        dims_t = (dims,) if isinstance(dims, str) else tuple(dims or ())
        rv = self.given[name](rv_name, dims_t)
        model = pm.modelcontext(None)
        if rv_name not in model.named_vars or model[rv_name] is not rv:
            raise InvalidParameterError(
                f"{self.factory}: priors['{name}'] must create a model variable named "
                f"'{rv_name}' (it is called with that name); it returned {rv!r}.",
                column="priors")
        return rv
