"""TensorFlow's own ops where the searches need them: eager or traced, an
argmax without keras' extra passes, a static shape kept, a cached graph."""

import tensorflow as tf


def executing_eagerly():
    return tf.executing_eagerly()


def argmax_of_rows(values):
    """``tf.argmax`` of the (R, V) rows, int32 (`tensors.argmax_of_rows`)."""
    return tf.argmax(values, axis=-1, output_type=tf.int32)


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
