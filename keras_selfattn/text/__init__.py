"""keras_selfattn.text: from sentence pairs to token ids and back, in TensorFlow graphs.

Everything runs offline. Most modules import TensorFlow (the layers in
`keras_selfattn.layers` do not); tensorflow_text is imported on first use by the
options that need it.

Modules:

- `corpus`: TSV pair files (``source<TAB>target``, further columns ignored):
  `read_pairs` (errors name file and line), `write_pairs`, `split_pairs`
  (deterministic, grouped by source), `filter_pairs_by_length`.
- `dates`: the bundled corpus, 30,000 dates written out by CLDR in eight languages
  -> ``YYYY-MM-DD`` (`load_bundled_dates`, `generate_date_pairs`, and the
  recommended `DATES_SOURCE_CONFIG` / `DATES_TARGET_CONFIG`).
- `vocab`: `Vocabulary` (a `tf.Module` with `tf.lookup.StaticHashTable`s), the
  reserved ids ``PAD_ID=0 "<pad>"``, ``UNK_ID=1 "<unk>"``, ``START_ID=2 "<s>"``,
  ``END_ID=3 "</s>"``, one-token-a-line files, `build_vocabulary`,
  `learn_wordpiece_vocabulary`.
- `tokenizers`: `TokenizerConfig` (kind "word" / "char" / "subword" /
  "sentencepiece"; ops "tensorflow_text" / "core"), `Tokenizer` (normalize,
  tokenize, encode, decode, all graph code; one class per kind: `WordTokenizer`,
  `CharTokenizer`, `WordPieceTokenizer`, `SentencePieceTokenizer`),
  `build_tokenizer`. Its docstring has the table of which option uses which ops:
  ``ops="core"`` gives graphs of core TensorFlow ops only, which serve on any TF
  Serving build.
- `pair_tokenizer`: `PairTokenizer`, source + target tokenizers saved to / loaded
  from a run directory (``source_vocab.txt``, ``target_vocab.txt``,
  ``tokenizer.json``).
- `dataset`: `make_dataset`, pairs -> ``({"source", "target_in"}, target_out)``
  int32 batches for `model.fit` (start/end ids, padding, buckets, static shapes),
  composed of the stages the streamed training input uses too: `fits_limits`
  (the length rule), `to_example` (start/end ids), `buckets.batch_in_buckets`
  (`buckets`: length buckets, `bucket_shapes`).

Example, the whole path on the bundled corpus::

    from keras_selfattn import text

    pairs = text.load_bundled_dates()
    train, validation, test = text.split_pairs(pairs, (0.8, 0.1, 0.1), seed=0)
    tokenizer = text.PairTokenizer.build(
        train, text.DATES_SOURCE_CONFIG, text.DATES_TARGET_CONFIG
    )
    tokenizer.save("runs/demo")                      # vocabularies + tokenizer.json
    train_ds = text.make_dataset(train, tokenizer, batch_size=64, seed=0)
    valid_ds = text.make_dataset(validation, tokenizer, batch_size=256, shuffle=False)
    # make_dataset shuffles itself, so:
    # model.fit(train_ds, validation_data=valid_ds, shuffle=False, ...)
    # greedy ids (B, S) -> strings: tokenizer.target.decode(ids)
"""

from keras_selfattn.text.corpus import (
    PairSplits,
    filter_pairs_by_length,
    read_pairs,
    split_pairs,
    write_pairs,
)
from keras_selfattn.text.dataset import encode_pairs, make_dataset
from keras_selfattn.text.dates import (
    DATES_SOURCE_CONFIG,
    DATES_TARGET_CONFIG,
    bundled_dates_path,
    generate_date_pairs,
    load_bundled_dates,
    load_pairs,
)
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.tokenizers import (
    Tokenizer,
    TokenizerConfig,
    build_tokenizer,
    normalize_text,
    split_text,
)
from keras_selfattn.text.vocab import (
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
    Vocabulary,
    build_vocabulary,
    learn_wordpiece_vocabulary,
)

__all__ = [
    "DATES_SOURCE_CONFIG",
    "DATES_TARGET_CONFIG",
    "END_ID",
    "END_TOKEN",
    "PAD_ID",
    "PAD_TOKEN",
    "RESERVED_TOKENS",
    "START_ID",
    "START_TOKEN",
    "UNK_ID",
    "UNK_TOKEN",
    "PairSplits",
    "PairTokenizer",
    "Tokenizer",
    "TokenizerConfig",
    "Vocabulary",
    "build_tokenizer",
    "build_vocabulary",
    "bundled_dates_path",
    "encode_pairs",
    "filter_pairs_by_length",
    "generate_date_pairs",
    "learn_wordpiece_vocabulary",
    "load_bundled_dates",
    "load_pairs",
    "make_dataset",
    "normalize_text",
    "read_pairs",
    "split_pairs",
    "split_text",
    "write_pairs",
]
