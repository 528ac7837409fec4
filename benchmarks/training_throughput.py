"""Training throughput of the demo model: float32 vs mixed_bfloat16, XLA on vs off.

Run: .venv/bin/python benchmarks/training_throughput.py [--quick]
         [--rounds N] [--steps-per-round N]

The demo's model (``jobs.DEMO_MODEL_CONFIG``) and batches (8000 pairs of the
bundled dates corpus through the training pipeline: the demo's tokenizers, batch
64, every batch padded to the longest training pair as `train` does for XLA),
compiled as `train` compiles it (Adam with gradient clipping, masked
cross-entropy, masked accuracy), in four variants built in this one process:
dtype policy float32 or mixed_bfloat16 (logits in float32), ``jit_compile``
True (the TrainConfig default) or False. The variants' ``train_on_batch`` calls
run interleaved, round by round, on the same batches. Throughput counts target
tokens (the non-padding positions of ``target_out``, the end ids included) per
second; ratios are to float32 with XLA (the default): the median of the
per-round ratios, and the ratio of the fastest rounds (the least disturbed by
other processes; where the two disagree, the machine's load decided).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

VARIANTS = (
    ("float32", True),
    ("float32", False),
    ("mixed_bfloat16", True),
    ("mixed_bfloat16", False),
)


def demo_batches(count, quick):
    """(list of (inputs, target_out) batches, source and target vocabulary sizes)."""
    from keras_selfattn import text
    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG
    from keras_selfattn.text import load_pairs
    from keras_selfattn.training.data.run_tokenizer import tokenizer_configs

    # 8000 of the 30000 pairs: the same vocabularies and longest pair as the full
    # corpus, in a quarter of the set-up time.
    pairs = load_pairs(None)[: 512 if quick else 8000]
    splits = text.split_pairs(
        pairs, DEMO_TRAIN_CONFIG.split, seed=DEMO_TRAIN_CONFIG.seed
    )
    tokenizer = text.PairTokenizer.build(
        splits.train, *tokenizer_configs(DEMO_TRAIN_CONFIG)
    )
    # Static shapes: every batch padded to the longest pair (the target with </s>).
    lengths = [
        (len(source), len(target) + 1)
        for source, target in text.encode_pairs(
            splits.train, tokenizer
        ).as_numpy_iterator()
    ]
    longest_source = max(source for source, _ in lengths)
    longest_target = max(target for _, target in lengths)
    batch_size = 8 if quick else DEMO_TRAIN_CONFIG.batch_size
    dataset = text.make_dataset(
        splits.train,
        tokenizer,
        batch_size=batch_size,
        drop_remainder=True,
        max_source_length=min(longest_source, DEMO_MODEL_CONFIG.max_source_len),
        max_target_length=min(longest_target, DEMO_MODEL_CONFIG.max_target_len + 1),
        pad_to_max_length=True,
        seed=DEMO_TRAIN_CONFIG.seed,
    )
    batches = list(dataset.take(count))
    return batches, tokenizer.source_vocab_size, tokenizer.target_vocab_size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small corpus and model, 2 rounds, float32 without XLA only (smoke run)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds (default 9)"
    )
    parser.add_argument(
        "--steps-per-round",
        type=int,
        default=None,
        help="train steps per round (default 6)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 9)
    steps = args.steps_per_round or (1 if args.quick else 6)

    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG

    config = DEMO_MODEL_CONFIG
    if args.quick:
        config = _bench.tiny_model_config(32, 16)
    batches, source_vocab, target_vocab = demo_batches(max(steps, 2), args.quick)
    tokens = [int((target_out.numpy() != 0).sum()) for _, target_out in batches]
    shape = (
        tuple(batches[0][0]["source"].shape),
        tuple(batches[0][0]["target_in"].shape),
    )

    variants = [("float32", False)] if args.quick else list(VARIANTS)
    functions = {}
    for policy, jit_compile in variants:
        model = _bench.compiled_seq2seq(
            source_vocab,
            target_vocab,
            config,
            policy,
            jit_compile,
            DEMO_TRAIN_CONFIG.learning_rate,
            DEMO_TRAIN_CONFIG.clipnorm,
        )
        position = {"i": 0}

        def run(model=model, position=position):
            for _ in range(steps):
                inputs, target_out = batches[position["i"] % len(batches)]
                position["i"] += 1
                model.train_on_batch(inputs, target_out)

        functions[(policy, jit_compile)] = run
    samples = _bench.interleaved(functions, rounds, 1, warmup=2)
    tokens_per_step = sum(tokens) / len(tokens)
    reference = variants[0]
    rows = []
    for key in functions:
        policy, jit_compile = key
        step_seconds = _bench.median(samples[key]) / steps
        rows.append(
            [
                policy,
                "on" if jit_compile else "off",
                _bench.ms(step_seconds),
                f"{tokens_per_step / step_seconds:,.0f}",
                f"**{_bench.paired_ratio(samples, reference, key):.2f}**",
                f"{min(samples[reference]) / min(samples[key]):.2f}",
            ]
        )

    print()
    print(
        "Demo model training throughput (train_on_batch), batches of source "
        f"{shape[0]}, "
        f"target {shape[1]}, {tokens_per_step:.0f} target tokens per batch on average:"
    )
    print()
    _bench.print_table(
        [
            "dtype policy",
            "XLA",
            "ms / step",
            "target tokens / s",
            f"throughput vs {reference[0]}{' + XLA' if reference[1] else ''}",
            "same, fastest rounds",
        ],
        rows,
    )
    print()
    print(
        f"median of {rounds} interleaved rounds of {steps} steps; "
        f"{_bench.environment_line()}"
    )
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
