"""The argument checks that run before TensorFlow loads, so that their errors
answer at once: file arguments (not empty; ``--model`` a directory; the pair-file
options ``--data``, ``--valid-data`` and ``--test-data`` name files that exist,
or glob patterns that match some), arguments that are not UTF-8, a SentencePiece
model given by the user, and a command's own configuration (its parser's
``configure``).

Pair files: a path that exists is that file, even when its name holds glob
characters (``[``, ``*``, ``?``); a ``.gz`` file is read as it is. ``evaluate
--data`` reads its file once, so a pipe (``<(zcat ...)``) works there; ``train``
and ``build-vocab`` read theirs more than once (a fingerprint, the held-out
window, each pass; again on resume), so a pipe is refused there with that
reason. ``-`` (stdin) is refused: no command reads pairs from stdin.

Each raises a ValueError or an OSError naming the argument and the value received
(`errors.failure` turns it into one line and exit status 2).
"""

import fnmatch
import os
import pathlib
import stat

# The pair-file options, and the commands that read them once only (a pipe works).
_PAIR_FILE_OPTIONS = (("--data", "data"), ("--valid-data", "valid_data"))
_PAIR_FILE_OPTIONS += (("--test-data", "test_data"),)
_READ_ONCE = ("evaluate",)
_GLOB_CHARACTERS = "*?["


def check_arguments(args):
    """What can be checked before TensorFlow loads (so that these errors answer
    at once), a command's configuration (``configure``) included."""
    decode_arguments(args)
    check_argument_paths(args)
    _check_sentencepiece_models(args)
    configure = getattr(args, "configure", None)
    if configure is not None:
        configure(args)


def check_argument_paths(args):
    """File arguments: not empty; ``--model`` a directory; each pair file (see
    the module docstring) a regular file that exists, or a pattern that matches."""
    for flag, dest in (("--out", "out"), ("--model", "model")):
        value = getattr(args, dest, None)
        if value is not None:
            _check_not_empty(flag, value)
    model = getattr(args, "model", None)
    if model is not None and not os.path.isdir(model):  # before TensorFlow loads
        raise FileNotFoundError(f"Run directory not found: {model} (--model)")
    read_once = getattr(args, "command", None) in _READ_ONCE
    for flag, dest in _PAIR_FILE_OPTIONS:
        values = getattr(args, dest, None)
        for value in values if isinstance(values, list) else [values]:
            if value is not None:
                _check_data_path(flag, value, read_once=read_once)


def _check_not_empty(flag, value):
    if not str(value).strip():
        raise ValueError(f"{flag} must not be empty. Received: {flag}={value!r}")


def _check_data_path(flag, value, read_once=False):
    """A pair file argument: not empty, a regular file (a pipe when read once) if
    it exists, else a pattern matching files; the messages are the readers'."""
    _check_not_empty(flag, value)
    try:
        mode = os.stat(value).st_mode
    except OSError:
        _check_missing(flag, value, read_once)
        return
    if stat.S_ISREG(mode) or (read_once and stat.S_ISFIFO(mode)):
        return
    # A pipe is empty the second time: train reads its files more than once
    # (the fingerprint, the held-out window, each pass; again on resume). .gz
    # files are read as they are, so <(zcat ...) is not needed.
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a pipe, and this command reads its files more than once (write it "
        "to a file; .gz files are read as they are)"
        if stat.S_ISFIFO(mode)
        else "a device or socket"
    )
    raise ValueError(
        f"{flag} must be a file of source<TAB>target lines; "
        f"{value} is {kind}. Received: {flag}={value!r}"
    )


def _check_missing(flag, value, read_once):
    """A pair file that does not exist: a pattern that matches, or an error
    (the one the reader gives after TensorFlow loads). Remote paths (``gs://``)
    are left to TensorFlow's file systems."""
    if "://" in value:
        return
    if value == "-":
        raise ValueError(
            f"{flag} - (stdin) is not read: give the pairs as a file. "
            f"Received: {flag}={value!r}"
        )
    if read_once:  # evaluate reads one file, not a pattern (corpus.read_pairs)
        raise FileNotFoundError(f"Sentence-pair file not found: {value}")
    if any(c in value for c in _GLOB_CHARACTERS):
        if not glob_matches(value):
            raise FileNotFoundError(f"No sentence-pair file matches {value!r}")
        return
    raise FileNotFoundError(f"No sentence-pair file matches {value!r} (file not found)")


def glob_matches(pattern):
    """The paths ``pattern`` matches as the data reader's ``tf.io.gfile.glob``
    matches them: each path component by `fnmatch.fnmatchcase`, so that ``*``
    and ``?`` match a leading dot too (Python's `glob` skips such files: ``*``
    would not match ``.train.tsv`` here while the reader reads it).

    Example:

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / ".hidden.tsv").write_text("a\tb\n")
    >>> [pathlib.Path(p).name for p in glob_matches(str(folder / "*.tsv"))]
    ['.hidden.tsv']
    """
    parts = pathlib.PurePath(pattern).parts
    found = [parts[0]] if not _magic(parts[0]) else _listed(".", parts[0], "")
    for part in parts[1:]:
        if _magic(part):
            found = [path for base in found for path in _listed(base, part, base)]
        else:
            found = [
                os.path.join(base, part)
                for base in found
                if os.path.lexists(os.path.join(base, part))
            ]
    return sorted(path for path in found if os.path.lexists(path))


def _magic(part):
    return any(c in part for c in _GLOB_CHARACTERS)


def _listed(directory, part, prefix):
    """The names in ``directory`` that ``part`` matches, joined to ``prefix``."""
    try:
        names = os.listdir(directory)
    except OSError:  # not a directory, or not readable
        return []
    return [
        os.path.join(prefix, name) if prefix else name
        for name in sorted(names)
        if fnmatch.fnmatchcase(name, part)
    ]


def decode_arguments(args):
    """Arguments that are not UTF-8 (Python keeps their bytes as surrogates).

    Sentences to translate get U+FFFD for such bytes, as stdin does; any other
    argument is refused with a ValueError naming it.
    """
    for name, value in vars(args).items():
        if name == "text" and isinstance(value, list):
            args.text = [
                text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                for text in value
            ]
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                shown = item.encode("utf-8", "surrogateescape")
                flag = "--" + name.replace("_", "-") if name != "path" else "PATH"
                raise ValueError(
                    f"{flag} is not valid UTF-8. Received: {flag}={shown!r}"
                ) from None


def _check_sentencepiece_models(args):
    """A SentencePiece model given by the user: read before any data is."""
    for side in ("source", "target"):
        path = getattr(args, f"{side}_sentencepiece_model", None)
        if path is not None:
            from keras_selfattn.text.sentencepiece_model import read_sentencepiece_model

            read_sentencepiece_model(path, f"--{side}-sentencepiece-model")
