"""Several SavedModels of one run under the session loader, in one process: texts
compared and passes timed, interleaved, each against the first.

Run: .venv/bin/python benchmarks/served_exports.py --test TSV \
         LABEL=SAVED_MODEL[:INTRA:INTER] LABEL=SAVED_MODEL[:INTRA:INTER] ...
         [--batch 32] [--rounds 3] [--limit N] [--no-beam]

Each export (written from the same run by whichever tree is measured: ``git
archive`` a commit, then ``keras_selfattn.serving.export_run`` with
``PYTHONPATH`` at it) is loaded as TF Serving loads it, in a session of its own
with its own thread pools; ``INTRA:INTER`` sets them as TF Serving's
``--tensorflow_intra_op_parallelism`` and ``--tensorflow_inter_op_parallelism``
do (0: TensorFlow's default, one thread a core). Every test source is translated
by each, greedy (``serving_default``) and beam (``translate_nbest``); the texts
are compared with the first export's and the passes over the test set timed
round by round, interleaved (_bench.py).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench
import served_translator


class Served(served_translator.Served):
    """`served_translator.Served` in a session with its own thread pools."""

    def __init__(self, saved_model_dir, intra=0, inter=0):
        import tensorflow as tf

        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=intra,
            inter_op_parallelism_threads=inter,
            use_per_session_threads=True,
        )
        super().__init__(saved_model_dir, config)


def _export(spec):
    label, value = spec.split("=", 1)
    path, *threads = value.split(":")
    if len(threads) not in (0, 2):
        raise ValueError(f"expected LABEL=SAVED_MODEL[:INTRA:INTER]; received {spec!r}")
    return label, Served(path, *map(int, threads))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("exports", nargs="+", help="LABEL=SAVED_MODEL[:INTRA:INTER]")
    parser.add_argument("--test", required=True, help="the test TSV (source, target)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="first N sources")
    parser.add_argument("--no-beam", action="store_true")
    args = parser.parse_args(argv)
    import tensorflow_text  # noqa: F401  (registers the exports' text ops)

    from keras_selfattn.text import read_pairs

    sources = [s for s, _ in read_pairs(args.test)][: args.limit]
    batches = [sources[i : i + args.batch] for i in range(0, len(sources), args.batch)]
    served = dict(map(_export, args.exports))
    first = next(iter(served))
    rows = []
    names = ["serving_default"] + ([] if args.no_beam else ["translate_nbest"])
    for name in names:
        texts = {label: s.texts(name, batches) for label, s in served.items()}
        passes = {
            label: served_translator._pass(s, name, batches)
            for label, s in served.items()
        }
        samples = _bench.interleaved(passes, args.rounds, warmup=1)
        for label in served:
            differ = sum(a != b for a, b in zip(texts[label], texts[first]))
            rows.append(
                [
                    name,
                    label,
                    f"{len(sources) / _bench.median(samples[label]):.0f}",
                    f"**{1 / _bench.paired_ratio(samples, label, first):.2f}**",
                    f"{min(samples[first]) / min(samples[label]):.2f}",
                    f"{differ} of {len(texts[label])}",
                ]
            )
    print()
    _bench.print_table(
        [
            "signature",
            "export",
            "sentences/s",
            f"speed / {first}'s (median of rounds)",
            "fastest / fastest",
            f"texts that differ from {first}'s",
        ],
        rows,
    )
    print()
    print(f"median of {args.rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, sys.argv[1:])}")


if __name__ == "__main__":
    main()
