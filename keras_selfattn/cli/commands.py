"""The ``keras-selfattn`` command line: the parser, `main`, the dispatch.

Each command is a function pair in the module of its kind (`cli.run_commands`,
`cli.text_commands`, `cli.serving_commands`; `cli.command` holds what they
share): ``add_<command>`` declares its options (the shared ones and those
generated from the config dataclasses come from `cli.flags`) and binds
``_<command>``, which calls the job's function in `keras_selfattn.jobs` (the one
place every job lives) and prints what it returns. `main` parses, makes sure it
runs on TensorFlow (`run_on_tensorflow`), runs the checks of `cli.checks`,
quiets TensorFlow (`cli.quiet`) and runs the command; `cli.errors` turns what
fails into one line and an exit status.
"""

import os
import sys

import keras

from keras_selfattn import backends, stopping
from keras_selfattn.cli import (
    errors,
    run_commands,
    serving_commands,
    text_commands,
)
from keras_selfattn.cli.checks import check_arguments
from keras_selfattn.cli.flags import (
    add_output_options,
    append_defaults,
)
from keras_selfattn.cli.quiet import quiet_tensorflow
from keras_selfattn.stopping import signals_stop


def run_on_tensorflow(parser, argv):
    """Runs the command again under ``KERAS_BACKEND=tensorflow`` when Keras was
    loaded with another backend: the command line is a TensorFlow application.

    Says so in one line on stderr, then replaces this process (``os.execv`` of
    ``python -m keras_selfattn_command`` with the same arguments: the console
    script's module, which honours a stopping signal from its start, also in
    this second start-up). Called from Python
    (``argv`` given), the caller's process is not replaced: one usage error.
    TensorFlow not installed: one usage error (exit 2) naming the package.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    try:
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


def main(argv=None):
    """Runs the command line.

    Returns 0 when done, 1 when ``check-serving`` found problems, 3 when
    ``train`` ended with a model that does not translate (after an error line).
    Otherwise exits (SystemExit) after one line on stderr: 2, bad input (naming
    the file or argument; argparse's usage errors too; TensorFlow not
    installed); 70, an internal error (``--debug`` shows the traceback); 130,
    interrupted (143 by SIGTERM, 129 by SIGHUP, in any command); 141, quietly,
    when the reader of stdout went away (``| head``).
    The command line runs on TensorFlow whatever ``KERAS_BACKEND`` says
    (`run_on_tensorflow`).
    """
    # A stopping signal, from the first line to the last, unwinds the command
    # (`stopping.signals_stop`): its locks, child processes and temporary files
    # are released, and it ends with one line and 130, 143 or 129.
    with signals_stop():
        args = None
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            run_on_tensorflow(parser, argv)
            check_arguments(args)
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


# The statuses of a command a signal stopped: 128 + SIGINT, SIGTERM, SIGHUP.
STOPPED_STATUSES = (130, 143, 129)


def run_program():
    """`main` as a program runs it (the console script, ``python -m``): a command
    a signal stopped ends at once with its status, its output flushed, without
    the interpreter's finalization, whether `main` returned the status (a command
    that reports its own stop, as `translate` does) or exited with it. It has
    already unwound (its locks, child processes and temporary files released);
    finalizing Python while TensorFlow's threads still ran was seen to die by
    SIGSEGV instead of 130 or 143. Python callers of `main` get its status or its
    SystemExit as before.

    Returns:
        `main`'s exit status.
    """
    try:
        status = main()
    except SystemExit as stopped:
        if stopped.code in STOPPED_STATUSES:
            _end_now(stopped.code)
        raise
    if status in STOPPED_STATUSES:
        _end_now(status)
    return status


def _end_now(status):
    """Flushes stdout and stderr and ends the process with ``status`` at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, full or a broken pipe
            pass
    os._exit(status)


def build_parser():
    """The ``keras-selfattn`` argument parser (imports no Keras or TensorFlow)."""
    parser = errors.Parser(
        prog="keras-selfattn",
        description="Attention seq2seq with Keras 3: train, evaluate, translate, "
        "export for TF Serving.",
    )
    add_output_options(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (
        run_commands.add_demo,
        run_commands.add_build_vocab,
        run_commands.add_train,
        text_commands.add_evaluate,
        text_commands.add_translate,
        run_commands.add_average,
        serving_commands.add_export,
        serving_commands.add_check_serving,
    ):
        add(subparsers)
    append_defaults(parser)
    return parser


def _run(args):
    """Runs the command ``args`` holds (``args.run``, set by its parser)."""
    return args.run(args)
