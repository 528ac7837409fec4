"""The ``keras-selfattn`` commands: the parser, and the dispatch to the library.

One function pair per command: ``_add_<command>`` declares its options (the
shared ones and those generated from the config dataclasses come from
`cli.flags`) and binds ``_<command>``, which calls the job's function in
`keras_selfattn.jobs` (the one place every job lives) and prints what it
returns. `main` parses, makes
sure it runs on TensorFlow (`run_on_tensorflow`), runs the checks of
`cli.checks`, quiets TensorFlow (`cli.quiet`) and runs the command;
`cli.errors` turns what fails into one line and an exit status.
"""

import argparse
import contextlib
import functools
import json
import os
import sys

import keras

from keras_selfattn import backends
from keras_selfattn.choices import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_GROUPS,
    DEFAULT_MODEL_NAME,
    XLA_SERVER_FLAG,
)
from keras_selfattn.cli import errors, search_options, streams
from keras_selfattn.cli.checks import check_arguments
from keras_selfattn.cli.flags import (
    add_beam_option,
    add_config_arguments,
    add_data_option,
    add_grouped_config_arguments,
    add_model_option,
    add_output_options,
    append_defaults,
    config_from_args,
    count,
    shows,
    train_groups,
)
from keras_selfattn.cli.quiet import quiet_tensorflow
from keras_selfattn.config import TrainConfig
from keras_selfattn.config.presets import PRESETS, preset_configs
from keras_selfattn.models.config import ModelConfig
from keras_selfattn.run_directory.layout import checkpoint_step
from keras_selfattn.run_directory.vocabulary_settings import (
    VOCABULARY_SETTINGS,
    train_config_with_vocabulary,
)
from keras_selfattn.stopping import signals_stop


def run_on_tensorflow(parser, argv):
    """Runs the command again under ``KERAS_BACKEND=tensorflow`` when Keras was
    loaded with another backend: the command line is a TensorFlow application.

    Says so in one line on stderr, then replaces this process (``os.execv`` of
    ``python -m keras_selfattn`` with the same arguments). Called from Python
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
    command = [sys.executable, "-m", "keras_selfattn", *sys.argv[1:]]
    os.execv(sys.executable, command)


def main(argv=None):
    """Runs the command line.

    Returns 0 when done, 1 when ``check-serving`` found problems, 3 when
    ``train`` ended with a model that does not translate (after an error line).
    Otherwise exits (SystemExit) after one line on stderr: 2, bad input (naming
    the file or argument; argparse's usage errors too; TensorFlow not
    installed); 70, an internal error (``--debug`` shows the traceback); 130,
    interrupted (143: `train` stopped by SIGTERM); 141, quietly, when the reader
    of stdout went away (``| head``).
    The command line runs on TensorFlow whatever ``KERAS_BACKEND`` says
    (`run_on_tensorflow`).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    run_on_tensorflow(parser, argv)
    try:
        check_arguments(args)
        if not (args.verbose or args.debug):
            quiet_tensorflow()
        with errors.guarded_output(), _stops_cleanly(args):
            return _run(args)
    except KeyboardInterrupt as error:
        status, message = errors.interrupted(args.command, error)
    except Exception as error:
        if args.debug:
            raise
        status, message = errors.failure(error)
    # as on a usage error (a broken pipe: no message)
    parser.exit(status, message and f"keras-selfattn: {message}\n")


def _stops_cleanly(args):
    """`train` and `demo` write a run: SIGTERM stops them as Ctrl-C does
    (`stopping.signals_stop`), with one line and exit 143 (129 for SIGHUP)."""
    if args.command in ("train", "demo"):
        return signals_stop()
    return contextlib.nullcontext()


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
    append_defaults(parser)
    return parser


def _run(args):
    """Runs the command ``args`` holds (``args.run``, set by its parser)."""
    return args.run(args)


def _add_command(subparsers, name, run, **kwargs):
    """A command's parser, with the output options; ``run(args)`` runs it. Its
    --help opens with what it does: its ``description``, by default its line in
    the list of commands (``help``)."""
    summary = kwargs["help"]
    first = summary.split()[0]
    if first.islower():  # "chrF" stays as it is written
        summary = first.capitalize() + summary[len(first) :]
    kwargs.setdefault("description", summary + ".")
    parser = subparsers.add_parser(name, **kwargs)
    add_output_options(parser, default=argparse.SUPPRESS)
    parser.set_defaults(run=run)
    return parser


def _progress(args):
    """`train`'s verbose: nothing with --quiet, else what `fit_verbosity` chooses
    for ``"auto"`` (a progress bar on a terminal, progress lines otherwise)."""
    from keras_selfattn.training.callbacks.progress import fit_verbosity

    return fit_verbosity(0 if args.quiet else "auto")


def _load_translator(args):
    """The `inference.Translator` of the run directory ``--model``."""
    from keras_selfattn import jobs

    with errors.opening_run(args.model):
        return jobs.load_translator(args.model, **search_options.search_options(args))


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
        "--epochs", type=count(1), help="override the demo's epoch count"
    )
    shows(epochs, "the demo's 4")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a finished run in --out"
    )


def _demo(args):
    from keras_selfattn import jobs

    result, _ = jobs.run_demo(
        args.out, epochs=args.epochs, overwrite=args.overwrite, verbose=_progress(args)
    )
    print(f"run directory: {result.run_dir}")
    return 0


def _add_build_vocab(subparsers):
    parser = _add_command(
        subparsers,
        "build-vocab",
        _build_vocab,
        help="learn the vocabularies from pair files, in bounded memory",
    )
    add_data_option(parser, "pair file or glob pattern (.gz read); repeat for more")
    parser.add_argument(
        "--out", required=True, help="directory for the vocabularies + tokenizer.json"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace vocabularies in --out"
    )
    add_config_arguments(
        parser, TrainConfig, "tokenizer", only=TrainConfig.VOCAB_FIELDS
    )


def _build_vocab(args):
    from keras_selfattn import jobs

    config = config_from_args(TrainConfig, args)
    jobs.build_vocab(args.data, args.out, config, overwrite=args.overwrite)
    return 0


def _add_train(subparsers):
    parser = _add_command(
        subparsers,
        "train",
        _train,
        help="train on source<TAB>target pair files",
        usage="%(prog)s --data DATA --out OUT [--epochs EPOCHS] [--preset NAME] "
        "[options]",
    )
    groups = train_groups(parser)
    add_data_option(
        groups["data"],
        "pair file or glob pattern (shards/*.tsv.gz), streamed; repeat for more",
    )
    for flag, split in (("--valid-data", "validation"), ("--test-data", "test")):
        held_out = groups["data"].add_argument(
            flag, action="append", help=f"{split} pair file(s)"
        )
        shows(held_out, "held out of --data")
    vocab = groups["data"].add_argument(
        "--vocab",
        help="vocabularies from build-vocab, or a run directory; the tokenizer "
        "settings it was built with are used (a tokenizer flag given must agree)",
    )
    shows(vocab, "learned")
    _add_run_directory_options(groups["run directory"])
    preset = groups["training"].add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="start from a named recipe for real text (every setting in "
        "keras_selfattn.config.presets; README: Training on real text); the "
        "flags given override it",
    )
    shows(preset, "none, the defaults shown below")
    add_grouped_config_arguments(groups, ModelConfig, TrainConfig, skip=("split",))
    parser.set_defaults(configure=_configure_train)


def _add_run_directory_options(group):
    """train's --out and --overwrite."""
    group.add_argument(
        "--out",
        required=True,
        help="run directory to write (an interrupted run resumes)",
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run or a directory holding other files",
    )


def _configure_train(args):
    """``args.model_config`` and ``args.train_config``: the preset, then the flags;
    with ``--vocab``, the vocabulary's tokenizer settings (a flag typed that
    contradicts one is refused, naming both)."""
    bases = preset_configs(args.preset) if args.preset else (None, None)
    args.model_config = config_from_args(ModelConfig, args, bases[0])
    args.train_config = config_from_args(TrainConfig, args, bases[1])
    if args.vocab is not None:
        args.train_config = train_config_with_vocabulary(
            args.train_config, args.vocab, given=_typed_flags(args, VOCABULARY_SETTINGS)
        )


def _typed_flags(args, names):
    """The flags of ``names`` given on the command line: name -> "--flag value"."""
    typed = {}
    for name in names:
        value = getattr(args, name, None)
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            typed[name] = f"--{'' if value else 'no-'}{flag}"
        elif value is not None:
            typed[name] = f"--{flag} {value}"
    return typed


def _train(args):
    from keras_selfattn import jobs

    result = jobs.train(
        args.data,
        args.out,
        args.model_config,
        args.train_config,
        valid_data=args.valid_data,
        test_data=args.test_data,
        vocab=args.vocab,
        overwrite=args.overwrite,
        verbose=_progress(args),
        on_finished=jobs.report,  # the chief, before the run is marked finished
    )
    if not result.is_chief:  # the chief evaluates and writes the run directory
        jobs.print_worker_summary(result)
        return 0
    print(f"run directory: {result.run_dir}")
    return errors.health_status(result)


def _add_evaluate(subparsers):
    parser = _add_command(
        subparsers,
        "evaluate",
        _evaluate,
        help="chrF, BLEU and exact match of a trained run's output against the "
        "references as written",
    )
    add_model_option(parser)
    data = parser.add_argument("--data", help="TSV file of pairs to score, all of it")
    shows(data, "the run's test split, RUN_DIR/splits/test.tsv")
    add_beam_option(parser)
    search_options.add_search_options(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the scores as one JSON object (and nothing else) on stdout",
    )


def _evaluate(args):
    from keras_selfattn import jobs

    translator = _load_translator(args)
    metrics = jobs.evaluate_run(
        args.model, args.data, beam_size=args.beam, translator=translator
    )
    if args.json:
        scores = {key: value for key, value in metrics.items() if key != "examples"}
        print(json.dumps(scores, sort_keys=True))
    else:
        jobs.print_metrics(metrics)
    return 0


def _add_translate(subparsers):
    parser = _add_command(
        subparsers,
        "translate",
        _translate,
        help="translate sentences (arguments, or one per line from --input or stdin)",
    )
    add_model_option(parser)
    add_beam_option(parser)
    search_options.add_search_options(parser)
    parser.add_argument(
        "--scores", action="store_true", help="print the score after a tab"
    )
    source = parser.add_argument(
        "--input", metavar="FILE", help="translate this file, one sentence a line"
    )
    shows(source, "the sentences given, else stdin")
    output = parser.add_argument(
        "--output", metavar="FILE", help="write the translations to this file"
    )
    shows(output, "stdout")
    text = parser.add_argument("text", nargs="*", help="sentences to translate")
    shows(text, "read --input or stdin, one sentence a line")


def _translate(args):
    from keras_selfattn import jobs

    streams.check_sources(args)
    lines = None
    with signals_stop(), contextlib.ExitStack() as stack:
        try:
            lines = streams.Lines(args, stack)
            translator = _load_translator(args)
            lines.open_output(args, stack)
            streams.hint_on_a_terminal(args)
            jobs.translate_stream(
                translator,
                lines.batches,
                lines.sink,
                beam_size=args.beam,
                scores=args.scores,
                on_truncated=functools.partial(_truncated, translator),
            )
        except KeyboardInterrupt as interrupt:
            _say_not_utf8(lines)
            written = 0 if lines is None else lines.written()
            output = args.output or "stdout"
            print(
                f"keras-selfattn: interrupted: {written} lines written to {output}",
                file=sys.stderr,
            )
            return streams.exit_status(interrupt)
        _say_not_utf8(lines)
    return 0


def _truncated(translator, translation):
    streams.warn(
        f"input truncated to {translator.max_source_len} tokens: "
        f"{translation.source[:60]!r}"
    )


def _say_not_utf8(lines):
    report = None if lines is None else lines.not_utf8_report()
    if report:
        streams.warn(report)


def _add_average(subparsers):
    parser = _add_command(
        subparsers,
        "average",
        _average,
        help="average a run's kept checkpoints (train --keep-checkpoints N) into "
        "its model.keras",
    )
    add_model_option(parser)
    last = parser.add_argument(
        "--last", type=count(2), help="average the newest LAST checkpoints"
    )
    shows(last, "all kept")
    out = parser.add_argument("--out", help="write the average to this .keras file")
    shows(out, "RUN_DIR/model.keras, the model it replaces kept beside it")


def _average(args):
    from keras_selfattn import jobs

    errors.check_run_directory(args.model)
    path, averaged = jobs.average(args.model, last=args.last, out=args.out)
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
    add_model_option(parser)
    parser.add_argument(
        "--export-dir",
        required=True,
        help="the model's base folder (holds the version folders)",
    )
    version = parser.add_argument("--version", type=count(0), help="version number")
    shows(version, "highest + 1")
    add_beam_option(
        parser, "hypotheses of the translate_nbest signature", default=DEFAULT_BEAM_SIZE
    )
    parser.add_argument(
        "--model-name",
        default=DEFAULT_MODEL_NAME,
        help="served model name (warmup requests, docker line)",
    )
    parser.add_argument(
        "--xla",
        action="store_true",
        help=(
            "compile the searches with XLA; a CPU "
            "tensorflow_model_server must then run with "
            f"{XLA_SERVER_FLAG} (default: off, no server flag)"
        ),
    )
    parser.add_argument(
        "--groups",
        type=count(1),
        default=DEFAULT_GROUPS,
        help=(
            "each request's sentences are sorted by length and searched as this "
            "many groups at once, on separate cores (1: one search a request; "
            "the same translations either way)"
        ),
    )
    dtype = parser.add_argument(
        "--dtype",
        metavar="POLICY",
        help=(
            "the served graph computes under this Keras dtype policy, e.g. "
            "float32 for a mixed_bfloat16 run served on CPUs without bfloat16 units"
        ),
    )
    shows(
        dtype,
        "the policy the model was trained with; float32 for a run trained with "
        "--mixed-precision auto",
    )
    search_options.add_search_options(parser)


def _export(args):
    from keras_selfattn import jobs

    # export loads, then writes: only what loading raises names the run
    with errors.opening_run(args.model, only_loading=True):
        version_dir = jobs.export(
            args.model,
            args.export_dir,
            args.version,
            model_name=args.model_name,
            beam_size=args.beam,
            xla=args.xla,
            dtype=args.dtype,
            groups=args.groups,
            **search_options.search_options(args),
        )
    print(f"exported: {version_dir}")
    search_options.print_export_report(version_dir)
    print(jobs.serving_lines(args.model, args.export_dir, args.model_name, args.xla))
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
    shows(serving_version, "all")


def _check_serving(args):
    from keras_selfattn import jobs
    from keras_selfattn.serving.check import CheckStopped

    try:
        with errors.reading("the SavedModel in", args.path):
            check = jobs.check_serving(args.path, serving_version=args.serving_version)
    except CheckStopped as stopped:
        print(f"keras-selfattn: {stopped}", file=sys.stderr)
        return stopped.exit_status
    print(check.summary())
    return 0 if check.ok else 1
