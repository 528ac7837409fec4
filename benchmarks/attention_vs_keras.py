"""MultiHeadSelfAttention vs keras.layers.MultiHeadAttention: forward + backward time.

Run: .venv/bin/python benchmarks/attention_vs_keras.py [--quick]
         [--rounds N] [--no-mask-table]

Both layers get the same input X (batch, length, width), the same number of heads
and the same key size (width / heads), no biases, no dropout, and compute
self-attention (the peer as ``mha(X, X)``). "ours" is the layer as it runs on
TensorFlow (its three steps: logits, masked softmax, weighted sum); "ours
through dot_product_attention" is the same layer and weights forced onto one
``keras.ops.dot_product_attention``, what it runs on JAX and torch, and what
the peer runs (no scores asked for, no dropout). One step is the forward pass, a
scalar loss and the gradients with respect to X and every weight, inside
``tf.function`` -- once without XLA and once with ``jit_compile=True``. The two
layers' steps run interleaved in the same process (see _bench.py); the table
gives each one's median time per step, the median of the per-round ratios
``ours / peer`` (below 1: ours is faster; the verdict uses it) and the ratio of
the two fastest rounds (other processes only ever slow a round down, so the
fastest rounds are the least disturbed: where the two ratios disagree, the
machine's load decided the round, not the layers).

A second table does the same with a padding mask (a Keras mask from
``Embedding(mask_zero=True)``: ours receives it as ``mask=``, the peer the
(B, T, T) AND of the query and key masks as ``attention_mask``, which is what
Keras builds from a Keras mask), the encoder's case.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

SHAPES = ((32, 128, 256), (8, 512, 256), (1, 2048, 256))
QUICK_SHAPES = ((2, 16, 32),)
NUM_HEADS = 8


def inputs_and_mask(batch, length, width, masked):
    """The benchmark's X (batch, length, width) and padding mask (or None)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, length, width)).astype("float32"))
    mask = None
    if masked:
        # Every sequence keeps a different prefix (3/4 of the length and more).
        lens = rng.integers(length * 3 // 4, length + 1, size=batch)
        lens[0] = length
        mask = tf.constant(np.arange(length)[None, :] < lens[:, None])
    return x, mask


def keras_self_attention(peer, mask):
    """keras' MHA as self-attention, given the (B, T, T) mask Keras builds."""
    import tensorflow as tf

    def attend_peer(x):
        if mask is None:
            return peer(x, x, training=True)
        pair = tf.logical_and(mask[:, :, None], mask[:, None, :])
        return peer(x, x, attention_mask=pair, training=True)

    return attend_peer


def gradient_step(attend, variables, x, jit_compile):
    """A callable timing one forward + backward of ``attend`` (loss: mean square)."""
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_mean(tf.square(attend(x)))
        grads = tape.gradient(loss, [x, *variables])
        return tf.add_n([tf.reduce_sum(g) for g in grads])

    return lambda: step(x).numpy()


def make_steps(batch, length, width, num_heads, jit_compile, masked):
    import keras

    from keras_selfattn.layers import MultiHeadSelfAttention

    x, mask = inputs_and_mask(batch, length, width, masked)

    class ThroughFusedOp(MultiHeadSelfAttention):
        """The layer forced onto keras.ops.dot_product_attention, as on JAX."""

        def _fused_attention_applies(self, return_attention_scores, training):
            return not return_attention_scores

    ours = MultiHeadSelfAttention(width, num_heads, use_bias=False)
    fused_op = ThroughFusedOp(width, num_heads, use_bias=False)
    peer = keras.layers.MultiHeadAttention(
        num_heads, key_dim=width // num_heads, use_bias=False
    )
    ours(x[:1, :4])
    fused_op(x[:1, :4])
    fused_op.set_weights(ours.get_weights())
    peer(x[:1, :4], x[:1, :4])

    def attend_ours(x):
        return ours(x, mask=mask, training=True)

    def attend_fused_op(x):
        return fused_op(x, mask=mask, training=True)

    return {
        "ours": gradient_step(attend_ours, ours.trainable_variables, x, jit_compile),
        "fused_op": gradient_step(
            attend_fused_op, fused_op.trainable_variables, x, jit_compile
        ),
        "keras": gradient_step(
            keras_self_attention(peer, mask), peer.trainable_variables, x, jit_compile
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one tiny shape, 2 rounds, no padding-mask table (smoke run)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds per case (default 5)"
    )
    parser.add_argument(
        "--no-mask-table", action="store_true", help="skip the padding-mask table"
    )
    args = parser.parse_args(argv)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    rounds = args.rounds or (2 if args.quick else 5)
    num_heads = 4 if args.quick else NUM_HEADS

    maskings = (False,) if (args.no_mask_table or args.quick) else (False, True)
    tables = {}
    for masked in maskings:
        rows = []
        for batch, length, width in shapes:
            for jit_compile in (False, True):
                steps = make_steps(batch, length, width, num_heads, jit_compile, masked)
                # About 0.1 s per sample, so that timer and dispatch noise vanish.
                calls = 1 if args.quick else _bench.calls_for(steps["keras"], 0.1)
                samples = _bench.interleaved(steps, rounds, calls)
                ratio = _bench.paired_ratio(samples, "ours", "keras")
                best_ratio = min(samples["ours"]) / min(samples["keras"])
                rows.append(
                    [
                        f"({batch}, {length}, {width})",
                        "XLA" if jit_compile else "tf.function",
                        _bench.ms(_bench.median(samples["ours"])),
                        _bench.ms(_bench.median(samples["fused_op"])),
                        _bench.ms(_bench.median(samples["keras"])),
                        f"**{ratio:.2f}**",
                        f"{best_ratio:.2f}",
                        f"{_bench.paired_ratio(samples, 'ours', 'fused_op'):.2f}",
                        "yes" if ratio <= 1.0 else f"no (+{100 * (ratio - 1):.0f}%)",
                    ]
                )
        tables[masked] = rows

    for masked, rows in tables.items():
        print()
        print(
            "MultiHeadSelfAttention vs keras.layers.MultiHeadAttention, forward + "
            "backward, "
            f"{num_heads} heads, float32, {'padding mask' if masked else 'no mask'}:"
        )
        print()
        _bench.print_table(
            [
                "(batch, length, width)",
                "compiled as",
                "ours ms",
                "ours through dot_product_attention ms",
                "keras ms",
                "ours / keras",
                "fastest ours / fastest keras",
                "ours / ours through dot_product_attention",
                "no slower?",
            ],
            rows,
        )
    print()
    print(f"median of {rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
