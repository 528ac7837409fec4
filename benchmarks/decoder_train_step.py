"""Bahdanau decoder teacher-forced training step vs the book's loop; utilization.

Run: .venv/bin/python benchmarks/decoder_train_step.py [--quick] [--rounds N]

Table 1. One training step of ``BahdanauDecoder`` (teacher forcing: forward over
the whole target sequence, a scalar loss, gradients with respect to every weight,
the memory, the inputs and the initial state) vs the same computation written as
in Dive into Deep Learning (section 11.4, ``Seq2SeqAttentionDecoder``): a Python
``for`` loop over the time steps inside ``tf.function`` (unrolled into the graph),
each step projecting the query, projecting the keys (the book does this at every
step), the additive score, the masked softmax, the context, ``concat`` and a GRU
cell. A second reference ("book, keys once") hoists the key projection out of the
loop, which is what our layer does. The references use the layer's own weights,
and the benchmark checks that all three give the same outputs first. Without XLA
and with ``jit_compile=True``; ratios are ``ours / reference`` (below 1: ours is
faster).

Table 2. The whole ``build_seq2seq`` training step (``train_on_batch``: forward,
masked cross-entropy, backward, Adam) of the demo model on batches of the demo's
shapes, and its utilization: model FLOPs per second (the matrix products of the
forward pass counted analytically, times 3 for forward + backward) over the
float32 matmul throughput (1024^3 ``tf.matmul``) measured in the same process,
round by round (the matmul is one more interleaved peer).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

# (label, batch, memory length T, target length S, units, embedding E, memory width Dm)
DECODER_SHAPES = (
    ("demo", 64, 13, 11, 128, 32, 64),
    ("larger", 64, 32, 32, 256, 64, 256),
)
QUICK_DECODER_SHAPES = (("tiny", 4, 5, 3, 8, 4, 6),)


def decoder_steps(batch, mem_len, tgt_len, units, emb, mem_dim, jit_compile):
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.layers import BahdanauDecoder

    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(size=(batch, tgt_len, emb)).astype("float32"))
    memory = tf.constant(rng.normal(size=(batch, mem_len, mem_dim)).astype("float32"))
    lens = rng.integers(mem_len // 2, mem_len + 1, size=batch)
    valid_lens = tf.constant(lens.astype("int32"))
    state0 = tf.constant(rng.normal(size=(batch, units)).astype("float32") * 0.1)

    decoder = BahdanauDecoder(units)
    decoder(inputs[:1], memory[:1], initial_state=state0[:1])
    cell = decoder.cell
    gru = cell.rnn_cells[0]
    w_q = cell.attention.query_dense.kernel
    w_k = cell.attention.key_dense.kernel
    w_v = cell.attention.score_dense.kernel

    def ours(inputs, memory, state0):
        return decoder(
            inputs,
            memory,
            memory_valid_lens=valid_lens,
            initial_state=state0,
            training=True,
        )

    def book(keys_once):
        def run(inputs, memory, state0):
            # d2l 11.4 (TensorFlow version), with the layer's weights.
            key_mask = tf.sequence_mask(valid_lens, mem_len)
            keys = tf.matmul(memory, w_k) if keys_once else None
            h, outputs = state0, []
            for t in range(tgt_len):
                query = tf.matmul(h, w_q)  # W_q q
                projected = keys if keys_once else tf.matmul(memory, w_k)  # W_k k
                features = tf.tanh(query[:, None, :] + projected)  # (B, T, units)
                scores = tf.squeeze(tf.matmul(features, w_v), -1)  # w_v^T tanh(...)
                scores = tf.where(key_mask, scores, -1e6)  # d2l masked_softmax
                weights = tf.nn.softmax(scores, axis=-1)
                context = tf.squeeze(tf.matmul(weights[:, None, :], memory), 1)
                x = tf.concat([inputs[:, t], context], axis=-1)
                h, _ = gru(x, [h], training=True)
                outputs.append(h)
            return tf.stack(outputs, axis=1)

        return run

    variables = decoder.trainable_variables
    implementations = {"ours": ours, "book": book(False), "book, keys once": book(True)}
    reference = ours(inputs, memory, state0).numpy()
    for name, fn in implementations.items():
        got = fn(inputs, memory, state0).numpy()
        if not np.allclose(got, reference, atol=1e-4):
            raise AssertionError(
                f"{name} differs from the layer: {np.abs(got - reference).max()}"
            )

    def train_step(fn):
        @tf.function(jit_compile=jit_compile)
        def step(inputs, memory, state0):
            with tf.GradientTape() as tape:
                tape.watch([inputs, memory, state0])
                loss = tf.reduce_mean(tf.square(fn(inputs, memory, state0)))
            grads = tape.gradient(loss, [inputs, memory, state0, *variables])
            return tf.add_n([tf.reduce_sum(g) for g in grads])

        return lambda: step(inputs, memory, state0).numpy()

    return {name: train_step(fn) for name, fn in implementations.items()}


def seq2seq_step(
    config, batch, src_len, tgt_len, src_vocab, tgt_vocab, jit_compile, policy="float32"
):
    """(train_on_batch callable, real target tokens per batch) for the model."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(1)
    src_lens = rng.integers(max(1, src_len // 2), src_len + 1, size=batch)
    tgt_lens = rng.integers(max(2, tgt_len // 2), tgt_len + 1, size=batch)
    source = rng.integers(4, src_vocab, size=(batch, src_len)) * (
        np.arange(src_len) < src_lens[:, None]
    )
    target = rng.integers(4, tgt_vocab, size=(batch, tgt_len)) * (
        np.arange(tgt_len) < tgt_lens[:, None]
    )
    x = {
        "source": tf.constant(source.astype("int32")),
        "target_in": tf.constant(target.astype("int32")),
    }
    y = tf.constant(target.astype("int32"))
    model = _bench.compiled_seq2seq(
        src_vocab, tgt_vocab, config, policy, jit_compile, learning_rate=1e-3
    )
    return (lambda: model.train_on_batch(x, y)), int((target != 0).sum())


def seq2seq_forward_flops(config, batch, src_len, tgt_len, src_vocab, tgt_vocab):
    """Multiply-add FLOPs (2 per MAC) of the matrix products of one forward pass.

    Counted: encoder Q/K/V and output projections, Q K^T and weights x V, the
    feed-forward layers; the bridge; the decoder's key projection (once), and per
    step its query projection, the score vector v over tanh features, the
    context, the GRU's input and recurrent kernels; the output logits.
    Element-wise work (softmax, tanh, layer norm) is not counted (as usual for
    "model FLOPs").
    """
    d, f, u, e = (
        config.num_hiddens,
        config.ffn_hiddens,
        config.decoder_units,
        config.embedding_dim,
    )
    tokens = batch * src_len
    per_layer = (
        2 * tokens * d * 3 * d
        + 2 * 2 * batch * src_len * src_len * d
        + 2 * tokens * d * d
        + 2 * 2 * tokens * d * f
    )
    encoder = config.num_layers * per_layer
    gates = 4 if config.rnn_type == "lstm" else 3
    states = config.decoder_layers * (2 if config.rnn_type == "lstm" else 1)
    bridge = states * 2 * batch * d * u
    keys = 2 * tokens * d * u
    step = 2 * batch * u * u + 2 * batch * src_len * u + 2 * batch * src_len * d
    step += 2 * batch * (e + d) * gates * u + 2 * batch * u * gates * u
    step += (config.decoder_layers - 1) * (2 * batch * u * gates * u * 2)
    logits = 2 * batch * tgt_len * u * tgt_vocab
    return encoder + bridge + keys + tgt_len * step + logits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny shapes, 2 rounds, no XLA (smoke run)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds (default 5)"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)

    import tensorflow as tf

    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG

    compile_modes = (False,) if args.quick else (False, True)
    rows = []
    for label, batch, mem_len, tgt_len, units, emb, mem_dim in (
        QUICK_DECODER_SHAPES if args.quick else DECODER_SHAPES
    ):
        for jit_compile in compile_modes:
            steps = decoder_steps(
                batch, mem_len, tgt_len, units, emb, mem_dim, jit_compile
            )
            calls = 1 if args.quick else _bench.calls_for(steps["ours"], 0.1)
            samples = _bench.interleaved(steps, rounds, calls)
            rows.append(
                [
                    (
                        f"{label}: B={batch}, T={mem_len}, S={tgt_len}, units={units}, "
                        f"E={emb}, Dm={mem_dim}"
                    ),
                    "XLA" if jit_compile else "tf.function",
                    _bench.ms(_bench.median(samples["ours"])),
                    _bench.ms(_bench.median(samples["book"])),
                    _bench.ms(_bench.median(samples["book, keys once"])),
                    f"**{_bench.paired_ratio(samples, 'ours', 'book'):.2f}**",
                    f"{_bench.paired_ratio(samples, 'ours', 'book, keys once'):.2f}",
                ]
            )

    # The demo model on batches of the demo's shapes (longest source 13 tokens,
    # longest target 11 with its end id; vocabularies 190 and 15).
    if args.quick:
        config = _bench.tiny_model_config()
        shape = (4, 6, 5, 20, 12)
    else:
        config = DEMO_MODEL_CONFIG
        shape = (DEMO_TRAIN_CONFIG.batch_size, 13, 11, 190, 15)
    n = 256 if args.quick else 1024
    a = tf.random.normal((n, n))
    matmul = tf.function(lambda: tf.matmul(a, a))
    flops = 3 * seq2seq_forward_flops(config, *shape)
    model_rows = []
    for jit_compile in compile_modes:
        step, _ = seq2seq_step(config, *shape, jit_compile=jit_compile)
        calls = 1 if args.quick else _bench.calls_for(step, 0.1)
        samples = _bench.interleaved(
            {"step": step, "matmul": lambda: matmul().numpy()}, rounds, calls
        )
        utilization = _bench.median(
            (flops / s) / (2 * n**3 / m)
            for s, m in zip(samples["step"], samples["matmul"])
        )
        best_peak = 2 * n**3 / min(samples["matmul"])
        best_utilization = flops / min(samples["step"]) / best_peak
        model_rows.append(
            [
                "XLA" if jit_compile else "tf.function",
                _bench.ms(_bench.median(samples["step"])),
                f"{flops / 1e9:.3f}",
                f"{flops / _bench.median(samples['step']) / 1e9:.1f}",
                (
                    f"{2 * n**3 / _bench.median(samples['matmul']) / 1e9:.0f} (best "
                    f"{best_peak / 1e9:.0f})"
                ),
                f"**{100 * utilization:.1f}%**",
                f"{100 * best_utilization:.1f}%",
            ]
        )

    print()
    print(
        "BahdanauDecoder teacher-forced training step (forward + backward) vs the "
        "book's loop, float32:"
    )
    print()
    _bench.print_table(
        [
            "shape",
            "compiled as",
            "ours ms",
            "book ms",
            "book, keys once ms",
            "ours / book",
            "ours / book, keys once",
        ],
        rows,
    )
    print()
    print(
        "Whole seq2seq train step (train_on_batch: forward, loss, backward, Adam), "
        "demo model, "
        f"batch {shape[0]}, source {shape[1]}, target {shape[2]} tokens, float32:"
    )
    print()
    _bench.print_table(
        [
            "compiled as",
            "step ms",
            "model GFLOP / step",
            "model GFLOP/s",
            f"matmul {n}^3 GFLOP/s",
            "utilization (median of rounds)",
            "utilization (fastest step / best matmul)",
        ],
        model_rows,
    )
    print()
    print(
        "Utilization: model FLOP/s over the float32 matmul FLOP/s measured in the same "
        "round. Under heavy"
    )
    print(
        "load from other processes the big matmul suffers more than the small kernels "
        "of the step, which"
    )
    print(
        "inflates the per-round figure; the last column pairs the least disturbed "
        "samples of each."
    )
    print()
    print(f"median of {rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
