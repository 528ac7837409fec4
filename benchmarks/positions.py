"""Which position encoding? Sinusoidal, learned, relative (Shaw et al. 2018) and rotary,
trained with the same budget and seed on the bundled dates corpus.

Run: .venv/bin/python benchmarks/positions.py [--epochs 2] [--max-pairs 8000] [--quick]

The pairs are split by source length in tokens (the demo's word tokenizer, digits
split): every variant trains on the sources of at most ``--short-max`` tokens
(``train()`` splits them 80/10/10 into train / validation / held-out test, by the
same seed), and is scored twice: on its held-out test split (same lengths as in
training) and on sources longer than any seen in training (length
generalization). Every other setting is the demo's (`DEMO_MODEL_CONFIG`,
`DEMO_TRAIN_CONFIG`) with XLA, except the budget. Greedy decoding; exact match and
BLEU/chrF by `keras_selfattn.inference.evaluate`. The longer sources also contain
date formats the short ones lack (e.g. "1955. 10. 09."), so their absolute scores
are low for every variant: compare the variants with each other. Prints a markdown
table; wall times are for this machine and are figures to record, never tests.
"""

import argparse
import dataclasses
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = ("sinusoidal", "learned", "relative", "rotary")


def source_lengths(pairs, tokenizer):
    import tensorflow as tf

    from keras_selfattn import text

    lengths = []
    sizes = text.encode_pairs(pairs, tokenizer).map(lambda s, t: tf.size(s))
    for batch in sizes.batch(8192).as_numpy_iterator():
        lengths.extend(int(n) for n in batch)
    return lengths


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--max-pairs",
        type=int,
        default=8000,
        help="training pairs (before the 80/10/10 split)",
    )
    parser.add_argument(
        "--short-max", type=int, default=9, help="longest training source, in tokens"
    )
    parser.add_argument(
        "--eval-pairs",
        type=int,
        default=800,
        help="at most this many pairs per evaluation",
    )
    parser.add_argument("--max-relative-position", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1 epoch, 1500 pairs, 100 evaluated",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.max_pairs, args.eval_pairs = 1, 1500, 100

    from keras_selfattn import text
    from keras_selfattn.inference import Translator, evaluate
    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG
    from keras_selfattn.training import train

    pairs = text.load_bundled_dates()
    counter = text.PairTokenizer.build(
        pairs, text.DATES_SOURCE_CONFIG, text.DATES_TARGET_CONFIG
    )
    lengths = source_lengths(pairs, counter)
    short = [p for p, n in zip(pairs, lengths) if n <= args.short_max][: args.max_pairs]
    long = [p for p, n in zip(pairs, lengths) if n > args.short_max][: args.eval_pairs]
    longest = max(lengths)
    print(
        f"training on {len(short)} pairs with sources of "
        f"{min(lengths)}-{args.short_max} tokens; length generalization on {len(long)} "
        f"pairs of {args.short_max + 1}-{longest} tokens"
    )

    out = args.out or tempfile.mkdtemp(prefix="positions_")
    rows = []
    for variant in args.variants:
        model_config = dataclasses.replace(
            DEMO_MODEL_CONFIG,
            position=variant,
            max_relative_position=args.max_relative_position,
            max_source_len=max(DEMO_MODEL_CONFIG.max_source_len, longest),
        )
        train_config = dataclasses.replace(
            DEMO_TRAIN_CONFIG,
            epochs=args.epochs,
            seed=args.seed,
            patience=args.epochs,
            jit_compile=True,
            warmup_steps=min(DEMO_TRAIN_CONFIG.warmup_steps, 50 * args.epochs),
        )
        start = time.perf_counter()
        result = train(
            short, os.path.join(out, variant), model_config, train_config, verbose=0
        )
        wall = time.perf_counter() - start
        translator = Translator(
            result.model,
            result.tokenizer,
            model_config.max_source_len,
            model_config.max_target_len,
        )
        held_out = evaluate(translator, result.test_pairs[: args.eval_pairs])
        longer = evaluate(translator, long)
        rows.append(
            (
                variant,
                result.model.count_params(),
                result.history["val_loss"][-1],
                held_out,
                longer,
                wall,
            )
        )
        print(
            f"{variant}: held-out EM {100 * held_out['exact_match']:.1f}%, "
            f"longer EM {100 * longer['exact_match']:.1f}% ({wall:.0f} s)",
            flush=True,
        )

    print()
    print(
        "command: .venv/bin/python benchmarks/positions.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
    )
    print(
        f"Budget: {args.epochs} epoch(s) on {len(short)} pairs with sources <= "
        f"{args.short_max} tokens (80% train), seed {args.seed}, XLA, "
        f"max_relative_position={args.max_relative_position}."
    )
    print()
    print(
        "| position | parameters | val loss | held-out exact match | held-out BLEU | "
        "longer: exact match | longer: BLEU | longer: chrF | train time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for variant, params, val_loss, held_out, longer, wall in rows:
        print(
            f"| {variant} | {params:,} | {val_loss:.3f} | "
            f"{100 * held_out['exact_match']:.1f}% | {held_out['bleu']:.1f} | "
            f"{100 * longer['exact_match']:.1f}% | {longer['bleu']:.1f} | "
            f"{longer['chrf']:.1f} | {wall:.0f} s |"
        )


if __name__ == "__main__":
    main()
