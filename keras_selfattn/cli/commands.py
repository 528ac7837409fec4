"""The ``keras-selfattn`` command line: `prepare`, `main`, the dispatch.

The parser is `cli.parser.build_parser`; each command is a function pair in the
module of its kind (`cli.run_commands`, `cli.text_commands`,
`cli.serving_commands`; `cli.command` holds what they share): ``add_<command>``
declares its options (the shared ones and those generated from the config
dataclasses come from `cli.flags`) and binds ``_<command>``, which calls the
job's function in `keras_selfattn.jobs` (the one place every job lives) and
prints what it returns.

`prepare` parses, chooses TensorFlow (`use_tensorflow`) and runs the checks of
`cli.checks`, all before Keras loads: ``--help``, ``--version``, a usage error
and a missing file answer at once. `main` then loads the package (Keras, every
class registered), quiets TensorFlow (`cli.quiet`) and runs the command;
`cli.errors` turns what fails into one line and an exit status. Importing this
module loads no Keras (the console script imports it before Keras loads).
"""

import functools
import importlib
import os
import signal
import sys

from keras_selfattn import backends, stopping
from keras_selfattn.cli import errors
from keras_selfattn.cli.checks import check_arguments
from keras_selfattn.cli.parser import build_parser
from keras_selfattn.cli.quiet import quiet_tensorflow
from keras_selfattn.stopping import signals_stop

__all__ = ["build_parser", "main", "prepare", "run_program", "use_tensorflow"]


def _loaded_backend():
    """The backend of the Keras loaded in this process, or None before it loads."""
    keras = sys.modules.get("keras")
    backend = getattr(keras, "backend", None)
    return None if backend is None else backend.backend()


def use_tensorflow(parser, argv):
    """Makes the command run on TensorFlow: the command line is a TensorFlow
    application.

    Before Keras loads (the console script), ``KERAS_BACKEND=tensorflow``
    (`backends.choose_tensorflow`), with one line on stderr when the user's
    configuration named another backend, installed or not. When Keras is loaded
    already with another backend: called from Python (``argv`` given), one
    usage error (the caller's process is not replaced); as a program, the line
    and the command again in a new process (`run_on_tensorflow`). TensorFlow
    not installed: one usage error (exit 2) naming the package.
    """
    backend = _loaded_backend()
    if backend == "tensorflow":
        return
    try:
        if backend is None:
            note = backends.choose_tensorflow()
            if note:
                print(note, file=sys.stderr, flush=True)
            return
        backends.check_backend("tensorflow", "the command line runs on TensorFlow")
    except backends.MissingBackendError as error:
        parser.exit(errors.USAGE_ERROR, f"keras-selfattn: error: {error}\n")
    if argv is not None:
        parser.exit(
            errors.USAGE_ERROR,
            "keras-selfattn: error: the command line runs on TensorFlow, but Keras "
            f"is loaded with the {backend!r} backend in this process; set "
            "KERAS_BACKEND=tensorflow\n",
        )
    run_on_tensorflow(backend)


def run_on_tensorflow(backend):
    """Says so in one line on stderr, then replaces this process (``os.execv``
    of ``python -m keras_selfattn_command`` with the same arguments, under
    ``KERAS_BACKEND=tensorflow``: the console script's module, which honours a
    stopping signal from its start, also in this second start-up). Only a
    program that loaded Keras with ``backend`` before the command line ran
    comes here."""
    print(
        f"keras-selfattn: the command line runs on TensorFlow, not {backend!r}: "
        "running it again with KERAS_BACKEND=tensorflow",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os.environ["KERAS_BACKEND"] = "tensorflow"
    command = [sys.executable, "-m", "keras_selfattn_command", *sys.argv[1:]]
    os.execv(sys.executable, command)


def prepare(argv=None):
    """Parses ``argv`` (None: ``sys.argv[1:]``) and readies the command, without
    loading Keras: TensorFlow chosen (`use_tensorflow`), the arguments checked
    (`cli.checks`).

    Returns:
        The parsed arguments, for `main`.

    Exits (SystemExit) after ``--help`` or ``--version`` (0), on a usage error
    or bad input (one line, 2) or an internal error (one line, 70); ``--debug``
    raises the error instead, with its traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    use_tensorflow(parser, argv)
    try:
        check_arguments(args)
    except Exception as error:  # bad input, or a bug: one line, as in `main`
        if args.debug:
            raise
        status, message = errors.failure(error)
        print(f"keras-selfattn: {message}", file=sys.stderr)
        sys.exit(status)
    return args


def main(argv=None, *, args=None):
    """Runs the command line: `prepare`, then the command.

    Args:
        argv: the arguments (None: ``sys.argv[1:]``).
        args: what `prepare` returned, when it ran already (the console script
            prepares before it loads Keras); ``argv`` is not read then.

    Returns 0 when done, 1 when ``check-serving`` found problems, 3 when
    ``train`` ended with a model that does not translate (after an error line).
    Otherwise exits (SystemExit) after one line on stderr: 2, bad input (naming
    the file or argument; argparse's usage errors too; TensorFlow not
    installed); 70, an internal error (``--debug`` shows the traceback); 130,
    interrupted (143 by SIGTERM, 129 by SIGHUP, in any command); 141, quietly,
    when the reader of stdout went away (``| head``).
    The command line runs on TensorFlow whatever ``KERAS_BACKEND`` says
    (`use_tensorflow`).
    """
    # A stopping signal, from the first line to the last, unwinds the command
    # (`stopping.signals_stop`): its locks, child processes and temporary files
    # are released, and it ends with one line and 130, 143 or 129.
    with signals_stop():
        try:
            if args is None:
                args = prepare(argv)
            importlib.import_module("keras_selfattn")  # Keras, classes registered
            if not (args.verbose or args.debug):
                quiet_tensorflow()
            with errors.guarded_output():
                return _run(args)
        except KeyboardInterrupt as error:
            status, message = errors.interrupted(getattr(args, "command", None), error)
        except Exception as error:
            # A signal's exception that C code turned into another one is a stop.
            stop = stopping.stopped_by(error)
            if stop is not None:
                command = getattr(args, "command", None)
                status, message = errors.interrupted(command, stop)
            elif getattr(args, "debug", False):
                raise
            else:
                status, message = errors.failure(error)
    # as on a usage error (a broken pipe: no message)
    if message:
        print(f"keras-selfattn: {message}", file=sys.stderr)
    sys.exit(status)


def run_program(args=None):
    """`main` as a program runs it (the console script, ``python -m``): the
    process ends at once with `main`'s status, its output flushed, without the
    interpreter's finalization (``os._exit``). The command has already unwound
    (its locks, child processes and temporary files released); finalizing Python
    while TensorFlow's threads still ran was seen to die by SIGSEGV instead of
    130 or 143, and a signal during that finalization (Python has given the
    signals back to the system by then) ended the process by the signal itself,
    with no line. From its start to that end a stopping signal that `main`'s own
    handling does not take (before it, or once its work is done) ends the
    process with the command's line and 128 + the signal's number
    (`errors.interrupted_as_it_ended`); a signal the caller ignores stays
    ignored. Python callers of `main` get its status or its SystemExit as before.

    Args:
        args: what `prepare` returned, or None (`main` parses ``sys.argv``).

    Returns:
        Nothing: the process ends here, with `main`'s exit status.
    """
    stop = functools.partial(_stop_as_it_ends, args)
    previous = {}
    for signum in stopping.STOPPING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    try:
        _end_now(_run_to_its_status(args))
    finally:  # reached only where ``os._exit`` returns (a test's stand-in)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run_to_its_status(args):
    """`main`'s exit status, returned or exited with; a stop raised as `main`'s
    handlers are undone (its work done) gets its line here."""
    try:
        return main(args=args)
    except SystemExit as exited:
        return _exit_status(exited)
    except KeyboardInterrupt as stopped:
        status = getattr(stopped, "exit_status", errors.INTERRUPTED)
        name = getattr(stopped, "signal_name", "SIGINT")
        _, message = errors.interrupted_as_it_ended(args, name, status)
        print(f"keras-selfattn: {message}", file=sys.stderr)
        return status


def _exit_status(exited):
    """The exit status a SystemExit gives, as Python's own exit gives it: None
    is 0, a number itself, anything else printed on stderr and 1."""
    if exited.code is None or isinstance(exited.code, int):
        return exited.code or 0
    print(exited.code, file=sys.stderr)
    return 1


def _stop_as_it_ends(args, signum, frame):
    """`run_program`'s handler: the command's line, then the process ends with
    128 + ``signum`` at once."""
    status, message = errors.interrupted_as_it_ended(
        args, signal.Signals(signum).name, 128 + signum
    )
    _end_now(status, f"keras-selfattn: {message}\n")


def _end_now(status, line=None):
    """Flushes stdout and stderr, writes ``line`` to stderr's descriptor (a
    signal handler's: stderr's buffer may be in the middle of a write), and ends
    the process with ``status`` at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, RuntimeError):  # closed, full, a broken pipe
            pass
    if line is not None:
        try:
            os.write(2, line.encode())
        except OSError:  # a closed or full stderr: the status says it all
            pass
    os._exit(status)


def _run(args):
    """Runs the command ``args`` holds (``args.run``, set by its parser)."""
    return args.run(args)
