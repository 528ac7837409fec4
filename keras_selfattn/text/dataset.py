"""Sentence pairs -> a batched `tf.data.Dataset` for `model.fit` on a seq2seq model.

Each element is ``({"source": (B, T), "target_in": (B, S)}, target_out (B, S))``,
int32, padded with `PAD_ID` (0)::

    target ids        y1 y2 y3
    target_in    <s>  y1 y2 y3        (START_ID, then the target: teacher forcing)
    target_out   y1   y2 y3 </s>      (the target, then END_ID: what to predict)

Tokenization runs inside the pipeline (`Dataset.map` over batches of strings,
once; the ids are cached), so the same `PairTokenizer` code serves at export time.
"""

import os
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.text import corpus
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID

__all__ = ["encode_pairs", "make_dataset"]

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
        cache: cache the token ids in memory after the first pass.
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
    dataset = _encode_strings(sources, targets, tokenizer)
    if cache:
        dataset = dataset.cache()
    if shuffle:
        buffer = shuffle_buffer_size or num_pairs
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)

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
