"""Vocabularies: reserved ids, token <-> id lookup tables, plain-text files.

A `Vocabulary` is an ordered list of distinct tokens whose first four entries are the
reserved tokens (`RESERVED_TOKENS`):

| id | token    | role                                         |
|----|----------|----------------------------------------------|
| 0  | `<pad>`  | padding (`PAD_ID`; `Embedding(mask_zero=True)`) |
| 1  | `<unk>`  | any token not in the vocabulary (`UNK_ID`)   |
| 2  | `<s>`    | start of a target sequence (`START_ID`)      |
| 3  | `</s>`   | end of a target sequence (`END_ID`)          |

The lookups are two `tf.lookup.StaticHashTable`s (core TensorFlow ops: they serve on
every TF Serving build) held by the `Vocabulary`, which is a `tf.Module`: the tables
are trackable resources that `tf.saved_model.save` and `keras.export.ExportArchive`
(`archive.track(vocabulary)`) carry into a SavedModel.

On disk a vocabulary is a UTF-8 text file with one token a line, in id order, each
line ending in "\\n" (a line may be a single space: the character tokenizer's space).
"""

import collections
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence

import tensorflow as tf

from keras_selfattn.reserved_ids import (  # their one home
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
)

__all__ = [
    "END_ID",
    "END_TOKEN",
    "PAD_ID",
    "PAD_TOKEN",
    "RESERVED_TOKENS",
    "START_ID",
    "START_TOKEN",
    "UNK_ID",
    "UNK_TOKEN",
    "Vocabulary",
    "build_vocabulary",
    "learn_wordpiece_vocabulary",
]


def _map_values(fn, values):
    """Applies `fn` to a Tensor, or to the flat values of a RaggedTensor."""
    if isinstance(values, tf.RaggedTensor):
        return tf.ragged.map_flat_values(fn, values)
    return fn(values)


def _check_tokens(tokens, where):
    """Raises ValueError unless `tokens` is a valid vocabulary token list."""
    if tuple(tokens[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
        raise ValueError(
            f"{where}: a vocabulary must start with the reserved tokens "
            f"{list(RESERVED_TOKENS)} (ids 0-3). "
            f"Received: {list(tokens[: len(RESERVED_TOKENS)])}"
        )
    seen = {}
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(
                f"{where}: tokens must be str. Received: {token!r} at id {index}"
            )
        if token == "" or "\n" in token:
            raise ValueError(
                f"{where}: a token must be non-empty and contain no newline. "
                f"Received: {token!r} at id {index}"
            )
        if token in seen:
            raise ValueError(
                f"{where}: duplicate token {token!r} at ids {seen[token]} and {index}"
            )
        seen[token] = index


class Vocabulary(tf.Module):
    """An ordered token list with in-graph token <-> id lookup tables.

    Ids are positions in `tokens`; the first four are `RESERVED_TOKENS`. Unknown
    tokens map to `UNK_ID` (1); ids outside the vocabulary map to `UNK_TOKEN`.
    Both lookups are pure TensorFlow graph code (core ops only) and work on
    `tf.Tensor` and `tf.RaggedTensor` of any shape, eagerly, inside `tf.data` and
    inside a `tf.function` / SavedModel.

    Args:
        tokens: sequence of distinct, non-empty `str` without newlines, starting
            with `RESERVED_TOKENS`.
        name: optional `tf.Module` name.

    Example:

    >>> vocab = Vocabulary(list(RESERVED_TOKENS) + ["hello", "world"])
    >>> vocab.token_to_id(tf.constant(["hello", "moon"])).numpy().tolist()
    [4, 1]
    >>> vocab.id_to_token(tf.constant([5, 99])).numpy().tolist()
    [b'world', b'<unk>']
    """

    def __init__(self, tokens: Sequence[str], name: str | None = None):
        super().__init__(name=name)
        tokens = list(tokens)
        _check_tokens(tokens, "Vocabulary")
        # A plain string, not a list: tf.Module's tracking leaves it alone.
        self._tokens_text = "\n".join(tokens)
        self._size = len(tokens)
        keys = tf.constant(tokens, dtype=tf.string)
        ids = tf.range(len(tokens), dtype=tf.int64)
        self._token_to_id_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, ids),
            default_value=tf.constant(UNK_ID, tf.int64),
        )
        self._id_to_token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(ids, keys),
            default_value=tf.constant(UNK_TOKEN, tf.string),
        )

    @property
    def tokens(self) -> list[str]:
        """The tokens in id order (a new list)."""
        return self._tokens_text.split("\n")

    @property
    def size(self) -> int:
        """Number of tokens, reserved ones included."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self._size})"

    def token_to_id(self, tokens):
        """Maps string tokens to int32 ids (unknown tokens -> `UNK_ID`).

        Args:
            tokens: `tf.string` Tensor or RaggedTensor, any shape.

        Returns:
            int32 Tensor or RaggedTensor of the same shape.

        Example:

        >>> vocab = Vocabulary(list(RESERVED_TOKENS) + ["a"])
        >>> vocab.token_to_id(tf.ragged.constant([["a"], ["b", "a"]])).to_list()
        [[4], [1, 4]]
        """
        return _map_values(
            lambda t: tf.cast(self._token_to_id_table.lookup(t), tf.int32), tokens
        )

    def id_to_token(self, ids):
        """Maps integer ids to string tokens (out of range -> `UNK_TOKEN`).

        Args:
            ids: integer Tensor or RaggedTensor, any shape and integer dtype.

        Returns:
            `tf.string` Tensor or RaggedTensor of the same shape.

        Example:

        >>> vocab = Vocabulary(list(RESERVED_TOKENS) + ["a"])
        >>> vocab.id_to_token(tf.constant([0, 4])).numpy().tolist()
        [b'<pad>', b'a']
        """
        return _map_values(
            lambda i: self._id_to_token_table.lookup(tf.cast(i, tf.int64)), ids
        )

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Writes the tokens, one a line in id order, as UTF-8.

        Args:
            path: file to write (parent folders are created).

        Returns:
            The path written, as a `pathlib.Path`.

        Example:

        >>> import tempfile
        >>> vocab = Vocabulary(list(RESERVED_TOKENS) + ["a"])
        >>> path = vocab.save(pathlib.Path(tempfile.mkdtemp()) / "vocab.txt")
        >>> Vocabulary.load(path).tokens == vocab.tokens
        True
        """
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(self._tokens_text + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, name: str | None = None) -> "Vocabulary":
        """Reads a vocabulary file written by `save` (one token a line).

        Args:
            path: the file.
            name: optional `tf.Module` name.

        Returns:
            A `Vocabulary` giving the same ids as the one saved.

        Raises:
            FileNotFoundError: the file does not exist.
            ValueError: the file is empty, has an empty line, a duplicate token, or
                does not start with `RESERVED_TOKENS`; the message names the file.
        """
        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"Vocabulary file not found: {path}")
        # newline="": a token never holds "\n", but could hold other characters
        # that universal-newline reading or str.splitlines() would treat as breaks.
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        text = text.removesuffix("\n")
        if not text:
            raise ValueError(f"{path}: the vocabulary file is empty")
        tokens = text.split("\n")
        for line_number, token in enumerate(tokens, start=1):
            if token == "":
                raise ValueError(f"{path}:{line_number}: empty line in vocabulary file")
        _check_tokens(tokens, str(path))
        return cls(tokens, name=name)


def _as_str(token) -> str:
    return token.decode("utf-8") if isinstance(token, bytes) else str(token)


def build_vocabulary(
    token_sequences: Iterable[Iterable[str | bytes]] | Mapping[str, int],
    *,
    max_size: int | None = None,
    min_count: int = 1,
) -> Vocabulary:
    """Builds a `Vocabulary` from tokenized training data by frequency.

    Tokens are ordered by decreasing count, ties broken by the token's code points,
    so the result depends only on the counts (not on the order of the data).
    Reserved tokens found in the data are not counted twice.

    Args:
        token_sequences: iterable of token sequences (`str` or UTF-8 `bytes`), or a
            mapping token -> count.
        max_size: largest vocabulary size, reserved tokens included; `None` keeps
            every token seen at least `min_count` times.
        min_count: tokens seen fewer times are left out (they become `<unk>`).

    Returns:
        A `Vocabulary`.

    Example:

    >>> build_vocabulary([["b", "a"], ["a"]]).tokens
    ['<pad>', '<unk>', '<s>', '</s>', 'a', 'b']
    """
    if max_size is not None and max_size < len(RESERVED_TOKENS):
        raise ValueError(
            f"max_size must be at least {len(RESERVED_TOKENS)} (the reserved tokens). "
            f"Received: max_size={max_size}"
        )
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1. Received: min_count={min_count}")
    if isinstance(token_sequences, Mapping):
        counts = collections.Counter(
            {_as_str(t): int(c) for t, c in token_sequences.items()}
        )
    else:
        counts = collections.Counter()
        for sequence in token_sequences:
            counts.update(sequence)
        counts = collections.Counter({_as_str(t): c for t, c in counts.items()})
    for token in RESERVED_TOKENS:
        counts.pop(token, None)
    ranked = sorted(
        (t for t, c in counts.items() if c >= min_count and t and "\n" not in t),
        key=lambda t: (-counts[t], t),
    )
    if max_size is not None:
        ranked = ranked[: max_size - len(RESERVED_TOKENS)]
    return Vocabulary(list(RESERVED_TOKENS) + ranked)


def learn_wordpiece_vocabulary(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    suffix_indicator: str = "##",
    lower_threshold: int = 1,
) -> Vocabulary:
    """Learns a WordPiece vocabulary from word counts with tensorflow_text's learner.

    Uses `tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`
    (the algorithm behind `bert_vocab_from_dataset`, runs offline). Every character
    seen in the words is in the result, both as a word start and as a suffix
    piece, so any word over the training alphabet can be tokenized.

    Args:
        word_counts: mapping word -> count (words as produced by the pre-tokenizer,
            no whitespace inside).
        vocab_size: target size, reserved tokens included (the learner aims near it).
        suffix_indicator: prefix marking a piece that continues a word.
        lower_threshold: smallest count a piece may have to be kept.

    Returns:
        A `Vocabulary` starting with `RESERVED_TOKENS`.

    Example:

    >>> vocab = learn_wordpiece_vocabulary({"lower": 5, "lowest": 3}, 40)
    >>> "##e" in vocab.tokens
    True
    """
    from tensorflow_text.tools.wordpiece_vocab import (
        wordpiece_tokenizer_learner_lib as learner,
    )

    items = sorted(
        ((_as_str(w), int(c)) for w, c in word_counts.items() if w), key=lambda x: x[0]
    )
    if not items:
        raise ValueError("learn_wordpiece_vocabulary: no words to learn from")
    learned = learner.learn(
        items,
        vocab_size,
        list(RESERVED_TOKENS),
        lower_thresh=lower_threshold,
        include_joiner_token=True,
        joiner=suffix_indicator,
    )
    tokens = list(RESERVED_TOKENS)
    seen = set(tokens)
    for token in learned:
        if token not in seen and token and "\n" not in token:
            seen.add(token)
            tokens.append(token)
    return Vocabulary(tokens)
