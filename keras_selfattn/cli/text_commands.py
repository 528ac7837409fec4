"""The commands that read a run and translate: evaluate, translate."""

import contextlib
import functools
import json
import sys

from keras_selfattn.cli import search_options, streams
from keras_selfattn.cli.command import add_command, load_translator
from keras_selfattn.cli.flags import add_beam_option, add_model_option, shows
from keras_selfattn.stopping import signals_stop


def add_evaluate(subparsers):
    parser = add_command(
        subparsers,
        "evaluate",
        _evaluate,
        help="chrF, BLEU and exact match of a trained run's output against the "
        "references as written",
    )
    add_model_option(parser)
    data = parser.add_argument(
        "--data", metavar="FILE", help="TSV file of pairs to score, all of it"
    )
    shows(data, "the run's test split, RUN_DIR/splits/test.tsv")
    add_beam_option(parser)
    search_options.add_search_options(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the scores as one JSON object (and nothing else) on stdout",
    )


def _evaluate(args):
    """Scores the run, its pairs read a batch at a time; Ctrl-C, SIGTERM and SIGHUP
    stop it (`stopping.Stopped`: one line, exit 130, 143 or 129; nothing written)."""
    from keras_selfattn import jobs

    with signals_stop():
        translator = load_translator(args)
        metrics = jobs.evaluate_run(args.model, args.data, translator=translator)
    if args.json:
        scores = {key: value for key, value in metrics.items() if key != "examples"}
        print(json.dumps(scores, sort_keys=True))
    else:
        jobs.print_metrics(metrics)
    return 0


def add_translate(subparsers):
    parser = add_command(
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
            translator = load_translator(args)
            lines.open_output(args, stack)
            streams.hint_on_a_terminal(args)
            jobs.translate_stream(
                translator,
                lines.batches,
                lines.sink,
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


def add_distill_data(subparsers):
    parser = add_command(
        subparsers,
        "distill-data",
        _distill_data,
        help="a teacher run's translations of pair files' sources as a new pair "
        "file (a student's training data): resumable, shardable",
    )
    parser.add_argument(
        "--teacher", required=True, metavar="RUN_DIR", help="the teacher's run"
    )
    parser.add_argument(
        "--data",
        required=True,
        action="append",
        metavar="FILE",
        help="pairs whose sources are translated: a file, a .gz or a glob pattern; "
        "repeat for more",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the new pair file; the same command again resumes it",
    )
    add_beam_option(parser)
    search_options.add_search_options(parser)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=64,
        metavar="N",
        help="sentences translated and written at a time",
    )
    shard = parser.add_argument(
        "--shard",
        metavar="I/N",
        help="translate the pairs whose index modulo N is I, into this --out "
        "(merge the N outputs with merge-shards)",
    )
    shows(shard, "all of them")


def _distill_data(args):
    """`distillation.translate_pairs` with the command's search settings; a stop
    keeps every line written so far, and the same command resumes."""
    from keras_selfattn import distillation

    settings = args.settings
    distillation.translate_pairs(
        args.teacher,
        args.data,
        args.out,
        beam_size=settings.beam_size if settings.search == "beam" else 1,
        alpha=settings.length_penalty,
        batch_size=args.batch_size,
        shard=args.shard,
        precision=settings.precision,
        quantize=settings.quantize,
        shortlist=settings.shortlist,
        max_length_ratio=settings.max_length_ratio,
        verbose=not args.quiet,
    )
    return 0


def add_merge_shards(subparsers):
    parser = add_command(
        subparsers,
        "merge-shards",
        _merge_shards,
        help="the --out files of distill-data --shard I/N (I = 0 .. N-1) back in "
        "input order, as one unsharded distill-data writes it",
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="the merged pair file"
    )
    parser.add_argument(
        "shards",
        nargs="+",
        metavar="SHARD_OUT",
        help="the --out file of each shard, complete, in any order",
    )


def _merge_shards(args):
    from keras_selfattn import distillation

    distillation.merge_shards(args.shards, args.out, verbose=not args.quiet)
    return 0
