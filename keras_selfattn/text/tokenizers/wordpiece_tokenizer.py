"""`WordPieceTokenizer` ("subword"): WordPiece pieces of the words of "word".

The words (with their joiner marks, see `split_words`) are cut into pieces by
tensorflow_text's `FastWordpieceTokenizer`, suffix pieces marked
`SUFFIX_INDICATOR` ("##"); a word it cannot cut is "<unk>". The vocabulary is
learned from the word counts of the training data
(`keras_selfattn.text.vocab.learn_wordpiece_vocabulary`, about
``max_vocab_size`` pieces, default `DEFAULT_SUBWORD_VOCAB_SIZE`).
Detokenization uses core ops only.
"""

import tensorflow as tf

from keras_selfattn.text import vocab as vocab_lib
from keras_selfattn.text.tokenizers.base import Tokenizer
from keras_selfattn.text.tokenizers.learning import count_tokens
from keras_selfattn.text.tokenizers.text_ops import glue_joined, tf_text

__all__ = ["DEFAULT_SUBWORD_VOCAB_SIZE", "SUFFIX_INDICATOR", "WordPieceTokenizer"]

SUFFIX_INDICATOR = "##"
DEFAULT_SUBWORD_VOCAB_SIZE = 8000


def _merge_last_two_dims(pieces):
    """(..., words, pieces) ragged -> (..., tokens); (words, pieces) -> (tokens,)."""
    if pieces.shape.rank == 2:
        return pieces.flat_values
    return pieces.merge_dims(-2, -1)


class WordPieceTokenizer(Tokenizer, kind="subword"):
    """WordPiece subwords: the "subword" kind (see `Tokenizer` for the interface).

    Args:
        config: a `TokenizerConfig` of kind "subword" (ops "tensorflow_text").
        vocabulary: a WordPiece `Vocabulary`, suffix pieces starting with "##".
        name: optional `tf.Module` name.
        sentencepiece_model: must be None (it belongs to "sentencepiece").

    Example:

    >>> from keras_selfattn.text.tokenizers import TokenizerConfig
    >>> config = TokenizerConfig(kind="subword", max_vocab_size=30)
    >>> tok = WordPieceTokenizer.build(["lower lowest newer newest"] * 3, config)
    >>> tok.decode(tok.encode(tf.constant(["newest lower"]))).numpy()
    array([b'newest lower'], dtype=object)
    """

    def __init__(self, config, vocabulary, name=None, *, sentencepiece_model=None):
        super().__init__(
            config, vocabulary, name=name, sentencepiece_model=sentencepiece_model
        )
        self._wordpiece = tf_text().FastWordpieceTokenizer(
            vocab=self.vocabulary.tokens,
            suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=100,
            token_out_type=tf.int64,
            unknown_token=vocab_lib.UNK_TOKEN,
            no_pretokenization=True,
            support_detokenization=False,
        )

    @classmethod
    def _learn(cls, texts, config, name):
        vocabulary = vocab_lib.learn_wordpiece_vocabulary(
            count_tokens(texts, config),
            config.max_vocab_size or DEFAULT_SUBWORD_VOCAB_SIZE,
            suffix_indicator=SUFFIX_INDICATOR,
            lower_threshold=config.min_count,
        )
        return cls(config, vocabulary, name=name)

    def _encode_int64(self, texts):
        words = self.split(self.normalize(texts), self._config)
        return _merge_last_two_dims(self._wordpiece.tokenize(words))

    def tokenize(self, texts):
        """Strings -> WordPiece pieces (a word it cannot cut -> "<unk>").

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        return self.vocabulary.id_to_token(self._encode_int64(texts))

    def encode(self, texts):
        """Strings -> int32 piece ids (unknown words -> `UNK_ID`), no start/end ids.

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            int32 `tf.RaggedTensor` (batch, None) for rank 1; a 1-D int32 Tensor
            for a scalar.
        """
        ids = self._encode_int64(texts)
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(tf.cast, ids, tf.int32)
        return tf.cast(ids, tf.int32)

    def detokenize(self, tokens):
        """Pieces -> text (core TensorFlow ops).

        The pieces joined with one space; then each ``##`` piece glued to the
        piece before it; then each token that starts with `JOINER` glued to the
        token before it (see `WordTokenizer.detokenize`).

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.
        """
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, "(^| )" + SUFFIX_INDICATOR, "")
        return glue_joined(text)
