"""What each tokenizer kind gives on a few sentences: the reference of
`test_tokenizer_kinds.py`, and the code that wrote ``tokenizer_reference.json``.

``tokenizer_reference.json`` was written by this module when one
``Tokenizer`` class branched on the kind, before the tokenizers became one class
per kind (``keras_selfattn/text/tokenizers/``)::

    python -m tests.text.tokenizer_reference > tests/text/tokenizer_reference.json

The test runs `describe` on today's code and compares: the vocabularies learned,
the ids, tokens and texts of each kind, and the errors of bad input. The
SentencePiece model is learned once with one thread (reproducible) and its bytes
are kept in the JSON, so the comparison does not depend on the learner's threads.
"""

import base64
import json

import tensorflow as tf

from keras_selfattn.text import sentencepiece_model as sentencepiece_lib
from keras_selfattn.text.tokenizers import (
    Tokenizer,
    TokenizerConfig,
    build_tokenizer,
    normalize_text,
    split_text,
)
from keras_selfattn.text.vocab import build_vocabulary

TRAIN = [
    "Hello,  World! It's 5 o'clock.",
    "Va-t'en\u00a0!  Où est l'été ?",
    "Straße \u2003 numéro 42\tà «Paris»",
    "ÉTÉ 2024-03-15 ($3.50)",
    "The lower lowest newer newest wider widest.",
]
PROBES = [
    "Hello, world!",
    "L'été 2024 (où?) \uffed x",
    "Straße ＡＢ\ufb01 unseen-words 漢字",
    "",
    "  spaces\t\tand\nnewlines  ",
]
CONFIGS = {
    "word": {"kind": "word"},
    "word-core-digits": {"kind": "word", "ops": "core", "split_digits": True},
    "word-target": {"kind": "word", "lowercase": False, "normalization": "none"},
    "char": {"kind": "char"},
    "char-core": {"kind": "char", "ops": "core"},
    "subword": {"kind": "subword", "max_vocab_size": 80},
    "subword-digits-nfc": {
        "kind": "subword",
        "split_digits": True,
        "normalization": "NFC",
        "lowercase": False,
        "max_vocab_size": 60,
        "min_count": 2,
    },
    "word-limited": {"kind": "word", "max_vocab_size": 12, "min_count": 2},
    "sentencepiece": {"kind": "sentencepiece", "max_vocab_size": 60},
    "sentencepiece-target": {
        "kind": "sentencepiece",
        "lowercase": False,
        "normalization": "none",
        "split_digits": True,
        "max_vocab_size": 60,
    },
}


def _bad_inputs(vocabulary, model):
    """Calls that must fail, each as (name, zero-argument callable)."""
    return [
        ("kind", lambda: TokenizerConfig(kind="bpe")),
        ("ops", lambda: TokenizerConfig(ops="icu")),
        (
            "core-normalization",
            lambda: TokenizerConfig(ops="core", normalization="NFC"),
        ),
        ("core-subword", lambda: TokenizerConfig(kind="subword", ops="core")),
        (
            "core-sentencepiece",
            lambda: TokenizerConfig(kind="sentencepiece", ops="core"),
        ),
        ("normalization", lambda: TokenizerConfig(normalization="NFX")),
        ("model-not-sp", lambda: TokenizerConfig(sentencepiece_model="a.model")),
        ("max_vocab_size", lambda: TokenizerConfig(max_vocab_size=3)),
        ("min_count", lambda: TokenizerConfig(min_count=0)),
        ("config-type", lambda: Tokenizer({"kind": "word"}, vocabulary)),
        ("vocabulary-type", lambda: Tokenizer(TokenizerConfig(), ["a"])),
        (
            "sp-without-model",
            lambda: Tokenizer(TokenizerConfig(kind="sentencepiece"), None),
        ),
        (
            "model-without-sp",
            lambda: Tokenizer(TokenizerConfig(), vocabulary, sentencepiece_model=model),
        ),
        (
            "sp-vocabulary-mismatch",
            lambda: Tokenizer(
                TokenizerConfig(kind="sentencepiece"),
                vocabulary,
                sentencepiece_model=model,
            ),
        ),
        ("build-one-string", lambda: build_tokenizer("hello", TokenizerConfig())),
        ("build-no-text", lambda: build_tokenizer([], TokenizerConfig(kind="subword"))),
    ]


def _sentencepiece_model(config, vocab_size):
    sentences = [
        t.decode("utf-8") for t in normalize_text(tf.constant(TRAIN), config).numpy()
    ]
    return sentencepiece_lib.train_sentencepiece_model(
        sentences, vocab_size, split_digits=config.split_digits, num_threads=1
    )


def _outputs(tokenizer):
    probes = tf.constant(PROBES)
    ids = tokenizer.encode(probes)
    tokens = tokenizer.tokenize(probes)
    padded = tf.concat(
        [tf.fill([len(PROBES), 1], 2), ids.to_tensor(), tf.fill([len(PROBES), 2], 3)],
        axis=1,
    )
    return {
        "vocabulary": tokenizer.vocabulary.tokens,
        "ids": ids.to_list(),
        "scalar_ids": [
            tokenizer.encode(tf.constant(p)).numpy().tolist() for p in PROBES
        ],
        "tokens": [[t.decode("utf-8") for t in row] for row in tokens.to_list()],
        "normalized": _strings(tokenizer.normalize(probes)),
        "decoded": _strings(tokenizer.decode(ids)),
        "decoded_padded": _strings(tokenizer.decode(padded)),
        "scalar_decoded": tokenizer.decode(ids[0]).numpy().decode("utf-8"),
        "detokenized": _strings(tokenizer.detokenize(tokens)),
        "split": [
            [t.decode("utf-8") for t in row]
            for row in split_text(probes, tokenizer.config).to_list()
        ],
    }


def _strings(tensor):
    return [t.decode("utf-8") for t in tensor.numpy().tolist()]


def describe(models=None):
    """The outputs of every config in `CONFIGS`, and the errors of bad input.

    Args:
        models: config name -> SentencePiece model bytes to use (None: learn them
            with one thread).

    Returns:
        A JSON-ready dict; its ``"models"`` are the SentencePiece models used,
        base64.
    """
    models = dict(models or {})
    report = {"kinds": {}, "models": {}, "errors": {}}
    for name, fields in CONFIGS.items():
        config = TokenizerConfig(**fields)
        if config.kind == "sentencepiece":
            if name not in models:
                models[name] = _sentencepiece_model(config, config.max_vocab_size)
            tokenizer = Tokenizer(
                config,
                None,
                name=name.replace("-", "_"),
                sentencepiece_model=models[name],
            )
            report["models"][name] = base64.b64encode(models[name]).decode("ascii")
        else:
            tokenizer = build_tokenizer(TRAIN, config, name=name.replace("-", "_"))
        report["kinds"][name] = _outputs(tokenizer)
    vocabulary = build_vocabulary([["a", "b"]])
    for name, call in _bad_inputs(vocabulary, models["sentencepiece"]):
        try:
            call()
        except (TypeError, ValueError) as error:
            report["errors"][name] = [type(error).__name__, str(error)]
        else:
            report["errors"][name] = None
    return report


if __name__ == "__main__":
    print(json.dumps(describe(), indent=1, ensure_ascii=False))
