"""A signal stops a command the same way everywhere (keras_selfattn.stopping)."""

import _signal
import os
import signal
import sys
import time
import types

import pytest

from keras_selfattn import stopping
from keras_selfattn.stopping import Stopped, held, signals_stop


def _raise_pending():
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a point where it is raised


@pytest.mark.parametrize(
    "signum, status",
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
)
def test_the_first_signal_raises_with_the_shells_status(signum, status):
    with signals_stop(), pytest.raises(Stopped) as stopped:
        os.kill(os.getpid(), signum)
        _raise_pending()
    assert stopped.value.exit_status == status
    assert stopped.value.signal_name == signal.Signals(signum).name


def test_a_second_signal_while_unwinding_is_ignored():
    with signals_stop():
        with pytest.raises(Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
            _raise_pending()
        os.kill(os.getpid(), signal.SIGTERM)  # during cleanup: no second raise
        _raise_pending()


def test_held_work_finishes_before_the_signal_is_raised():
    done = []
    with signals_stop(), pytest.raises(Stopped) as stopped, held():
        os.kill(os.getpid(), signal.SIGINT)
        _raise_pending()
        done.append("written")
    assert done == ["written"] and stopped.value.exit_status == 130


def _library_call(steps, callback, signum=None):
    """Stands for TensorFlow's code (`_tensorflow_like`): runs ``callback`` (a
    Python callback of TensorFlow's C++) between two steps, and records each step
    it got through; told to, it handles a signal itself first (the C function
    ``_signal.pthread_sigmask`` runs the handler in its caller's frame; the
    ``signal`` module's wrapper would run it in its own)."""
    steps.append("called")
    if signum is not None:
        os.kill(os.getpid(), signum)
        _signal.pthread_sigmask(signal.SIG_SETMASK, [])
    callback()
    steps.append("after the callback")
    return "result"


def _tensorflow_like(function=_library_call):
    """``function`` as a function of a module of the tensorflow package."""
    module_globals = {**globals(), "__name__": "tensorflow.python.stand_in"}
    return types.FunctionType(function.__code__, module_globals)


@pytest.mark.parametrize(
    "where", ["in TensorFlow", "in its callback", "in a function its callback calls"]
)
def test_a_signal_inside_tensorflow_is_raised_at_the_first_line_outside_it(where):
    """Handled while TensorFlow's code runs, a callback it made (whose caller is
    TensorFlow's), or a function that callback calls (an import inside
    ``nest``'s flattening: raised there, it came back through the C++ as a
    SystemError and a printed traceback), the signal waits: TensorFlow's call
    runs to its end, and the caller's next line raises it; the line tracer is
    gone afterwards."""
    library_call = _tensorflow_like()
    steps = []

    def signalled():
        os.kill(os.getpid(), signal.SIGTERM)
        _signal.pthread_sigmask(signal.SIG_SETMASK, [])  # handled here
        steps.append("its callee ended")

    def callback():
        if where == "in its callback":
            os.kill(os.getpid(), signal.SIGTERM)
            _signal.pthread_sigmask(signal.SIG_SETMASK, [])  # handled here
        elif where == "in a function its callback calls":
            signalled()
        steps.append("callback ended")

    signum = signal.SIGTERM if where == "in TensorFlow" else None
    before = sys.gettrace()
    with signals_stop(), pytest.raises(Stopped) as stopped:
        result = library_call(steps, callback, signum)
        steps.append(f"caller saw {result}")  # not run: the raise is at this line
    callee = ["its callee ended"] if where.endswith("calls") else []
    assert steps == ["called", *callee, "callback ended", "after the callback"]
    assert stopped.value.exit_status == 143
    assert sys.gettrace() is before


def test_the_thread_s_own_tracer_is_back_after_a_deferred_raise():
    """A debugger's or coverage's tracer, set before the block: the raise of a
    deferred signal (which Python answers by dropping the thread's tracer) leaves
    it set again once the block ends, and it sees the calls made after."""
    library_call = _tensorflow_like()
    calls = []

    def own_tracer(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    def called_after():
        return None

    original = sys.gettrace()  # coverage's, under coverage
    sys.settrace(own_tracer)
    try:
        with signals_stop(), pytest.raises(Stopped) as stopped:
            library_call([], lambda: None, signal.SIGTERM)
            calls.append("the caller's next line")  # not run: the raise is here
        after = sys.gettrace()
        called_after()
    finally:
        sys.settrace(original)
    assert stopped.value.exit_status == 143
    assert after is own_tracer
    assert "the caller's next line" not in calls
    assert calls[-1] == "called_after"


def _tensorflow_loop(steps, seconds):
    """Stands for TensorFlow's Python code that keeps running (a loop waiting for
    a peer): handles a signal, then counts lines for ``seconds``."""
    os.kill(os.getpid(), signal.SIGTERM)
    _signal.pthread_sigmask(signal.SIG_SETMASK, [])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        steps.append("waited")
    steps.append("returned")


def test_a_signal_inside_tensorflow_code_that_keeps_running_is_raised_there(
    monkeypatch,
):
    """Deferred at most `DEFERRED_AT_MOST` seconds: then raised in TensorFlow's
    code, which never returns."""
    monkeypatch.setattr(stopping, "DEFERRED_AT_MOST", 0.2)
    loop = _tensorflow_like(_tensorflow_loop)
    steps = []
    before = sys.gettrace()
    start = time.monotonic()
    with signals_stop(), pytest.raises(Stopped):
        loop(steps, 60)
    assert 0.2 <= time.monotonic() - start < 30
    assert steps and "returned" not in steps
    assert sys.gettrace() is before


def _lock_section(steps, seconds):
    """Stands for a lock of TensorFlow's written in Python (its graph's group
    lock): acquired, held for ``seconds`` of lines, released."""
    steps.append("acquired")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    steps.append("released")


def _tensorflow_loop_taking_a_lock(steps, seconds, lock_section):
    """Stands for TensorFlow's code that handles a signal, then spends longer
    than `DEFERRED_AT_MOST` inside a lock, then keeps running."""
    os.kill(os.getpid(), signal.SIGTERM)
    _signal.pthread_sigmask(signal.SIG_SETMASK, [])
    lock_section(steps, 0.6)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        steps.append("waited")
    steps.append("returned")


def test_a_signal_past_its_deadline_waits_for_the_end_of_a_lock(monkeypatch):
    """Past `DEFERRED_AT_MOST`, inside a lock written in Python (TensorFlow's
    lock_util, threading), the raise waits until the lock is released: raised
    between its acquire and its release, it would leave the lock held and the
    next op hang. Then it is raised in the TensorFlow code that goes on."""
    monkeypatch.setattr(stopping, "DEFERRED_AT_MOST", 0.2)
    lock_section = types.FunctionType(
        _lock_section.__code__,
        {**globals(), "__name__": "tensorflow.python.util.lock_util"},
    )
    loop = _tensorflow_like(_tensorflow_loop_taking_a_lock)
    steps = []
    with signals_stop(), pytest.raises(Stopped):
        loop(steps, 60, lock_section)
    assert steps[:2] == ["acquired", "released"]
    assert "returned" not in steps


def test_a_signal_outside_tensorflow_is_raised_at_once():
    library_call = _tensorflow_like()
    steps = []
    with signals_stop(), pytest.raises(Stopped):
        os.kill(os.getpid(), signal.SIGINT)
        _raise_pending()
        library_call(steps, lambda: None)
    assert steps == []


def test_a_subclass_carries_its_own_line():
    class Named(Stopped):
        def __init__(self, signum):
            super().__init__(signum, "stopped: cleaned up")

    with signals_stop(stopped=Named), pytest.raises(Named) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
        _raise_pending()
    assert str(stopped.value) == "stopped: cleaned up"


def test_handlers_come_back_and_ignored_signals_stay_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        term = signal.getsignal(signal.SIGTERM)
        with signals_stop():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not term
        assert signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_signal_whose_raise_was_swallowed_is_raised_again():
    """A handler that runs inside a garbage-collector callback has its exception
    dropped by Python; the next step's check raises it again, once."""
    from keras_selfattn.stopping import raise_if_swallowed

    with signals_stop():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            _raise_pending()
        except Stopped:
            pass  # stands in for Python dropping it ("Exception ignored in ...")
        with pytest.raises(Stopped) as stopped:
            raise_if_swallowed()
        assert stopped.value.exit_status == 143
        raise_if_swallowed()  # once only


def _signal_turned_into(error_type, keep_chain=True):
    """A SIGTERM raised here, then the exception a C extension or a library
    turns it into (``error_type``), with or without the chain back to it."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        _raise_pending()
    except KeyboardInterrupt as stop:
        if keep_chain:
            raise error_type("returned a result with an exception set") from stop
    raise error_type("returned a result with an exception set")


@pytest.mark.parametrize("keep_chain", [True, False], ids=["chained", "chain_lost"])
def test_a_signal_turned_into_another_exception_is_still_a_stop(keep_chain):
    with signals_stop():
        with pytest.raises(SystemError) as caught:
            _signal_turned_into(SystemError, keep_chain)
        stop = stopping.stopped_by(caught.value)
    assert isinstance(stop, Stopped) and stop.exit_status == 143
    # Outside, or with no signal raised, an error is only an error.
    assert stopping.stopped_by(caught.value if keep_chain else ValueError("x")) is (
        caught.value.__cause__ if keep_chain else None
    )
    with signals_stop():
        assert stopping.stopped_by(RuntimeError("no signal")) is None


def test_a_stop_raised_in_an_inner_block_is_still_a_stop_outside_it():
    """A command's job has its own block inside the command's (evaluate's):
    a signal raised there and turned into another exception, its chain lost,
    is a stop for the outer block too, and a second signal while the outer
    block unwinds is ignored."""
    with signals_stop():
        with pytest.raises(SystemError) as caught, signals_stop():  # the inner block
            _signal_turned_into(SystemError, keep_chain=False)
        stop = stopping.stopped_by(caught.value)
        assert isinstance(stop, Stopped) and stop.exit_status == 143
        os.kill(os.getpid(), signal.SIGTERM)  # unwinding: no second raise
    with signals_stop():  # a new block starts with no stop
        assert stopping.stopped_by(RuntimeError("no signal")) is None


def test_the_command_line_reports_a_converted_signal_as_the_signal(monkeypatch, capsys):
    """`cli.main`: an exception that stands for a SIGTERM ends the command as
    the SIGTERM does (143, one line), not as an internal error (70)."""
    from keras_selfattn.cli import commands

    def run(args):
        _signal_turned_into(SystemError, keep_chain=False)

    monkeypatch.setattr(commands, "_run", run)
    monkeypatch.setattr(commands, "check_arguments", lambda args: None)
    with pytest.raises(SystemExit) as exited:
        commands.main(["evaluate", "--model", "run", "--data", "pairs.tsv"])
    assert exited.value.code == 143
    assert capsys.readouterr().err == "keras-selfattn: interrupted by SIGTERM\n"
