"""bayesynth: Bayesian synthetic data and statistical disclosure control on PyMC.

Data flow: DataFrame + :class:`Schema` -> model factory (:mod:`bayesynth.models`) ->
:func:`sample` with the custom steps of :mod:`bayesynth.samplers` -> posterior ->
synthesizer (:mod:`bayesynth.synthesis`) -> synthetic DataFrames -> :mod:`bayesynth.evaluation`.
The data types every stage shares sit beside them: :class:`Schema` and :class:`Rule`
(:mod:`bayesynth.schema`, :mod:`bayesynth.rules`) and the sparse contingency tables of
:mod:`bayesynth.tables`.
"""

import os as _os
import sys as _sys
from ctypes.util import find_library as _find_library
from importlib.metadata import PackageNotFoundError, version


def _configure_pytensor_blas() -> None:
    """Give PyTensor explicit BLAS link flags before it is first imported.

    Where a system BLAS exists, link it (``-lblas``); where none does, say so (empty flags) so
    that PyTensor uses NumPy's BLAS through its C API without a warning at every compile. The
    heavy linear algebra of bayesynth runs in NumPy either way. A user's own ``blas__ldflags``
    setting always wins, and nothing changes once PyTensor is imported.
    """
    flags = _os.environ.get("PYTENSOR_FLAGS", "")
    if "pytensor" in _sys.modules or "blas__ldflags" in flags:
        return
    ld = "-lblas" if _find_library("blas") else ""
    _os.environ["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"blas__ldflags={ld}") if f)
    if not ld:
        import logging

        # PyTensor logs that it falls back to NumPy's BLAS; that is the intended set-up here.
        logging.getLogger("pytensor.tensor.blas").setLevel(logging.ERROR)


_configure_pytensor_blas()

from bayesynth import errors  # noqa: E402  (after the BLAS set-up)
from bayesynth.rules import Rule  # noqa: E402
from bayesynth.schema import ColumnSchema, Schema, infer_schema, validate_data  # noqa: E402

try:
    __version__ = version("bayesynth")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

from bayesynth import (  # noqa: E402
    datasets,
    evaluation,
    experiments,
    models,
    privacy,
    samplers,
    synthesis,
    tables,
)
from bayesynth.samplers import sample, steps  # noqa: E402
from bayesynth.synthesis import (  # noqa: E402
    CartSynthesizer,
    CopulaSynthesizer,
    RankLikelihoodSynthesizer,
)

__all__ = [
    "__version__",
    "Schema",
    "ColumnSchema",
    "infer_schema",
    "validate_data",
    "Rule",
    "sample",
    "steps",
    "CopulaSynthesizer",
    "RankLikelihoodSynthesizer",
    "CartSynthesizer",
    "privacy",
    "models",
    "samplers",
    "synthesis",
    "evaluation",
    "datasets",
    "tables",
    "experiments",
    "errors",
]
