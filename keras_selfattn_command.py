"""The ``keras-selfattn`` console script: it parses before Keras loads, and a
stopping signal is honoured from its start.

Importing any module of the package runs ``keras_selfattn/__init__``, which loads
Keras and TensorFlow (seconds), so that every class is registered for
``keras.saving.load_model`` whatever the import order. This module sits beside the
package, not in it (setup.py's ``py_modules``; the entry point is `main`), so
that importing it loads the standard library only. `main`:

1. makes Ctrl-C, SIGTERM and SIGHUP end the process with one line and the
   shell's status (130, 143, 129), at once: nothing has started, so there is
   nothing to unwind (``os._exit``);
2. makes the package's module without running its ``__init__``
   (`_package_module`: what ``import`` does, less the execution), so that the
   command line's Keras-free modules import: `keras_selfattn.cli.commands.prepare`
   parses, chooses TensorFlow and checks the arguments. ``--help``,
   ``--version``, a usage error and a missing file end here, in a fraction of a
   second, without Keras;
3. runs the package's ``__init__`` in that same module (`_run_package_init`):
   Keras and TensorFlow load, every class is registered, and the package is
   from then on exactly what ``import keras_selfattn`` gives;
4. gives the signals back to the handlers they had (a signal the caller ignores
   stays ignored) and runs the command (`keras_selfattn.cli.run_program`); from
   there each command stops as `keras_selfattn.stopping` says, and a signal once
   its work is done still ends it with its line.

``python -m keras_selfattn_command`` runs the same, and is what the command runs
when it starts again on TensorFlow (`keras_selfattn.cli.commands.run_on_tensorflow`).
``python -m keras_selfattn`` imports the package (Keras) before any of its code
runs, so its ``--help`` loads Keras and its start-up signals are not covered.
"""

import functools
import importlib.util
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


_PACKAGE = "keras_selfattn"


def _package_module():
    """The package's module, in ``sys.modules``: imported already, or made from
    its spec with its ``__init__`` not run yet (then returned with True).

    Python's own import makes the module from its spec, puts it in
    ``sys.modules`` and executes it; this does the first two, so that the
    package's Keras-free modules (the parser) import without its ``__init__``.
    """
    if _PACKAGE in sys.modules:
        return sys.modules[_PACKAGE], False
    spec = importlib.util.find_spec(_PACKAGE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_PACKAGE] = module
    return module, True


def _run_package_init(module):
    """Runs the package's ``__init__`` in ``module`` (`_package_module`'s): the
    third step of an import. Its submodules imported already stay as they are,
    attributes of the package as an import leaves them. When it fails, the
    module leaves ``sys.modules``, as after a failed import."""
    try:
        module.__spec__.loader.exec_module(module)
    except BaseException:
        del sys.modules[_PACKAGE]
        raise


def main():
    """Runs ``keras-selfattn``: parses before Keras loads; a stopping signal while
    it starts ends it in one line.

    Once the command ran, `keras_selfattn.cli.run_program` ends the process with
    its exit status (``os._exit``: no finalization, where a signal would end it
    with no line); only ``--help``, ``--version`` and usage errors exit here.
    """
    stderr = _duplicate_stderr()
    stop = functools.partial(_stop_while_starting, stderr)
    previous = {}
    for name in _STOPPING_SIGNALS:
        signum = getattr(signal, name, None)  # SIGHUP: not on Windows
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    try:
        package, deferred = _package_module()
        from keras_selfattn.cli import commands  # the standard library, no Keras

        args = commands.prepare()  # --help, --version, usage errors: exit here
        if deferred:
            _run_package_init(package)  # Keras and TensorFlow load here
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if stderr is not None:
            os.close(stderr)
    return commands.run_program(args)


if __name__ == "__main__":
    sys.exit(main())
