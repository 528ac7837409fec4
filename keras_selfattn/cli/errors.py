"""The command line's error policy: one line on stderr and an exit status, never
a traceback.

Bad input (a missing or unreadable file, a malformed TSV or ``config.json``, a
bad option value: a ValueError or an OSError) prints ``keras-selfattn: error:
...`` naming the file or argument and exits with `USAGE_ERROR` (2), as argparse's
usage errors do (`Parser`); a missing optional extra is bad input too. Anything
else is an internal error (`INTERNAL_ERROR`, 70) and ``--debug`` shows its
traceback; an interrupt is `INTERRUPTED` (130). A ``train`` whose model does not
translate at its last validation exits with `EXIT_NOT_TRANSLATING` (3,
`health_status`). `failure` and `interrupted` choose the status and the line;
`reading` and `opening_run` turn a file that cannot be read into a ValueError
naming it. Imports no Keras or TensorFlow until a run is opened.
"""

import argparse
import contextlib
import os
import sys
import zipfile

from keras_selfattn.run_layout import MODEL_FILE

USAGE_ERROR = 2  # bad input: one line naming the file or argument
# A bug (sysexits' EX_SOFTWARE): one line; --debug shows the traceback.
INTERNAL_ERROR = 70
# train finished, but at its last validation the model did not translate (its
# output ignored the source, or was one sentence for every input).
EXIT_NOT_TRANSLATING = 3
INTERRUPTED = 130
_LONGEST_MESSAGE = 1000  # characters of an error message kept on its one line

# The optional extras' modules (setup.py extras_require): "plots" and "serving".
_EXTRA_MODULES = ("matplotlib", "tensorflow_serving")


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit status 2)."""

    def error(self, message):
        self.exit(
            USAGE_ERROR,
            f"{self.prog}: error: {message} (see {self.prog} --help)\n",
        )


def failure(error):
    """``(exit status, message)`` for an error that ended a command."""
    if isinstance(error, (ValueError, OSError)):
        return USAGE_ERROR, f"error: {one_line(error)}"
    if isinstance(error, ImportError) and _missing_extra(error):
        return USAGE_ERROR, (
            f"error: {one_line(error)} (this needs an optional dependency: "
            "pip install 'keras-selfattn[serving,plots]')"
        )
    return INTERNAL_ERROR, (
        f"internal error: {type(error).__name__}: {one_line(error)} "
        "(a bug: rerun with --debug for the traceback and report it)"
    )


def interrupted(command):
    """``(exit status, message)`` for a command interrupted (Ctrl-C)."""
    resume = "; rerun the same command to resume" if command == "train" else ""
    return INTERRUPTED, f"interrupted{resume}"


def health_status(result):
    """0, or `EXIT_NOT_TRANSLATING` after an error line when the model of the
    `TrainResult` ``result`` did not translate at its last validation."""
    health = result.summary.get("health")
    if not health or health["ok"]:
        return 0
    print(
        "keras-selfattn: error: at the last validation the model was not "
        f"translating: {'; '.join(health['problems'])}. The run is kept in "
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
    """A run directory's ``model.keras``, when present, is a whole ``.keras`` archive.

    (Keras calls a truncated archive "File not found".)
    """
    model = _model_file(path)
    if os.path.isfile(model) and not zipfile.is_zipfile(model):
        raise ValueError(
            f"{model} is not a .keras archive: the file is truncated or corrupt "
            "(retrain, or restore it from a copy)"
        )


def opening_run(run_dir, only_loading=False):
    """The block that loads the run ``run_dir``: its ``model.keras`` is checked
    first, and what cannot be read is an error naming the file (`reading`)."""
    check_run_directory(run_dir)
    return reading("the run directory", run_dir, only_loading=only_loading)
