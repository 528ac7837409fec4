"""Text normalization and tokenization as TensorFlow graph code, one class per kind.

Everything here runs inside `tf.data` (`Dataset.map`), inside a `tf.function` and in
a SavedModel: no Python per string. A `Tokenizer` is a `tf.Module` that owns its
`Vocabulary` tables (and, for subwords, its `FastWordpieceTokenizer`), so exporting
code can `track()` it.

Modules (keras-hub's layout: a class per kind, its learning beside it):

- `config`: `TokenizerConfig` (no TensorFlow); the kinds and ops come from
  `keras_selfattn.choices`.
- `text_ops`: what every kind shares in the graph: `normalize_text`, the word
  split with joiner marks (`JOINER`) and its undoing.
- `base`: `Tokenizer`, the interface (normalize, tokenize, encode, detokenize,
  decode; the vocabulary's tables, the reserved ids in `decode`), `split_text`;
  ``Tokenizer(config, ...)`` makes the class of ``config.kind``.
- `word_tokenizer` (`WordTokenizer`), `char_tokenizer` (`CharTokenizer`),
  `wordpiece_tokenizer` (`WordPieceTokenizer`), `sentencepiece_tokenizer`
  (`SentencePieceTokenizer`, its trainer is `keras_selfattn.text.sentencepiece_model`).
- `learning`: the training texts read for the learners (`count_tokens`).
- `factory`: `build_tokenizer` (every kind registered).

Kinds (`TokenizerConfig.kind`, `keras_selfattn.choices.TOKENIZER_KINDS`):

- ``"word"`` (`WordTokenizer`): words and punctuation. Every punctuation or
  symbol character (Unicode categories P* and S*) is its own token; with
  ``split_digits=True`` every decimal digit is too.
- ``"char"`` (`CharTokenizer`): Unicode characters (code points), the space
  included. Detokenization joins with "".
- ``"subword"`` (`WordPieceTokenizer`): WordPiece pieces of the words above,
  suffix pieces marked ``##``; the vocabulary is learned from the training data.
- ``"sentencepiece"`` (`SentencePieceTokenizer`): the pieces of a SentencePiece
  model (tensorflow_text's `SentencepieceTokenizer`, in-graph both ways) applied
  to the normalized text; the model is learned from the training data
  (`sentencepiece_model` module) or is the user's own ``.model``
  (``TokenizerConfig.sentencepiece_model``). Its pieces, in id order, are the
  vocabulary: ids 0-3 are the reserved tokens. No joiner marks: SentencePiece
  writes spaces as "\u2581" inside its pieces.

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

from keras_selfattn.text.tokenizers.base import Tokenizer, split_text
from keras_selfattn.text.tokenizers.config import KINDS, OPS, TokenizerConfig
from keras_selfattn.text.tokenizers.factory import (
    CharTokenizer,
    SentencePieceTokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    build_tokenizer,
    tokenizer_class,
)
from keras_selfattn.text.tokenizers.learning import count_tokens
from keras_selfattn.text.tokenizers.text_ops import JOINER, normalize_text
from keras_selfattn.text.tokenizers.wordpiece_tokenizer import (
    DEFAULT_SUBWORD_VOCAB_SIZE,
    SUFFIX_INDICATOR,
)

__all__ = [
    "DEFAULT_SUBWORD_VOCAB_SIZE",
    "JOINER",
    "KINDS",
    "OPS",
    "SUFFIX_INDICATOR",
    "CharTokenizer",
    "SentencePieceTokenizer",
    "Tokenizer",
    "TokenizerConfig",
    "WordPieceTokenizer",
    "WordTokenizer",
    "build_tokenizer",
    "count_tokens",
    "normalize_text",
    "split_text",
    "tokenizer_class",
]
