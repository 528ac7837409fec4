"""`CharTokenizer` ("char"): Unicode characters (code points), the space included.

Detokenization joins with "". The vocabulary is learned by frequency
(`learn_frequency_vocabulary`).
"""

import tensorflow as tf

from keras_selfattn.text.tokenizers.base import Tokenizer
from keras_selfattn.text.tokenizers.learning import learn_frequency_vocabulary

__all__ = ["CharTokenizer"]


class CharTokenizer(Tokenizer, kind="char"):
    """Characters: the "char" kind (see `Tokenizer` for the interface).

    Args:
        config: a `TokenizerConfig` of kind "char".
        vocabulary: a `Vocabulary` of characters.
        name: optional `tf.Module` name.
        sentencepiece_model: must be None (it belongs to "sentencepiece").

    Example:

    >>> from keras_selfattn.text.tokenizers import TokenizerConfig
    >>> tok = CharTokenizer.build(["ab"], TokenizerConfig(kind="char", ops="core"))
    >>> tok.tokenize(tf.constant(["b a"])).to_list()
    [[b'b', b' ', b'a']]
    """

    @classmethod
    def _learn(cls, texts, config, name):
        return cls(config, learn_frequency_vocabulary(texts, config), name=name)

    @classmethod
    def split(cls, normalized, config):
        """Normalized strings -> their characters (`tf.strings.unicode_split`).

        Args:
            normalized: `tf.string` Tensor, rank 0 or 1, `normalize_text`'s output.
            config: a `TokenizerConfig` of kind "char".

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        return tf.strings.unicode_split(normalized, "UTF-8")

    def detokenize(self, tokens):
        """Characters -> text: joined with "" (core TensorFlow ops).

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.
        """
        return tf.strings.reduce_join(tokens, axis=-1, separator="")
