"""The command line's error policy: one line on stderr and an exit status, never
a traceback.

Bad input (a missing or unreadable file, a malformed TSV or ``config.json``, a
bad option value: a ValueError or an OSError) prints ``keras-selfattn: error:
...`` naming the file or argument and exits with `USAGE_ERROR` (2), as argparse's
usage errors do (`Parser`); a missing optional extra is bad input too. Anything
else is an internal error (`INTERNAL_ERROR`, 70) and ``--debug`` shows its
traceback; an interrupt is `INTERRUPTED` (130). A ``train`` whose model does not
translate at its last validation exits with `EXIT_NOT_TRANSLATING` (3,
`health_status`), once it was long enough for a model to translate (a shorter
one gets a warning line and 0). `failure` and `interrupted` choose the status
and the line; `reading` and `opening_run` turn a file that cannot be read into
a ValueError naming it. Imports no Keras or TensorFlow until a run is opened.

TensorFlow's own writers (SavedModel, checkpoints, summaries, ``tf.io.gfile``)
report a full disk or a refused write as ``tf.errors`` (ResourceExhaustedError,
PermissionDeniedError, FailedPreconditionError...): `failure` gives them the line
Python's OSError gets (``FILE: No space left on device``, exit 2), and a data
file that disappears while a stream reads it (NotFoundError) names the file.

The output: `guarded_output` wraps stdout for a command, so that a write that
fails is an `OutputError`: a full device or a closed stdout is one line and exit
2; a reader that went away (``| head``) ends the command quietly with
`BROKEN_PIPE` (141, what a shell reports for a Unix tool killed by SIGPIPE).
"""

import argparse
import contextlib
import difflib
import errno
import os
import re
import sys
import zipfile

from keras_selfattn.cli.flags import HelpFormatter
from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.damaged import RunFileDamaged
from keras_selfattn.run_directory.layout import MODEL_FILE

USAGE_ERROR = 2  # bad input: one line naming the file or argument
# A bug (sysexits' EX_SOFTWARE): one line; --debug shows the traceback.
INTERNAL_ERROR = 70
# train finished, but at its last validation the model did not translate (its
# output ignored the source, or was one sentence for every input).
EXIT_NOT_TRANSLATING = 3
INTERRUPTED = 130
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (| head)
_LONGEST_MESSAGE = 1000  # characters of an error message kept on its one line

# The optional extras' modules (setup.py extras_require): "plots" and "serving".
_EXTRA_MODULES = ("matplotlib", "tensorflow_serving")


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit status 2) and exact option
    names only: a prefix (``--epoch`` for ``--epochs``) is a usage error, not
    taken for the option it starts (so that a typo is not read as another
    option). Its commands' parsers are Parsers too.

    A mistyped option, command or choice gets the closest one
    (`difflib.get_close_matches`: "did you mean --epochs?"), and the line points
    to the help of the command it was typed for (``keras-selfattn train
    --help``), also for an option argparse leaves unrecognized to the main
    parser."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(
            USAGE_ERROR,
            f"{self.prog}: error: {message} (see {self.prog} --help)\n",
        )

    def parse_args(self, args=None, namespace=None):
        parsed, unrecognized = self.parse_known_args(args, namespace)
        if unrecognized:
            self._command(parsed).refuse(unrecognized)
        return parsed

    def _command(self, parsed):
        """The parser of the command ``parsed`` holds, else this one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(parsed, action.dest, None)
                return action.choices.get(name, self)
        return self

    def refuse(self, unrecognized):
        """The usage error for arguments no option of this parser takes, with
        the option closest to the first mistyped one."""
        message = f"unrecognized arguments: {' '.join(unrecognized)}"
        for argument in unrecognized:
            if argument.startswith("-"):
                typed = argument.split("=", 1)[0]
                message += _did_you_mean(typed, self._option_string_actions)
                break
        self.error(message)

    def _check_value(self, action, value):
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as error:
            choices = [str(choice) for choice in action.choices]
            hint = _did_you_mean(str(value), choices)
            if not hint:
                raise
            raise argparse.ArgumentError(action, error.message + hint) from None


def _did_you_mean(typed, names):
    """ "; did you mean NAME?" for the name of ``names`` closest to ``typed``, or
    "" when none is close."""
    close = difflib.get_close_matches(typed, list(names), n=1)
    return f"; did you mean {close[0]}?" if close else ""


class OutputError(OSError):
    """Writing the command's output (stdout) failed; the OSError is the cause."""


def failure(error):
    """``(exit status, message)`` for an error that ended a command.

    The message is None for a broken pipe (`BROKEN_PIPE`: nothing to say).
    """
    if isinstance(error, OutputError):
        if isinstance(error.__cause__, BrokenPipeError):
            return BROKEN_PIPE, None
        return USAGE_ERROR, f"error: {error}"
    tf_error = tensorflow_file_error(error)
    if tf_error is not None:
        return USAGE_ERROR, f"error: {one_line(tf_error)}"
    if isinstance(error, (ValueError, OSError)):
        return USAGE_ERROR, f"error: {cli_words(one_line(error))}"
    if isinstance(error, ImportError) and _missing_extra(error):
        return USAGE_ERROR, (
            f"error: {one_line(error)} (this needs an optional dependency: "
            "pip install 'keras-selfattn[serving,plots]')"
        )
    return INTERNAL_ERROR, (
        f"internal error: {type(error).__name__}: {one_line(error)} "
        "(a bug: rerun with --debug for the traceback and report it)"
    )


# TensorFlow's file-system errors (tf.errors classes, by name: no import here) and
# the OS reasons their messages carry.
_TF_FILE_ERRORS = (
    "ResourceExhaustedError",
    "PermissionDeniedError",
    "FailedPreconditionError",
    "UnknownError",
    "InternalError",
    "AbortedError",
    "NotFoundError",
)
_OS_REASONS = {
    "No space left on device": errno.ENOSPC,
    "Permission denied": errno.EACCES,
    "Read-only file system": errno.EROFS,
    "File too large": errno.EFBIG,
    "Disk quota exceeded": errno.EDQUOT,
}
_PATH = re.compile(r"(?<![\w.])(?:[a-z][a-z0-9+.-]*://|/)[^\s;,'\"]+")


def tensorflow_file_error(error):
    """The `OSError` a TensorFlow file-system error stands for, or None.

    A full disk, a read-only folder or a refused permission met by TensorFlow's
    writers (``FILE; No space left on device`` inside a ResourceExhaustedError,
    a FailedPreconditionError...) is an OSError naming the file, as Python's
    own; a file a ``tf.data`` reader no longer finds (a data file removed
    mid-run: NotFoundError at IteratorGetNext) is a FileNotFoundError naming it.
    The error and its causes are searched; Keras wraps TensorFlow's.
    """
    while error is not None:
        name = type(error).__name__
        if type(error).__module__.startswith("tensorflow") and name in _TF_FILE_ERRORS:
            found = _as_os_error(error, name)
            if found is not None:
                return found
        error = error.__cause__ or (
            None if error.__suppress_context__ else error.__context__
        )
    return None


def _as_os_error(error, name):
    """The OSError in a TensorFlow error's message (TensorFlow writes ``FILE;
    reason`` or ``FILE: reason``, the FILE as it was given), or None."""
    text = getattr(error, "message", None) or str(error)
    for reason, number in _OS_REASONS.items():
        if reason in text:
            where = _file_before(reason, text)
            if where:  # export's staging folder is removed: name the base folder
                where = re.sub(r"/\.export-tmp-[^/]*/.*$", "", where)
            return OSError(number, reason, where or "a file TensorFlow wrote")
    missing = _file_before("No such file or directory", text)
    if name == "NotFoundError" and missing:
        return FileNotFoundError(
            errno.ENOENT,
            "No such file or directory (it disappeared while it was read; a "
            "run's backup is kept: put the file back and rerun the same command)",
            missing,
        )
    return None


def _file_before(reason, text):
    """The file TensorFlow names before ``reason`` (``FILE; reason``), else the
    first absolute path or URL of ``text``, else None."""
    before = re.search(r"([^\s;:{}\[\]]+)\s*[;:,]\s*" + re.escape(reason), text)
    if before:
        return before.group(1)
    paths = _PATH.findall(text)
    return paths[0] if paths else None


class GuardedStream:
    """A stream (text or binary) whose failed writes are `OutputError`s naming it;
    an `OutputError` from a guarded stream under it passes as it is."""

    def __init__(self, stream, name):
        self._stream = stream
        self._name = name

    def _guard(self, method, *args):
        try:
            return getattr(self._stream, method)(*args)
        except OutputError:
            raise
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise OutputError(
                f"cannot write the output to {self._name}: {reason}"
            ) from error

    def write(self, data):
        return self._guard("write", data)

    def flush(self):
        return self._guard("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output():
    """Runs a command with stdout guarded: its failures are `OutputError`s.

    A closed stdout (fd 1 closed: Python's ``sys.stdout`` is None) is refused at
    once; stdout is flushed before the block ends, so that a full device is met
    here, not at interpreter exit. After a failed write stdout points to
    /dev/null, so that the interpreter's last flush does not fail again.
    """
    if sys.stdout is None:
        raise OutputError(
            "stdout is closed: the command has nowhere to write its output "
            "(redirect it to a file or /dev/null instead)"
        )
    saved = sys.stdout
    sys.stdout = GuardedStream(saved, "stdout")
    try:
        yield
        sys.stdout.flush()
    except OutputError:
        _silence(saved)
        raise
    finally:
        sys.stdout = saved


def _silence(stream):
    """Points ``stream``'s file descriptor to /dev/null (when it has one)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def interrupted(command, error=None):
    """``(exit status, message)`` for a command interrupted (Ctrl-C, or SIGTERM:
    ``error`` carries ``exit_status`` and ``signal_name``); a `train` says what
    the rerun does (``error.rerun``, or that it resumes)."""
    status = getattr(error, "exit_status", INTERRUPTED)
    name = getattr(error, "signal_name", "SIGINT")
    by = "" if name == "SIGINT" else f" by {name}"
    rerun = getattr(error, "rerun", None) or "rerun the same command to resume"
    resume = f"; {rerun}" if command in ("train", "demo") else ""
    return status, f"interrupted{by}{resume}"


def interrupted_as_it_ended(args, signal_name, status):
    """``(exit status, message)`` for a stop that came once the command's work was
    done, while its process ends (``status``: 128 + the signal's number): a
    `train` or `demo` says where its run is (finished and complete, or what the
    rerun does), any other command that its work was done."""
    by = "" if signal_name == "SIGINT" else f" by {signal_name}"
    command = getattr(args, "command", None)
    done = "its work was done"
    if command in ("train", "demo"):
        from keras_selfattn.run_directory.rerun import run_dir_state

        done = "rerun the same command to finish the run"
        if run_dir_state(args.out) == "finished":
            done = f"the run in {args.out} is finished and complete"
    return status, f"interrupted{by} as it ended; {done}"


# A run is expected to translate once it has made this many optimizer updates
# and is past its learning-rate warm-up; a shorter one (a first trial of a few
# steps, or one epoch) that does not is warned about, not failed.
HEALTH_EXIT_UPDATES = 1000


def long_enough_to_translate(steps, train_config):
    """Whether a run of ``steps`` steps under ``train_config`` is long enough
    for a working model to be expected: `HEALTH_EXIT_UPDATES` optimizer updates
    (steps count batches, ``accumulate_steps`` of them an update) and past its
    ``warmup_steps``."""
    updates = steps // train_config.accumulate_steps
    return updates >= max(HEALTH_EXIT_UPDATES, train_config.warmup_steps + 1)


def health_status(result):
    """0, or `EXIT_NOT_TRANSLATING` after an error line when the model of the
    `TrainResult` ``result`` did not translate at its last validation and the
    run was long enough for it to (`long_enough_to_translate`); a shorter run
    that does not translate gets a warning line and 0."""
    health = result.summary.get("health")
    if not health or health["ok"]:
        return 0
    problems = "; ".join(health["problems"])
    steps = result.summary.get("steps") or 0
    if not long_enough_to_translate(steps, result.train_config):
        print(
            "keras-selfattn: warning: at the last validation the model was not "
            f"translating yet: {problems}. {steps} steps are few for that (a run "
            f"fails this check from {HEALTH_EXIT_UPDATES:,} optimizer updates past "
            "its warm-up on): train longer with --epochs or --train-steps. The run "
            f"is kept in {result.run_dir}",
            file=sys.stderr,
        )
        return 0
    print(
        "keras-selfattn: error: at the last validation the model was not "
        f"translating: {problems}. The run is kept in "
        f"{result.run_dir}; see README: Training on real text",
        file=sys.stderr,
    )
    return EXIT_NOT_TRANSLATING


def _missing_extra(error):
    """Whether an ImportError says that an optional extra is not installed."""
    cause = error
    while cause is not None:
        name = getattr(cause, "name", None) or ""
        if name.split(".")[0] in _EXTRA_MODULES:
            return True
        cause = cause.__cause__
    return False


# The library's Python words in its messages, and the command line's for them
# (`cli_words`): the parameters of `training.train` and `workflows.build_vocab`
# that are ``--out``, ``--overwrite`` and ``--strict-columns`` there.
_CLI_WORDS = (
    (re.compile(r"--overwrite \(overwrite=True\)"), "--overwrite"),
    (re.compile(r"\boverwrite=True\b"), "--overwrite"),
    (re.compile(r"(--out \S+) \((?:out_dir|run_dir)\)"), r"\1"),
    (re.compile(r"(?<![\w/.-])(?:run_dir|out_dir)=(?=\S)"), "--out "),
    (re.compile(r"(?<![\w/.-])(?:run_dir|out_dir)(?![\w/.-])"), "--out"),
    (re.compile(r"\(strict_columns\)"), "(--strict-columns)"),
    (re.compile(r"(?<![\w/.-])batch_size=(?=\d)"), "--batch-size "),
    (re.compile(r"(?<![\w/.-])batch_size(?= is the global batch)"), "--batch-size"),
)


def cli_words(message):
    """A library error's message in the command line's words: ``--overwrite``
    for ``overwrite=True``, ``--out`` for ``run_dir`` and ``out_dir``,
    ``--batch-size 32`` for ``batch_size=32``..."""
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return message


def one_line(error):
    """An exception as one line: OSErrors as ``FILE: reason``, whitespace collapsed."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        message = f"{error.filename}: {error.strerror}"
    else:
        message = str(error) or type(error).__name__
        if isinstance(error, KeyError):  # str(KeyError) is the quoted key alone
            message = f"missing key {message}"
    message = " ".join(message.split())
    if len(message) > _LONGEST_MESSAGE:
        message = message[: _LONGEST_MESSAGE - 3] + "..."
    return message


def _innermost(error):
    """The deepest cause of a chained exception (Keras wraps the real one)."""
    while error.__cause__ is not None or (
        error.__context__ is not None and not error.__suppress_context__
    ):
        error = error.__cause__ or error.__context__
    return error


@contextlib.contextmanager
def reading(what, path, only_loading=False):
    """Turns a failure to read ``path`` into a ValueError naming it.

    A file that exists but cannot be read (truncated, not what it should be,
    written by other code) is bad input, not a bug. Our own ValueErrors and
    OSErrors already name their file and pass unchanged; a model Keras could not
    load (`inference.ModelFileError`) is named after the run's ``model.keras``.
    With ``only_loading``, every other exception passes unchanged (the block does
    more than read).
    """
    from keras_selfattn.inference import ModelFileError  # TensorFlow is loaded by now

    try:
        yield
    except ModelFileError as error:
        raise _unreadable(_model_file(path), error) from error
    except (ValueError, OSError):
        raise
    except Exception as error:
        if only_loading:
            raise
        raise _unreadable(f"{what} {path}", error) from error


def _unreadable(what, error):
    cause = _innermost(error)
    return ValueError(f"cannot read {what}: {type(cause).__name__}: {one_line(cause)}")


def _model_file(run_dir):
    return os.path.join(run_dir, MODEL_FILE)


def check_run_directory(path):
    """A run directory's ``model.keras``, when present, is a whole ``.keras``
    archive (Keras calls a truncated archive "File not found"), and its parts
    belong together (`check_run_parts`: vocabularies, tokenizer.json,
    config.json and the model's own record), all before TensorFlow loads.
    """
    model = _model_file(path)
    if os.path.isfile(model) and not zipfile.is_zipfile(model):
        raise RunFileDamaged(
            model,
            "not a .keras archive: the file is truncated or corrupt",
            "retrain, or restore it from a copy",
        )
    check_run_parts(path)


def opening_run(run_dir, only_loading=False):
    """The block that loads the run ``run_dir``: its ``model.keras`` is checked
    first, and what cannot be read is an error naming the file (`reading`)."""
    check_run_directory(run_dir)
    return reading("the run directory", run_dir, only_loading=only_loading)
