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
import os
import weakref
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.text import corpus
from keras_selfattn.text.buckets import batch_in_buckets, bucket_shapes
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.vocab import END_ID, START_ID

__all__ = [
    "batch_by_length",
    "encode_pairs",
    "encode_within_limits",
    "fits_limits",
    "make_dataset",
    "to_example",
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
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    return _encode(pairs, tokenizer, encode_batch_size)


# Each side's encode traced once per tokenizer, for every pipeline that maps it
# (a run's training, validation and counting stages): traced inline, each map
# built the tokenizer's ops again. Kept here, not on the tokenizer, which is
# saved (a `tf.Module` would carry the functions into its SavedModel).
_ENCODERS = weakref.WeakKeyDictionary()


def _traced_encode(tokenizer):
    """``(source encode, target encode)`` of ``tokenizer`` as `tf.function`s
    of a (N,) string batch, traced once."""
    if tokenizer not in _ENCODERS:
        strings = [tf.TensorSpec([None], tf.string)]
        _ENCODERS[tokenizer] = tuple(
            tf.function(side.encode, input_signature=strings, autograph=False)
            for side in (tokenizer.source, tokenizer.target)
        )
    return _ENCODERS[tokenizer]


def _encode(pairs, tokenizer, encode_batch_size, select=None):
    """The tokenization stage: string pairs -> unbatched id vectors, input order.

    Tokenizes ``encode_batch_size`` strings a ``map`` call; ``select(source_ids,
    target_ids)`` (ragged batches) may return the batch to keep instead.
    """

    # The functions tf.data traces in this module are plain graph code, no Python
    # control flow on tensors: AutoGraph's conversion would only cost time (about
    # 2 CPU-s of each run's start, over its stages).
    encode_source, encode_target = _traced_encode(tokenizer)

    @tf.autograph.experimental.do_not_convert
    def encode(sources, targets):
        ids = encode_source(sources), encode_target(targets)
        return ids if select is None else select(*ids)

    return (
        pairs.batch(encode_batch_size)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch()
    )


def fits_limits(source_length, target_length, max_source_length, max_target_length):
    """The length rule: whether a pair of these lengths fits the model's limits.

    The source fits with at most ``max_source_length`` ids, the target with at
    most ``max_target_length - 1``: `to_example` adds one id to each of its sides
    (``<s>`` before ``target_in``, ``</s>`` after ``target_out``), and
    ``max_target_length`` counts it. `None`: no limit. Elementwise on tensors.

    Example:

    >>> fits_limits(3, 4, max_source_length=3, max_target_length=5)
    True
    >>> fits_limits(3, 5, max_source_length=3, max_target_length=5)
    False
    """
    fits = True
    if max_source_length is not None:
        fits = fits & (source_length <= max_source_length)
    if max_target_length is not None:
        fits = fits & (target_length <= _target_ids_limit(max_target_length))
    return fits


def _target_ids_limit(max_target_length):
    """The most target ids that fit ``max_target_length`` once `to_example` adds one."""
    return max_target_length - 1


def _truncated(source, target, max_source_length, max_target_length):
    """The pair cut to the limits of `fits_limits` (`None`: not cut)."""
    if max_source_length is not None:
        source = source[:max_source_length]
    if max_target_length is not None:
        target = target[: _target_ids_limit(max_target_length)]
    return source, target


def to_example(source, target):
    """``(source_ids, target_ids)`` -> ``({"source", "target_in"}, target_out)``.

    ``target_in`` is ``<s>`` followed by the target (teacher forcing),
    ``target_out`` the target followed by ``</s>`` (what to predict): both one
    id longer than the target (see `fits_limits`).

    Example:

    >>> inputs, target_out = to_example(tf.constant([7, 8]), tf.constant([5, 6]))
    >>> inputs["target_in"].numpy().tolist(), target_out.numpy().tolist()
    ([2, 5, 6], [5, 6, 3])
    """
    target_in = tf.concat([tf.constant([START_ID], tf.int32), target], axis=0)
    target_out = tf.concat([target, tf.constant([END_ID], tf.int32)], axis=0)
    return {"source": source, "target_in": target_in}, target_out


# `to_example` as the pipelines map it (see `_encode` on AutoGraph).
_mapped_to_example = tf.autograph.experimental.do_not_convert(to_example)


# Long: a 50-line docstring for its 14 documented arguments; the code is 40 lines.
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
    limit (`fits_limits`) -> add ``<s>``/``</s>`` (`to_example`) -> padded
    batches, optionally bucketed by length (`batch_in_buckets`) -> prefetch.
    Deterministic for a given `seed`; a new order each epoch. (Training on
    streamed corpora uses the same stages: `encode_within_limits`,
    `batch_by_length`.)

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
            together (bucket ``i`` holds pairs whose longer side, ``source`` or
            ``target_out``, is below ``bucket_boundaries[i]`` and not below the
            boundary before; the last bucket the rest), so batches carry less
            padding. `None`: one padded batch stream.
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
    limits = (max_source_length, max_target_length)
    _check_batching(batch_size, too_long, limits, pad_to_max_length)
    bucket_boundaries = _checked_boundaries(bucket_boundaries, pad_to_max_length)
    sources, targets = _pairs_to_strings(data)
    encoded = _encode_strings(sources, targets, tokenizer)
    if cache:
        encoded = encoded.cache()
    dataset = encoded
    if shuffle:
        buffer = shuffle_buffer_size or int(sources.shape[0])
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if bucket_boundaries:
        # The longer side below boundary i: both sides at most boundary i - 1.
        buckets = [(b - 1, b - 1) for b in bucket_boundaries] + [(None, None)]
    else:
        buckets = [limits]
    to_batches = functools.partial(
        _limited_batches,
        limits=limits,
        too_long=too_long,
        buckets=buckets,
        batch_size=batch_size,
        pad_to_max_length=pad_to_max_length,
        drop_remainder=drop_remainder,
    )
    dataset = to_batches(dataset)
    if cache:
        # One pass in input order fills the cache and counts the batches: every
        # bucket makes ceil(n / batch_size) of them (floor when dropping the
        # remainder) in any order, so every epoch has this many. With the length
        # known, Keras never reads past the end ("Your input ran out of data").
        batches = to_batches(encoded).reduce(
            tf.constant(0, tf.int64), lambda n, _: n + 1
        )
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    dataset = dataset.with_options(_in_memory_options())
    return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset


def _in_memory_options():
    options = tf.data.Options()
    options.deterministic = True
    # Data is in memory, not in files: shard by element under tf.distribute.
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return options


def _limited_batches(
    ids, *, limits, too_long, buckets, batch_size, pad_to_max_length, drop_remainder
):
    """`make_dataset` after the ids: the length limit, `to_example`, the batches."""
    if too_long == "filter" and limits != (None, None):
        ids = ids.filter(
            tf.autograph.experimental.do_not_convert(
                lambda s, t: fits_limits(tf.size(s), tf.size(t), *limits)
            )
        )

    @tf.autograph.experimental.do_not_convert
    def example(source, target):
        if too_long == "truncate":
            source, target = _truncated(source, target, *limits)
        return to_example(source, target)

    examples = ids.map(example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return batch_in_buckets(
        examples,
        buckets,
        [batch_size] * len(buckets),
        pad_to_limits=pad_to_max_length,
        drop_remainder=drop_remainder,
    )


def _check_batching(batch_size, too_long, limits, pad_to_max_length):
    """`make_dataset`'s batch size, length limits and their options checked."""
    max_source_length, max_target_length = limits
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


def _checked_boundaries(bucket_boundaries, pad_to_max_length):
    """`make_dataset`'s bucket boundaries checked, as a list of ints (or None)."""
    if bucket_boundaries is None:
        return None
    if pad_to_max_length and bucket_boundaries:
        raise ValueError(
            "pad_to_max_length and bucket_boundaries exclude each other: padding every "
            "batch to the maximum undoes bucketing"
        )
    bucket_boundaries = [int(b) for b in bucket_boundaries]
    if not bucket_boundaries or any(
        b <= a for a, b in zip([0] + bucket_boundaries, bucket_boundaries, strict=False)
    ):
        raise ValueError(
            "bucket_boundaries must be increasing positive integers. "
            f"Received: {bucket_boundaries}"
        )
    return bucket_boundaries


def encode_within_limits(
    pairs: tf.data.Dataset,
    tokenizer: PairTokenizer,
    *,
    max_source_length: int,
    max_target_length: int,
    counters=None,
    encode_batch_size: int = 1024,
) -> tf.data.Dataset:
    """``(source, target)`` strings -> ``(source_ids, target_ids)`` of pairs that fit.

    A pair fits the limits by `fits_limits` (its target, with the ``</s>``
    added later, at most ``max_target_length``). The others are dropped and,
    with `stream.StreamCounters` given, counted (``pairs``, ``too_long``).

    Returns:
        Unbatched `tf.data.Dataset` of int32 vectors, in input order.
    """

    def select(source_ids, target_ids):
        fits = fits_limits(
            source_ids.row_lengths(),
            target_ids.row_lengths(),
            max_source_length,
            max_target_length,
        )
        if counters is not None:
            counters.pairs.assign_add(tf.size(fits, out_type=tf.int64))
            counters.too_long.assign_add(tf.reduce_sum(tf.cast(~fits, tf.int64)))
        return (
            tf.ragged.boolean_mask(source_ids, fits),
            tf.ragged.boolean_mask(target_ids, fits),
        )

    return _encode(pairs, tokenizer, encode_batch_size, select)


def batch_by_length(
    ids: tf.data.Dataset,
    *,
    max_source_length: int,
    max_target_length: int,
    num_buckets: int = 4,
    bucket_spacing: str = "even",
    batch_size: int = 64,
    batch_tokens: int | None = None,
    batch_multiple: int = 1,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """Batches ``(source_ids, target_ids)`` pairs by length into padded model inputs.

    `to_example`, then `batch_in_buckets` over `bucket_shapes`: each pair goes
    to the first bucket it fits (pairs that fit none must have been dropped,
    e.g. by `encode_within_limits`) and is padded to that bucket's lengths, so
    every batch has one of at most ``num_buckets`` shapes: XLA compiles the
    step at most that many times. With one bucket the element spec is fully
    static (what a TPU needs).

    Args:
        ids: unbatched ``(source_ids, target_ids)`` int32 vectors, no ``<s>``/``</s>``.
        max_source_length: longest source, in tokens.
        max_target_length: longest ``target_in``/``target_out`` (with ``<s>``/``</s>``).
        num_buckets: number of length buckets.
        bucket_spacing: ``"even"`` or ``"geometric"`` (`bucket_shapes`).
        batch_size: pairs per batch (without ``batch_tokens``).
        batch_tokens: a token budget instead: bucket ``i`` batches
            ``batch_tokens // max(its source, target length)`` pairs.
        batch_multiple: every batch size is a multiple of this (the replicas).
        drop_remainder: drop each bucket's last partial batch (training).

    Returns:
        `tf.data.Dataset` of ``({"source": (B, T), "target_in": (B, S)},
        target_out (B, S))``.
    """
    shapes = bucket_shapes(
        max_source_length, max_target_length, num_buckets, bucket_spacing
    )
    if batch_tokens is not None:
        longest = max(max_source_length, max_target_length)
        if batch_tokens < longest * batch_multiple:
            raise ValueError(
                "batch_tokens must hold at least one pair of the longest bucket per "
                f"replica ({longest * batch_multiple} tokens). "
                f"Received: batch_tokens={batch_tokens}"
            )
        sizes = [
            batch_tokens // max(s, t) // batch_multiple * batch_multiple
            for s, t in shapes
        ]
    else:
        sizes = [batch_size] * len(shapes)
    examples = ids.map(
        _mapped_to_example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return batch_in_buckets(
        examples, shapes, sizes, pad_to_limits=True, drop_remainder=drop_remainder
    )
