"""Reading training texts for the learners: string batches, counts, sentences.

Every kind learns its vocabulary from the texts streamed here through
``tf.data`` (tokenization in the graph, counts in a `collections.Counter` of
token types): "word"/"char" and "subword" from `count_tokens`, "sentencepiece"
from `normalized_sentences`.
"""

import collections
from collections.abc import Iterable

import tensorflow as tf

from keras_selfattn.text import vocab as vocab_lib
from keras_selfattn.text.tokenizers.base import split_text
from keras_selfattn.text.tokenizers.config import TokenizerConfig
from keras_selfattn.text.tokenizers.text_ops import normalize_text

__all__ = ["count_tokens", "learn_frequency_vocabulary", "normalized_sentences"]


def string_batches(texts, batch_size=1024) -> tf.data.Dataset:
    """A `tf.data.Dataset` of rank-1 `tf.string` batches from strings or a Dataset."""
    if isinstance(texts, tf.data.Dataset):
        if texts.element_spec.shape.rank == 0:
            return texts.batch(batch_size)
        return texts
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of strings, not a single string")
    if not isinstance(texts, tf.Tensor):
        texts = list(texts)
        texts = tf.constant(texts, dtype=tf.string, shape=[len(texts)])
    return tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)


def normalized_sentences(texts, config: TokenizerConfig):
    """Yields `normalize_text` of each text as `str` (normalized inside ``tf.data``)."""
    dataset = string_batches(texts).map(
        # Graph code: nothing for AutoGraph to convert (its conversion costs time).
        tf.autograph.experimental.do_not_convert(
            lambda batch: normalize_text(batch, config)
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    for batch in dataset.as_numpy_iterator():
        for text in batch.tolist():
            yield text.decode("utf-8")


def count_tokens(texts: Iterable[str], config: TokenizerConfig) -> collections.Counter:
    """Counts the tokens `split_text` makes of `texts` (words, for "subword").

    Args:
        texts: strings (list, NumPy array, 1-D Tensor, or a `tf.data.Dataset` of
            scalar or 1-D `tf.string`).
        config: a `TokenizerConfig`.

    Returns:
        `collections.Counter` of `str` token -> count.
    """
    dataset = string_batches(texts).map(
        tf.autograph.experimental.do_not_convert(
            lambda batch: split_text(batch, config).flat_values
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    counts = collections.Counter()
    for tokens in dataset.as_numpy_iterator():
        counts.update(tokens.tolist())
    return collections.Counter({t.decode("utf-8"): c for t, c in counts.items()})


def learn_frequency_vocabulary(texts, config: TokenizerConfig) -> vocab_lib.Vocabulary:
    """The vocabulary of "word"/"char": the tokens of `texts` by frequency.

    `build_vocabulary` of `count_tokens` with `config.max_vocab_size` and
    `config.min_count`.

    Args:
        texts: training strings (as `count_tokens` takes them).
        config: a `TokenizerConfig`.

    Returns:
        A `Vocabulary`.
    """
    return vocab_lib.build_vocabulary(
        count_tokens(texts, config),
        max_size=config.max_vocab_size,
        min_count=config.min_count,
    )
