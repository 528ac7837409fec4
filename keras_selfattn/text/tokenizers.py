"""Text normalization and tokenization as TensorFlow graph code.

Everything here runs inside `tf.data` (`Dataset.map`), inside a `tf.function` and in
a SavedModel: no Python per string. A `Tokenizer` is a `tf.Module` that owns its
`Vocabulary` tables (and, for subwords, its `FastWordpieceTokenizer`), so exporting
code can `track()` it.

Kinds (`TokenizerConfig.kind`):

- ``"word"``: words and punctuation. Every punctuation or symbol character
  (Unicode categories P* and S*) is its own token; with ``split_digits=True`` every
  decimal digit is too.
- ``"char"``: Unicode characters (code points), the space included. Detokenization
  joins with "".
- ``"subword"``: WordPiece pieces of the words above, suffix pieces marked ``##``;
  the vocabulary is learned from the training data.
- ``"sentencepiece"``: the pieces of a SentencePiece model (tensorflow_text's
  `SentencepieceTokenizer`, in-graph both ways) applied to the normalized text;
  the model is learned from the training data (`sentencepiece_model` module) or
  is the user's own ``.model`` (``TokenizerConfig.sentencepiece_model``). Its
  pieces, in id order, are the vocabulary: ids 0-3 are the reserved tokens. No
  joiner marks: SentencePiece writes spaces as "\u2581" inside its pieces.

Spacing is recorded in the tokens, so detokenization gives the text back as
written. A token that was glued to the one before it in the text (no space
between them) starts with the joiner mark `JOINER` ("\uffed", OpenNMT's joiner):
"Hello, world!" is ``Hello ￭, world ￭!`` and, with ``split_digits``, "342" is
``3 ￭4 ￭2`` while "3 4 2" is ``3 4 2``. Detokenization joins the tokens with one
space and deletes the space before each mark together with the mark (for
"subword", after gluing the ``##`` pieces of each word). A literal "\uffed" in the
text is a symbol, so it is always a token of its own and is never taken for a
mark. A model therefore learns to write the marks too: its output detokenizes
with the spacing of its training targets. Ids carry no offsets, so the marks, not
tensorflow_text's offsets, are what a generated sequence can carry.

The normalized text (`Tokenizer.normalize`) is what a round trip gives back:
``decode(encode(text)) == normalize(text)`` whenever every token is in the
vocabulary. Normalization changes only what the options ask for (case, the
Unicode form) and whitespace: every run of Unicode whitespace becomes one space,
and leading and trailing spaces go. With ``lowercase=False`` and
``normalization="none"`` (`TokenizerConfig.for_target`, what a target side needs)
``normalize(text)`` is the text itself, whitespace runs aside.

Which ops each option puts in the graph (`TokenizerConfig.ops`):

Unicode normalization
    tensorflow_text: `tensorflow_text.normalize_utf8` (NFKC by default).
    core: none (core TensorFlow has no normalization op).
Lowercasing
    tensorflow_text: `tensorflow_text.case_fold_utf8` (full case folding, implies
    NFKC). core: `tf.strings.lower(encoding="utf-8")`.
Whitespace, punctuation splits and joiner marks (both): `tf.strings.regex_replace`,
    `tf.strings.strip`.
Word split
    tensorflow_text: `tensorflow_text.WhitespaceTokenizer`. core: `tf.strings.split`.
Char split (both): `tf.strings.unicode_split`.
Subword split
    tensorflow_text: `tensorflow_text.FastWordpieceTokenizer`. core: not available.
SentencePiece, both ways
    tensorflow_text: `tensorflow_text.SentencepieceTokenizer` (ops ``SentencepieceOp``,
    ``SentencepieceTokenizeOp``, ``SentencepieceDetokenizeOp``). core: not available.
Token <-> id (both): `tf.lookup.StaticHashTable`.
Decode, ids -> text (both, every kind but "sentencepiece", subwords included):
    core ops only (`tf.cumsum`, `tf.ragged.boolean_mask`, the tables,
    `tf.strings.reduce_join`, `tf.strings.regex_replace`); "sentencepiece"
    detokenizes with ``SentencepieceDetokenizeOp``.

So a model whose source tokenizer uses ``ops="core"`` (kind "word" or "char")
exports a graph with core TensorFlow ops only; decoding is core for every kind
but "sentencepiece".
The two options differ only on text that NFKC or full case folding changes (e.g.
"ﬁ", "ß", full-width letters); a vocabulary must be used with the options it was
built with (`PairTokenizer` saves them together).
"""

import collections
import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from keras_selfattn.text import sentencepiece_model as sentencepiece_lib
from keras_selfattn.text import vocab as vocab_lib
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID, Vocabulary

__all__ = [
    "JOINER",
    "KINDS",
    "OPS",
    "SUFFIX_INDICATOR",
    "Tokenizer",
    "TokenizerConfig",
    "build_tokenizer",
    "count_tokens",
    "normalize_text",
    "split_text",
]

KINDS = ("word", "char", "subword", "sentencepiece")
OPS = ("tensorflow_text", "core")
_NORMALIZATION_FORMS = ("NFKC", "NFC", "NFKD", "NFD")
SUFFIX_INDICATOR = "##"
# Marks a token glued to the previous one (OpenNMT's joiner, U+FFED).
JOINER = "\uffed"
# A Unicode noncharacter (reserved for internal use): marks, for a moment, each
# place where a split must be made inside the text.
_SPLIT = "\ufdd0"
DEFAULT_SUBWORD_VOCAB_SIZE = 8000

# Unicode White_Space: RE2's \s is only [\t\n\f\r ], so name the rest explicitly.
_WHITESPACE = r"[\t\n\v\f\r\x{85}\p{Z}]+"
_PUNCTUATION = r"\p{P}\p{S}"
_DIGITS = r"\p{Nd}"


def _tf_text():
    """Imports tensorflow_text on first use (the "core" option never needs it)."""
    import tensorflow_text

    return tensorflow_text


def _normalization_form(normalization, ops):
    """``normalization`` as a `TokenizerConfig` stores it ("NFKC", ... or "none")."""
    form = normalization
    if form is None:
        form = "NFKC" if ops == "tensorflow_text" else "none"
    if isinstance(form, str) and form.lower() == "none":
        form = "none"
    elif isinstance(form, str):
        form = form.upper()
    if form not in _NORMALIZATION_FORMS + ("none",):
        raise ValueError(
            f"normalization must be one of {_NORMALIZATION_FORMS + ('none',)} or "
            f"None. Received: normalization={normalization!r}"
        )
    return form


def _check_core_ops(kind, normalization):
    """Raises ValueError for what ``ops="core"`` cannot do."""
    if normalization != "none":
        raise ValueError(
            "Unicode normalization needs tensorflow_text ops; core TensorFlow has "
            "none. Use ops='tensorflow_text', or normalization='none' with "
            f"ops='core'. Received: ops='core', normalization={normalization!r}"
        )
    if kind == "subword":
        raise ValueError(
            "kind='subword' needs tensorflow_text's FastWordpieceTokenizer. Use "
            "ops='tensorflow_text', or kind='word' or 'char' with ops='core'. "
            "Received: kind='subword', ops='core'"
        )
    if kind == "sentencepiece":
        raise ValueError(
            "kind='sentencepiece' needs tensorflow_text's SentencepieceTokenizer. "
            "Use ops='tensorflow_text', or kind='word' or 'char' with ops='core'. "
            "Received: kind='sentencepiece', ops='core'"
        )


@dataclasses.dataclass(frozen=True)
class TokenizerConfig:
    """How text becomes tokens: kind, ops, normalization, vocabulary limits.

    Saved as JSON beside the vocabulary (`to_dict` / `from_dict`).

    Args:
        kind: "word", "char", "subword" or "sentencepiece" (see the module
            docstring).
        ops: "tensorflow_text" or "core" (core TensorFlow ops only: no Unicode
            normalization, `tf.strings.lower` instead of case folding; no subwords,
            no SentencePiece).
        lowercase: case-fold ("tensorflow_text") or lowercase ("core") the text.
        normalization: Unicode normalization form, "NFKC", "NFC", "NFKD", "NFD" or
            "none". `None` picks the default: "NFKC" for "tensorflow_text", "none"
            for "core".
        split_digits: "word"/"subword": make every decimal digit its own token;
            "sentencepiece": a learned model makes every digit its own piece.
        max_vocab_size: vocabulary size limit, reserved tokens included. `None`:
            no limit for "word"/"char"; 8000 (the learner's target) for "subword"
            and "sentencepiece" (a soft limit there: a small corpus gets fewer).
        min_count: "word"/"char": tokens seen fewer times in the training data
            are left out of the vocabulary; "subword": least count of a piece;
            "sentencepiece": unused.
        sentencepiece_model: "sentencepiece": the path of the user's own ``.model``
            file to use instead of learning one (see
            `keras_selfattn.text.sentencepiece_model.read_sentencepiece_model`);
            None: learn one. Recorded for provenance: a saved tokenizer keeps the
            model's bytes, not the path.

    Example:

    >>> TokenizerConfig(kind="char", ops="core").normalization
    'none'
    """

    kind: str = "word"
    ops: str = "tensorflow_text"
    lowercase: bool = True
    normalization: str | None = None
    split_digits: bool = False
    max_vocab_size: int | None = None
    min_count: int = 1
    sentencepiece_model: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(
                f"kind must be one of {KINDS}. Received: kind={self.kind!r}"
            )
        if self.ops not in OPS:
            raise ValueError(f"ops must be one of {OPS}. Received: ops={self.ops!r}")
        normalization = _normalization_form(self.normalization, self.ops)
        object.__setattr__(self, "normalization", normalization)
        if self.ops == "core":
            _check_core_ops(self.kind, normalization)
        if self.sentencepiece_model is not None and self.kind != "sentencepiece":
            raise ValueError(
                "sentencepiece_model (a SentencePiece .model file) needs "
                f"kind='sentencepiece'. Received: kind={self.kind!r}, "
                f"sentencepiece_model={self.sentencepiece_model!r}"
            )
        if self.max_vocab_size is not None and self.max_vocab_size < len(
            vocab_lib.RESERVED_TOKENS
        ):
            raise ValueError(
                "max_vocab_size must be at least 4 (the reserved tokens) or None. "
                f"Received: max_vocab_size={self.max_vocab_size}"
            )
        if self.min_count < 1:
            raise ValueError(
                f"min_count must be >= 1. Received: min_count={self.min_count}"
            )

    @classmethod
    def for_target(cls, kind: str = "word", **kwargs) -> "TokenizerConfig":
        """A config for a target side: text comes back as written.

        The same arguments as the constructor, with other defaults:
        ``lowercase=False`` and ``normalization="none"``, so that
        ``normalize(text)`` is ``text`` (whitespace runs aside) and the model's
        detokenized output can equal the reference as written in the data.

        Example:

        >>> TokenizerConfig.for_target("char").lowercase
        False
        """
        kwargs.setdefault("lowercase", False)
        kwargs.setdefault("normalization", "none")
        return cls(kind=kind, **kwargs)

    def check_reversible(self, side: str = "target") -> None:
        """Raises ValueError unless detokenization gives the text back as written.

        Lowercasing and the compatibility forms (NFKC, NFKD: "²" -> "2", "ﬁ" ->
        "fi") cannot be undone, so a side whose output is read by people, or
        scored against its references, must not use them. NFC and NFD are
        allowed (canonically equivalent text; the bytes of text not already in
        that form differ).

        Args:
            side: the name used in the message (e.g. "target").
        """
        problems = []
        if self.lowercase:
            problems.append("lowercase=True")
        if self.normalization in ("NFKC", "NFKD"):
            problems.append(f"normalization={self.normalization!r}")
        if problems:
            raise ValueError(
                f"The {side} tokenizer must give text back as written (it is what "
                "users read and what the metrics compare with the references), "
                f"but {' and '.join(problems)} cannot be undone. Use "
                f"TokenizerConfig.for_target(kind={self.kind!r}, ...) (lowercase="
                "False, normalization='none'); lowercasing and NFKC are for the "
                f"source side. Received: {side}_config={self!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "TokenizerConfig":
        """Inverse of `to_dict`; unknown keys raise ValueError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(
                f"Unknown TokenizerConfig keys {unknown}. Known keys: {sorted(known)}"
            )
        return cls(**config)


def normalize_text(texts, config: TokenizerConfig):
    """Normalizes UTF-8 strings: Unicode form, case, whitespace.

    Steps, all in-graph: lowercasing/case folding and Unicode normalization (per
    `config.ops`, only when the config asks for them); every run of Unicode
    whitespace becomes one space; leading and trailing spaces removed (and the
    noncharacter U+FDD0, which `split_text` uses internally). This is the text a
    round trip (`Tokenizer.encode` then `Tokenizer.decode`) gives back.

    Args:
        texts: `tf.string` Tensor of any shape (or anything convertible).
        config: a `TokenizerConfig`.

    Returns:
        `tf.string` Tensor of the same shape.

    Example:

    >>> normalize_text(tf.constant(["Hello,  World!"]), TokenizerConfig()).numpy()
    array([b'hello, world!'], dtype=object)
    """
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    if config.ops == "tensorflow_text":
        text_ops = _tf_text()
        if config.lowercase:
            texts = text_ops.case_fold_utf8(texts)  # folds case and applies NFKC
        if config.normalization != "none" and not (
            config.lowercase and config.normalization == "NFKC"
        ):
            texts = text_ops.normalize_utf8(texts, config.normalization)
    elif config.lowercase:
        texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
    texts = tf.strings.regex_replace(texts, _SPLIT, "")  # reserved for `split_text`
    return tf.strings.strip(texts)


def _mark_splits(normalized, config: TokenizerConfig):
    """Normalized text -> tokens separated by one space, glued ones marked `JOINER`.

    A split goes on each side of every punctuation/symbol character (and digit,
    with ``split_digits``). A split where the text has a space (or at either
    end) is that space; a split inside the text becomes " " + `JOINER`.
    """
    separate = _PUNCTUATION + (_DIGITS if config.split_digits else "")
    marked = tf.strings.regex_replace(
        normalized, f"([{separate}])", rf"{_SPLIT}\1{_SPLIT}"
    )
    marked = tf.strings.regex_replace(marked, f"{_SPLIT}+", _SPLIT)
    marked = tf.strings.regex_replace(marked, f"^{_SPLIT}|{_SPLIT}$", "")
    # Two passes: in "3<split> <split>4" one space ends one split and starts the next.
    marked = tf.strings.regex_replace(marked, f"{_SPLIT} ", " ")
    marked = tf.strings.regex_replace(marked, f" {_SPLIT}", " ")
    return tf.strings.regex_replace(marked, _SPLIT, " " + JOINER)


def split_text(texts, config: TokenizerConfig):
    """Normalizes and splits strings into tokens ("word", "char") or words ("subword").

    "word"/"subword": a token glued to the previous one in the text starts with
    `JOINER` (see the module docstring), so the split can be undone.

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
    normalized = normalize_text(texts, config)
    if config.kind == "char":
        return tf.strings.unicode_split(normalized, "UTF-8")
    marked = _mark_splits(normalized, config)
    if config.ops == "tensorflow_text":
        return _tf_text().WhitespaceTokenizer().tokenize(marked)
    return tf.strings.split(marked)


def _merge_last_two_dims(pieces):
    """(..., words, pieces) ragged -> (..., tokens); (words, pieces) -> (tokens,)."""
    if pieces.shape.rank == 2:
        return pieces.flat_values
    return pieces.merge_dims(-2, -1)


class Tokenizer(tf.Module):
    """A tokenizer with its vocabulary: text <-> tokens <-> int32 ids, in-graph.

    Build one from training texts with `build_tokenizer` (or `Tokenizer.build`), or
    from a saved vocabulary with `Tokenizer(config, Vocabulary.load(path))`.

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

    >>> tok = build_tokenizer(["Hello world!", "hello moon"], TokenizerConfig())
    >>> ids = tok.encode(tf.constant(["Hello, moon!"]))
    >>> tok.decode(ids).numpy()
    array([b'hello <unk> moon!'], dtype=object)
    """

    def __init__(
        self,
        config: TokenizerConfig,
        vocabulary: Vocabulary | None,
        name=None,
        *,
        sentencepiece_model: bytes | None = None,
    ):
        super().__init__(name=name)
        if not isinstance(config, TokenizerConfig):
            raise TypeError(
                f"config must be a TokenizerConfig. Received: {type(config).__name__}"
            )
        if (config.kind == "sentencepiece") != (sentencepiece_model is not None):
            raise ValueError(
                "sentencepiece_model (the model's bytes) is needed by, and only by, "
                f"kind='sentencepiece'. Received: kind={config.kind!r}, "
                f"sentencepiece_model={'given' if sentencepiece_model else None}"
            )
        if sentencepiece_model is not None:
            pieces = sentencepiece_lib.sentencepiece_pieces(sentencepiece_model)
            if vocabulary is None:
                vocabulary = Vocabulary(pieces)
            elif vocabulary.tokens != pieces:
                raise ValueError(
                    f"The vocabulary ({vocabulary.size} tokens) is not the "
                    f"SentencePiece model's pieces ({len(pieces)}) in id order"
                )
        if not isinstance(vocabulary, Vocabulary):
            raise TypeError(
                "vocabulary must be a Vocabulary. "
                f"Received: {type(vocabulary).__name__}"
            )
        self._config = config
        self.vocabulary = vocabulary
        if config.kind == "subword":
            self._wordpiece = _tf_text().FastWordpieceTokenizer(
                vocab=vocabulary.tokens,
                suffix_indicator=SUFFIX_INDICATOR,
                max_bytes_per_word=100,
                token_out_type=tf.int64,
                unknown_token=vocab_lib.UNK_TOKEN,
                no_pretokenization=True,
                support_detokenization=False,
            )
        self._sentencepiece_model = sentencepiece_model
        if sentencepiece_model is not None:
            # A name of its own for each model: tensorflow-text 2.21 names the
            # model's resource op after it, and two SentencepieceTokenizers of the
            # same name in one SavedModel come back from loading (both loaders)
            # sharing ONE model (the source's pieces decoded as the target's).
            digest = hashlib.sha256(sentencepiece_model).hexdigest()[:16]
            self._sentencepiece = _tf_text().SentencepieceTokenizer(
                model=sentencepiece_model,
                out_type=tf.int32,
                name=f"sentencepiece_{digest}",
            )

    @property
    def config(self) -> TokenizerConfig:
        """The `TokenizerConfig`."""
        return self._config

    @property
    def sentencepiece_model(self) -> bytes | None:
        """The serialized SentencePiece model ("sentencepiece"), else None."""
        return self._sentencepiece_model

    @property
    def vocab_size(self) -> int:
        """Vocabulary size, reserved tokens included (the model's embedding rows)."""
        return self.vocabulary.size

    @classmethod
    def build(cls, texts, config: TokenizerConfig | None = None, name=None):
        """Same as `build_tokenizer(texts, config)`."""
        return build_tokenizer(texts, config, name=name)

    def normalize(self, texts):
        """`normalize_text(texts, self.config)`: the text a round trip gives back."""
        return normalize_text(texts, self._config)

    def tokenize(self, texts):
        """Strings -> string tokens (subword: WordPiece pieces, unknown words -> <unk>).

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
            `tf.string` Tensor for a scalar.
        """
        if self._config.kind == "subword":
            return self.vocabulary.id_to_token(self._encode_int64(texts))
        if self._config.kind == "sentencepiece":
            return self.vocabulary.id_to_token(self.encode(texts))
        return split_text(texts, self._config)

    def _encode_int64(self, texts):
        words = split_text(texts, self._config)
        return _merge_last_two_dims(self._wordpiece.tokenize(words))

    def encode(self, texts):
        """Strings -> int32 token ids (unknown tokens -> `UNK_ID`), no start/end ids.

        Args:
            texts: `tf.string` Tensor, rank 0 or 1.

        Returns:
            int32 `tf.RaggedTensor` (batch, None) for rank 1; a 1-D int32 Tensor
            for a scalar.

        Example:

        >>> tok = build_tokenizer(["ab"], TokenizerConfig(kind="char"))
        >>> tok.encode(tf.constant("abc")).numpy().tolist()
        [4, 5, 1]
        """
        if self._config.kind == "subword":
            ids = self._encode_int64(texts)
            if isinstance(ids, tf.RaggedTensor):
                return tf.ragged.map_flat_values(tf.cast, ids, tf.int32)
            return tf.cast(ids, tf.int32)
        if self._config.kind == "sentencepiece":
            return self._sentencepiece.tokenize(self.normalize(texts))
        return self.vocabulary.token_to_id(split_text(texts, self._config))

    def detokenize(self, tokens):
        """String tokens -> text, the inverse of `tokenize` (core TensorFlow ops).

        "sentencepiece": the pieces' ids detokenized by SentencePiece (its op,
        not core). "char": the tokens joined with "". "word"/"subword": joined with one
        space; then ("subword") each ``##`` piece glued to the piece before it;
        then each token that starts with `JOINER` glued to the token before it
        (the space and the mark deleted). A `JOINER` followed by a space or the
        end is a literal one, and stays.

        Args:
            tokens: `tf.string` RaggedTensor (batch, None) or a 1-D Tensor.

        Returns:
            `tf.string` Tensor (batch,) or a scalar.

        Example:

        >>> tok = build_tokenizer(["Hello, world!"], TokenizerConfig.for_target())
        >>> tok.detokenize(tok.tokenize(tf.constant(["Hello, world!"]))).numpy()
        array([b'Hello, world!'], dtype=object)
        """
        if self._config.kind == "sentencepiece":
            return self._sentencepiece.detokenize(self.vocabulary.token_to_id(tokens))
        if self._config.kind == "char":
            return tf.strings.reduce_join(tokens, axis=-1, separator="")
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        if self._config.kind == "subword":
            text = tf.strings.regex_replace(text, "(^| )" + SUFFIX_INDICATOR, "")
        return tf.strings.regex_replace(text, f" ?{JOINER}([^ ])", r"\1")

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
        if self._config.kind == "sentencepiece":
            kept = tf.cast(tf.ragged.boolean_mask(ids, keep), tf.int32)
            text = self._sentencepiece.detokenize(kept)
            return text[0] if scalar else text
        text = self.detokenize(
            self.vocabulary.id_to_token(tf.ragged.boolean_mask(ids, keep))
        )
        return text[0] if scalar else text


def _string_batches(texts, batch_size=1024) -> tf.data.Dataset:
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


def _normalized_sentences(texts, config: TokenizerConfig):
    """Yields `normalize_text` of each text as `str` (normalized inside ``tf.data``)."""
    dataset = _string_batches(texts).map(
        lambda batch: normalize_text(batch, config),
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
    dataset = _string_batches(texts).map(
        lambda batch: split_text(batch, config).flat_values,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    counts = collections.Counter()
    for tokens in dataset.as_numpy_iterator():
        counts.update(tokens.tolist())
    return collections.Counter({t.decode("utf-8"): c for t, c in counts.items()})


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
        A `Tokenizer`.

    Example:

    >>> tok = build_tokenizer(["le chat", "le chien"], TokenizerConfig())
    >>> tok.vocabulary.tokens[4:]
    ['le', 'chat', 'chien']
    """
    config = config or TokenizerConfig()
    if config.kind == "sentencepiece":
        if config.sentencepiece_model is not None:
            model = sentencepiece_lib.read_sentencepiece_model(
                config.sentencepiece_model, "sentencepiece_model"
            )
        else:
            model = sentencepiece_lib.train_sentencepiece_model(
                _normalized_sentences(texts, config),
                config.max_vocab_size
                or sentencepiece_lib.DEFAULT_SENTENCEPIECE_VOCAB_SIZE,
                split_digits=config.split_digits,
            )
        return Tokenizer(config, None, name=name, sentencepiece_model=model)
    counts = count_tokens(texts, config)
    if config.kind == "subword":
        vocabulary = vocab_lib.learn_wordpiece_vocabulary(
            counts,
            config.max_vocab_size or DEFAULT_SUBWORD_VOCAB_SIZE,
            suffix_indicator=SUFFIX_INDICATOR,
            lower_threshold=config.min_count,
        )
    else:
        vocabulary = vocab_lib.build_vocabulary(
            counts, max_size=config.max_vocab_size, min_count=config.min_count
        )
    return Tokenizer(config, vocabulary, name=name)
