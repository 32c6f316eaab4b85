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
import os
import signal
import threading
from collections.abc import Iterator

from bayesynth.errors import RunStopped

__all__ = ["RunStopped", "stop_on_signals"]


#: Seconds after which a signal that arrived where an exception would be dropped is sent again.
REDELIVER_S = 0.05
#: Functions that Python calls from C where an exception is printed and dropped: the
#: at-fork hooks of :mod:`logging` (which hold its module lock across a fork) and finalisers.
_HOOKS = {"_acquireLock", "_releaseLock", "_after_at_fork_child_reinit_locks",
          "_prepareFork", "_afterFork", "__del__"}  # the latter two: Python 3.13's names


def _swallowed_here(frame) -> bool:
    """Whether an exception raised in ``frame`` (or a caller) would be dropped by Python."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in _HOOKS and (code.co_name == "__del__"
                                       or os.sep + "logging" + os.sep in code.co_filename):
            return True
        frame = frame.f_back
    return False


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

    def handler(signum, frame):
        if _swallowed_here(frame):
            # Raised here the exception would be printed and dropped, and the run would go
            # on with the signals ignored (seen: SIGTERM during a fork, in logging's at-fork
            # hook, which also kept its lock and hung the next log call). Deliver it again
            # once the hook has returned.
            threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signum)).start()
            return
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
