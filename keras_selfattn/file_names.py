"""The names of the files the library saves into a folder it is given (no Keras,
no TensorFlow import).

`text.PairTokenizer.save` writes a pair of tokenizers as a record and one
vocabulary (and, for a "sentencepiece" side, one model) per side;
`text.shortlist.ShortlistTable.save` writes the shortlist table. A run directory
and a ``build-vocab`` folder hold them under these names: the run directory's
layout (`keras_selfattn.run_directory.layout`, which lists every name of a run
and reads no TensorFlow) takes them from here, as the library does.
"""

__all__ = [
    "SENTENCEPIECE_MODEL_FILES",
    "SHORTLIST_FILE",
    "SOURCE_VOCAB_FILE",
    "TARGET_VOCAB_FILE",
    "TOKENIZER_CONFIG_FILE",
]

TOKENIZER_CONFIG_FILE = "tokenizer.json"
SOURCE_VOCAB_FILE = "source_vocab.txt"
TARGET_VOCAB_FILE = "target_vocab.txt"
SENTENCEPIECE_MODEL_FILES = {"source": "source.spm.model", "target": "target.spm.model"}
SHORTLIST_FILE = "shortlist.npz"  # the vocabulary shortlist table (export --shortlist)
