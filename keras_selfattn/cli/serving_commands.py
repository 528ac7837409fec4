"""The commands that serve a run: export, check-serving."""

import sys

from keras_selfattn.choices import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_GROUPS,
    DEFAULT_MODEL_NAME,
    XLA_SERVER_FLAG,
)
from keras_selfattn.cli import errors, search_options
from keras_selfattn.cli.command import add_command
from keras_selfattn.cli.flags import add_beam_option, add_model_option, count, shows


def add_export(subparsers):
    parser = add_command(
        subparsers,
        "export",
        _export,
        help="write a TF Serving SavedModel: EXPORT_DIR/VERSION/",
    )
    add_model_option(parser)
    parser.add_argument(
        "--export-dir",
        required=True,
        metavar="DIR",
        help="the model's base folder (holds the version folders)",
    )
    version = parser.add_argument(
        "--version", type=count(0), metavar="N", help="version number"
    )
    shows(version, "highest + 1")
    add_beam_option(
        parser, "hypotheses of the translate_nbest signature", default=DEFAULT_BEAM_SIZE
    )
    parser.add_argument(
        "--model-name",
        default=DEFAULT_MODEL_NAME,
        metavar="NAME",
        help="served model name (warmup requests, docker line)",
    )
    parser.add_argument(
        "--xla",
        action="store_true",
        help="compile the searches with XLA; a CPU tensorflow_model_server must "
        f"then run with {XLA_SERVER_FLAG} (default: off, no server flag)",
    )
    parser.add_argument(
        "--groups",
        type=count(1),
        metavar="N",
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
    from keras_selfattn import jobs, serving

    # export loads, then writes: only what loading raises names the run
    with errors.opening_run(args.model, only_loading=True):
        version_dir = serving.export_run(
            args.model,
            args.export_dir,
            args.version,
            args.settings,
            model_name=args.model_name,
            xla=args.xla,
            dtype=args.dtype,
            groups=args.groups,
        )
    print(f"exported: {version_dir}")
    search_options.print_export_report(version_dir)
    print(jobs.serving_lines(args.model, args.export_dir, args.model_name, args.xla))
    return 0


def add_check_serving(subparsers):
    parser = add_command(
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
        "--serving-version",
        metavar="RELEASE",
        help="TF Serving release to audit against",
    )
    shows(serving_version, "all")


def _check_serving(args):
    from keras_selfattn import serving
    from keras_selfattn.serving.check import CheckStopped

    try:
        with errors.reading("the SavedModel in", args.path):
            check = serving.check_serving(
                args.path, serving_version=args.serving_version
            )
    except CheckStopped as stopped:
        print(f"keras-selfattn: {stopped}", file=sys.stderr)
        return stopped.exit_status
    # The op list and each request with --verbose; otherwise the verdict's line.
    print(check.summary() if args.verbose or args.debug else check.summary_line())
    return 0 if check.ok else 1
