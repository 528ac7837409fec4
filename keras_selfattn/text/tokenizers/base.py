"""`Tokenizer`: the interface of every kind and the parts they share.

A kind is a subclass that names itself, ``class WordTokenizer(Tokenizer,
kind="word")``, and implements `Tokenizer.tokenize`, `Tokenizer.detokenize` and
the learning of its vocabulary (`Tokenizer._learn`); it may replace `encode`
(default: the tokens' ids), the split (`Tokenizer.split`, default: words with
joiner marks) and the decoding of kept ids. What every kind shares lives here:
the config and its checks, the `Vocabulary` (ids <-> tokens tables), the
normalization, and `decode`'s handling of the reserved ids.

``Tokenizer(config, vocabulary)`` is the factory: it makes the class of
``config.kind``, so code written before the kinds had classes works unchanged.
"""

import tensorflow as tf

from keras_selfattn.text.tokenizers.config import KINDS, TokenizerConfig
from keras_selfattn.text.tokenizers.text_ops import normalize_text, split_words
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID, Vocabulary

__all__ = ["Tokenizer", "split_text", "tokenizer_class"]

# kind -> its class, filled by `Tokenizer.__init_subclass__`.
_CLASSES: dict[str, type] = {}


def tokenizer_class(kind: str) -> type:
    """The `Tokenizer` subclass of a kind ("word", "char", "subword"...).

    Args:
        kind: one of `keras_selfattn.choices.TOKENIZER_KINDS`.

    Returns:
        The class, e.g. `WordPieceTokenizer` for "subword".

    Example:

    >>> tokenizer_class("char").__name__
    'CharTokenizer'
    """
    if kind not in _CLASSES:
        raise ValueError(f"kind must be one of {KINDS}. Received: kind={kind!r}")
    return _CLASSES[kind]


def _check_config(config):
    if not isinstance(config, TokenizerConfig):
        raise TypeError(
            f"config must be a TokenizerConfig. Received: {type(config).__name__}"
        )


class Tokenizer(tf.Module):
    """A tokenizer with its vocabulary: text <-> tokens <-> int32 ids, in-graph.

    Build one from training texts with `build_tokenizer` (or `Tokenizer.build`), or
    from a saved vocabulary with `Tokenizer(config, Vocabulary.load(path))`.
    ``Tokenizer(config, ...)`` gives the class of ``config.kind``
    (`WordTokenizer`, `CharTokenizer`, `WordPieceTokenizer`,
    `SentencePieceTokenizer`); each class also takes the same arguments itself,
    with a config of its kind.

    Args:
        config: a `TokenizerConfig`.
        vocabulary: a `Vocabulary` (for "subword", a WordPiece vocabulary whose
            suffix pieces start with "##"; for "sentencepiece", the model's pieces
            in id order, or None to take them from the model).
        name: optional `tf.Module` name.
        sentencepiece_model: "sentencepiece" only: the serialized SentencePiece
            model (bytes of a ``.model`` file) with the reserved pieces at ids 0-3
            (`keras_selfattn.text.sentencepiece_model`; a user's model with other
            special ids is rewritten so by `read_sentencepiece_model`).

    Example:

    >>> from keras_selfattn.text.tokenizers import build_tokenizer
    >>> tok = build_tokenizer(["Hello world!", "hello moon"], TokenizerConfig())
    >>> type(tok).__name__
    'WordTokenizer'
    >>> ids = tok.encode(tf.constant(["Hello, moon!"]))
    >>> tok.decode(ids).numpy()
    array([b'hello <unk> moon!'], dtype=object)
    """

    # The `TokenizerConfig.kind` of a subclass (None: this interface).
    kind: str | None = None

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind
            _CLASSES[kind] = cls

    def __new__(cls, config=None, *args, **kwargs):
        kind_class = cls
        if cls is Tokenizer:
            _check_config(config)
            kind_class = tokenizer_class(config.kind)
        return super().__new__(kind_class)

    def __init__(
        self,
        config: TokenizerConfig,
        vocabulary: Vocabulary | None,
        name=None,
        *,
        sentencepiece_model: bytes | None = None,
    ):
        super().__init__(name=name)
        _check_config(config)
        if config.kind != self.kind:
            raise ValueError(
                f"{type(self).__name__} needs a config of kind {self.kind!r} "
                f"(Tokenizer(config, ...) picks the class of config.kind). "
                f"Received: kind={config.kind!r}"
            )
        if (config.kind == "sentencepiece") != (sentencepiece_model is not None):
            raise ValueError(
                "sentencepiece_model (the model's bytes) is needed by, and only by, "
                f"kind='sentencepiece'. Received: kind={config.kind!r}, "
                f"sentencepiece_model={'given' if sentencepiece_model else None}"
            )
        vocabulary = self._model_vocabulary(vocabulary, sentencepiece_model)
        if not isinstance(vocabulary, Vocabulary):
            raise TypeError(
                "vocabulary must be a Vocabulary. "
                f"Received: {type(vocabulary).__name__}"
            )
        self._config = config
        self.vocabulary = vocabulary

    def _model_vocabulary(self, vocabulary, sentencepiece_model):
        """The vocabulary to keep (SentencePiece: checked against its model)."""
        return vocabulary

    @property
    def config(self) -> TokenizerConfig:
        """The `TokenizerConfig`."""
        return self._config

    @property
    def sentencepiece_model(self) -> bytes | None:
        """The serialized SentencePiece model ("sentencepiece"), else None."""
        return None

    @property
    def vocab_size(self) -> int:
        """Vocabulary size, reserved tokens included (the model's embedding rows)."""
        return self.vocabulary.size

    @classmethod
    def build(cls, texts, config: TokenizerConfig | None = None, name=None):
        """Learns a tokenizer from training texts (`build_tokenizer`).

        Args:
            texts: training strings: list, NumPy array, 1-D Tensor, or a
                `tf.data.Dataset` of `tf.string` (scalar or 1-D elements).
            config: a `TokenizerConfig`. Default: `TokenizerConfig()` (words)
                on `Tokenizer`, a default config of the class's kind on a kind's
                class (whose config must be of its kind).
            name: optional `tf.Module` name.

        Returns:
            A tokenizer of the class of ``config.kind``.
        """
        if config is None:
            config = TokenizerConfig(kind=cls.kind or "word")
        _check_config(config)
        if cls is not Tokenizer and config.kind != cls.kind:
            raise ValueError(
                f"{cls.__name__}.build needs a config of kind {cls.kind!r}. "
                f"Received: kind={config.kind!r}"
            )
        learner = tokenizer_class(config.kind) if cls is Tokenizer else cls
        return learner._learn(texts, config, name)

    @classmethod
    def _learn(cls, texts, config, name):
        """A tokenizer of this kind with a vocabulary learned from ``texts``."""
        raise NotImplementedError

    @classmethod
    def split(cls, normalized, config: TokenizerConfig):
        """Normalized strings -> the tokens a vocabulary of this kind counts.

        Default: words and punctuation with joiner marks (`split_words`).

        Args:
            normalized: `tf.string` Tensor, rank 0 or 1, `normalize_text`'s output.
            config: a `TokenizerConfig` of this kind.

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        return split_words(normalized, config)

    def normalize(self, texts):
        """`normalize_text(texts, self.config)`: the text a round trip gives back."""
        return normalize_text(texts, self._config)

    def tokenize(self, texts):
        """Strings -> string tokens (unknown ones as "<unk>" where the kind maps them).

        Default: the kind's `split` of the normalized text, the tokens its
        vocabulary counts ("word": words and punctuation, each glued one
        starting with `JOINER`; "char": characters). The kinds that cut with a
        model ("subword", "sentencepiece") override it.

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        return self.split(self.normalize(texts), self._config)

    def encode(self, texts):
        """Strings -> int32 token ids (unknown tokens -> `UNK_ID`), no start/end ids.

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            int32 `tf.RaggedTensor` (batch, None) for rank 1; a 1-D int32 Tensor
            for a scalar.

        Example:

        >>> from keras_selfattn.text.tokenizers import build_tokenizer
        >>> tok = build_tokenizer(["ab"], TokenizerConfig(kind="char"))
        >>> tok.encode(tf.constant("abc")).numpy().tolist()
        [4, 5, 1]
        """
        return self.vocabulary.token_to_id(self.tokenize(texts))

    def detokenize(self, tokens):
        """String tokens -> text, the inverse of `tokenize`.

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.
        """
        raise NotImplementedError

    def decode(self, ids):
        """Ids -> text: stops at the first `END_ID`, drops `PAD_ID` and `START_ID`.

        Core TensorFlow ops only, for every kind but "sentencepiece" (which
        detokenizes with SentencePiece's op). Unknown ids decode to "<unk>"
        ("sentencepiece": to SentencePiece's " \u2047 ").

        Args:
            ids: integer Tensor (batch, length) or (length,), or a RaggedTensor
                (batch, None): e.g. the model's greedy output, or `encode`'s.

        Returns:
            `tf.string` Tensor (batch,), or a scalar for 1-D input.

        Example:

        >>> from keras_selfattn.text.tokenizers import build_tokenizer
        >>> tok = build_tokenizer(["ab"], TokenizerConfig(kind="char"))
        >>> tok.decode(tf.constant([[2, 5, 4, 3, 4], [4, 0, 0, 0, 0]])).numpy()
        array([b'ba', b'a'], dtype=object)
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.convert_to_tensor(ids)
        scalar = ids.shape.rank == 1
        if scalar:
            ids = ids[tf.newaxis, :]
        ids = tf.cast(ids, tf.int64)
        before_end = tf.equal(
            tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=-1), 0
        )
        keep = before_end & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, START_ID)
        text = self._decode_kept(tf.ragged.boolean_mask(ids, keep))
        return text[0] if scalar else text

    def _decode_kept(self, ids):
        """int64 RaggedTensor (batch, None) of kept ids -> text (batch,)."""
        return self.detokenize(self.vocabulary.id_to_token(ids))


def split_text(texts, config: TokenizerConfig):
    """Normalizes and splits strings into tokens ("word", "char") or words ("subword").

    "word"/"subword": a token glued to the previous one in the text starts with
    `JOINER` (see the module docstring), so the split can be undone. The split
    is the one of the config kind's class (`Tokenizer.split`).

    Args:
        texts: `tf.string` Tensor, rank 0 or 1.
        config: a `TokenizerConfig`.

    Returns:
        For rank-1 input a `tf.RaggedTensor` of `tf.string`, shape (batch, None);
        for a scalar a 1-D `tf.string` Tensor.

    Example:

    >>> split_text(tf.constant(["a b."]), TokenizerConfig()).to_list()
    [[b'a', b'b', b'\xef\xbf\xad.']]
    """
    return tokenizer_class(config.kind).split(normalize_text(texts, config), config)
