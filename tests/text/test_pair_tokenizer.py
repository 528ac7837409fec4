"""PairTokenizer: build, save to and load from a run directory."""

import json

import pytest
import tensorflow as tf

from keras_selfattn.run_directory.layout import (
    SENTENCEPIECE_MODEL_FILES,
    SOURCE_VOCAB_FILE,
    TARGET_VOCAB_FILE,
    TOKENIZER_CONFIG_FILE,
)
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.tokenizers import TokenizerConfig, build_tokenizer
from tests.text.german_sentences import GERMAN

PAIRS = [
    ("Le chat dort.", "The cat sleeps."),
    ("Le chien, 3 ans.", "The dog, 3 years."),
    ("Où est l'été ?", "Where is summer?"),
]


@pytest.mark.parametrize(
    "source_config, target_config",
    [
        (
            TokenizerConfig(kind="word", split_digits=True),
            TokenizerConfig.for_target(kind="char"),
        ),
        (
            TokenizerConfig(kind="word", ops="core"),
            TokenizerConfig.for_target(kind="char", ops="core"),
        ),
        (TokenizerConfig(kind="subword", max_vocab_size=80), None),
    ],
    ids=["word-char", "core", "subword"],
)
def test_save_load_gives_identical_ids(tmp_path, source_config, target_config):
    tokenizer = PairTokenizer.build(PAIRS, source_config, target_config)
    tokenizer.save(tmp_path / "run")
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert names == sorted(
        [SOURCE_VOCAB_FILE, TARGET_VOCAB_FILE, TOKENIZER_CONFIG_FILE]
    )
    loaded = PairTokenizer.load(tmp_path / "run")
    assert loaded.source.config == tokenizer.source.config
    assert loaded.target.config == (
        target_config or TokenizerConfig.for_target(kind="subword", max_vocab_size=80)
    )
    probe = tf.constant([s for s, _ in PAIRS] + ["Unseen words, 42!"])
    for side in ("source", "target"):
        before, after = getattr(tokenizer, side), getattr(loaded, side)
        assert after.vocabulary.tokens == before.vocabulary.tokens
        assert after.encode(probe).to_list() == before.encode(probe).to_list()


def test_json_describes_kind_options_and_sizes(tmp_path):
    target_config = TokenizerConfig.for_target(kind="char", ops="core")
    tokenizer = PairTokenizer.build(PAIRS, TokenizerConfig(kind="word"), target_config)
    tokenizer.save(tmp_path)
    config = json.loads((tmp_path / TOKENIZER_CONFIG_FILE).read_text())
    assert config["source"]["kind"] == "word"
    assert config["target"] == {
        **target_config.to_dict(),
        "vocab_file": TARGET_VOCAB_FILE,
        "vocab_size": tokenizer.target_vocab_size,
    }
    assert config["source"]["vocab_size"] == tokenizer.source_vocab_size
    assert config["version"] == 2


def test_target_must_give_text_back_as_written():
    """Lowercasing or NFKC on the target cannot be undone: a clear error."""
    source = TokenizerConfig(kind="word")  # lowercases, NFKC: fine for a source
    for target, named in [
        (TokenizerConfig(kind="char"), "lowercase=True and normalization='NFKC'"),
        (TokenizerConfig(kind="char", ops="core"), "lowercase=True"),
        (TokenizerConfig.for_target("word", normalization="NFKD"), "'NFKD'"),
    ]:
        with pytest.raises(ValueError, match=f"target tokenizer.*{named}.*Received"):
            PairTokenizer.build(PAIRS, source, target)
        with pytest.raises(ValueError, match="target tokenizer"):
            PairTokenizer(
                build_tokenizer(["a"], source), build_tokenizer(["a"], target)
            )
    nfc = TokenizerConfig.for_target("word", normalization="NFC")
    assert PairTokenizer.build(PAIRS, source, nfc).target.config == nfc
    # The default target: the source's kind and splits, cased, not normalized.
    default = PairTokenizer.build(PAIRS, source).target
    assert default.config == TokenizerConfig.for_target("word")
    assert (
        default.decode(default.encode(tf.constant(["The dog, 3 years."]))).numpy()
        == b"The dog, 3 years."
    )


def test_version_1_files_are_refused_with_a_clear_error(tmp_path):
    PairTokenizer.build(PAIRS).save(tmp_path)
    path = tmp_path / TOKENIZER_CONFIG_FILE
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "version": 1}))
    with pytest.raises(ValueError, match="format version 1.*Retrain"):
        PairTokenizer.load(tmp_path)
    path.write_text(json.dumps({**config, "version": 7}))
    with pytest.raises(ValueError, match="format version 7 is not supported"):
        PairTokenizer.load(tmp_path)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No tokenizer.json"):
        PairTokenizer.load(tmp_path)
    PairTokenizer.build(PAIRS).save(tmp_path)
    with open(tmp_path / TARGET_VOCAB_FILE, "a", encoding="utf-8") as f:
        f.write("extra\n")
    with pytest.raises(ValueError, match="records vocab_size"):
        PairTokenizer.load(tmp_path)
    (tmp_path / TARGET_VOCAB_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="Vocabulary file not found"):
        PairTokenizer.load(tmp_path)
    (tmp_path / TOKENIZER_CONFIG_FILE).write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a keras_selfattn.text.PairTokenizer"):
        PairTokenizer.load(tmp_path)


def test_pair_tokenizer_tables_travel_in_a_saved_model(tmp_path):
    tokenizer = PairTokenizer.build(PAIRS)
    module = tf.Module()
    module.tokenizer = tokenizer
    module.encode = tf.function(
        lambda t: tokenizer.source.encode(t).to_tensor(),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "m"))
    del module
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    probe = tf.constant(["le chat", "le loup"])
    assert (
        loaded.encode(probe).numpy().tolist()
        == tokenizer.source.encode(probe).to_tensor().numpy().tolist()
    )


def test_sentencepiece_sides_save_their_models(tmp_path):
    pairs = [(f"Le chat numéro {n} dort.", GERMAN[n % len(GERMAN)]) for n in range(60)]
    tokenizer = PairTokenizer.build(
        pairs,
        TokenizerConfig(kind="sentencepiece", max_vocab_size=120),
        TokenizerConfig.for_target(kind="sentencepiece", max_vocab_size=300),
    )
    run = tokenizer.save(tmp_path / "run")
    assert sorted(p.name for p in run.iterdir()) == sorted(
        [SOURCE_VOCAB_FILE, TARGET_VOCAB_FILE, TOKENIZER_CONFIG_FILE]
        + list(SENTENCEPIECE_MODEL_FILES.values())
    )
    config = json.loads((run / TOKENIZER_CONFIG_FILE).read_text("utf-8"))
    for side in ("source", "target"):
        assert config[side]["kind"] == "sentencepiece"
        assert config[side]["sentencepiece_model_file"] == f"{side}.spm.model"
        assert (run / f"{side}.spm.model").read_bytes() == getattr(
            tokenizer, side
        ).sentencepiece_model
    loaded = PairTokenizer.load(run)
    probe = tf.constant([s for s, _ in pairs[:3]] + GERMAN[:3] + ["Unbekannt: Ω"])
    for side in ("source", "target"):
        before, after = getattr(tokenizer, side), getattr(loaded, side)
        assert after.config == before.config
        assert after.vocabulary.tokens == before.vocabulary.tokens
        assert after.encode(probe).to_list() == before.encode(probe).to_list()
    assert [
        t.decode()
        for t in loaded.target.decode(
            loaded.target.encode(tf.constant(GERMAN[:3]))
        ).numpy()
    ] == GERMAN[:3]

    # A missing or broken model file is named.
    (run / "target.spm.model").write_bytes(b"broken")
    with pytest.raises(ValueError, match="target.spm.model: not a SentencePiece model"):
        PairTokenizer.load(run)
    (run / "target.spm.model").unlink()
    with pytest.raises(FileNotFoundError, match="SentencePiece model file not found"):
        PairTokenizer.load(run)
