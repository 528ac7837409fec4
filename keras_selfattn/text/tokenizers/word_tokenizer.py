"""`WordTokenizer` ("word"): words and punctuation, glued tokens marked `JOINER`.

Every punctuation or symbol character (Unicode categories P* and S*) is a token
of its own; with ``split_digits=True`` every decimal digit is too. The
vocabulary is learned by frequency (`learn_frequency_vocabulary`).
"""

import tensorflow as tf

from keras_selfattn.text.tokenizers.base import Tokenizer
from keras_selfattn.text.tokenizers.learning import learn_frequency_vocabulary
from keras_selfattn.text.tokenizers.text_ops import glue_joined

__all__ = ["WordTokenizer"]


class WordTokenizer(Tokenizer, kind="word"):
    """Words and punctuation: the "word" kind (see `Tokenizer` for the interface).

    Args:
        config: a `TokenizerConfig` of kind "word".
        vocabulary: a `Vocabulary` of word tokens.
        name: optional `tf.Module` name.
        sentencepiece_model: must be None (it belongs to "sentencepiece").

    Example:

    >>> from keras_selfattn.text.tokenizers import TokenizerConfig
    >>> tok = WordTokenizer.build(["Hello, world!"], TokenizerConfig.for_target())
    >>> tok.tokenize(tf.constant(["world, Hello!"])).to_list()
    [[b'world', b'\\xef\\xbf\\xad,', b'Hello', b'\\xef\\xbf\\xad!']]
    >>> tok.detokenize(tok.tokenize(tf.constant(["Hello, world!"]))).numpy()
    array([b'Hello, world!'], dtype=object)
    """

    @classmethod
    def _learn(cls, texts, config, name):
        return cls(config, learn_frequency_vocabulary(texts, config), name=name)

    def detokenize(self, tokens):
        """Tokens -> text: joined with one space, each `JOINER` token glued on.

        Core TensorFlow ops. Each token that starts with `JOINER` is glued to
        the token before it (the space and the mark deleted); a `JOINER`
        followed by a space or the end is a literal one, and stays.

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.
        """
        return glue_joined(tf.strings.reduce_join(tokens, axis=-1, separator=" "))
