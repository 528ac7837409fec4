"""Four other layouts of MultiHeadSelfAttention's TensorFlow path against keras' MHA.

Run: .venv/bin/python benchmarks/attention_layouts.py [--rounds N] [--quick]

The target is the layer at most 0.8x the time of
``keras.layers.MultiHeadAttention`` (forward + backward). On TensorFlow both
run the same essential work (the Q/K/V and output projections, two batched
matmuls over the heads, a softmax over (B, H, T, T) logits); keras' layer adds a
pass that scales the logits and one that builds the mask. This script asks whether
another arrangement of our attention core removes enough of the rest to reach
0.8x. With the layer's own weights, in one process, interleaved (see _bench.py),
each against keras' MHA on the shapes of attention_vs_keras.py:

- ``ours``: the layer as it runs on TensorFlow (einsums over (B, T, H, D)
  operands, ``where`` for the mask, softmax);
- ``heads_first_where``: one transpose of the fused projection to
  (3, B, H, T, D), ``matmul(q, k, transpose_b=True)`` and ``matmul(w, v)``, one
  transpose back (instead of the einsums' transposes of each operand);
- ``heads_first_additive``: the same with the mask as an additive bias (its
  gradient passes through the add; ``where``'s gradient is two selects);
- ``einsum_additive``: the layer's einsums with the additive mask;
- ``hand_backward``: the layer's einsums and ``where``, with the attention
  core's gradient written out (``tf.custom_gradient``) as flash attention's
  backward pass computes it: ``dS = P * (dP - rowsum(dO * O))``, the row sums
  over the (B, T, H, D) output instead of TensorFlow's softmax gradient's pass
  over the (B, H, T, T) weights, and no gradient of ``where`` (a masked weight
  is 0, so its logit's gradient is too).

Every variant computes the layer's output and gradients (checked against the
layer's before timing).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench
from attention_vs_keras import gradient_step, inputs_and_mask, keras_self_attention

SHAPES = ((32, 128, 256), (8, 512, 256), (1, 2048, 256))
NUM_HEADS = 8


def variant_forwards(ours, mask, width, num_heads):
    """name -> forward function of X: the layer and its four other layouts."""
    import numpy as np
    import tensorflow as tf

    fill = float(-0.7 * np.finfo("float32").max)
    qkv_kernel = ours.query_key_value_dense.kernel
    out_kernel = ours.output_dense.kernel
    head = width // num_heads

    def zero_empty_rows(context):  # (B, H, T, D) or (B, T, H, D): batch first
        if mask is None:
            return context
        keeps = tf.cast(tf.reduce_any(mask, -1), context.dtype)
        return context * keeps[:, None, None, None]

    def masked(logits, additive):
        if mask is None:
            return logits
        keys = mask[:, None, None, :]
        if additive:
            return logits + tf.where(keys, 0.0, fill)
        return tf.where(keys, logits, fill)

    def heads_first(x, additive):
        b, t = tf.shape(x)[0], tf.shape(x)[1]
        qkv = tf.matmul(tf.reshape(x, (-1, width)), qkv_kernel)
        qkv = tf.reshape(qkv, (b, t, 3, num_heads, head))
        q, k, v = tf.unstack(tf.transpose(qkv, (2, 0, 3, 1, 4)), 3)
        logits = tf.matmul(q * (1.0 / math.sqrt(head)), k, transpose_b=True)
        weights = tf.nn.softmax(masked(logits, additive))
        context = zero_empty_rows(tf.matmul(weights, v))
        context = tf.reshape(tf.transpose(context, (0, 2, 1, 3)), (-1, width))
        return tf.reshape(tf.matmul(context, out_kernel), (b, t, width))

    def einsum_additive(x):
        b, t = tf.shape(x)[0], tf.shape(x)[1]
        q, k, v = ours.project_query_key_value(x)
        logits = tf.einsum("bqhd,bkhd->bhqk", q * (1.0 / math.sqrt(head)), k)
        weights = tf.nn.softmax(masked(logits, True))
        context = tf.einsum("bhqk,bkhd->bqhd", weights, v)
        return ours.output_dense(tf.reshape(zero_empty_rows(context), (b, t, width)))

    def hand_backward(x):
        b, t = tf.shape(x)[0], tf.shape(x)[1]
        q, k, v = ours.project_query_key_value(x)
        context = zero_empty_rows(core_with_hand_backward(q, k, v, masked, head))
        return ours.output_dense(tf.reshape(context, (b, t, width)))

    return {
        "ours": lambda x: ours(x, mask=mask, training=True),
        "heads_first_where": lambda x: heads_first(x, False),
        "heads_first_additive": lambda x: heads_first(x, True),
        "einsum_additive": einsum_additive,
        "hand_backward": hand_backward,
    }


def core_with_hand_backward(q, k, v, masked, head):
    """The layer's attention core (einsums, ``where``, softmax), its gradient
    written out as flash attention's backward pass computes it."""
    import tensorflow as tf

    @tf.custom_gradient
    def core(q, k, v):
        q = q * (1.0 / math.sqrt(head))
        weights = tf.nn.softmax(masked(tf.einsum("bqhd,bkhd->bhqk", q, k), False))
        context = tf.einsum("bhqk,bkhd->bqhd", weights, v)

        def gradient(d_context):
            d_v = tf.einsum("bhqk,bqhd->bkhd", weights, d_context)
            d_weights = tf.einsum("bqhd,bkhd->bhqk", d_context, v)
            rows = tf.transpose(tf.reduce_sum(d_context * context, -1), (0, 2, 1))
            d_logits = weights * (d_weights - rows[..., None])
            d_q = tf.einsum("bhqk,bkhd->bqhd", d_logits, k) * (1.0 / math.sqrt(head))
            return d_q, tf.einsum("bhqk,bqhd->bkhd", d_logits, q), d_v

        return context, gradient

    return core(q, k, v)


def outputs_and_gradients(forward, ours, x):
    """``forward(x)`` and the gradients of its mean square with respect to X and
    the layer's weights (training=True: no dropout in this layer)."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = forward(x)
        loss = tf.reduce_mean(tf.square(outputs))
    return outputs, tape.gradient(loss, [x, *ours.trainable_variables])


def make_steps(batch, length, width, num_heads, jit_compile, masked):
    import keras
    import numpy as np

    from keras_selfattn.layers import MultiHeadSelfAttention

    x, mask = inputs_and_mask(batch, length, width, masked)
    ours = MultiHeadSelfAttention(width, num_heads)
    ours(x[:1, :4])
    peer = keras.layers.MultiHeadAttention(
        num_heads, key_dim=width // num_heads, use_bias=False
    )
    peer(x[:1, :4], x[:1, :4])
    forwards = variant_forwards(ours, mask, width, num_heads)
    reference, reference_grads = outputs_and_gradients(forwards["ours"], ours, x)
    steps = {}
    for name, forward in forwards.items():
        outputs, grads = outputs_and_gradients(forward, ours, x)
        np.testing.assert_allclose(outputs, reference, atol=1e-4, err_msg=name)
        for grad, reference_grad in zip(grads, reference_grads):
            np.testing.assert_allclose(grad, reference_grad, atol=1e-4, err_msg=name)
        steps[name] = gradient_step(forward, ours.trainable_variables, x, jit_compile)
    steps["keras"] = gradient_step(
        keras_self_attention(peer, mask), peer.trainable_variables, x, jit_compile
    )
    return steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one tiny shape")
    args = parser.parse_args(argv)
    shapes = ((2, 16, 32),) if args.quick else SHAPES
    rounds = 2 if args.quick else args.rounds
    variants = (
        "ours",
        "heads_first_where",
        "heads_first_additive",
        "einsum_additive",
        "hand_backward",
    )
    rows = []
    for masked in (False, True):
        for batch, length, width in shapes:
            for jit_compile in (False, True):
                steps = make_steps(batch, length, width, NUM_HEADS, jit_compile, masked)
                calls = 1 if args.quick else _bench.calls_for(steps["keras"], 0.1)
                samples = _bench.interleaved(steps, rounds, calls)
                rows.append(
                    [
                        f"({batch}, {length}, {width})",
                        "padding" if masked else "none",
                        "XLA" if jit_compile else "tf.function",
                        _bench.ms(_bench.median(samples["keras"])),
                        *(
                            f"{_bench.paired_ratio(samples, name, 'keras'):.2f}"
                            for name in variants
                        ),
                    ]
                )
    print()
    print(
        f"Attention layouts against keras' MHA, forward + backward, {NUM_HEADS} heads, "
        "float32 (median of per-round ratios; below 1: faster than keras):"
    )
    print()
    _bench.print_table(
        ["(batch, length, width)", "mask", "compiled as", "keras ms", *variants],
        rows,
    )
    print()
    print(f"median of {rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
