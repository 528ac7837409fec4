"""CPU seconds of one `--preset small` training step (64 pairs), variants side by side.

    .venv/bin/python benchmarks/small_step_cost.py --threads 1 --rounds 6 \\
        --variant preset=10175,7830 --variant v4k=4077,3715 \\
        --variant v4k-tied=4077,3715,tie_embeddings=True \\
        --variant v4k-tied-nodropout=4077,3715,tie_embeddings=True,dropout=0.0

Every variant is the ``small`` preset's model and optimizer (`build_and_compile`;
XLA as ``train`` decides it: off on CPUs unless ``train.jit_compile=True``) with
the given source and target vocabulary sizes and `ModelConfig` overrides
(``train.FIELD=value``: a `TrainConfig` one, e.g. ``train.jit_compile=True`` or
``train.mixed_precision='float32'`` (the model built under that policy; the
preset's ``'auto'`` is bfloat16 where the CPU multiplies it natively);
``keras_dropout=True``: the dropout masks drawn by Keras' RNG as before
`HashDropout`), in this one process, on the same random batch of 64 pairs
(source ``--source-len`` and target ``--target-len`` tokens, no padding).
Rounds run the variants in turn, the order reversed every other round (A B B A
...), each ``--steps`` ``train_on_batch`` calls timed in CPU seconds of the
process (``resource.getrusage``, user + system, all threads); the figure is the
median over rounds, and the ratio to the first variant is taken round by round
so that a drift of the machine's load hits both alike. The last column is the
CPU seconds of each variant's first call (tracing, XLA's compilation where it
compiles, and one step): what a new batch shape costs once. ``--quick``: tiny
sizes.
"""

import argparse
import ast
import contextlib
import os
import resource
import statistics
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: F401  (quiet TensorFlow)


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse_variant(text):
    """``name=SOURCE_VOCAB,TARGET_VOCAB[,field=value...]`` -> (name, sizes, fields)."""
    name, _, spec = text.partition("=")
    parts = spec.split(",")
    if len(parts) < 2 or not name:
        raise ValueError(
            "--variant must be NAME=SOURCE_VOCAB,TARGET_VOCAB[,field=value...]. "
            f"Received: --variant={text!r}"
        )
    fields = {}
    for part in parts[2:]:
        key, _, value = part.partition("=")
        fields[key] = ast.literal_eval(value)
    return name, (int(parts[0]), int(parts[1])), fields


def build(sizes, fields, quick):
    import tensorflow as tf

    from keras_selfattn.training.config.presets import preset_configs
    from keras_selfattn.training.fit.compiled_model import (
        build_and_compile,
        dtype_policy,
        training_policy,
    )

    model_config, train_config = preset_configs("small")
    overrides = {k: v for k, v in fields.items() if not k.startswith("train.")}
    train_overrides = {
        k.removeprefix("train."): v for k, v in fields.items() if k.startswith("train.")
    }
    train_config = type(train_config)(**{**vars(train_config), **train_overrides})
    if quick:
        overrides.update(num_hiddens=16, ffn_hiddens=32, num_layers=1)
        overrides.update(decoder_units=16, embedding_dim=16, num_heads=2)
    model_config = type(model_config)(**{**vars(model_config), **overrides})
    tokenizer = types.SimpleNamespace(
        source_vocab_size=sizes[0], target_vocab_size=sizes[1]
    )
    with dtype_policy(training_policy(train_config)):  # as `train` builds it
        return build_and_compile(
            tokenizer, model_config, train_config, tf.distribute.get_strategy(), 1000
        )


@contextlib.contextmanager
def keras_dropout_masks(active):
    """With ``active``: the model traced inside draws its dropout masks with
    Keras' own `keras.layers.Dropout.call` (the RNG), not `HashDropout`'s hash:
    the step before the hash, measured in the same process."""
    from keras_selfattn.layers import HashDropout

    hashed = HashDropout.call
    if active:
        HashDropout.call = HashDropout.__mro__[1].call
    try:
        yield
    finally:
        HashDropout.call = hashed


def batch(sizes, source_len=16, target_len=17, seed=1):
    import numpy as np

    rng = np.random.default_rng(seed)
    source = rng.integers(4, sizes[0], (64, source_len)).astype("int32")
    target = rng.integers(4, sizes[1], (64, target_len + 1)).astype("int32")
    return {"source": source, "target_in": target[:, :-1]}, target[:, 1:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--threads", type=int, default=0, help="0: TensorFlow's")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--source-len", type=int, default=16)
    parser.add_argument("--target-len", type=int, default=17)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.variant = args.variant or ["a=50,40", "b=50,40,tie_embeddings=True"]
        args.rounds, args.steps = 2, 2
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    variants = [parse_variant(v) for v in args.variant]
    steps, first_call = {}, {}
    for name, sizes, fields in variants:
        keras_dropout = fields.pop("keras_dropout", False)
        with keras_dropout_masks(keras_dropout):
            model = build(sizes, fields, args.quick)
            x, y = batch(sizes, args.source_len, args.target_len)
            start = cpu()
            model.train_on_batch(x, y)  # tracing, XLA compilation
            first_call[name] = cpu() - start
            for _ in range(2):
                model.train_on_batch(x, y)
        steps[name] = (model, x, y)
    samples = {name: [] for name, _, _ in variants}
    names = list(samples)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            model, x, y = steps[name]
            start = cpu()
            for _ in range(args.steps):
                model.train_on_batch(x, y)
            samples[name].append((cpu() - start) / args.steps)
    first = names[0]
    print(f"| variant | CPU-s per step | ratio to {first} | first call CPU-s |")
    print("|---|---|---|---|")
    for name in names:
        ratios = [a / b for a, b in zip(samples[name], samples[first], strict=True)]
        print(
            f"| {name} | {statistics.median(samples[name]):.3f} | "
            f"{statistics.median(ratios):.2f} | {first_call[name]:.1f} |"
        )
    quick = " --quick" if args.quick else ""
    print(f"command: .venv/bin/python benchmarks/small_step_cost.py{quick}")


if __name__ == "__main__":
    main()
