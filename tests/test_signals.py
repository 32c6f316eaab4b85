"""Signals that arrive where Python would drop an exception are delivered again."""

from __future__ import annotations

import os
import signal
import time

import pytest

from bayesynth._signals import stop_on_signals
from bayesynth.errors import RunStopped

# A stand-in for logging's at-fork hook: Python runs it from C and drops what it raises.
_FAKE_HOOK = compile(
    "def _releaseLock(seen):\n"
    "    signal.raise_signal(signal.SIGTERM)\n"
    "    seen.append('hook finished')\n",
    os.path.join(os.sep, "fake", "logging", "__init__.py"), "exec")


@pytest.mark.skipif(not hasattr(signal, "raise_signal"), reason="needs signal.raise_signal")
def test_a_signal_inside_an_at_fork_hook_is_raised_after_it():
    namespace = {"signal": signal}
    exec(_FAKE_HOOK, namespace)
    seen: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunStopped), stop_on_signals():
        namespace["_releaseLock"](seen)  # the handler runs inside the hook: deferred
        seen.append("after the hook")
        deadline = time.time() + 5
        while time.time() < deadline:  # the signal comes again here
            time.sleep(0.01)
        seen.append("never stopped")
    assert seen == ["hook finished", "after the hook"]
    # the handlers are restored
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.skipif(not hasattr(signal, "raise_signal"), reason="needs signal.raise_signal")
def test_a_signal_elsewhere_stops_the_run_at_once():
    seen: list[str] = []
    with pytest.raises(RunStopped), stop_on_signals():
        signal.raise_signal(signal.SIGTERM)
        seen.append("went on")
    assert seen == []
