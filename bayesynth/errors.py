"""Exceptions raised by bayesynth.

Every error a user can trigger with bad input is one of these classes. Messages name the column or
parameter at fault, what was found, and how to fix it. Data errors subclass :class:`ValueError`;
state errors (using an object before it is ready) subclass :class:`RuntimeError`, so code written
against the standard exceptions keeps working.
"""

from __future__ import annotations

__all__ = [
    "RunStopped",
    "BayesynthError",
    "DataValidationError",
    "InputTypeError",
    "EmptyDataError",
    "TooFewRowsError",
    "ConstantColumnError",
    "IdentifierColumnError",
    "NonFiniteValueError",
    "ColumnTypeError",
    "SchemaError",
    "UnknownColumnTypeError",
    "MissingColumnError",
    "UnknownLevelError",
    "TooManyLevelsError",
    "IncompatibleModelError",
    "NotFittedError",
    "NoPosteriorError",
    "OutputExistsError",
    "InvalidParameterError",
    "PrivacyGuaranteeError",
    "PrivacyWarning",
]


class BayesynthError(Exception):
    """Base class of every bayesynth exception.

    Parameters
    ----------
    message : str
        What went wrong and how to fix it.
    column : str, optional
        The column (or parameter) the error is about, for programmatic handling.
    """

    def __init__(self, message: str, *, column: str | None = None):
        super().__init__(message)
        self.column = column


class DataValidationError(BayesynthError, ValueError):
    """The input table cannot be modelled as given."""


class InputTypeError(DataValidationError, TypeError):
    """The input is not a pandas DataFrame (or a value has the wrong Python type)."""


class EmptyDataError(DataValidationError):
    """The table has no rows or no columns."""


class TooFewRowsError(DataValidationError):
    """The table has fewer rows than a model needs."""


class ConstantColumnError(DataValidationError):
    """A column takes a single value (or is entirely missing)."""


class IdentifierColumnError(DataValidationError):
    """A column of distinct strings: an identifier, which must not be modelled or released."""


class NonFiniteValueError(DataValidationError):
    """A numeric column holds +inf or -inf."""


class ColumnTypeError(DataValidationError):
    """A column's values do not fit the type the schema gives it."""


class UnknownLevelError(DataValidationError):
    """A categorical value that the schema does not list."""


class TooManyLevelsError(DataValidationError):
    """A categorical column with more levels than a model accepts."""


class SchemaError(BayesynthError, ValueError):
    """The schema itself is malformed or does not match the data."""


class UnknownColumnTypeError(SchemaError):
    """A schema names a column type that bayesynth does not know."""


class MissingColumnError(SchemaError):
    """A schema (or a keyword list) names a column that the table does not have."""


class IncompatibleModelError(BayesynthError, ValueError):
    """A custom step method was given a model (or prior) it does not fit.

    :func:`bayesynth.sample` catches this for each block and leaves the variable to PyMC's own
    step methods.
    """


class NotFittedError(BayesynthError, RuntimeError):
    """A synthesizer was asked to sample before :meth:`fit` was called."""


class NoPosteriorError(BayesynthError, NotImplementedError):
    """A synthesizer was asked to synthesize from a posterior it does not have.

    Raised by ``from_posterior`` of methods that are not Bayesian models (CART, the perturbed
    histogram), whose synthesis needs no posterior (the saturated count models), or whose
    posterior is not sampled from a PyMC model (the rank-likelihood baseline). It subclasses
    :class:`NotImplementedError` (a :class:`RuntimeError`).
    """


class OutputExistsError(BayesynthError, RuntimeError):
    """An output path would overwrite the input (or an existing file without permission)."""


class InvalidParameterError(BayesynthError, ValueError):
    """A parameter (not the data) is out of its valid range.

    For example an epsilon that is not positive, an unknown neighbour relation, or a budget
    split that does not add up. The message echoes the value and states the valid range.
    """


class PrivacyGuaranteeError(BayesynthError, ValueError):
    """A differential-privacy mechanism was asked for a release whose guarantee cannot hold.

    For example a model that releases real records, a prior built from the data, or a domain
    read from the data. The message says why and what would make the guarantee hold.
    """


class PrivacyWarning(UserWarning):
    """A release is weaker than it may look.

    For example noise drawn from a fixed seed (anyone who knows the seed can remove it), or a
    guarantee that is local or asymptotic rather than strict.
    """


class RunStopped(BaseException):  # noqa: N818 - a stop, not an error
    """A run was stopped by a signal (SIGTERM or Ctrl-C).

    It derives from ``BaseException``, like ``KeyboardInterrupt``, so that ``except Exception``
    blocks (and PyMC, which ends sampling quietly on ``KeyboardInterrupt``) let it through.
    """

    def __init__(self, signum: int):
        import signal

        self.signum = int(signum)
        super().__init__(f"stopped by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal number."""
        return 128 + self.signum


def is_real(value) -> bool:
    """Return whether ``value`` is a finite real number (a Python or NumPy int or float).

    Booleans, strings, complex numbers, NaN and infinities are not.
    """
    import numpy as np

    return (not isinstance(value, bool)
            and isinstance(value, int | float | np.integer | np.floating)
            and bool(np.isfinite(value)))


def check_integer(value, name: str, least: int) -> int:
    """Return ``value`` as an int, or raise :class:`InvalidParameterError` naming ``name``.

    Booleans are refused (``True`` is an int in Python).
    """
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise InvalidParameterError(f"{name} must be an integer >= {least}; got {value!r}.",
                                    column=name)
    return int(value)
