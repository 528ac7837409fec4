"""SIGINT and SIGTERM as one exception in a command that writes a run (`train`).

A supervisor's stop (SIGTERM) gets what Ctrl-C gets: `Stopped`, a
KeyboardInterrupt, raised at the next Python instruction, so that the command
unwinds (its lock released, its files whole) and ends with one line and the
shell's status for the signal (130 SIGINT, 143 SIGTERM). A second signal while
the first unwinds is ignored: the process never dies by the signal halfway
through its cleanup. Imports no TensorFlow.
"""

import contextlib
import signal
import threading

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A command stopped by ``signum``; ``exit_status`` is 128 + its number."""

    def __init__(self, signum):
        super().__init__()
        self.signal_name = signal.Signals(signum).name
        self.exit_status = 128 + signum


@contextlib.contextmanager
def signals_stop():
    """Inside the block, the first SIGINT or SIGTERM raises `Stopped` and later ones
    are ignored; the previous handlers come back after it. Outside the main
    thread (where Python cannot set handlers) the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = []

    def stop(signum, frame):
        if not stopping:
            stopping.append(signum)
            raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
