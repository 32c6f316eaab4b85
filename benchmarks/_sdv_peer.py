"""SDV's synthesizers on a training table: a helper run by ``real_data.py``.

SDV needs PyTorch (through CTGAN), so bayesynth does not depend on it; ``make peers``
installs it into ``.venv-peers`` (PyTorch's CPU build). Run with that interpreter::

    .venv-peers/bin/python benchmarks/_sdv_peer.py train.csv spec.json out_dir

``spec.json`` holds ``columns`` (name -> ``"categorical"`` or ``"numerical"``, as bayesynth's
schema reads each column), ``model`` (``"gaussian_copula"`` or ``"ctgan"``), ``m`` (tables to
draw), ``n`` (records per table) and ``seed``. The training CSV is read with only empty cells
missing; categorical columns as text. SDV runs at its defaults (the Gaussian copula's
per-column distribution chosen by SDV, minimum and maximum enforced, numbers rounded as the
data are; CTGAN's 300 epochs). Writes ``syn_<i>.csv`` for each table and ``fit.json`` with the
fit and sampling seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def main(src: str, spec_path: str, out: str) -> None:
    import torch
    from sdv.metadata import Metadata
    from sdv.single_table import CTGANSynthesizer, GaussianCopulaSynthesizer

    spec = json.loads(Path(spec_path).read_text())
    kinds = spec["columns"]
    dtype = {c: str for c, kind in kinds.items() if kind == "categorical"}
    train = pd.read_csv(src, keep_default_na=False, na_values=[""], dtype=dtype)
    metadata = Metadata.load_from_dict(
        {"tables": {"t": {"columns": {c: {"sdtype": kind} for c, kind in kinds.items()}}}})
    np.random.seed(spec["seed"])  # SDV and CTGAN draw from NumPy's and PyTorch's global state
    torch.manual_seed(spec["seed"])
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    if spec["model"] == "ctgan":
        synthesizer = CTGANSynthesizer(metadata)
    else:
        synthesizer = GaussianCopulaSynthesizer(metadata)
    synthesizer.fit({"t": train})
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(spec["m"]):
        table = synthesizer.sample(spec["n"])
        table = table["t"] if isinstance(table, dict) else table
        table.to_csv(Path(out) / f"syn_{i}.csv", index=False)
    sample_s = time.perf_counter() - t0
    (Path(out) / "fit.json").write_text(json.dumps({"fit_s": fit_s, "sample_s": sample_s}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
