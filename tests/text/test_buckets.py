"""Length buckets: batch_in_buckets' padding and bucket_shapes' lengths."""

import math

import pytest
import tensorflow as tf

from keras_selfattn.text.buckets import batch_in_buckets, bucket_shapes
from keras_selfattn.text.dataset import to_example


def _examples(lengths):
    return tf.data.Dataset.from_tensor_slices(lengths).map(
        lambda n: to_example(tf.range(1, n[0] + 1), tf.range(4, n[1] + 4))
    )


def test_batch_in_buckets_pads_to_the_limits_or_to_the_longest():
    lengths = [[1, 1], [3, 1], [2, 4], [6, 2], [1, 1], [2, 2]]
    shapes = {
        pad: [
            (inputs["source"].shape, target_out.shape)
            for inputs, target_out in batch_in_buckets(
                _examples(lengths), limits, [2, 2, 2], pad_to_limits=pad
            ).as_numpy_iterator()
        ]
        for pad, limits in (
            (False, [(2, 3), (4, 5), (None, None)]),
            (True, [(2, 3), (4, 5), (6, 5)]),
        )
    }
    # A bucket's batch leaves when the bucket is full (bucket 1 at the third
    # pair, bucket 0 at the fifth); the partial ones at the end, by bucket.
    assert shapes[False] == [((2, 3), (2, 5)), ((2, 1), (2, 2)), ((1, 2), (1, 3)),
                             ((1, 6), (1, 3))]  # fmt: skip
    assert shapes[True] == [((2, 4), (2, 5)), ((2, 2), (2, 3)), ((1, 2), (1, 3)),
                            ((1, 6), (1, 5))]  # fmt: skip
    static = batch_in_buckets(
        _examples(lengths), [(6, 5)], [4], pad_to_limits=True, drop_remainder=True
    )
    assert static.element_spec[0]["source"].shape.as_list() == [4, 6]
    assert static.element_spec[1].shape.as_list() == [4, 5]
    with pytest.raises(ValueError, match="one entry per bucket"):
        batch_in_buckets(_examples(lengths), [(2, 3), (None, None)], [2])
    with pytest.raises(ValueError, match="needs every bucket's limits"):
        batch_in_buckets(
            _examples(lengths), [(2, 3), (None, 4)], [2, 2], pad_to_limits=True
        )


def test_geometric_buckets_grow_by_sqrt2_up_to_the_limits():
    shapes = bucket_shapes(100, 60, 8, spacing="geometric")
    expected = [
        (math.ceil(100 / 2 ** (k / 2) - 1e-9), math.ceil(60 / 2 ** (k / 2) - 1e-9))
        for k in range(7, -1, -1)
    ]
    assert shapes == expected and shapes[-1] == (100, 60)
    assert shapes[:3] == [(9, 6), (13, 8), (18, 11)]
    # Short limits, many buckets: equal buckets given once, never below 1.
    assert bucket_shapes(3, 2, 8, spacing="geometric") == [(1, 1), (2, 1), (3, 2)]
    with pytest.raises(ValueError, match="spacing='log'"):
        bucket_shapes(10, 10, 4, spacing="log")
