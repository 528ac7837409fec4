"""`SentencePieceTokenizer` ("sentencepiece"): a SentencePiece model's pieces.

tensorflow_text's `SentencepieceTokenizer`, in-graph both ways, applied to the
normalized text. The model is learned from the training data
(`keras_selfattn.text.sentencepiece_model`, its trainer) or is the user's own
``.model`` (``TokenizerConfig.sentencepiece_model``). Its pieces, in id order,
are the vocabulary: ids 0-3 are the reserved tokens. No joiner marks:
SentencePiece writes spaces as "\u2581" inside its pieces.
"""

import hashlib

import tensorflow as tf

from keras_selfattn.text import sentencepiece_model as sentencepiece_lib
from keras_selfattn.text.tokenizers.base import Tokenizer
from keras_selfattn.text.tokenizers.learning import normalized_sentences
from keras_selfattn.text.tokenizers.text_ops import tf_text
from keras_selfattn.text.vocab import Vocabulary

__all__ = ["SentencePieceTokenizer"]


class SentencePieceTokenizer(Tokenizer, kind="sentencepiece"):
    """SentencePiece pieces: the "sentencepiece" kind (see `Tokenizer`).

    Args:
        config: a `TokenizerConfig` of kind "sentencepiece".
        vocabulary: the model's pieces in id order as a `Vocabulary`, or None to
            take them from the model.
        name: optional `tf.Module` name.
        sentencepiece_model: the serialized SentencePiece model (bytes of a
            ``.model`` file) with the reserved pieces at ids 0-3.
    """

    def __init__(self, config, vocabulary, name=None, *, sentencepiece_model=None):
        super().__init__(
            config, vocabulary, name=name, sentencepiece_model=sentencepiece_model
        )
        self._sentencepiece_model = sentencepiece_model
        # A name of its own for each model: tensorflow-text 2.21 names the
        # model's resource op after it, and two SentencepieceTokenizers of the
        # same name in one SavedModel come back from loading (both loaders)
        # sharing ONE model (the source's pieces decoded as the target's).
        digest = hashlib.sha256(sentencepiece_model).hexdigest()[:16]
        self._sentencepiece = tf_text().SentencepieceTokenizer(
            model=sentencepiece_model,
            out_type=tf.int32,
            name=f"sentencepiece_{digest}",
        )

    def _model_vocabulary(self, vocabulary, sentencepiece_model):
        """The model's pieces; a given vocabulary must be them, in id order."""
        pieces = sentencepiece_lib.sentencepiece_pieces(sentencepiece_model)
        if vocabulary is None:
            return Vocabulary(pieces)
        if isinstance(vocabulary, Vocabulary) and vocabulary.tokens != pieces:
            raise ValueError(
                f"The vocabulary ({vocabulary.size} tokens) is not the "
                f"SentencePiece model's pieces ({len(pieces)}) in id order"
            )
        return vocabulary

    @property
    def sentencepiece_model(self) -> bytes:
        """The serialized SentencePiece model."""
        return self._sentencepiece_model

    @classmethod
    def _learn(cls, texts, config, name):
        """The user's model when the config names one, else one learned from texts.

        Learned: a unigram model of about `config.max_vocab_size` (default
        `DEFAULT_SENTENCEPIECE_VOCAB_SIZE`) pieces from the normalized texts,
        at most `DEFAULT_INPUT_SENTENCE_SIZE` of them held.
        """
        if config.sentencepiece_model is not None:
            model = sentencepiece_lib.read_sentencepiece_model(
                config.sentencepiece_model, "sentencepiece_model"
            )
        else:
            model = sentencepiece_lib.train_sentencepiece_model(
                normalized_sentences(texts, config),
                config.max_vocab_size
                or sentencepiece_lib.DEFAULT_SENTENCEPIECE_VOCAB_SIZE,
                split_digits=config.split_digits,
            )
        return cls(config, None, name=name, sentencepiece_model=model)

    def tokenize(self, texts):
        """Strings -> the model's pieces (the vocabulary's tokens of `encode`).

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        return self.vocabulary.id_to_token(self.encode(texts))

    def encode(self, texts):
        """Strings -> int32 piece ids of the normalized text, no start/end ids.

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            int32 `tf.RaggedTensor` (batch, None) for rank 1; a 1-D int32 Tensor
            for a scalar.
        """
        return self._sentencepiece.tokenize(self.normalize(texts))

    def detokenize(self, tokens):
        """Pieces -> text: their ids detokenized by SentencePiece (its op).

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.
        """
        return self._sentencepiece.detokenize(self.vocabulary.token_to_id(tokens))

    def _decode_kept(self, ids):
        return self._sentencepiece.detokenize(tf.cast(ids, tf.int32))
