"""How big a request batch's shortlist is and how much of a reference it covers.

Run: .venv/bin/python benchmarks/shortlist_coverage.py --run RUN_DIR --test TSV
     [--batch 32] [--sizes 50:50,20:100,100:100] | --quick

For each ``per_source:frequent`` pair the run's table is learned from its
training split (`learn_run_shortlist`, nothing saved), and the test pairs are
cut into request batches of ``--batch`` sentences: per batch the shortlist's
size (`shortlist_ops.shortlist_ids`) and, over all batches, the share of the
references' target pieces that their batch's shortlist holds (an upper bound
on what a search restricted to it can write). ``--quick`` makes a run directory
of the bundled dates (its data record and tokenizer, no model) and measures it.
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench


def quick_run(run_dir):
    """A run directory of the bundled dates with its split and tokenizer."""
    from keras_selfattn import text
    from keras_selfattn.models import ModelConfig
    from keras_selfattn.run_directory.layout import CONFIG_FILE
    from keras_selfattn.run_directory.settings import save_run_config
    from keras_selfattn.training import TrainConfig
    from keras_selfattn.training.data import run_data as run_data_lib
    from keras_selfattn.training.data.run_tokenizer import load_or_learn_tokenizer

    config = TrainConfig(
        source_tokenizer="word", target_tokenizer="char", split_digits=True
    )
    run_data = run_data_lib.prepare_run_data(
        text.load_bundled_dates()[:400], run_dir, config
    )
    load_or_learn_tokenizer(None, run_dir, False, run_data, config)
    save_run_config(run_dir / CONFIG_FILE, ModelConfig(), config)
    return run_data.test


def coverage(table, tokenizer, pairs, batch):
    """``(sizes per batch, share of reference target pieces covered)``."""
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.models import shortlist_ops

    sizes, covered, total = [], 0, 0
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        sources = tokenizer.source.encode(tf.constant([s for s, _ in chunk]))
        ids = shortlist_ops.shortlist_ids(
            sources.to_tensor(),
            table.candidates,
            table.always,
            tokenizer.target_vocab_size,
        ).numpy()
        sizes.append(len(ids))
        targets = tokenizer.target.encode(tf.constant([t for _, t in chunk]))
        pieces = targets.flat_values.numpy()
        covered += int(np.isin(pieces, ids).sum())
        total += pieces.size
    return sizes, covered / max(total, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", help="a trained run directory")
    parser.add_argument("--test", help="test pairs (TSV)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sizes", default="50:50,20:100,100:100")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    from keras_selfattn import text
    from keras_selfattn.training.data.run_shortlist import learn_run_shortlist

    scratch = None
    if args.quick:
        scratch = tempfile.TemporaryDirectory()
        run_dir = pathlib.Path(scratch.name)
        pairs = quick_run(run_dir)
    elif args.run and args.test:
        run_dir, pairs = pathlib.Path(args.run), text.read_pairs(args.test)
    else:
        parser.error("give --run and --test, or --quick")
    tokenizer = text.PairTokenizer.load(run_dir)
    rows = []
    for item in args.sizes.split(","):
        per_source, frequent = (int(v) for v in item.split(":"))
        start = time.perf_counter()
        table = learn_run_shortlist(run_dir, per_source, frequent, save=False)
        seconds = time.perf_counter() - start
        sizes, share = coverage(table, tokenizer, pairs, args.batch)
        rows.append(
            [
                per_source,
                frequent,
                f"{seconds:.1f}",
                table.record["pairs_counted"],
                f"{int(_bench.median(sizes))} ({min(sizes)}-{max(sizes)})",
                tokenizer.target_vocab_size,
                f"{share:.4f}",
            ]
        )
    _bench.print_table(
        [
            "per source",
            "frequent",
            "learned in s",
            "pairs counted",
            f"shortlist size, batch {args.batch}: median (range)",
            "target vocabulary",
            "reference pieces covered",
        ],
        rows,
    )
    print(_bench.environment_line())
    print("command:", _bench.command_line(__file__, argv))
    if scratch is not None:
        scratch.cleanup()


if __name__ == "__main__":
    main()
