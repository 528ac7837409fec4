"""TensorFlow's own ops where the searches need them: eager or traced, an
argmax without keras' extra passes, a static shape kept, a cached graph."""

import tensorflow as tf


def executing_eagerly():
    return tf.executing_eagerly()


def argmax_of_rows(values):
    """``tf.argmax`` of the (R, V) rows, int32 (`tensors.argmax_of_rows`)."""
    return tf.argmax(values, axis=-1, output_type=tf.int32)


def size_bucket(count):
    """int32 scalar: the smallest of 1, 2, 3, 4, 6, 8, 12, 16 ... (powers of two
    and three quarters of them) at least ``count`` (int32 scalar); 0 for 0.

    An XLA program compiles once per shape: sizes rounded up to these give
    about two shapes an octave, each less than half as large again as needed.
    """
    power = count - 1  # its highest bit copied into every lower one, plus 1
    for shift in (1, 2, 4, 8, 16):
        power = tf.bitwise.bitwise_or(power, tf.bitwise.right_shift(power, shift))
    power = tf.maximum(power + 1, 0)
    three_quarters = power // 4 * 3
    return tf.where(count <= three_quarters, three_quarters, power)


def ensure_shape(new, old):
    """``new`` with the static shape of ``old`` (`tensors.keep_shape`)."""
    return tf.ensure_shape(new, old.shape)


def graph_of(model_ref, search):
    """``search(model, source_ids)`` as a ``tf.function`` with the input
    signature (None, None) int32: one trace for every batch and source length."""

    def run(source_ids):
        return search(model_ref(), source_ids)

    return tf.function(
        run,
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
        autograph=False,  # an explicit while loop; nothing to convert
    )
