"""`build_tokenizer`: a tokenizer of a config's kind, learned from training texts.

The kinds are the four classes imported here, each naming its kind in its class
statement (``class WordPieceTokenizer(Tokenizer, kind="subword")``): importing
this module registers them all for `tokenizer_class`, which
``Tokenizer(config, ...)`` and `Tokenizer.build` use to pick ``config.kind``'s.
"""

from keras_selfattn.text.tokenizers.base import Tokenizer, tokenizer_class
from keras_selfattn.text.tokenizers.char_tokenizer import CharTokenizer
from keras_selfattn.text.tokenizers.config import TokenizerConfig
from keras_selfattn.text.tokenizers.sentencepiece_tokenizer import (
    SentencePieceTokenizer,
)
from keras_selfattn.text.tokenizers.word_tokenizer import WordTokenizer
from keras_selfattn.text.tokenizers.wordpiece_tokenizer import WordPieceTokenizer

__all__ = [
    "CharTokenizer",
    "SentencePieceTokenizer",
    "WordPieceTokenizer",
    "WordTokenizer",
    "build_tokenizer",
    "tokenizer_class",
]


def build_tokenizer(
    texts, config: TokenizerConfig | None = None, name=None
) -> Tokenizer:
    """Builds a `Tokenizer`, learning its vocabulary from training texts.

    "word"/"char": tokens by frequency (`build_vocabulary` with
    `config.max_vocab_size`, `config.min_count`). "subword": a WordPiece vocabulary
    of about `config.max_vocab_size` (default 8000) learned from word counts.
    "sentencepiece": the user's model when `config.sentencepiece_model` names one
    (``texts`` is then not read), else a unigram model of about
    `config.max_vocab_size` (default 8000) pieces learned from the normalized
    texts (`sentencepiece_model.train_sentencepiece_model`; at most
    `sentencepiece_model.DEFAULT_INPUT_SENTENCE_SIZE` of them are held).

    Args:
        texts: training strings: list, NumPy array, 1-D Tensor, or a
            `tf.data.Dataset` of `tf.string` (scalar or 1-D elements).
        config: a `TokenizerConfig` (default: `TokenizerConfig()`, words).
        name: optional `tf.Module` name.

    Returns:
        A `Tokenizer` of the class of ``config.kind`` (`tokenizer_class`).

    Example:

    >>> tok = build_tokenizer(["le chat", "le chien"], TokenizerConfig())
    >>> tok.vocabulary.tokens[4:]
    ['le', 'chat', 'chien']
    """
    return Tokenizer.build(texts, config, name=name)
