"""Monte Carlo replicate studies over a parameter grid, on dask.distributed.

Every method paper behind bayesynth evaluates its synthesizer by repeating "simulate data, fit,
synthesize, measure" many times over a grid of settings. :func:`run_replicates` runs such a
study on a local cluster (or any dask scheduler), with one independent, reproducible random
stream per task, and returns an :class:`xarray.Dataset` indexed by the grid and the replicate.
"""

from __future__ import annotations

import itertools
import json
import os
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["run_replicates"]


def _run_task(fn: Callable[..., Mapping[str, Any]], params: dict[str, Any],
              seed: np.random.SeedSequence) -> tuple[str, Any]:
    """Run one task; never raises (errors come back as text, so finished tasks are kept)."""
    try:
        out = fn(rng=np.random.default_rng(seed), **params)
        return "ok", {k: np.asarray(v, dtype=float) for k, v in dict(out).items()}
    except Exception as err:  # noqa: BLE001 - reported with the task's parameters
        return "error", "".join(traceback.format_exception_only(type(err), err)).strip()


def run_replicates(
    fn: Callable[..., Mapping[str, Any]],
    grid: Mapping[str, Sequence[Any]],
    replicates: int,
    *,
    client: Any = None,
    random_seed: int | None = None,
    n_workers: int | None = None,
    progressbar: bool = True,
) -> xr.Dataset:
    """Run ``fn`` for every grid point and replicate, in parallel.

    Parameters
    ----------
    fn : callable
        ``fn(rng=numpy.random.Generator, **params) -> mapping`` of output name to a number or a
        fixed-shape array. It must be importable or picklable (dask ships it to the workers).
    grid : mapping of str to sequence
        Parameter values; the study runs over their Cartesian product.
    replicates : int
        Replicates per grid point.
    client : None, "serial", str or dask.distributed.Client
        ``None``: a :class:`dask.distributed.LocalCluster` of ``n_workers`` single-threaded
        processes for the duration of the call; a scheduler address string or a ``Client``
        scales the study to a cluster; ``"serial"`` runs in this process (for debugging and
        tests).
    random_seed : int, optional
        Root seed. Task t gets the t-th child of ``numpy.random.SeedSequence(random_seed)``
        (tasks ordered by grid point, then replicate), so results do not depend on where or in
        which order tasks run.
    n_workers : int, optional
        Workers of the local cluster (default: the CPU count).
    progressbar : bool, default True

    Returns
    -------
    xarray.Dataset
        One variable per output, with dimensions the grid names and ``replicate`` (plus
        ``<output>_dim_<i>`` for array outputs); failed tasks leave NaN. ``attrs["failures"]``
        is a JSON list of the failed tasks with their parameters, replicate and error, and a
        :class:`RuntimeWarning` names them.

    Raises
    ------
    bayesynth.errors.RunStopped
        SIGTERM or Ctrl-C arrived (in the main thread): the local cluster this call started is
        closed, its worker processes ended, and no result is returned.

    Examples
    --------
    >>> def study(rng, n, scale):
    ...     x = rng.normal(scale=scale, size=n)
    ...     return {"mean": x.mean(), "sd": x.std()}
    >>> ds = run_replicates(study, {"n": [10, 100], "scale": [1.0, 2.0]}, 3,
    ...                     client="serial", random_seed=1, progressbar=False)
    >>> dict(ds["mean"].sizes)
    {'n': 2, 'scale': 2, 'replicate': 3}
    """
    if int(replicates) != replicates or replicates < 1:
        raise ValueError(f"replicates must be a positive integer; got {replicates!r}.")
    names = list(grid)
    values = [list(grid[n]) for n in names]
    if any(len(v) == 0 for v in values):
        raise ValueError("every grid entry needs at least one value.")
    points = list(itertools.product(*values))
    tasks = [(p, r) for p in range(len(points)) for r in range(int(replicates))]
    seeds = np.random.SeedSequence(random_seed).spawn(len(tasks))
    params = [dict(zip(names, points[p])) for p, _ in tasks]


    from bayesynth._signals import stop_on_signals

    with stop_on_signals():
        outcomes = _run_all(fn, tasks, params, seeds, client, n_workers, progressbar)
    return _gather(names, values, int(replicates), tasks, params, outcomes)


def _run_all(fn, tasks, params, seeds, client, n_workers, progressbar):
    """Run every task; a stop (SIGTERM, Ctrl-C) closes the cluster this call started."""
    from tqdm import tqdm

    outcomes: list[tuple[str, Any] | None] = [None] * len(tasks)
    bar = tqdm(total=len(tasks), desc="replicates", disable=not progressbar)
    if client == "serial":
        for t in range(len(tasks)):
            outcomes[t] = _run_task(fn, params[t], seeds[t])
            bar.update()
    else:
        from dask.distributed import Client, LocalCluster, as_completed

        own_cluster = None
        if client is None:
            own_cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1,
                                       threads_per_worker=1, processes=True,
                                       dashboard_address=None)
            dclient = Client(own_cluster)
        elif isinstance(client, str):
            dclient = Client(client)
        else:
            dclient = client
        try:
            futures = [dclient.submit(_run_task, fn, params[t], seeds[t], pure=False)
                       for t in range(len(tasks))]
            index = {f.key: t for t, f in enumerate(futures)}
            for fut in as_completed(futures):
                t = index[fut.key]
                try:
                    outcomes[t] = fut.result()
                except Exception as err:  # noqa: BLE001 - a worker died: keep the rest
                    outcomes[t] = ("error", f"{type(err).__name__}: {err}")
                bar.update()
        finally:
            if dclient is not client:
                dclient.close()
            if own_cluster is not None:
                own_cluster.close()
    bar.close()
    return outcomes


def _gather(names, values, replicates, tasks, params, outcomes) -> xr.Dataset:
    shapes: dict[str, tuple[int, ...]] = {}
    for status, out in outcomes:
        if status == "ok":
            for k, v in out.items():
                shapes.setdefault(k, v.shape)
    grid_shape = tuple(len(v) for v in values) + (replicates,)
    arrays = {k: np.full(grid_shape + shp, np.nan) for k, shp in shapes.items()}
    failures = []
    for t, ((p, r), (status, out)) in enumerate(zip(tasks, outcomes)):
        pos = np.unravel_index(p, grid_shape[:-1]) + (r,)
        if status == "ok":
            for k, v in out.items():
                if v.shape == shapes[k]:
                    arrays[k][pos] = v
        else:
            failures.append({**{k: _plain(v) for k, v in params[t].items()}, "replicate": r,
                             "error": out})
    coords = {n: v for n, v in zip(names, values)}
    coords["replicate"] = np.arange(replicates)
    data = {}
    for k, arr in arrays.items():
        extra = [f"{k}_dim_{i}" for i in range(len(shapes[k]))]
        data[k] = (names + ["replicate"] + extra, arr)
    ds = xr.Dataset(data, coords=coords)
    ds.attrs["failures"] = json.dumps(failures)
    ds.attrs["n_failed"] = len(failures)
    if failures:
        first = failures[0]
        warnings.warn(
            f"{len(failures)} of {len(tasks)} tasks failed (their results are NaN; see "
            f"ds.attrs['failures']). First: {first}", RuntimeWarning, stacklevel=3)
    return ds


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
