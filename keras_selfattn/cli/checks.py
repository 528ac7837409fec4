"""The argument checks that run before TensorFlow loads, so that their errors
answer at once: file arguments (not empty; ``--model`` a directory; ``--data`` a
regular file), arguments that are not UTF-8, a SentencePiece model given by the
user, and a command's own configuration (its parser's ``configure``).

Each raises a ValueError or an OSError naming the argument and the value received
(`errors.failure` turns it into one line and exit status 2).
"""

import os
import stat


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
    """File arguments: not empty; ``--model`` a directory; ``--data`` a regular
    file (or a glob pattern), not a directory, pipe or device."""
    for flag, dest in (("--out", "out"), ("--model", "model")):
        value = getattr(args, dest, None)
        if value is not None:
            _check_not_empty(flag, value)
    model = getattr(args, "model", None)
    if model is not None and not os.path.isdir(model):  # before TensorFlow loads
        raise FileNotFoundError(f"Run directory not found: {model} (--model)")
    values = getattr(args, "data", None)
    for value in values if isinstance(values, list) else [values]:
        if value is not None:
            _check_data_path("--data", value)


def _check_not_empty(flag, value):
    if not str(value).strip():
        raise ValueError(f"{flag} must not be empty. Received: {flag}={value!r}")


def _check_data_path(flag, value):
    """A pair file argument: not empty, and a regular file if it exists."""
    _check_not_empty(flag, value)
    try:
        mode = os.stat(value).st_mode
    except OSError:
        return  # missing (or a glob pattern): the reader says so
    if not stat.S_ISREG(mode):
        # The stream is read more than once (the held-out window, then
        # each training pass): a pipe would be empty the second time.
        # .gz files are read as they are, so <(zcat ...) is not needed.
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a pipe (read once; pass the file, .gz is read)"
            if stat.S_ISFIFO(mode)
            else "a device or socket"
        )
        raise ValueError(
            f"{flag} must be a file of source<TAB>target lines; "
            f"{value} is {kind}. Received: {flag}={value!r}"
        )


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
