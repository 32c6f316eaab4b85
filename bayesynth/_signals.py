"""Stopping a run cleanly on SIGTERM or Ctrl-C.

PyMC ends sampling quietly on ``KeyboardInterrupt`` and returns the draws so far, which would
let a stopped command go on to write synthetic data from a truncated posterior; and a process
killed by SIGTERM's default action runs no cleanup, so the chain worker processes it started
stay alive. Inside :func:`stop_on_signals` both signals raise
:class:`~bayesynth.errors.RunStopped` instead: it derives from ``BaseException`` (not
``KeyboardInterrupt``), so PyMC does not swallow it, and on its way out every context manager
runs, PyMC's parallel sampler terminating its workers and a dask cluster closing its
processes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from bayesynth.errors import RunStopped

__all__ = ["RunStopped", "stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Make the given signals raise :class:`~bayesynth.errors.RunStopped` within the block.

    Outside the main thread (where Python cannot install handlers) the block runs unchanged.
    The previous handlers are restored on leaving the block.

    Parameters
    ----------
    signals : tuple of int, default (SIGTERM, SIGINT)
        The signal numbers to turn into :class:`~bayesynth.errors.RunStopped`.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in signals}

    def handler(signum, frame):  # noqa: ARG001
        # Later signals during the clean-up are ignored, so that it can finish.
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise RunStopped(signum)

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
