"""The layers and searches of the working tree vs an earlier commit, in one process.

Run: .venv/bin/python benchmarks/before_after.py [--rev REV] [--quick] [--rounds N]
         [--only attention|decoder|model|decoding|loss]

Loads ``multi_head_self_attention.py``, ``bahdanau_attention.py``,
``bahdanau_decoder.py`` and ``decoding.py`` as they are at git revision REV
(default HEAD, i.e. the last commit: run it before committing a change) into
temporary modules, and times them against the working tree's, interleaved:

- MultiHeadSelfAttention forward + backward at (32, 128, 256), 8 heads, with and
  without a padding mask, ``tf.function`` and XLA;
- BahdanauDecoder's teacher-forced training step at the demo's shapes (B=64,
  T=13, S=11, units 128);
- the whole demo seq2seq ``train_on_batch`` (the model built from this tree's
  ``build_seq2seq`` with the old or new attention and decoder classes);
- greedy decoding of 30 tokens, batch 32, called eagerly (as
  ``Translator.translate`` calls it) and inside ``tf.function``;
- the label-smoothed masked loss (0.1) forward + backward on (64, 17, 3,715)
  logits, and ``--preset small``'s ``train_on_batch`` (small_step_cost.py's model
  and batch, graph mode as the preset trains on CPUs) compiled with the old or
  the new loss.

Each pair is checked for equal outputs first; ratios are ``after / before``
(below 1: the working tree is faster).
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = {
    "multi_head_self_attention": "keras_selfattn/layers/multi_head_self_attention.py",
    "bahdanau_attention": "keras_selfattn/layers/bahdanau_attention.py",
    "bahdanau_decoder": "keras_selfattn/layers/bahdanau_decoder.py",
    "decoding": "keras_selfattn/decoding.py",
    "losses": "keras_selfattn/models/losses.py",
}


def load_old_modules(rev):
    """{name: module} of the files at ``rev``, registered under another package."""
    folder = tempfile.mkdtemp(prefix="before_after_")
    tag = "before_" + "".join(c if c.isalnum() else "_" for c in rev)
    for name, path in MODULES.items():
        source = subprocess.run(
            ["git", "show", f"{rev}:{path}"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        source = source.replace(
            "from keras_selfattn.layers.bahdanau_attention import",
            f"from {tag}_bahdanau_attention import",
        )
        source = source.replace('package="keras_selfattn"', f'package="{tag}"')
        with open(
            os.path.join(folder, f"{tag}_{name}.py"), "w", encoding="utf-8"
        ) as handle:
            handle.write(source)
    modules = {}
    for name in MODULES:
        spec = importlib.util.spec_from_file_location(
            f"{tag}_{name}", os.path.join(folder, f"{tag}_{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"{tag}_{name}"] = (
            module  # the old decoder imports the old attention by this name
        )
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def gradient_step(call, variables, inputs, jit_compile):
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def step(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(list(inputs))
            loss = tf.reduce_mean(tf.square(call(*inputs)))
        grads = tape.gradient(loss, [*inputs, *variables])
        return tf.add_n([tf.reduce_sum(g) for g in grads])

    return lambda: step(*inputs).numpy()


def attention_cases(old, quick):
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.layers import MultiHeadSelfAttention

    batch, length, width, heads = (2, 16, 32, 4) if quick else (32, 128, 256, 8)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, length, width)).astype("float32"))
    lens = rng.integers(length * 3 // 4, length + 1, size=batch)
    padding = tf.constant(np.arange(length)[None, :] < lens[:, None])
    before = old["multi_head_self_attention"].MultiHeadSelfAttention(width, heads)
    after = MultiHeadSelfAttention(width, heads)
    before(x[:1])
    after(x[:1])
    after.set_weights(before.get_weights())
    for mask in (None, padding):
        np.testing.assert_allclose(
            after(x, mask=mask).numpy(), before(x, mask=mask).numpy(), atol=1e-5
        )
    for jit_compile in (False,) if quick else (False, True):
        for label, mask in (("no mask", None), ("padding mask", padding)):
            yield (
                f"MultiHeadSelfAttention fwd+bwd {(batch, length, width)}, {label}",
                "XLA" if jit_compile else "tf.function",
                {
                    side: gradient_step(
                        lambda x, layer=layer, mask=mask: layer(
                            x, mask=mask, training=True
                        ),
                        layer.trainable_variables,
                        [x],
                        jit_compile,
                    )
                    for side, layer in (("before", before), ("after", after))
                },
            )


def decoder_cases(old, quick):
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.layers import BahdanauDecoder

    batch, mem_len, tgt_len, units, emb, mem_dim = (
        (4, 5, 3, 8, 4, 6) if quick else (64, 13, 11, 128, 32, 64)
    )
    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(size=(batch, tgt_len, emb)).astype("float32"))
    memory = tf.constant(rng.normal(size=(batch, mem_len, mem_dim)).astype("float32"))
    valid_lens = tf.constant(
        rng.integers(mem_len // 2, mem_len + 1, size=batch).astype("int32")
    )
    before = old["bahdanau_decoder"].BahdanauDecoder(units)
    after = BahdanauDecoder(units)
    before(inputs[:1], memory[:1])
    after(inputs[:1], memory[:1])
    after.set_weights(before.get_weights())
    np.testing.assert_allclose(
        after(inputs, memory, memory_valid_lens=valid_lens, training=True).numpy(),
        before(inputs, memory, memory_valid_lens=valid_lens, training=True).numpy(),
        atol=1e-5,
    )
    for jit_compile in (False,) if quick else (False, True):
        yield (
            (
                f"BahdanauDecoder training step, B={batch}, T={mem_len}, S={tgt_len}, "
                f"units={units}"
            ),
            "XLA" if jit_compile else "tf.function",
            {
                side: gradient_step(
                    lambda i, m, layer=layer: layer(
                        i, m, memory_valid_lens=valid_lens, training=True
                    ),
                    layer.trainable_variables,
                    [inputs, memory],
                    jit_compile,
                )
                for side, layer in (("before", before), ("after", after))
            },
        )


def model_cases(old, quick):
    from decoder_train_step import seq2seq_step

    from keras_selfattn.jobs import DEMO_MODEL_CONFIG
    from keras_selfattn.models import blocks, seq2seq

    config, shape = DEMO_MODEL_CONFIG, (64, 13, 11, 190, 15)
    if quick:
        config = _bench.tiny_model_config()
        shape = (4, 6, 5, 20, 12)
    for jit_compile in (False,) if quick else (False, True):
        steps = {"after": seq2seq_step(config, *shape, jit_compile=jit_compile)[0]}
        current = (blocks.MultiHeadSelfAttention, seq2seq.BahdanauDecoder)
        blocks.MultiHeadSelfAttention = old[
            "multi_head_self_attention"
        ].MultiHeadSelfAttention
        seq2seq.BahdanauDecoder = old["bahdanau_decoder"].BahdanauDecoder
        try:
            steps["before"] = seq2seq_step(config, *shape, jit_compile=jit_compile)[0]
        finally:
            blocks.MultiHeadSelfAttention, seq2seq.BahdanauDecoder = current
        yield (
            f"demo seq2seq train_on_batch, batch {shape[0]}",
            "XLA" if jit_compile else "tf.function",
            steps,
        )


def loss_cases(old, quick):
    import numpy as np
    import small_step_cost
    import tensorflow as tf

    from keras_selfattn.models import masked_loss
    from keras_selfattn.training.fit import compiled_model

    sizes = (50, 40) if quick else (4077, 3715)
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(size=(64, 17, sizes[1])).astype("float32") * 3)
    targets = rng.integers(4, sizes[1], size=(64, 17))
    targets[:, 14:] = 0
    losses = {
        "before": old["losses"].masked_loss(label_smoothing=0.1),
        "after": masked_loss(label_smoothing=0.1),
    }
    np.testing.assert_allclose(
        float(losses["after"](targets, logits)),
        float(losses["before"](targets, logits)),
        rtol=1e-6,
    )

    def loss_step(loss):
        @tf.function
        def step(z):
            with tf.GradientTape() as tape:
                tape.watch(z)
                value = loss(targets, z)
            return tf.reduce_sum(tape.gradient(value, z))

        return lambda: step(logits).numpy()

    yield (
        f"label-smoothed masked loss fwd+bwd, logits (64, 17, {sizes[1]:,})",
        "tf.function",
        {side: loss_step(loss) for side, loss in losses.items()},
    )
    x, y = small_step_cost.batch(sizes)
    steps = {}
    current = compiled_model.masked_loss
    for side, module_loss in (
        ("after", current),
        ("before", old["losses"].masked_loss),
    ):
        compiled_model.masked_loss = module_loss
        try:
            model = small_step_cost.build(sizes, {}, quick)
        finally:
            compiled_model.masked_loss = current
        steps[side] = lambda model=model: model.train_on_batch(x, y)
    yield ("`--preset small` train_on_batch, batch 64", "tf.function", steps)


def decoding_cases(old, quick):
    import numpy as np
    import tensorflow as tf
    from decoding_latency import demo_model

    from keras_selfattn import decoding

    model, _, _ = demo_model(29, quick)
    batch = 4 if quick else 32
    source = tf.constant(
        np.random.default_rng(0).integers(4, 100, size=(batch, 16)).astype("int32")
    )
    np.testing.assert_array_equal(
        decoding.greedy_decode(model, source, 30)["ids"].numpy(),
        old["decoding"].greedy_decode(model, source, 30)["ids"].numpy(),
    )
    yield (
        f"greedy decoding, 30 tokens, batch {batch}",
        "called eagerly",
        {
            side: (
                lambda module=module: module.greedy_decode(model, source, 30)[
                    "ids"
                ].numpy()
            )
            for side, module in (("before", old["decoding"]), ("after", decoding))
        },
    )
    graphs = {
        side: tf.function(
            lambda s, module=module: module.greedy_decode(model, s, 30)["ids"]
        )
        for side, module in (("before", old["decoding"]), ("after", decoding))
    }
    yield (
        f"greedy decoding, 30 tokens, batch {batch}",
        "tf.function",
        {side: (lambda fn=fn: fn(source).numpy()) for side, fn in graphs.items()},
    )


CASES = {
    "attention": attention_cases,
    "decoder": decoder_cases,
    "model": model_cases,
    "decoding": decoding_cases,
    "loss": loss_cases,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rev", default="HEAD", help="the git revision to compare with (default HEAD)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny shapes, 2 rounds, no XLA (smoke run)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds (default 5)"
    )
    parser.add_argument(
        "--only",
        choices=list(CASES),
        help="run one group of cases",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.rev],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    old = load_old_modules(args.rev)

    rows = []
    for group, cases in CASES.items():
        if args.only not in (None, group):
            continue
        for case, compiled, functions in cases(old, args.quick):
            calls = 1 if args.quick else _bench.calls_for(functions["after"], 0.1)
            samples = _bench.interleaved(functions, rounds, calls)
            rows.append(
                [
                    case,
                    compiled,
                    _bench.ms(_bench.median(samples["before"])),
                    _bench.ms(_bench.median(samples["after"])),
                    f"**{_bench.paired_ratio(samples, 'after', 'before'):.2f}**",
                ]
            )

    print()
    print(
        f"Working tree vs {args.rev} ({revision}), float32, same process, interleaved:"
    )
    print()
    _bench.print_table(
        [
            "case",
            "compiled as",
            f"before ({revision}) ms",
            "after ms",
            "after / before",
        ],
        rows,
    )
    print()
    print(f"median of {rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
