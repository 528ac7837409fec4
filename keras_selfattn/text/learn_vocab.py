"""Vocabularies learned from a pair stream, in memory bounded by the vocabulary.

`learn_pair_tokenizer` counts the tokens of the first ``sample_lines`` pairs of a
``(source, target)`` `tf.data` stream (tokenization inside ``tf.data``, counts in
a `collections.Counter` of token types) and builds the source and target
tokenizers from the counts with `build_tokenizer` ("sentencepiece": SentencePiece
learns from the normalized lines, holding at most a bounded sample of them).
What it writes (`PairTokenizer.save`) is what a run directory holds.
"""

import time
from collections.abc import Callable

import tensorflow as tf

from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.tokenizers import Tokenizer, TokenizerConfig, build_tokenizer

__all__ = ["DEFAULT_VOCAB_SAMPLE_LINES", "learn_pair_tokenizer"]

DEFAULT_VOCAB_SAMPLE_LINES = 1_000_000


def learn_pair_tokenizer(
    pairs: tf.data.Dataset,
    source_config: TokenizerConfig,
    target_config: TokenizerConfig,
    *,
    sample_lines: int | None = DEFAULT_VOCAB_SAMPLE_LINES,
    on_learned: Callable[[str, "Tokenizer", float, float], None] | None = None,
) -> PairTokenizer:
    """Learns both vocabularies from (a bounded sample of) a stream of pairs.

    Args:
        pairs: `tf.data.Dataset` of ``(source, target)`` scalar strings (finite
            unless ``sample_lines`` is given).
        source_config: the source `TokenizerConfig`.
        target_config: the target `TokenizerConfig`.
        sample_lines: learn from the first this many pairs (None: all).
        on_learned: called as ``on_learned(side, tokenizer, seconds,
            cpu_seconds)`` once each side's tokenizer is learned ("source", then
            "target"; the wall time and the CPU time of this process, all its
            threads, of reading the sample and learning that side).

    Returns:
        A `PairTokenizer`.

    Raises:
        ValueError: the stream holds no pair, or ``sample_lines`` < 1.

    Example:

    >>> pairs = tf.data.Dataset.from_tensor_slices((["le chat"], ["the cat"]))
    >>> tok = learn_pair_tokenizer(
    ...     pairs, TokenizerConfig(), TokenizerConfig.for_target()
    ... )
    >>> tok.source.vocabulary.tokens[4:]
    ['chat', 'le']
    """
    pairs = _sample(pairs, sample_lines)
    tokenizers = []
    for side, config, column in (
        ("source", source_config, 0),
        ("target", target_config, 1),
    ):
        start, cpu_start = time.perf_counter(), time.process_time()
        tokenizer = build_tokenizer(
            pairs.map(lambda *pair, column=column: pair[column]), config, name=side
        )
        if on_learned is not None:
            on_learned(
                side,
                tokenizer,
                time.perf_counter() - start,
                time.process_time() - cpu_start,
            )
        tokenizers.append(tokenizer)
    return PairTokenizer(*tokenizers)


def _sample(pairs, sample_lines):
    """The first ``sample_lines`` pairs (None: all); raises if there are none."""
    if sample_lines is not None:
        if not isinstance(sample_lines, int) or sample_lines < 1:
            raise ValueError(
                "sample_lines must be a positive integer or None. "
                f"Received: sample_lines={sample_lines!r}"
            )
        pairs = pairs.take(sample_lines)
    if not any(True for _ in pairs.take(1)):
        raise ValueError("No sentence pairs to learn the vocabularies from")
    return pairs
