"""One class per tokenizer kind: the same ids, tokens, texts and errors as the one
class that branched on the kind (the reference written by `tokenizer_reference`)."""

import base64
import json
import pathlib

import pytest
import tensorflow as tf

from keras_selfattn.choices import TOKENIZER_KINDS
from keras_selfattn.text.tokenizers import (
    CharTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    TokenizerConfig,
    WordPieceTokenizer,
    WordTokenizer,
    build_tokenizer,
    tokenizer_class,
)
from keras_selfattn.text.vocab import Vocabulary
from tests.text import tokenizer_reference

REFERENCE = json.loads(
    (pathlib.Path(__file__).with_name("tokenizer_reference.json")).read_text("utf-8")
)
MODELS = {name: base64.b64decode(m) for name, m in REFERENCE["models"].items()}
CLASSES = {
    "word": WordTokenizer,
    "char": CharTokenizer,
    "subword": WordPieceTokenizer,
    "sentencepiece": SentencePieceTokenizer,
}


@pytest.fixture(scope="module")
def described():
    return tokenizer_reference.describe(MODELS)


@pytest.mark.parametrize("name", list(tokenizer_reference.CONFIGS))
def test_each_kind_gives_what_the_one_class_gave(described, name):
    assert described["kinds"][name] == REFERENCE["kinds"][name]


def test_bad_input_gives_the_same_errors(described):
    assert described["errors"] == REFERENCE["errors"]
    assert all(REFERENCE["errors"].values())  # every call in the table failed


@pytest.mark.parametrize("name", list(tokenizer_reference.CONFIGS))
def test_the_kind_class_itself_gives_the_same_ids(name):
    """``WordTokenizer(config, vocabulary)``... gives the reference ids too."""
    config = TokenizerConfig(**tokenizer_reference.CONFIGS[name])
    reference = REFERENCE["kinds"][name]
    cls = CLASSES[config.kind]
    if config.kind == "sentencepiece":
        tokenizer = cls(config, None, sentencepiece_model=MODELS[name])
    else:
        tokenizer = cls(config, Vocabulary(reference["vocabulary"]))
    assert type(tokenizer) is cls and isinstance(tokenizer, Tokenizer)
    probes = tf.constant(tokenizer_reference.PROBES)
    assert tokenizer.encode(probes).to_list() == reference["ids"]
    assert tokenizer.vocabulary.tokens == reference["vocabulary"]


def test_the_factory_picks_the_class_of_the_kind():
    assert {kind: tokenizer_class(kind) for kind in TOKENIZER_KINDS} == CLASSES
    for kind, cls in CLASSES.items():
        assert cls.kind == kind
    tokenizer = build_tokenizer(["a b"], TokenizerConfig(kind="char"))
    assert type(tokenizer) is CharTokenizer
    assert type(Tokenizer(tokenizer.config, tokenizer.vocabulary)) is CharTokenizer
    built = WordTokenizer.build(["a b"])  # a default config of the class's kind
    assert type(built) is WordTokenizer and built.config == TokenizerConfig()
    assert type(Tokenizer.build(["a b"])) is WordTokenizer


def test_a_kind_class_refuses_another_kind():
    tokenizer = build_tokenizer(["a b"], TokenizerConfig(kind="char"))
    with pytest.raises(ValueError, match=r"WordTokenizer needs a config of kind"):
        WordTokenizer(tokenizer.config, tokenizer.vocabulary)
    with pytest.raises(ValueError, match=r"CharTokenizer.build needs a config of"):
        CharTokenizer.build(["a b"], TokenizerConfig(kind="word"))
    with pytest.raises(ValueError, match=r"kind must be one of .* kind='bpe'"):
        tokenizer_class("bpe")
    with pytest.raises(TypeError, match=r"config must be a TokenizerConfig"):
        WordTokenizer.build(["a b"], {"kind": "word"})
