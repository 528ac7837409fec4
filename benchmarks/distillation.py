"""A teacher and its students, served: BLEU, chrF and sentences/s, greedy and beam 4.

Run: .venv/bin/python benchmarks/distillation.py --teacher RUN --test TSV \\
         --student NAME=RUN [--student NAME=RUN ...] [--exports float32 shortlist]
         [--threads 1] [--batch 32] [--rounds 3] [--limit N]
     .venv/bin/python benchmarks/distillation.py --quick [--run RUN --test TSV]

Each run is exported with this tree's code (`keras_selfattn.serving.export_run`,
every label of ``--exports``: served_precision.py's labels, float32 by default)
and loaded as TF Serving loads it (the session loader), ``--threads`` intra-op
threads, one process. Every source of ``--test`` is translated by each export,
greedy (``serving_default``) and beam 4 (``translate_nbest``, its best), and
scored with sacrebleu against the references as written. Then the passes over
the test set in batches of ``--batch`` are timed round by round, interleaved
(_bench.py), and the table gives each export's sentences/s and the median of the
per-round ratios to the teacher's export of the same label.

The recipe that makes the students is docs/distillation.md's; the figures and
the commands that trained each run are in benchmarks/RESULTS.md ("Distillation").
``--quick`` serves one tiny run (`_bench.quick_run`, trained here unless
``--run``) as both teacher and student: the script end to end in seconds.
"""

import argparse
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench
import served_precision


def _named_run(text):
    """``--student NAME=RUN``."""
    name, equals, run = text.partition("=")
    if not equals or not name or not run:
        raise argparse.ArgumentTypeError(
            f"a student is NAME=RUN_DIR. Received: {text!r}"
        )
    return name, run


def served_models(runs, labels, base, threads, frequent, quick=False):
    """``{(name, label): served_translator.Served}`` for every run and label (a
    run named twice, as ``--quick`` names it, is exported once; ``quick``: by
    `_bench.quick_export`)."""
    served, by_run = {}, {}
    for name, run in runs:
        if run not in by_run:
            by_run[run] = served_precision._served_exports(
                pathlib.Path(run), base / name, labels, frequent, threads, quick
            )
        for label, model in by_run[run].items():
            served[name, label] = model
    return served


def rows(served, teacher, pairs, batch, rounds):
    """A row per search, export and model: sentences/s, speed / the teacher's
    export of the same label, BLEU and chrF."""
    sources = [source for source, _ in pairs]
    references = [target for _, target in pairs]
    table = []
    passes = served_precision.served_passes(served, sources, batch, rounds)
    for signature, texts, samples in passes:
        search = "greedy" if signature == "serving_default" else "beam 4"
        for name, label in served:
            bleu, chrf = served_precision._scores(texts[name, label], references)
            speed = 1 / _bench.paired_ratio(samples, (name, label), (teacher, label))
            table.append(
                [
                    search,
                    name,
                    label,
                    f"{len(sources) / _bench.median(samples[name, label]):.1f}",
                    f"**{speed:.2f}**",
                    bleu,
                    chrf,
                ]
            )
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tiny run, seconds")
    parser.add_argument("--run", help="--quick: the tiny run (default: trained here)")
    parser.add_argument("--teacher", help="the teacher's run directory")
    parser.add_argument(
        "--student",
        action="append",
        type=_named_run,
        default=[],
        metavar="NAME=RUN",
        help="a student's name in the table and its run directory (repeatable)",
    )
    parser.add_argument("--test", help="the TSV of test pairs")
    parser.add_argument("--limit", type=int, default=None, help="first N pairs")
    parser.add_argument(
        "--exports",
        nargs="+",
        type=served_precision._export_label,
        default=["float32"],
        metavar="EXPORT",
        help="served_precision.py's export labels (default: float32)",
    )
    parser.add_argument("--frequent", type=int, default=50, help="a shortlist's N")
    parser.add_argument("--threads", type=int, default=1, help="TF intra-op threads")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.quick and not (args.teacher and args.student and args.test):
        parser.error("give --teacher, --student NAME=RUN and --test, or --quick")

    import tensorflow_text  # noqa: F401  (an export's text ops, if any)

    from keras_selfattn.text import read_pairs

    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        if args.quick:
            if not args.run:
                args.run, args.test = _bench.quick_run(str(scratch))
            args.teacher, args.student = args.run, [("student", args.run)]
            args.limit, args.rounds = args.limit or 32, 1
        runs = [("teacher", args.teacher), *args.student]
        pairs = read_pairs(args.test)[: args.limit]
        served = served_models(
            runs,
            args.exports,
            scratch / "exports",
            args.threads,
            args.frequent,
            args.quick,
        )
        print(
            f"\nserved (session loader, batch {args.batch}, {args.threads} "
            f"thread(s)): {len(pairs)} pairs of {args.test}"
        )
        _bench.print_table(
            [
                "search",
                "model",
                "export",
                "sentences/s",
                "speed / teacher (median of rounds)",
                "BLEU",
                "chrF",
            ],
            rows(served, "teacher", pairs, args.batch, args.rounds),
        )
    for name, run in runs:
        print(f"{name}: {run}")
    print(f"interleaved rounds: {args.rounds}; ratios are medians of per-round ratios")
    print(_bench.environment_line())
    print("command:", _bench.command_line(__file__, argv))


if __name__ == "__main__":
    main()
