"""The vocabulary shortlist inside a graph: a request batch's candidate targets.

For a batch of source ids, `shortlist_ids` is the union of the table's rows for
those ids with the always-kept ids (`text.shortlist.ShortlistTable.always`):
sorted, unique, so the order is fixed whatever the batch's order.
`output_layer_weights` takes the output layer's columns for those ids once per
request (before the search loop: the weights are constant), `shortlist_logits`
computes a step's logits over them only, and `vocabulary_ids` maps shortlist
indices (an argmax, a beam's top-k) back to vocabulary ids. A search over the
shortlist is exact on what it keeps: its argmax is the full argmax whenever that
one is in the shortlist. Log-probabilities normalize over the shortlist only.
TensorFlow ops (the served graphs are TensorFlow's).
"""

import tensorflow as tf

from keras_selfattn.decoding.tensorflow_ops import size_bucket

__all__ = [
    "gather_output_layer",
    "output_layer_weights",
    "padded_ids",
    "shortlist_ids",
    "shortlist_logits",
    "vocabulary_ids",
]


def shortlist_ids(source_ids, candidates, always, target_vocab_size):
    """int32 (S,): sorted unique target ids a batch of sources may produce.

    Args:
        source_ids: int (B, T) source ids (padding 0 rows give only ``END_ID``).
        candidates: int32 (source_vocab_size, K) the table's rows.
        always: int32 (M,) ids every shortlist holds (reserved and frequent).
        target_vocab_size: int, the output layer's width.
    """
    rows = tf.gather(
        tf.convert_to_tensor(candidates, tf.int32), tf.cast(source_ids, tf.int32)
    )
    ids = tf.concat(
        [tf.reshape(rows, [-1]), tf.convert_to_tensor(always, tf.int32)], axis=0
    )
    # A presence mask over the vocabulary, then its positions: sorted and unique.
    present = tf.math.unsorted_segment_max(
        tf.ones_like(ids), ids, num_segments=target_vocab_size
    )
    return tf.cast(tf.reshape(tf.where(present > 0), [-1]), tf.int32)


def padded_ids(ids, upper, filler):
    """``ids`` (S,) padded with ``filler`` to the smallest of a few sizes
    (`tensorflow_ops.size_bucket`, at most ``upper``) that holds them.

    An XLA search compiles once per shape: about two widths an octave, less than
    half as many columns again as the shortlist holds. ``filler`` is an id whose
    logit a search masks (``PAD_ID``: `SearchLogits` gives it ``NEG``), so a
    padded position is never chosen.
    """
    width = tf.size(ids)
    size = tf.minimum(size_bucket(width), upper)  # ids are unique: width <= upper
    return tf.pad(ids, [[0, size - width]], constant_values=filler)


def output_layer_weights(model, ids=None):
    """``(kernel (D, V), bias (V,))`` float32 of a `Seq2Seq`'s output layer, or
    with ``ids`` (S,) its columns for those ids: ``(kernel (D, S), bias (S,))``.

    With tied embeddings (``--preset small``) the kernel is the target
    embedding's ``E^T`` (`TiedEmbedding.output_kernel`): for a shortlist the
    rows of ``E`` are taken first and only they are transposed (a third of the
    vocabulary on Multi30k; the transpose of the whole ``E`` took a served
    batch several milliseconds). Else the logits Dense's.
    """
    if model.logits_dense is None:
        layer = model.target_embedding
        bias = tf.cast(layer.bias, tf.float32)
        if ids is None:
            return layer.output_kernel(), bias
        # As `output_kernel` reads E: in the layer's compute dtype, as float32.
        rows = tf.gather(tf.cast(layer.embeddings, layer.compute_dtype), ids)
        return tf.transpose(tf.cast(rows, tf.float32)), tf.gather(bias, ids)
    dense = model.logits_dense
    kernel, bias = tf.cast(dense.kernel, tf.float32), tf.cast(dense.bias, tf.float32)
    if ids is None:
        return kernel, bias
    return gather_output_layer(kernel, bias, ids)


def gather_output_layer(kernel, bias, ids):
    """``(kernel[:, ids], bias[ids])``: the output layer cut to a shortlist."""
    return tf.gather(kernel, ids, axis=1), tf.gather(bias, ids)


def shortlist_logits(hidden, kernel, bias, deep_output=None):
    """float32 (..., S) logits over the shortlist of step outputs ``hidden``.

    ``deep_output``: the model's deep-output layer (``model.deep_output``),
    applied first as `Seq2Seq._logits` applies it. The product takes the
    kernel's dtype (bfloat16 kernels: `precision`); the result is float32.
    """
    if deep_output is not None:
        hidden = deep_output(hidden, training=False)
    hidden = tf.cast(hidden, kernel.dtype)
    logits = tf.matmul(hidden, kernel)
    return tf.cast(logits, tf.float32) + tf.cast(bias, tf.float32)


def vocabulary_ids(indices, ids):
    """Shortlist positions ``indices`` (any shape) -> vocabulary ids."""
    return tf.gather(ids, tf.cast(indices, tf.int32))
