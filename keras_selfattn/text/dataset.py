"""Sentence pairs -> a batched `tf.data.Dataset` for `model.fit` on a seq2seq model.

Each element is ``({"source": (B, T), "target_in": (B, S)}, target_out (B, S))``,
int32, padded with `PAD_ID` (0)::

    target ids        y1 y2 y3
    target_in    <s>  y1 y2 y3        (START_ID, then the target: teacher forcing)
    target_out   y1   y2 y3 </s>      (the target, then END_ID: what to predict)

Tokenization runs inside the pipeline (`Dataset.map` over batches of strings,
once; the ids are cached), so the same `PairTokenizer` code serves at export time.
"""

import functools
import math
import os
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.text import corpus
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID

__all__ = [
    "batch_by_length",
    "bucket_shapes",
    "encode_pairs",
    "encode_within_limits",
    "make_dataset",
    "real_token_share",
]

_TOO_LONG = ("filter", "truncate")


def _pairs_to_strings(data):
    if isinstance(data, (str, os.PathLike)):
        data = corpus.read_pairs(data)
    data = list(data)
    if not data:
        raise ValueError("make_dataset: no sentence pairs given")
    for index, pair in enumerate(data[:1]):
        if len(pair) != 2:
            raise ValueError(
                f"pairs must be (source, target) tuples. Received at {index}: {pair!r}"
            )
    sources = tf.constant([source for source, _ in data], tf.string, shape=[len(data)])
    targets = tf.constant([target for _, target in data], tf.string, shape=[len(data)])
    return sources, targets


def encode_pairs(
    data: Sequence[tuple[str, str]] | str | os.PathLike,
    tokenizer: PairTokenizer,
    *,
    encode_batch_size: int = 1024,
) -> tf.data.Dataset:
    """Pairs -> an unbatched dataset of ``(source_ids, target_ids)`` int32 vectors.

    No start/end ids, no length limits, input order. `make_dataset` builds on this.

    Args:
        data: ``(source, target)`` pairs, or the path of a TSV pair file.
        tokenizer: the `PairTokenizer`.
        encode_batch_size: strings tokenized per `map` call.

    Returns:
        `tf.data.Dataset` of ``(source_ids (T,), target_ids (S,))``.

    Example:

    >>> tokenizer = PairTokenizer.build([("a b", "x")])
    >>> dataset = encode_pairs([("b a c", "x")], tokenizer)
    >>> [source.tolist() for source, _ in dataset.as_numpy_iterator()]
    [[5, 4, 1]]
    """
    sources, targets = _pairs_to_strings(data)
    return _encode_strings(sources, targets, tokenizer, encode_batch_size)


def _encode_strings(sources, targets, tokenizer, encode_batch_size=1024):
    def encode(source_batch, target_batch):
        return tokenizer.source.encode(source_batch), tokenizer.target.encode(
            target_batch
        )

    return (
        tf.data.Dataset.from_tensor_slices((sources, targets))
        .batch(encode_batch_size)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch()
    )


def make_dataset(
    data: Sequence[tuple[str, str]] | str | os.PathLike,
    tokenizer: PairTokenizer,
    *,
    batch_size: int = 64,
    max_source_length: int | None = None,
    max_target_length: int | None = None,
    too_long: str = "filter",
    shuffle: bool = True,
    seed: int | None = 0,
    shuffle_buffer_size: int | None = None,
    bucket_boundaries: Sequence[int] | None = None,
    pad_to_max_length: bool = False,
    drop_remainder: bool = False,
    cache: bool = True,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Builds the training/evaluation dataset of a seq2seq model from sentence pairs.

    Pipeline: strings -> tokenize (batched `map`) -> cache -> shuffle -> length
    limit -> add ``<s>``/``</s>`` -> padded batches (optionally bucketed by length)
    -> prefetch. Deterministic for a given `seed`; a new order each epoch.

    Args:
        data: ``(source, target)`` pairs, or the path of a TSV pair file
            (`corpus.read_pairs`: malformed lines raise with file and line).
        tokenizer: the `PairTokenizer` (build it on the training pairs only).
        batch_size: pairs per batch.
        max_source_length: longest source, in tokens (`None`: no limit).
        max_target_length: longest ``target_in``/``target_out``, in tokens,
            counting the added ``<s>``/``</s>`` (`None`: no limit).
        too_long: "filter" drops pairs over a limit; "truncate" cuts them
            (``target_out`` still ends with ``</s>``).
        shuffle: shuffle pairs (use False for evaluation).
        seed: shuffle seed; `None` draws a fresh order every run.
        shuffle_buffer_size: default: the whole dataset (a full shuffle).
        bucket_boundaries: e.g. ``[8, 16, 32]``: batch pairs of similar length
            together (`Dataset.bucket_by_sequence_length` on the longer side), so
            batches carry less padding. `None`: one padded batch stream.
        pad_to_max_length: pad every batch to ``(max_source_length,
            max_target_length)``: static lengths for XLA/TPU (needs both limits;
            not with buckets). With `drop_remainder` all shapes are static.
        drop_remainder: drop the last partial batch (static batch size).
        cache: cache the token ids in memory, filled at once by a pass that
            counts the batches: the dataset then has a known length
            (``cardinality``), so Keras never runs past its end.
        prefetch: `prefetch(tf.data.AUTOTUNE)` at the end.

    Returns:
        `tf.data.Dataset` of ``({"source": int32 (B, T), "target_in": int32 (B, S)},
        target_out int32 (B, S))``.

    Example:

    >>> pairs = [("le chat", "the cat"), ("le chien noir", "the black dog")]
    >>> tokenizer = PairTokenizer.build(pairs)
    >>> dataset = make_dataset(pairs, tokenizer, batch_size=2, shuffle=False)
    >>> inputs, target_out = next(iter(dataset))
    >>> inputs["source"].shape, inputs["target_in"].shape, target_out.shape
    (TensorShape([2, 3]), TensorShape([2, 4]), TensorShape([2, 4]))
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1. Received: batch_size={batch_size}")
    if too_long not in _TOO_LONG:
        raise ValueError(
            f"too_long must be one of {_TOO_LONG}. Received: too_long={too_long!r}"
        )
    if max_source_length is not None and max_source_length < 1:
        raise ValueError(
            f"max_source_length must be >= 1 or None. Received: {max_source_length}"
        )
    if max_target_length is not None and max_target_length < 1:
        raise ValueError(
            f"max_target_length must be >= 1 or None (it counts <s>/</s>). "
            f"Received: {max_target_length}"
        )
    if pad_to_max_length and (max_source_length is None or max_target_length is None):
        raise ValueError(
            "pad_to_max_length=True needs max_source_length and max_target_length. "
            f"Received: max_source_length={max_source_length}, "
            f"max_target_length={max_target_length}"
        )
    if pad_to_max_length and bucket_boundaries:
        raise ValueError(
            "pad_to_max_length and bucket_boundaries exclude each other: padding every "
            "batch to the maximum undoes bucketing"
        )
    if bucket_boundaries is not None:
        bucket_boundaries = [int(b) for b in bucket_boundaries]
        if not bucket_boundaries or any(
            b <= a
            for a, b in zip([0] + bucket_boundaries, bucket_boundaries, strict=False)
        ):
            raise ValueError(
                "bucket_boundaries must be increasing positive integers. "
                f"Received: {bucket_boundaries}"
            )

    sources, targets = _pairs_to_strings(data)
    num_pairs = int(sources.shape[0])
    encoded = _encode_strings(sources, targets, tokenizer)
    if cache:
        encoded = encoded.cache()
    dataset = encoded
    if shuffle:
        buffer = shuffle_buffer_size or num_pairs
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    limit_and_batch = functools.partial(
        _limit_and_batch,
        batch_size=batch_size,
        max_source_length=max_source_length,
        max_target_length=max_target_length,
        too_long=too_long,
        bucket_boundaries=bucket_boundaries,
        pad_to_max_length=pad_to_max_length,
        drop_remainder=drop_remainder,
    )
    dataset = limit_and_batch(dataset)
    if cache:
        # One pass in input order fills the cache and counts the batches: every
        # bucket makes ceil(n / batch_size) of them (floor when dropping the
        # remainder) in any order, so every epoch has this many. With the length
        # known, Keras never reads past the end ("Your input ran out of data").
        batches = limit_and_batch(encoded).reduce(
            tf.constant(0, tf.int64), lambda n, _: n + 1
        )
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))

    options = tf.data.Options()
    options.deterministic = True
    # Data is in memory, not in files: shard by element under tf.distribute.
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    dataset = dataset.with_options(options)
    if prefetch:
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset


def _limit_and_batch(
    dataset,
    *,
    batch_size,
    max_source_length,
    max_target_length,
    too_long,
    bucket_boundaries,
    pad_to_max_length,
    drop_remainder,
):
    """`make_dataset` after the ids: the length limit, ``<s>``/``</s>``, the batches."""
    if too_long == "filter":

        def fits(source, target):
            ok = tf.constant(True)
            if max_source_length is not None:
                ok = ok & (tf.size(source) <= max_source_length)
            if max_target_length is not None:
                ok = ok & (tf.size(target) + 1 <= max_target_length)
            return ok

        if max_source_length is not None or max_target_length is not None:
            dataset = dataset.filter(fits)

    def add_start_end(source, target):
        if too_long == "truncate":
            if max_source_length is not None:
                source = source[:max_source_length]
            if max_target_length is not None:
                target = target[: max_target_length - 1]
        target_in = tf.concat([tf.constant([START_ID], tf.int32), target], axis=0)
        target_out = tf.concat([target, tf.constant([END_ID], tf.int32)], axis=0)
        return {"source": source, "target_in": target_in}, target_out

    dataset = dataset.map(
        add_start_end, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )

    if pad_to_max_length:
        padded_shapes = (
            {"source": [max_source_length], "target_in": [max_target_length]},
            [max_target_length],
        )
    else:
        padded_shapes = ({"source": [None], "target_in": [None]}, [None])
    padding_values = (
        {
            "source": tf.constant(PAD_ID, tf.int32),
            "target_in": tf.constant(PAD_ID, tf.int32),
        },
        tf.constant(PAD_ID, tf.int32),
    )
    if bucket_boundaries:
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda inputs, target_out: tf.maximum(
                tf.shape(inputs["source"])[0], tf.shape(target_out)[0]
            ),
            bucket_boundaries=bucket_boundaries,
            bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1),
            padded_shapes=padded_shapes,
            padding_values=padding_values,
            drop_remainder=drop_remainder,
        )
    else:
        dataset = dataset.padded_batch(
            batch_size,
            padded_shapes=padded_shapes,
            padding_values=padding_values,
            drop_remainder=drop_remainder,
        )
    return dataset


def bucket_shapes(max_source_length: int, max_target_length: int, num_buckets: int):
    """The padded ``(source, target)`` lengths of `batch_by_length`'s buckets.

    Bucket ``i`` of ``n`` holds pairs up to ``ceil((i + 1) / n)`` of each limit;
    the last one is the limits themselves.

    Example:

    >>> bucket_shapes(32, 16, 4)
    [(8, 4), (16, 8), (24, 12), (32, 16)]
    """
    if num_buckets < 1:
        raise ValueError(
            f"num_buckets must be >= 1. Received: num_buckets={num_buckets}"
        )
    return [
        (
            math.ceil(max_source_length * (i + 1) / num_buckets),
            math.ceil(max_target_length * (i + 1) / num_buckets),
        )
        for i in range(num_buckets)
    ]


def encode_within_limits(
    pairs: tf.data.Dataset,
    tokenizer: PairTokenizer,
    *,
    max_source_length: int,
    max_target_length: int,
    counters=None,
    encode_batch_size: int = 1024,
) -> tf.data.Dataset:
    """``(source, target)`` strings -> ``(source_ids, target_ids)`` of the pairs that fit.

    A pair fits when its source has at most ``max_source_length`` tokens and its
    target, with the ``</s>`` added later, at most ``max_target_length``. The
    others are dropped and, with `stream.StreamCounters` given, counted
    (``pairs``, ``too_long``).

    Returns:
        Unbatched `tf.data.Dataset` of int32 vectors, in input order.
    """

    def encode(sources, targets):
        source_ids = tokenizer.source.encode(sources)
        target_ids = tokenizer.target.encode(targets)
        target_lengths = target_ids.row_lengths() + 1
        fits = (source_ids.row_lengths() <= max_source_length) & (
            target_lengths <= max_target_length
        )
        if counters is not None:
            counters.pairs.assign_add(tf.size(fits, out_type=tf.int64))
            counters.too_long.assign_add(tf.reduce_sum(tf.cast(~fits, tf.int64)))
        return (
            tf.ragged.boolean_mask(source_ids, fits),
            tf.ragged.boolean_mask(target_ids, fits),
        )

    return (
        pairs.batch(encode_batch_size)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch()
    )


def batch_by_length(
    ids: tf.data.Dataset,
    *,
    max_source_length: int,
    max_target_length: int,
    num_buckets: int = 4,
    batch_size: int = 64,
    batch_tokens: int | None = None,
    batch_multiple: int = 1,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """Batches ``(source_ids, target_ids)`` pairs by length into padded model inputs.

    Each pair goes to the first of `bucket_shapes` it fits (pairs that fit none
    must have been dropped, e.g. by `encode_within_limits`) and is padded to that
    bucket's lengths, so every batch has one of ``num_buckets`` shapes: XLA
    compiles the step at most that many times. With one bucket the element spec
    is fully static (what a TPU needs).

    Args:
        ids: unbatched ``(source_ids, target_ids)`` int32 vectors, no ``<s>``/``</s>``.
        max_source_length: longest source, in tokens.
        max_target_length: longest ``target_in``/``target_out`` (with ``<s>``/``</s>``).
        num_buckets: number of length buckets.
        batch_size: pairs per batch (without ``batch_tokens``).
        batch_tokens: a token budget instead: bucket ``i`` batches
            ``batch_tokens // max(its source, target length)`` pairs.
        batch_multiple: every batch size is a multiple of this (the replicas).
        drop_remainder: drop each bucket's last partial batch (training).

    Returns:
        `tf.data.Dataset` of ``({"source": (B, T), "target_in": (B, S)}, target_out (B, S))``.
    """
    shapes = bucket_shapes(max_source_length, max_target_length, num_buckets)
    if batch_tokens is not None:
        if batch_tokens < max(max_source_length, max_target_length) * batch_multiple:
            raise ValueError(
                "batch_tokens must hold at least one pair of the longest bucket per "
                f"replica ({max(max_source_length, max_target_length) * batch_multiple}"
                f" tokens). Received: batch_tokens={batch_tokens}"
            )
        sizes = [
            batch_tokens // max(s, t) // batch_multiple * batch_multiple
            for s, t in shapes
        ]
    else:
        sizes = [batch_size] * num_buckets
    source_limits = tf.constant([s for s, _ in shapes], tf.int32)
    target_limits = tf.constant([t for _, t in shapes], tf.int32)

    def to_example(source, target):
        target_in = tf.concat([tf.constant([START_ID], tf.int32), target], axis=0)
        target_out = tf.concat([target, tf.constant([END_ID], tf.int32)], axis=0)
        fits = (tf.size(source) <= source_limits) & (
            tf.size(target_in) <= target_limits
        )
        bucket = tf.cast(tf.argmax(tf.cast(fits, tf.int32)), tf.int32)
        source_length = source_limits[bucket]
        target_length = target_limits[bucket]
        source = tf.pad(source, [[0, source_length - tf.size(source)]])
        target_in = tf.pad(target_in, [[0, target_length - tf.size(target_in)]])
        target_out = tf.pad(target_out, [[0, target_length - tf.size(target_out)]])
        return bucket, ({"source": source, "target_in": target_in}, target_out)

    examples = ids.map(
        to_example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    if num_buckets == 1:
        source_length, target_length = shapes[0]

        def static(bucket, example):
            inputs, target_out = example
            return (
                {
                    "source": tf.ensure_shape(inputs["source"], [source_length]),
                    "target_in": tf.ensure_shape(inputs["target_in"], [target_length]),
                },
                tf.ensure_shape(target_out, [target_length]),
            )

        return examples.map(static).batch(sizes[0], drop_remainder=drop_remainder)
    size_table = tf.constant(sizes, tf.int64)
    return examples.group_by_window(
        key_func=lambda bucket, example: tf.cast(bucket, tf.int64),
        reduce_func=lambda key, window: window.map(lambda b, e: e).batch(
            size_table[key], drop_remainder=drop_remainder
        ),
        window_size_func=lambda key: size_table[key],
    )


def real_token_share(dataset: tf.data.Dataset, batches: int) -> float:
    """Share of real (non-padding) positions in the first ``batches`` batches, both sides."""
    real = total = 0
    for inputs, target_out in dataset.take(batches).as_numpy_iterator():
        for array in (inputs["source"], target_out):
            real += int((array != PAD_ID).sum())
            total += array.size
    return real / total if total else 0.0
