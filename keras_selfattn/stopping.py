"""Stopping a command by a signal, the same way everywhere it matters.

A supervisor's stop (SIGTERM), Ctrl-C (SIGINT) and a closed terminal (SIGHUP) raise
`Stopped`, a KeyboardInterrupt, at the next Python instruction, so that the command
unwinds: its locks are released, its child processes reaped, its temporary files
removed and its files left whole. It then ends with one line and the shell's status
for the signal (128 + its number: 130, 143, 129). A second signal while the first
unwinds is ignored, so the process never dies halfway through its cleanup, and a
signal the caller ignores (``nohup``, a shell's background job) stays ignored.

Inside TensorFlow's own Python code, and in any code it called, the raise waits
for the first line outside it (`_raise_outside_tensorflow`): that code runs
between calls into TensorFlow's C++, some of which call back into Python and were
seen to die by SIGSEGV, or to print a traceback, when an exception came back from
the callback. Python code of TensorFlow's that keeps running (a loop waiting for
a peer) is stopped where it is after
`DEFERRED_AT_MOST` seconds, at a line where an exception breaks nothing
(`_safe_to_raise`): never inside a lock written in Python (TensorFlow's graph
lock, ``threading``'s), which an exception between its acquire and its release
leaves held (a command tracing a graph was seen to hang so, in its next op), and
never in a ``__del__``, where Python prints and drops it.

`held` makes a short piece of work (writing a batch of answers) finish before the
signal is raised. Python runs signal handlers in the main thread whichever thread
the signal reached (TensorFlow's threads take them too), so a signal mask cannot do
this; the handler itself waits. `run_to_the_end` runs a child process that has
ended, not merely been signalled, whatever stops the wait. Standard library only.
"""

import contextlib
import signal
import subprocess
import sys
import threading
import time

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long a signal handled in TensorFlow's Python code waits for a line outside
# it before it is raised in TensorFlow's code after all (`_raise_outside_tensorflow`).
DEFERRED_AT_MOST = 2.0


class Stopped(KeyboardInterrupt):
    """A command stopped by the signal ``signum``.

    Attributes:
        signal_name: e.g. "SIGTERM".
        exit_status: the shell's status for it, 128 + its number.
    """

    def __init__(self, signum, message=None):
        self.signal_name = signal.Signals(signum).name
        self.exit_status = 128 + signum
        super().__init__(message or self.signal_name)


class _State:
    """The handlers' state: the exception to raise, whether work is held, the
    signal waiting for it or for a line outside TensorFlow, and whether one was
    raised already."""

    stopped = Stopped
    holding = False
    pending = None
    raised = None  # the signal raised in this block, if any
    raised_signal = None  # the signal raised, until `raise_if_swallowed` sees it
    deferred = None  # the signal waiting for a line outside TensorFlow
    # The thread's own tracer (a debugger's, coverage's) while a deferred signal's
    # raise unwinds: Python drops a tracer that raises, so the block's end puts it
    # back.
    tracer_to_restore = None

    @classmethod
    def stop(cls, signum, frame):
        if cls.raised is not None or cls.deferred is not None:
            return  # unwinding from the first one, or about to
        if cls.holding:
            cls.pending = cls.pending or signum
            return
        if frame is not None and _in_tensorflow(frame):
            cls.deferred = signum
            _raise_outside_tensorflow(frame)
            return
        cls.raise_now(signum)

    @classmethod
    def raise_now(cls, signum):
        cls.raised, cls.raised_signal = signum, signum
        raise cls.stopped(signum)


# The packages whose C++ calls back into their own Python code: a signal handled
# there waits. Keras' code is pure Python above them, and raises as usual.
_DEFERRING_PACKAGES = frozenset({"tensorflow", "tensorflow_text"})
# Modules of locks written in Python, whose acquire and release are separate
# statements: an exception raised between them leaves the lock held.
_LOCK_MODULES = frozenset({"threading", "tensorflow.python.util.lock_util"})


def _in_tensorflow(frame):
    """Whether ``frame`` runs inside TensorFlow's code: it, or any frame below
    it, is TensorFlow's. A Python function that TensorFlow's C++ called back
    (an import inside ``nest``'s flattening, a callback of a dataset) has a frame
    of TensorFlow's below it; an exception raised in it comes back through that
    C++ as ``SystemError: ... returned a result with an exception set``, printed
    there as a traceback."""
    while frame is not None:
        package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        if package in _DEFERRING_PACKAGES:
            return True
        frame = frame.f_back
    return False


def _safe_to_raise(frame):
    """Whether an exception raised at ``frame``'s line breaks nothing: no frame
    of the stack is a lock's code written in Python (`_LOCK_MODULES`) or a
    ``__del__`` (Python prints and drops what one raises)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__" or (
            frame.f_globals.get("__name__") in _LOCK_MODULES
        ):
            return False
        frame = frame.f_back
    return True


def _raise_outside_tensorflow(frame):
    """Raises the deferred signal's `Stopped` at the first line that runs outside
    TensorFlow (`_in_tensorflow`): in a frame now running, once TensorFlow's calls
    return to it, or in one called since. A line tracer does it, on those frames
    and on each one called until then; it is removed when it raises, and the
    tracers it stood in for (a debugger's, coverage's) put back: each frame's at
    once, the thread's as the `signals_stop` block ends (Python drops a tracer
    that raises, and with it the one set back). A line still inside TensorFlow
    `DEFERRED_AT_MOST` seconds on raises it there. Either way, only at a line
    that is `_safe_to_raise`."""
    previous = sys.gettrace()
    deadline = time.monotonic() + DEFERRED_AT_MOST
    running = []  # (frame, its own local tracer)
    while frame is not None:
        running.append((frame, frame.f_trace))
        frame = frame.f_back

    def tracer(frame, event, arg):
        signum = _State.deferred
        if signum is not None and (
            event != "line"
            or (_in_tensorflow(frame) and time.monotonic() < deadline)
            or not _safe_to_raise(frame)
        ):
            return tracer
        sys.settrace(previous)
        for each, own in running:
            each.f_trace = own
        running.clear()
        if signum is None:  # the block ended
            return None
        _State.deferred = None
        # Python removes a tracer that raises: `signals_stop` puts the thread's
        # own back as its block ends.
        _State.tracer_to_restore = previous
        _State.raise_now(signum)

    for each, _ in running:
        each.f_trace = tracer
    sys.settrace(tracer)


def raise_if_swallowed():
    """Raises the signal's `Stopped` again if its first raise was lost.

    Python runs a handler between any two bytecodes, a garbage-collector callback's
    included, and an exception raised there is printed and dropped ("Exception
    ignored in ..."). A loop that keeps running after a stopping signal (training's
    step callback) calls this at each step, so that the signal still stops it."""
    signum, _State.raised_signal = _State.raised_signal, None
    if signum is not None:
        raise _State.stopped(signum)


def stopped_by(error):
    """The `Stopped` (a KeyboardInterrupt) that ``error`` stands for, or None.

    A signal's exception raised while C code runs a Python callback can come
    back as another exception (``SystemError: ... returned a result with an
    exception set``, or a library's own error with it as the cause or context).
    So ``error`` stands for a stop when its chain holds a KeyboardInterrupt, or
    when a stopping signal was raised inside the enclosing `signals_stop`.
    """
    seen = set()
    link = error
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    if _State.raised is not None:
        return _State.stopped(_State.raised)
    return None


@contextlib.contextmanager
def signals_stop(signals=STOPPING_SIGNALS, stopped=Stopped):
    """Inside the block, the first of ``signals`` raises ``stopped(signum)`` (a
    `Stopped`), except while `held` work runs: then right after it. The previous
    handlers come back after the block. Outside the main thread (where Python
    cannot set handlers) the block changes nothing. A block inside another
    (the command's, then its job's) hands a signal it raised to the outer one:
    the outer block still sees the stop (`stopped_by`) and ignores a second
    signal while it unwinds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in signals:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _State.stop)
    saved = (_State.stopped, _State.holding, _State.pending, _State.raised)
    _State.stopped, _State.holding, _State.pending, _State.raised = (
        stopped,
        False,
        None,
        None,
    )
    _State.raised_signal = _State.deferred = None
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        tracer, _State.tracer_to_restore = _State.tracer_to_restore, None
        if tracer is not None and sys.gettrace() is None:
            sys.settrace(tracer)
        # A signal still waiting for a line outside TensorFlow counts as raised.
        raised = _State.raised or _State.deferred
        _State.deferred = None
        _State.stopped, _State.holding, _State.pending, _State.raised = saved
        if _State.stop in previous.values():  # inside another block
            _State.raised = _State.raised or raised
        _State.raised_signal = None


@contextlib.contextmanager
def held():
    """Inside the block a stopping signal waits; it is raised when the block ends."""
    _State.holding = True
    try:
        yield
    finally:
        _State.holding = False
    pending, _State.pending = _State.pending, None
    if pending is not None:
        _State.raised = pending
        raise _State.stopped(pending)


def run_to_the_end(command, env, timeout):
    """``command``'s CompletedProcess (output captured), or None past ``timeout``.

    Whatever stops the wait (the timeout, a signal's `Stopped`), the child is
    killed and waited for before this returns or raises, so that it has ended,
    not merely been sent a signal: ``subprocess.run`` waits only a quarter of a
    second after a KeyboardInterrupt, and a loaded machine takes longer to end a
    TensorFlow process. A signal while the child starts waits until ``Popen``
    has returned it (`held`): raised inside ``Popen``, after the fork, it would
    leave a child nobody holds.
    """
    process = None
    try:
        with held():
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _ended(process)
        return None
    except BaseException:
        if process is not None:
            _ended(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _ended(process):
    """Kills ``process`` and waits until it has ended (its pipes drained)."""
    process.kill()
    process.communicate()
