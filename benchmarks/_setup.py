"""The common start of every benchmark script: one BLAS thread, and the repository on the path.

Import it before anything that loads NumPy (``import _setup  # noqa: F401``, followed by an
``# isort: split`` line): OpenBLAS, MKL and OpenMP read their thread counts once, when they
load. Figures in ``benchmarks/README.md`` are measured with one BLAS thread per process, as
``bayesynth.sample`` runs its chains: the sampler's products are tall and thin, and they get
slower, not faster, with a second thread on the two cores this project is measured on. A
variable the caller has set already is left alone, so ``OPENBLAS_NUM_THREADS=2 python ...``
still measures two threads.

The repository root and this folder go on ``sys.path``, so the scripts import the checkout's
``bayesynth`` (also where it is not installed) and each other (``real_data``,
``quantity_estimator``) from any working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

for _name in THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")

for _path in (str(HERE), str(ROOT)):  # ROOT ends up first
    if _path not in sys.path:
        sys.path.insert(0, _path)
