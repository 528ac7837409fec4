"""The ``keras-selfattn`` command: a thin argparse layer over the library.

Every subcommand calls one documented function (`workflows.run_demo`,
`training.train`, `inference.evaluate`, `inference.Translator.translate`,
`serving.export_run`, `serving.check_serving`).

Building the parser imports no Keras or TensorFlow (the package loads its names
on first use), so ``--help`` and usage errors answer at once; the option help
comes from the ``Attributes:`` sections of `ModelConfig` and `TrainConfig`.

Never a traceback: bad input (a missing or unreadable file, a malformed TSV or
``config.json``, a bad option value) prints one line ``keras-selfattn: error: ...``
naming the file or argument and exits with status 2; anything else is reported in
one line as an internal error (exit status 70), and ``--debug`` shows its
traceback. A ``train`` whose model does not translate at its last validation
(the health check of `training.watch`) exits with status 3. TensorFlow's C++ log
lines are silenced unless ``--verbose`` or ``--debug`` is given, whatever
``TF_CPP_MIN_LOG_LEVEL`` says.

One function pair per command: ``_add_<command>`` declares its options (the
shared ones come from ``_add_*_option`` helpers) and binds ``_<command>``, which
runs it; each option's "(default: ...)" is appended by `_append_defaults`.
"""

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import pathlib
import re
import stat
import sys
import tempfile
import typing
import zipfile

from keras_selfattn.models.config import ModelConfig
from keras_selfattn.training.config import TrainConfig
from keras_selfattn.training.presets import PRESETS, preset_configs

USAGE_ERROR = 2  # bad input: one line naming the file or argument
# A bug (sysexits' EX_SOFTWARE): one line; --debug shows the traceback.
INTERNAL_ERROR = 70
# train finished, but at its last validation the model did not translate (its
# output ignored the source, or was one sentence for every input).
EXIT_NOT_TRANSLATING = 3
INTERRUPTED = 130
_LONGEST_MESSAGE = 1000  # characters of an error message kept on its one line

# TensorFlow's native log lines: absl's ("I0000 00:00:1796071465.895658 10740
# cudart_stub.cc:31] ..."), its pre-initialization notice, and TF's older format.
NATIVE_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] )"
)


def _field_docs(cls):
    """``{field: description}`` from the ``Attributes:`` section of ``cls``'s
    docstring."""
    doc = inspect.getdoc(cls) or ""
    docs, name, indent, inside = {}, None, None, False
    for line in doc.splitlines():
        if line.strip() == "Attributes:":
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith(" "):
            break  # the next section
        match = re.match(r"^( +)(\w+): (.*)$", line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, name = len(match.group(1)), match.group(2)
            docs[name] = match.group(3).strip()
        elif name and line.strip():
            docs[name] += " " + line.strip()
    return {key: value.replace("``", "") for key, value in docs.items()}


# What an option's default is called in its help, where that is not the value
# itself: a config flag's None means the dataclass default, and some Nones mean
# something ("held out of --data"). Set with `_shows`; read by `_append_defaults`.
_SHOWN_DEFAULT = "shown_default"


def _shows(action, default):
    """Declares what the help calls ``action``'s default; returns ``action``."""
    setattr(action, _SHOWN_DEFAULT, default)
    return action


def _default_note(action):
    """What follows an option's help: " (required)", " (default: X)" or nothing.

    A switch (``--overwrite``: off unless given) and a positional argument that
    must be given show nothing; ``--x/--no-x`` shows yes or no, None "none".
    """
    if action.required and action.option_strings:
        return " (required)"
    if hasattr(action, _SHOWN_DEFAULT):
        default = getattr(action, _SHOWN_DEFAULT)
    elif action.required or action.nargs == 0 or action.default is argparse.SUPPRESS:
        return ""
    else:
        default = action.default
    if isinstance(default, bool):
        default = "yes" if default else "no"
    shown = "none" if default is None else str(default)
    return f" (default: {shown})".replace("%", "%%")


def _append_defaults(parser):
    """Appends `_default_note` to the help of every option of ``parser`` and of its
    commands: the one place a default is written into the help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _append_defaults(command)
        elif action.help not in (None, argparse.SUPPRESS):
            action.help += _default_note(action)


def _config_argument_kind(cls, field, default):
    """add_argument's keywords for a field: how its flag parses its value."""
    if isinstance(default, bool):
        return {"action": argparse.BooleanOptionalAction}
    if default is None:  # an optional field (int | None) parses as its non-None type
        kind = next(t for t in typing.get_args(field.type) if t is not type(None))
    else:
        kind = type(default)
    choices = cls.CHOICES.get(field.name)
    if choices:
        return {"type": kind, "choices": choices}
    return {"type": kind, "metavar": field.name.upper()}


def _add_config_arguments(parser, cls, title, *, only=None, skip=()):
    """One ``--flag`` per field of the dataclass ``cls`` (``foo_bar`` -> ``--foo-bar``).

    Every flag defaults to None, meaning "the dataclass default" (the help shows
    that one); booleans get ``--x/--no-x``; a field listed in ``cls.CHOICES``
    accepts only those values. The help line is the field's entry in the class
    docstring's ``Attributes:`` section. ``only`` (field names) or ``skip`` limit
    the fields.
    """
    defaults = cls()
    docs = _field_docs(cls)
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        if field.name in skip or (only is not None and field.name not in only):
            continue
        default = getattr(defaults, field.name)
        action = group.add_argument(
            "--" + field.name.replace("_", "-"),
            default=None,
            help=docs.get(field.name, "").replace("%", "%%"),
            **_config_argument_kind(cls, field, default),
        )
        _shows(action, default)


def _config_from_args(cls, args, base=None):
    """``cls`` from ``base`` (default: ``cls()``) and the flags given.

    Raises:
        ValueError: an invalid value; the message names the flags involved.
    """
    base = base or cls()
    values = vars(base).copy()
    given = []
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            values[field.name] = value
            given.append(field.name)
    try:
        return cls(**values)
    except ValueError as error:
        named = [name for name in given if re.search(rf"\b{name}\b", str(error))]
        if not named:
            raise
        flags = ", ".join("--" + name.replace("_", "-") for name in named)
        raise ValueError(f"{error} (from {flags})") from None


def _count(minimum):
    """An argparse type: an integer >= ``minimum``."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}. Received: {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}. Received: {value}"
            )
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


_OUTPUT_OPTIONS = (
    ("--quiet", "no progress lines while training"),
    ("--verbose", "show TensorFlow's own log lines (hidden by default)"),
    ("--debug", "like --verbose, and show the traceback of an error"),
)


def _add_output_options(parser, default):
    """--quiet, --verbose, --debug (on the main parser and on every command)."""
    for flag, help_text in _OUTPUT_OPTIONS:
        parser.add_argument(flag, action="store_true", default=default, help=help_text)


def _add_data_option(parser, help_text):
    """--data, required and repeatable: the pair files a command reads."""
    parser.add_argument("--data", action="append", required=True, help=help_text)


def _add_model_option(parser):
    """--model: the run directory a command loads (`_load_translator`)."""
    parser.add_argument("--model", required=True, help="run directory")


def _add_beam_option(parser, help_text="beam size", default=1):
    """--beam: a beam size (1, the default, is greedy search)."""
    action = parser.add_argument(
        "--beam", type=_count(1), default=default, help=help_text
    )
    if default == 1:
        _shows(action, "1, greedy search")


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit status 2)."""

    def error(self, message):
        self.exit(
            USAGE_ERROR,
            f"{self.prog}: error: {message} (see {self.prog} --help)\n",
        )


def _add_command(subparsers, name, run, **kwargs):
    """A command's parser, with the output options; ``run(args)`` runs it."""
    parser = subparsers.add_parser(name, **kwargs)
    _add_output_options(parser, default=argparse.SUPPRESS)
    parser.set_defaults(run=run)
    return parser


def build_parser():
    """The ``keras-selfattn`` argument parser (imports no Keras or TensorFlow)."""
    parser = _Parser(
        prog="keras-selfattn",
        description="Attention seq2seq with Keras 3: train, evaluate, translate, "
        "export for TF Serving.",
    )
    _add_output_options(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_demo,
        _add_build_vocab,
        _add_train,
        _add_evaluate,
        _add_translate,
        _add_average,
        _add_export,
        _add_check_serving,
    ):
        add(subparsers)
    _append_defaults(parser)
    return parser


def _one_line(error):
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
def _reading(what, path, only_loading=False):
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
    return ValueError(f"cannot read {what}: {type(cause).__name__}: {_one_line(cause)}")


def _model_file(run_dir):
    from keras_selfattn.training.train import MODEL_FILE  # TensorFlow is loaded by now

    return os.path.join(run_dir, MODEL_FILE)


def _check_run_directory(path):
    """A run directory's ``model.keras``, when present, is a whole ``.keras`` archive.

    (Keras calls a truncated archive "File not found".)
    """
    model = _model_file(path)
    if os.path.isfile(model) and not zipfile.is_zipfile(model):
        raise ValueError(
            f"{model} is not a .keras archive: the file is truncated or corrupt "
            "(retrain, or restore it from a copy)"
        )


def _check_argument_paths(args):
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


def _decode_arguments(args):
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


def _read_stdin_lines():
    """stdin's lines, split on "\\n" only (a sentence may hold \\f, \\x1d or U+2028).

    Bytes that are not UTF-8 become U+FFFD; a final "\\r" is dropped (CRLF files).
    """
    data = sys.stdin.buffer.read().decode("utf-8", "replace")
    lines = data.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _progress(args):
    """Keras fit verbosity: bars on a terminal, one line per epoch otherwise, none
    with --quiet."""
    if args.quiet:
        return 0
    return 1 if sys.stdout.isatty() else 2


@contextlib.contextmanager
def _native_stderr_filtered():
    """Drops TensorFlow's native log lines written to fd 2 inside the block; keeps
    the rest.

    TensorFlow prints "Could not find cuda drivers" through absl before any
    log level applies, so ``TF_CPP_MIN_LOG_LEVEL`` alone cannot hide it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            for line in text.splitlines(keepends=True):
                if not NATIVE_LOG_LINE.match(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


def _quiet_tensorflow():
    """Silences TensorFlow's C++ logging, whatever ``TF_CPP_MIN_LOG_LEVEL`` the
    user set.

    Measured with TF 2.21: ``import tensorflow`` prints absl's "All log messages
    before absl::InitializeLog()" notice, the oneDNN line and "Could not find
    cuda drivers" (each twice) under every ``TF_CPP_MIN_LOG_LEVEL`` (unset, 0-3);
    ``GLOG_minloglevel``, ``ABSL_MIN_LOG_LEVEL`` or an empty ``CUDA_VISIBLE_DEVICES``
    hide none of them, ``TF_ENABLE_ONEDNN_OPTS=0`` only the oneDNN line (and
    changes the numerics). So fd 2 is filtered around the import, and the level
    is 3 for what TensorFlow logs later (a user's 0 would show "failed call to
    cuInit") and for the processes the command starts (they inherit it).
    ``--verbose`` leaves all of this alone.
    """
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if "tensorflow" not in sys.modules:
        with _native_stderr_filtered():
            import tensorflow  # noqa: F401


def _check_sentencepiece_models(args):
    """A SentencePiece model given by the user: read before any data is."""
    for side in ("source", "target"):
        path = getattr(args, f"{side}_sentencepiece_model", None)
        if path is not None:
            from keras_selfattn.text.sentencepiece_model import read_sentencepiece_model

            read_sentencepiece_model(path, f"--{side}-sentencepiece-model")


def _check_arguments(args):
    """What can be checked before TensorFlow loads (so that these errors answer
    at once), a command's configuration (``configure``) included."""
    _decode_arguments(args)
    _check_argument_paths(args)
    _check_sentencepiece_models(args)
    configure = getattr(args, "configure", None)
    if configure is not None:
        configure(args)


def _opening_run(args, only_loading=False):
    """The block that loads the run of ``--model``: its ``model.keras`` is checked
    first, and what cannot be read is an error naming the file (`_reading`)."""
    _check_run_directory(args.model)
    return _reading("the run directory", args.model, only_loading=only_loading)


def _load_translator(args):
    """The `inference.Translator` of the run directory ``--model``."""
    from keras_selfattn.inference import Translator

    with _opening_run(args):
        return Translator.load(args.model)


# One function pair per command: `_add_<command>(subparsers)` declares it and
# `_<command>(args)` runs it (returning the exit status).


def _add_demo(subparsers):
    parser = _add_command(
        subparsers,
        "demo",
        _demo,
        help="the main job: train on the bundled dates corpus, evaluate, plot",
    )
    parser.add_argument("--out", default="runs/demo", help="run directory")
    epochs = parser.add_argument(
        "--epochs", type=_count(1), help="override the demo's epoch count"
    )
    _shows(epochs, "the demo's 4")


def _demo(args):
    from keras_selfattn.workflows import run_demo

    result, _ = run_demo(args.out, epochs=args.epochs, verbose=_progress(args))
    print(f"run directory: {result.run_dir}")
    return 0


def _add_build_vocab(subparsers):
    parser = _add_command(
        subparsers,
        "build-vocab",
        _build_vocab,
        help="learn the vocabularies from pair files, in bounded memory",
    )
    _add_data_option(parser, "pair file or glob pattern (.gz read); repeat for more")
    parser.add_argument(
        "--out", required=True, help="directory for the vocabularies + tokenizer.json"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace vocabularies in --out"
    )
    _add_config_arguments(
        parser, TrainConfig, "tokenizer", only=TrainConfig.VOCAB_FIELDS
    )


def _build_vocab(args):
    from keras_selfattn.workflows import build_vocab

    config = _config_from_args(TrainConfig, args)
    build_vocab(args.data, args.out, config, overwrite=args.overwrite)
    return 0


def _add_train(subparsers):
    parser = _add_command(
        subparsers, "train", _train, help="train on source<TAB>target pair files"
    )
    _add_data_option(
        parser,
        "pair file or glob pattern (shards/*.tsv.gz), streamed; repeat for more",
    )
    for flag, split in (("--valid-data", "validation"), ("--test-data", "test")):
        held_out = parser.add_argument(
            flag, action="append", help=f"{split} pair file(s)"
        )
        _shows(held_out, "held out of --data")
    vocab = parser.add_argument(
        "--vocab", help="vocabularies from build-vocab, or a run directory"
    )
    _shows(vocab, "learned")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run or a directory holding other files",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="run directory to write (an interrupted run resumes)",
    )
    preset = parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="start from a named recipe for real text (every setting in "
        "keras_selfattn.training.presets; README: Training on real text); the "
        "flags given override it",
    )
    _shows(preset, "none, the defaults shown below")
    _add_config_arguments(parser, ModelConfig, "model")
    _add_config_arguments(parser, TrainConfig, "training", skip=("split",))
    parser.set_defaults(configure=_configure_train)


def _configure_train(args):
    """``args.model_config`` and ``args.train_config``: the preset, then the flags."""
    bases = preset_configs(args.preset) if args.preset else (None, None)
    args.model_config = _config_from_args(ModelConfig, args, bases[0])
    args.train_config = _config_from_args(TrainConfig, args, bases[1])


def _train(args):
    from keras_selfattn.training import train
    from keras_selfattn.workflows import report

    result = train(
        args.data,
        args.out,
        args.model_config,
        args.train_config,
        valid_data=args.valid_data,
        test_data=args.test_data,
        vocab=args.vocab,
        overwrite=args.overwrite,
        verbose=_progress(args),
    )
    if not result.is_chief:  # the chief evaluates and writes the run directory
        _print_worker_summary(result)
        return 0
    report(result)
    print(f"run directory: {result.run_dir}")
    return _check_health(result)


def _print_worker_summary(result):
    summary, worker = result.summary, result.worker_index
    print(
        f"worker {worker} read {summary['pairs_read']} pairs "
        f"({summary['malformed_lines_skipped']} malformed lines skipped, "
        f"{summary['dropped_for_length']} too long)"
    )
    print(f"worker {worker} done; history: {json.dumps(result.history)}")


def _check_health(result):
    """0, or `EXIT_NOT_TRANSLATING` after an error line when the model did not
    translate at its last validation."""
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


def _add_evaluate(subparsers):
    parser = _add_command(
        subparsers,
        "evaluate",
        _evaluate,
        help="chrF, BLEU and exact match of a trained run's output against the "
        "references as written",
    )
    _add_model_option(parser)
    data = parser.add_argument("--data", help="TSV file of pairs to score, all of it")
    _shows(data, "the run's test split, RUN_DIR/splits/test.tsv")
    _add_beam_option(parser)


def _evaluate(args):
    from keras_selfattn.inference import evaluate
    from keras_selfattn.text import read_pairs
    from keras_selfattn.training.train import SPLITS_DIR
    from keras_selfattn.workflows import print_metrics

    translator = _load_translator(args)
    if args.data:
        data, label = args.data, args.data
    else:
        data = pathlib.Path(args.model) / SPLITS_DIR / "test.tsv"
        label = f"the run's test split ({data})"
    metrics = evaluate(translator, read_pairs(data), beam_size=args.beam, data=label)
    print_metrics(metrics)
    scores = {key: value for key, value in metrics.items() if key != "examples"}
    print(json.dumps(scores, sort_keys=True))
    return 0


def _add_translate(subparsers):
    parser = _add_command(
        subparsers,
        "translate",
        _translate,
        help="translate sentences (arguments, or one per line on stdin)",
    )
    _add_model_option(parser)
    _add_beam_option(parser)
    parser.add_argument(
        "--scores", action="store_true", help="print the score after a tab"
    )
    text = parser.add_argument("text", nargs="*", help="sentences to translate")
    _shows(text, "read stdin, one sentence a line")


def _translate(args):
    texts = args.text or _read_stdin_lines()
    translator = _load_translator(args)
    if not texts:
        return 0
    for translation in translator.translate(texts, beam_size=args.beam):
        if translation.truncated:
            print(
                "keras-selfattn: warning: input truncated to "
                f"{translator.max_source_len} tokens: {translation.source[:60]!r}",
                file=sys.stderr,
            )
        line = translation.text
        if args.scores:
            line += f"\t{translation.score:.4f}"
        print(line)
    return 0


def _add_average(subparsers):
    parser = _add_command(
        subparsers,
        "average",
        _average,
        help="average a run's kept checkpoints (train --keep-checkpoints N) into "
        "its model.keras",
    )
    _add_model_option(parser)
    last = parser.add_argument(
        "--last", type=_count(2), help="average the newest LAST checkpoints"
    )
    _shows(last, "all kept")
    out = parser.add_argument("--out", help="write the average to this .keras file")
    _shows(out, "RUN_DIR/model.keras, the model it replaces kept beside it")


def _average(args):
    from keras_selfattn.training.averaging import average_run, checkpoint_step

    _check_run_directory(args.model)
    path, averaged = average_run(args.model, last=args.last, out=args.out)
    steps = ", ".join(str(checkpoint_step(p)) for p in averaged)
    print(f"{path}: the average of {len(averaged)} checkpoints (steps {steps})")
    return 0


def _add_export(subparsers):
    parser = _add_command(
        subparsers,
        "export",
        _export,
        help="write a TF Serving SavedModel: EXPORT_DIR/VERSION/",
    )
    _add_model_option(parser)
    parser.add_argument(
        "--export-dir",
        required=True,
        help="the model's base folder (holds the version folders)",
    )
    version = parser.add_argument("--version", type=_count(0), help="version number")
    _shows(version, "highest + 1")
    _add_beam_option(parser, "hypotheses of the translate_nbest signature", default=4)
    parser.add_argument(
        "--model-name",
        default="translator",
        help="served model name (warmup requests, docker line)",
    )


def _export(args):
    from keras_selfattn import serving

    with _opening_run(args, only_loading=True):  # export_run loads, then writes
        version_dir = serving.export_run(
            args.model,
            args.export_dir,
            args.version,
            model_name=args.model_name,
            beam_size=args.beam,
        )
    print(f"exported: {version_dir}")
    sample = serving.sample_sources(args.model, 1)[0]
    print(
        serving.serving_instructions(
            args.export_dir, args.model_name, sample_text=sample
        )
    )
    return 0


def _add_check_serving(subparsers):
    parser = _add_command(
        subparsers,
        "check-serving",
        _check_serving,
        help="op audit, then RUNS an exported version under the session loader",
        description=(
            "Audits the ops of an exported version against stock TF Serving builds, "
            "then LOADS AND RUNS the model's graph under the session-based loader "
            "(warmup, bad and malformed requests). Check only models you trust: a "
            "graph with an op that writes files (WriteFile, checkpoint or summary "
            "writers...) is refused before anything runs, and ops that read files "
            "are reported."
        ),
    )
    parser.add_argument("path", help="an exported version folder, e.g. EXPORT_DIR/1")
    serving_version = parser.add_argument(
        "--serving-version", help="TF Serving release to audit against"
    )
    _shows(serving_version, "all")


def _check_serving(args):
    from keras_selfattn import serving

    with _reading("the SavedModel in", args.path):
        check = serving.check_serving(args.path, serving_version=args.serving_version)
    print(check.summary())
    return 0 if check.ok else 1


def _run(args):
    """Runs the command ``args`` holds (``args.run``, set by its parser)."""
    return args.run(args)


# The optional extras' modules (setup.py extras_require): "plots" and "serving".
_EXTRA_MODULES = ("matplotlib", "tensorflow_serving")


def _missing_extra(error):
    """Whether an ImportError says that an optional extra is not installed."""
    cause = error
    while cause is not None:
        name = getattr(cause, "name", None) or ""
        if name.split(".")[0] in _EXTRA_MODULES:
            return True
        cause = cause.__cause__
    return False


def main(argv=None):
    """Runs the command line.

    Returns 0 when done, 1 when ``check-serving`` found problems. Otherwise exits
    (SystemExit) after one line on stderr: 2, bad input (naming the file or
    argument; argparse's usage errors too); 70, an internal error (``--debug``
    shows the traceback); 130, interrupted.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_arguments(args)
        if not (args.verbose or args.debug):
            _quiet_tensorflow()
        return _run(args)
    except KeyboardInterrupt:
        resume = "; rerun the same command to resume" if args.command == "train" else ""
        status, message = INTERRUPTED, f"interrupted{resume}"
    except Exception as error:
        if args.debug:
            raise
        status, message = _failure(error)
    parser.exit(status, f"keras-selfattn: {message}\n")  # as on a usage error


def _failure(error):
    """``(exit status, message)`` for an error that ended a command."""
    if isinstance(error, (ValueError, OSError)):
        return USAGE_ERROR, f"error: {_one_line(error)}"
    if isinstance(error, ImportError) and _missing_extra(error):
        return USAGE_ERROR, (
            f"error: {_one_line(error)} (this needs an optional dependency: "
            "pip install 'keras-selfattn[serving,plots]')"
        )
    return INTERNAL_ERROR, (
        f"internal error: {type(error).__name__}: {_one_line(error)} "
        "(a bug: rerun with --debug for the traceback and report it)"
    )


if __name__ == "__main__":
    sys.exit(main())
