"""Tensor helpers of the searches, on ``keras.ops`` (TensorFlow's own op where
keras' costs more passes: `tensorflow_ops`)."""

import keras
import numpy as np
from keras import ops

NEG = -1e9  # a finite "minus infinity" for log-probabilities (keeps sums NaN-free)

# Rows at least this long take the two-level top-k of `top_k_of_rows`.
TWO_LEVEL_TOP_K_FROM = 512


def on_tensorflow():
    return keras.config.backend() == "tensorflow"


def unconverted(function):
    """``function``, which autograph leaves as written (TensorFlow).

    The searches are explicit loops that run as written inside any
    ``tf.function`` (the package's own graphs trace them with autograph off).
    Marked, they are not rewritten by a caller's own ``tf.function`` with
    autograph on (its default) before its first trace in a process: seconds,
    for the same graph. Other backends: ``function`` itself.
    """
    if not on_tensorflow():
        return function
    import tensorflow as tf

    return tf.autograph.experimental.do_not_convert(function)


def executing_eagerly():
    """False inside a ``tf.function`` trace (TensorFlow); True on other backends."""
    if not on_tensorflow():
        return True
    from keras_selfattn.decoding import tensorflow_ops

    return tensorflow_ops.executing_eagerly()


def write_column(buffer, t, values):
    """buffer[:, ..., t] = values, as an XLA-friendly masked add on a zero column."""
    column = ops.one_hot(t, ops.shape(buffer)[-1], dtype=buffer.dtype)
    return buffer + ops.expand_dims(values, -1) * column


def take_per_sentence(values, indices):
    """values[b, indices[b, k], ...] for (B, N, ...) values and (B, K) indices.

    A gather with one batch dimension (``tf.gather(..., batch_dims=1)``) as one
    ``ops.take`` over the (B * N, ...) rows. (``ops.take_along_axis`` broadcasts
    the indices over the trailing axes, which fails on an empty trailing axis: the
    (B, K, 0) ids of a search that took no step, as an empty batch does.)
    """
    shape = ops.shape(values)
    batch, n = shape[0], shape[1]
    rows = indices + n * ops.arange(batch, dtype=indices.dtype)[:, None]
    flat = ops.reshape(values, [batch * n, *shape[2:]])
    taken = ops.take(flat, rows, axis=0)
    if len(taken.shape) != len(values.shape):
        # keras' JAX take from an empty batch loses the indices' axes (a static
        # check: no op in a TensorFlow graph, whose take keeps them).
        taken = ops.reshape(taken, [batch, ops.shape(indices)[1], *shape[2:]])
    return taken


def argmax_of_rows(values):
    """int32 (R,): the index of each (R, V) row's largest value (the first on ties).

    On TensorFlow ``tf.argmax`` itself: keras' ``ops.argmax`` first replaces
    -0.0 by the smallest negative float (so that +0.0 wins over -0.0 on every
    backend), three more passes over the (R, V) row per decoder step; a
    log-probability is never -0.0 (the largest is ``0 - logsumexp``, +0.0 at
    most), so the tokens are the same.
    """
    if on_tensorflow():
        from keras_selfattn.decoding import tensorflow_ops

        return tensorflow_ops.argmax_of_rows(values)
    return ops.cast(ops.argmax(values, axis=-1), "int32")


def first_only(width):
    """(width,) bool constant: True at 0 only."""
    values = np.zeros([width], bool)
    values[0] = True
    return ops.convert_to_tensor(values)


def top_k_of_rows(values, k, size):
    """``ops.top_k(values, k)`` of (R, size) float32 rows, with int32 indices.

    The same values and indices, ties included (the lower index first), but
    without one top-k over the whole row: TensorFlow's CPU top-k over the
    (128, 8000) rows of a beam of 4 at batch 32 took several times the output
    layer's matmul. The row is cut into blocks; the k blocks with the largest
    maxima (ties: the lower block) hold the row's k largest values (each block
    passed over has k blocks whose maxima beat all of its values), so one
    top-k runs over the block maxima and one over those k blocks, taken in
    ascending block order so that a tie still goes to the lower index.

    A row known only at run time (a shortlist's width, at most ``size``) is
    padded to at least ``k`` blocks.

    Args:
        values: float32 (R, size), or (R, W) with W <= size known at run time.
        k: int, 1 <= k <= the rows' length.
        size: int, the rows' static length (or its upper bound).
    """
    if size < TWO_LEVEL_TOP_K_FROM or k * k * 4 > size:
        best, indices = ops.top_k(values, k)
        return best, ops.cast(indices, "int32")
    block = 2 ** int(np.ceil(np.log2(np.sqrt(size / k))))
    grouped = _in_blocks(values, block, k)
    _, chosen = ops.top_k(ops.max(grouped, axis=-1), k)
    chosen = ops.sort(ops.cast(chosen, "int32"), axis=-1)  # (R, k) ascending
    candidates = ops.reshape(take_per_sentence(grouped, chosen), [-1, k * block])
    best, within = ops.top_k(candidates, k)
    within = ops.cast(within, "int32")
    return best, take_per_sentence(chosen, within // block) * block + within % block


def _in_blocks(values, block, k):
    """(R, W) ``values`` -> (R, blocks, block), padded at the end with a value
    below every real one; at least ``k`` blocks for a row known at run time."""
    lowest = float(np.finfo("float32").min)
    width = values.shape[-1]
    if width is not None:  # static: the row's own length
        blocks = -(-width // block)
        if blocks * block > width:
            values = ops.pad(
                values, [[0, 0], [0, blocks * block - width]], constant_values=lowest
            )
        return ops.reshape(values, [-1, blocks, block])
    width = ops.shape(values)[-1]
    blocks = ops.maximum((width + block - 1) // block, k)
    filler = ops.full([ops.shape(values)[0], blocks * block - width], lowest)
    values = ops.concatenate([values, ops.cast(filler, values.dtype)], axis=-1)
    return ops.reshape(values, [-1, blocks, block])


def keep_shape(new, old):
    """``new`` with the static shape of ``old`` (TensorFlow's loop checks it).

    A gather forgets a static batch size; a ``tf.function`` traced with a fixed
    batch must give the loop back states of the shapes it started with. On JAX
    every shape is static already.
    """
    if not on_tensorflow():
        return new
    from keras_selfattn.decoding import tensorflow_ops

    return tensorflow_ops.ensure_shape(new, old)
