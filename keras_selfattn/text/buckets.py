"""Length buckets: batches of pairs of similar length, padded to a few shapes.

`batch_in_buckets` batches `dataset.to_example` examples in buckets of length
limits; `bucket_shapes` chooses those limits for `dataset.batch_by_length`.
Fewer padding tokens per batch, and a bounded number of batch shapes for XLA.
"""

import math
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.choices import BUCKET_SPACINGS
from keras_selfattn.text.vocab import PAD_ID

__all__ = ["batch_in_buckets", "bucket_shapes"]

_NO_LIMIT = 2**31 - 1  # a bucket limit that every length fits


def _padding():
    """The padding values of a batch. A function, not a module constant: a tensor
    made at import would start TensorFlow's runtime before a multi-worker strategy
    can configure its collectives ("must be configured at program startup")."""
    pad = tf.constant(PAD_ID, tf.int32)
    return ({"source": pad, "target_in": pad}, pad)


def batch_in_buckets(
    examples: tf.data.Dataset,
    bucket_limits: Sequence[tuple[int | None, int | None]],
    batch_sizes: Sequence[int],
    *,
    pad_to_limits: bool = False,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """Batches `to_example` examples in length buckets (one bucket: plain batches).

    Each example goes to the first bucket whose ``(source, target)`` limits it
    fits: its source at most the first, ``target_in``/``target_out`` at most the
    second (`None`: no limit). Bucket ``i`` batches ``batch_sizes[i]`` examples
    (``tf.data`` ``group_by_window``, in arrival order), padded with `PAD_ID` to
    its limits (``pad_to_limits``) or to the longest in the batch. An example
    that fits no bucket must have been dropped before. With one bucket the
    examples are not looked at: with ``pad_to_limits`` and ``drop_remainder``
    every shape is static.

    Args:
        examples: unbatched ``({"source", "target_in"}, target_out)`` int32.
        bucket_limits: per bucket, the longest source and target it holds.
        batch_sizes: per bucket, examples per batch.
        pad_to_limits: pad each batch to its bucket's limits (both must be set).
        drop_remainder: drop each bucket's last partial batch.

    Returns:
        `tf.data.Dataset` of ``({"source": (B, T), "target_in": (B, S)},
        target_out (B, S))``.
    """
    if len(bucket_limits) != len(batch_sizes):
        raise ValueError(
            "bucket_limits and batch_sizes must have one entry per bucket. "
            f"Received: {len(bucket_limits)} and {len(batch_sizes)}"
        )
    if pad_to_limits and any(n is None for limits in bucket_limits for n in limits):
        raise ValueError(
            "pad_to_limits=True needs every bucket's limits. "
            f"Received: bucket_limits={list(bucket_limits)}"
        )
    if len(bucket_limits) == 1:
        limits = bucket_limits[0] if pad_to_limits else (None, None)
        return examples.padded_batch(
            batch_sizes[0],
            padded_shapes=_padded_shapes(*limits),
            padding_values=_padding(),
            drop_remainder=drop_remainder,
        )
    return _grouped_batches(
        examples, bucket_limits, batch_sizes, pad_to_limits, drop_remainder
    )


def _grouped_batches(
    examples, bucket_limits, batch_sizes, pad_to_limits, drop_remainder
):
    """`batch_in_buckets` with two buckets or more: ``group_by_window``."""
    source_limits, target_limits = (
        tf.constant([_NO_LIMIT if n is None else n for n in side], tf.int32)
        for side in zip(*bucket_limits)
    )
    size_table = tf.constant(batch_sizes, tf.int64)

    @tf.autograph.experimental.do_not_convert
    def bucket(inputs, target_out):
        fits = (tf.size(inputs["source"]) <= source_limits) & (
            tf.size(target_out) <= target_limits
        )
        return tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int64)

    @tf.autograph.experimental.do_not_convert
    def batch(key, window):
        shapes = _padded_shapes(None, None)
        if pad_to_limits:
            shapes = _padded_shapes(
                tf.cast(source_limits[key], tf.int64)[None],
                tf.cast(target_limits[key], tf.int64)[None],
            )
        return window.padded_batch(
            size_table[key],
            padded_shapes=shapes,
            padding_values=_padding(),
            drop_remainder=drop_remainder,
        )

    return examples.group_by_window(
        key_func=bucket,
        reduce_func=batch,
        window_size_func=lambda key: size_table[key],
    )


def _padded_shapes(source_length, target_length):
    """`padded_batch` shapes of an example (`None`: the longest in the batch)."""

    def shape(length):
        return [None] if length is None else length

    return (
        {"source": shape(source_length), "target_in": shape(target_length)},
        shape(target_length),
    )


def bucket_shapes(
    max_source_length: int,
    max_target_length: int,
    num_buckets: int,
    spacing: str = "even",
):
    """The padded ``(source, target)`` lengths of `batch_by_length`'s buckets.

    ``spacing="even"``: bucket ``i`` of ``n`` holds pairs up to ``ceil((i + 1) /
    n)`` of each limit. ``spacing="geometric"``: each bucket's lengths are
    sqrt(2) times the previous one's, bucket ``i`` up to ``ceil(limit /
    sqrt(2) ** (n - 1 - i))``: fine steps among short sentences, coarse ones
    among long ones, so when most pairs are far below the limits (most corpora,
    with limits set for their longest sentences) far less of a batch is padding
    (Multi30k with limits of 100 tokens: benchmarks/RESULTS.md, "KerasHub peer,
    side by side"). Either way the last bucket is
    the limits themselves, and buckets of equal lengths (short limits, many
    buckets) are given once, so there may be fewer than ``num_buckets``.

    Example:

    >>> bucket_shapes(32, 16, 4)
    [(8, 4), (16, 8), (24, 12), (32, 16)]
    >>> bucket_shapes(32, 16, 4, spacing="geometric")
    [(12, 6), (16, 8), (23, 12), (32, 16)]
    """
    if num_buckets < 1:
        raise ValueError(
            f"num_buckets must be >= 1. Received: num_buckets={num_buckets}"
        )
    if spacing not in BUCKET_SPACINGS:
        raise ValueError(
            f"spacing must be one of {BUCKET_SPACINGS}. Received: spacing={spacing!r}"
        )
    shapes = []
    for i in range(num_buckets):
        if spacing == "even":
            shape = (
                math.ceil(max_source_length * (i + 1) / num_buckets),
                math.ceil(max_target_length * (i + 1) / num_buckets),
            )
        else:
            shrink = 2 ** ((num_buckets - 1 - i) / 2)
            shape = (
                max(1, math.ceil(max_source_length / shrink - 1e-9)),
                max(1, math.ceil(max_target_length / shrink - 1e-9)),
            )
        if shape not in shapes:
            shapes.append(shape)
    return shapes
