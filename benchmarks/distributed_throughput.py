"""Training steps per second on one replica and on two (MirroredStrategy, 2 CPUs).

Run: .venv/bin/python benchmarks/distributed_throughput.py [--quick]
         [--xla] [--rounds N]

The CPU is split into two logical devices (`split_cpu`); the same global batch
(the demo's 64 pairs, padded as `train` pads them) trains the demo model built
and compiled by `train`'s own `build_and_compile`, under the default strategy
(one replica on CPU:0) and under ``MirroredStrategy`` (two replicas of 32 pairs,
gradients all-reduced), interleaved round by round in this one process. With
``--xla`` both also run with ``jit_compile=True`` (the whole step compiled on one
replica; each replica's forward and backward pass compiled on two).

On a machine with two shared cores, two replicas split the same cores: the
figure shows what the all-reduce and the replica bookkeeping cost, and that the
path works; it is no forecast of the speed-up on several GPUs or hosts.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny model, 2 rounds of 1 step after 1 untimed (smoke run)",
    )
    parser.add_argument(
        "--xla",
        action="store_true",
        help="also with jit_compile=True (slow to compile)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds (default 7)"
    )
    parser.add_argument(
        "--steps-per-round",
        type=int,
        default=None,
        help="train steps per round (default 5)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 7)
    steps = args.steps_per_round or (1 if args.quick else 5)

    from keras_selfattn.training.distribute.strategy import split_cpu

    try:
        split_cpu(2)  # before TensorFlow initializes its devices
    except RuntimeError:
        # This process already initialized TensorFlow (e.g. a test harness that
        # imported the script): measure in a fresh one and print what it printed.
        import subprocess

        arguments = argv if argv is not None else sys.argv[1:]
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), *arguments],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        print(done.stdout, end="")
        if done.returncode:
            raise SystemExit(
                f"distributed_throughput.py failed:\n{done.stderr[-3000:]}"
            ) from None
        return

    import dataclasses

    import keras

    from keras_selfattn import text
    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG
    from keras_selfattn.training import get_strategy
    from keras_selfattn.training.data.run_tokenizer import tokenizer_configs
    from keras_selfattn.training.fit.train import (
        build_and_compile,
        make_training_datasets,
    )

    model_config = DEMO_MODEL_CONFIG
    if args.quick:
        model_config = _bench.tiny_model_config(32, 16)
    pairs = text.load_bundled_dates()[: 1024 if args.quick else 8192]
    splits = text.split_pairs(
        pairs, DEMO_TRAIN_CONFIG.split, seed=DEMO_TRAIN_CONFIG.seed
    )
    tokenizer = text.PairTokenizer.build(
        splits.train, *tokenizer_configs(DEMO_TRAIN_CONFIG)
    )

    variants = [("default", False), ("mirrored", False)]
    if args.xla:
        variants += [("default", True), ("mirrored", True)]
    functions, replicas = {}, {}
    for name, jit_compile in variants:
        train_config = dataclasses.replace(DEMO_TRAIN_CONFIG, jit_compile=jit_compile)
        strategy = get_strategy(name)
        keras.utils.set_random_seed(train_config.seed)
        train_ds, _, steps_per_epoch = make_training_datasets(
            splits, tokenizer, model_config, train_config
        )
        with strategy.scope():
            model = build_and_compile(
                tokenizer, model_config, train_config, strategy, steps_per_epoch
            )
        # One step through fit builds the optimizer and metrics as `train` does.
        model.fit(train_ds, epochs=1, steps_per_epoch=1, verbose=0)
        batches = iter(strategy.experimental_distribute_dataset(train_ds))

        def run(model=model, batches=batches):
            for _ in range(steps):
                logs = model.train_function(batches)
            # Block until the last step is done.
            float(keras.ops.convert_to_numpy(keras.tree.flatten(logs)[0]))

        functions[(name, jit_compile)] = run
        replicas[(name, jit_compile)] = strategy.num_replicas_in_sync

    samples = _bench.interleaved(functions, rounds, 1, warmup=1 if args.quick else 2)
    batch = DEMO_TRAIN_CONFIG.batch_size
    rows = []
    for key in functions:
        name, jit_compile = key
        reference = ("default", jit_compile)
        step_seconds = _bench.median(samples[key]) / steps
        rows.append(
            [
                str(replicas[key]),
                name,
                "on" if jit_compile else "off",
                str(batch),
                str(batch // replicas[key]),
                f"{1 / step_seconds:.2f}",
                f"{batch / step_seconds:,.0f}",
                f"**{_bench.paired_ratio(samples, reference, key):.2f}**",
            ]
        )
    print()
    print(
        "Training steps per second, one replica vs two (MirroredStrategy over two "
        "logical CPU devices), "
        f"{'tiny model' if args.quick else 'the demo model'}, the same global batch:"
    )
    print()
    _bench.print_table(
        [
            "replicas",
            "strategy",
            "XLA",
            "global batch",
            "per-replica batch",
            "steps / s",
            "pairs / s",
            "throughput vs one replica",
        ],
        rows,
    )
    print()
    print(
        "Two replicas on two shared CPU cores prove that synchronous training works "
        "(same weights as one replica, see tests/training/test_mirrored.py), not that "
        "it is faster: both replicas share the same cores, and the all-reduce is pure "
        "overhead here."
    )
    print(
        f"median of {rounds} interleaved rounds of {steps} steps; "
        f"{_bench.environment_line()}"
    )
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
