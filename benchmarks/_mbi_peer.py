"""private-pgm (``mbi``) on bayesynth's noisy marginals: a helper run by ``latent_class_dp.py``.

Run with an interpreter that has ``mbi`` (it needs jax, so bayesynth does not depend on it)::

    python benchmarks/_mbi_peer.py release.npz out.npy

``release.npz`` holds ``n``, ``names`` (the variables), ``cells`` (one string per table:
variable indices joined by ","), and ``noisy_<i>`` and ``sd_<i>`` per table. The graphical
model is fitted by mirror descent to the same noisy tables (L2 loss weighted by 1/sd: the
estimation step of MST, whose own selection and noise are not used, so both methods see exactly
the same release), and its full-table probabilities are saved.
"""

from __future__ import annotations

import sys

import numpy as np


def main(src: str, dst: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import mbi
    from mbi import estimation

    rel = np.load(src, allow_pickle=False)
    names = [str(x) for x in rel["names"]]
    domain = mbi.Domain(names, [2] * len(names))
    measurements = []
    for i, cells in enumerate(rel["cells"]):
        clique = tuple(names[int(j)] for j in str(cells).split(","))
        measurements.append(mbi.LinearMeasurement(rel[f"noisy_{i}"].astype(float).ravel(),
                                                  clique, stddev=float(rel[f"sd_{i}"])))
    model = estimation.MirrorDescent().estimate(domain, measurements,
                                                known_total=float(rel["n"]), iters=3000)
    full = np.asarray(model.project(tuple(names)).datavector(flatten=True), dtype=float)
    np.save(dst, full / full.sum())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
