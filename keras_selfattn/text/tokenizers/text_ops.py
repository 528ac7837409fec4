"""The text operations every tokenizer kind shares, all TensorFlow graph code.

`normalize_text` (case, Unicode form, whitespace), the word split that marks
glued tokens with `JOINER` (`split_words`) and its undoing (`glue_joined`), and
tensorflow_text imported on first use (the "core" ops never need it). See the
`keras_selfattn.text.tokenizers` docstring for the joiner marks and the ops.
"""

import tensorflow as tf

from keras_selfattn.text.tokenizers.config import TokenizerConfig

__all__ = ["JOINER", "glue_joined", "normalize_text", "split_words"]

# Marks a token glued to the previous one (OpenNMT's joiner, U+FFED).
JOINER = "\uffed"
# A Unicode noncharacter (reserved for internal use): marks, for a moment, each
# place where a split must be made inside the text.
_SPLIT = "\ufdd0"

# Unicode White_Space: RE2's \s is only [\t\n\f\r ], so name the rest explicitly.
_WHITESPACE = r"[\t\n\v\f\r\x{85}\p{Z}]+"
_PUNCTUATION = r"\p{P}\p{S}"
_DIGITS = r"\p{Nd}"


def tf_text():
    """Imports tensorflow_text on first use (the "core" option never needs it)."""
    import tensorflow_text

    return tensorflow_text


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
        text_ops = tf_text()
        if config.lowercase:
            texts = text_ops.case_fold_utf8(texts)  # folds case and applies NFKC
        if config.normalization != "none" and not (
            config.lowercase and config.normalization == "NFKC"
        ):
            texts = text_ops.normalize_utf8(texts, config.normalization)
    elif config.lowercase:
        texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
    texts = tf.strings.regex_replace(texts, _SPLIT, "")  # reserved for `split_words`
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


def split_words(normalized, config: TokenizerConfig):
    """Normalized strings -> word tokens, each glued one starting with `JOINER`.

    The split of the "word" kind, and the words that "subword" cuts into
    pieces: punctuation and symbols (and digits, with ``split_digits``) are
    tokens of their own.

    Args:
        normalized: `tf.string` Tensor of rank 0 or 1, `normalize_text`'s output.
        config: a `TokenizerConfig` (``ops`` and ``split_digits`` are read).

    Returns:
        A `tf.RaggedTensor` (batch, None) of `tf.string` for rank 1; a 1-D
        `tf.string` Tensor for a scalar.
    """
    marked = _mark_splits(normalized, config)
    if config.ops == "tensorflow_text":
        return tf_text().WhitespaceTokenizer().tokenize(marked)
    return tf.strings.split(marked)


def glue_joined(text):
    """Deletes the space before each `JOINER` mark together with the mark.

    A `JOINER` followed by a space or the end is a literal one, and stays.

    Args:
        text: `tf.string` Tensor, tokens joined with one space.

    Returns:
        `tf.string` Tensor of the same shape.
    """
    return tf.strings.regex_replace(text, f" ?{JOINER}([^ ])", r"\1")
