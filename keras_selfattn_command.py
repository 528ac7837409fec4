"""The ``keras-selfattn`` console script: a stopping signal is honoured from its start.

The command line lives in ``keras_selfattn.cli``, and importing any module of the
package runs ``keras_selfattn/__init__``, which loads Keras and TensorFlow: seconds
in which Ctrl-C would end in a traceback from inside an import and SIGTERM in a
death by the signal. This module sits beside the package, not in it (setup.py's
``py_modules``; the entry point is `main`), so that importing it loads the standard
library only. `main` first makes Ctrl-C, SIGTERM and SIGHUP end the process with one
line and the shell's status (130, 143, 129), at once: nothing has started, so there
is nothing to unwind (``os._exit``). Then it imports the command line, gives the
signals back to the handlers they had (a signal the caller ignores stays ignored)
and runs it; from there each command stops as `keras_selfattn.stopping` says.

``python -m keras_selfattn_command`` runs the same, and is what the command runs
when it starts again on TensorFlow (`keras_selfattn.cli.commands.run_on_tensorflow`).
``python -m keras_selfattn`` imports the package before any of its code runs, so
its start-up is not covered.
"""

import functools
import os
import signal
import sys

_STOPPING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _stop_while_starting(stderr, signum, frame):
    """Ends the process with one line on ``stderr`` (a file descriptor, or None)
    and 128 + ``signum``: it has done nothing yet."""
    name = signal.Signals(signum).name
    by = "" if name == "SIGINT" else f" by {name}"
    line = f"keras-selfattn: interrupted{by} while starting; nothing was done\n"
    if stderr is not None:
        try:
            os.write(stderr, line.encode())
        except OSError:  # a closed or full stderr: the status says it all
            pass
    os._exit(128 + signum)


def _duplicate_stderr():
    """A descriptor of stderr as it is now, or None when there is none. Loading
    Keras in the command line sends fd 2 to a filter of TensorFlow's lines for a
    while (`keras_selfattn.backends.import_keras`): the line goes here instead."""
    try:
        return os.dup(2)
    except OSError:
        return None


def main():
    """Runs ``keras-selfattn``; a stopping signal while it loads ends it in one line.

    Returns:
        `keras_selfattn.cli.main`'s exit status (`keras_selfattn.cli.run_program`).
    """
    stderr = _duplicate_stderr()
    stop = functools.partial(_stop_while_starting, stderr)
    previous = {}
    for name in _STOPPING_SIGNALS:
        signum = getattr(signal, name, None)  # SIGHUP: not on Windows
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    try:
        from keras_selfattn.cli import run_program  # Keras and TensorFlow load here
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if stderr is not None:
            os.close(stderr)
    return run_program()


if __name__ == "__main__":
    sys.exit(main())
