"""Tokenizers: normalization, round trips per kind and ops, graphs and SavedModels."""

import json
import os
import subprocess
import sys

import keras
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_selfattn.text.tokenizers import (
    JOINER,
    Tokenizer,
    TokenizerConfig,
    build_tokenizer,
    normalize_text,
    split_text,
)
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID, UNK_ID, build_vocabulary
from tests.text.german_sentences import GERMAN

TEXTS = [
    "Hello,  World! It's 5 o'clock.",
    "Va-t'en\u00a0!  Où est l'été ?",
    "Straße \u2003 numéro 42\tà «Paris»",
    "ÉTÉ 2024-03-15 ($3.50)",
]

CONFIGS = {
    "word-tf_text": TokenizerConfig(kind="word"),
    "word-core": TokenizerConfig(kind="word", ops="core"),
    "word-digits": TokenizerConfig(kind="word", split_digits=True),
    "char-tf_text": TokenizerConfig(kind="char"),
    "char-core": TokenizerConfig(kind="char", ops="core"),
    "char-cased": TokenizerConfig(kind="char", lowercase=False),
    "subword": TokenizerConfig(kind="subword", max_vocab_size=200),
}


def _strings(tensor):
    return [t.decode("utf-8") for t in tensor.numpy().tolist()]


@pytest.fixture(scope="module")
def tokenizers():
    return {name: build_tokenizer(TEXTS, config) for name, config in CONFIGS.items()}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_round_trip_gives_normalized_text(tokenizers, name):
    tokenizer = tokenizers[name]
    texts = tf.constant(TEXTS)
    ids = tokenizer.encode(texts)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert UNK_ID not in ids.flat_values.numpy().tolist()
    assert _strings(tokenizer.decode(ids)) == _strings(tokenizer.normalize(texts))
    assert _strings(tokenizer.detokenize(tokenizer.tokenize(texts))) == _strings(
        tokenizer.normalize(texts)
    )
    # Scalars in, scalars out.
    single = tokenizer.encode(tf.constant(TEXTS[0]))
    assert single.shape.rank == 1
    assert (
        tokenizer.decode(single).numpy().decode()
        == _strings(tokenizer.normalize(texts))[0]
    )


def test_normalization_details(tokenizers):
    word = _strings(tokenizers["word-tf_text"].normalize(tf.constant(TEXTS)))
    assert word[0] == "hello, world! it's 5 o'clock."
    assert word[1] == "va-t'en ! où est l'été ?"  # no-break space -> space
    assert word[2] == "strasse numéro 42 à «paris»"  # case folding: ß -> ss
    assert word[3] == "été 2024-03-15 ($3.50)"
    core = _strings(tokenizers["word-core"].normalize(tf.constant(TEXTS)))
    assert core[2] == "straße numéro 42 à «paris»"  # tf.strings.lower keeps ß
    assert _strings(tokenizers["word-digits"].normalize(tf.constant(["ab12"]))) == [
        "ab12"  # the splits live in the tokens (joiner marks), not in the text
    ]
    chars = _strings(tokenizers["char-tf_text"].normalize(tf.constant(TEXTS)))
    assert chars[1] == "va-t'en ! où est l'été ?"
    cased = _strings(tokenizers["char-cased"].normalize(tf.constant(["ＡＢ\ufb01"])))
    assert cased == ["ABfi"]  # NFKC: full-width letters and the ligature
    target = TokenizerConfig.for_target("char")
    assert _strings(normalize_text(tf.constant(["ＡＢ\ufb01  É"]), target)) == [
        "ＡＢ\ufb01 É"  # a target keeps case and Unicode form; only spaces change
    ]


def test_word_tokens(tokenizers):
    tokens = tokenizers["word-tf_text"].tokenize(tf.constant(["l'été, 2024!"]))
    j = JOINER.encode()
    assert tokens.to_list() == [
        [b"l", j + b"'", j + "été".encode(), j + b",", b"2024", j + b"!"]
    ]
    chars = tokenizers["char-core"].tokenize(tf.constant(["a b"]))
    assert chars.to_list() == [[b"a", b" ", b"b"]]
    digits = split_text(tf.constant(["342", "3 4 2", "(3)"]), CONFIGS["word-digits"])
    assert digits.to_list() == [
        [b"3", j + b"4", j + b"2"],
        [b"3", b"4", b"2"],
        [b"(", j + b"3", j + b")"],
    ]


def test_core_and_tensorflow_text_agree_on_ascii(tokenizers):
    texts = tf.constant(["Hello,  World!\tIt's 5 o'clock.", "  A-b  "])
    for kind in ("word", "char"):
        a = split_text(texts, TokenizerConfig(kind=kind))
        b = split_text(texts, TokenizerConfig(kind=kind, ops="core"))
        assert a.to_list() == b.to_list()


def test_unknown_words_become_unk(tokenizers):
    tokenizer = tokenizers["word-tf_text"]
    ids = tokenizer.encode(tf.constant(["hello zebra"])).to_list()[0]
    assert ids[1] == UNK_ID and ids[0] != UNK_ID
    assert _strings(tokenizer.decode(tf.ragged.constant([ids]))) == ["hello <unk>"]
    subword = tokenizers["subword"]
    assert UNK_ID in subword.encode(tf.constant(["hello 漢字"])).to_list()[0]


def test_decode_stops_at_end_and_drops_padding_and_start(tokenizers):
    tokenizer = tokenizers["char-core"]
    a, b = tokenizer.encode(tf.constant(["ae"])).to_list()[0]
    ids = tf.constant(
        [[START_ID, a, b, END_ID, a, a], [b, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]
    )
    assert UNK_ID not in (a, b)
    assert _strings(tokenizer.decode(ids)) == ["ae", "e"]
    assert tokenizer.decode(tf.constant([a, END_ID, b])).numpy() == b"a"


def test_subword_splits_words_into_pieces():
    tokenizer = build_tokenizer(
        ["lower lowest newer newest wider widest"] * 3,
        TokenizerConfig(kind="subword", max_vocab_size=30),
    )
    pieces = tokenizer.tokenize(tf.constant(["slowest"])).to_list()[0]
    assert len(pieces) > 1 and all(p.startswith(b"##") for p in pieces[1:])
    assert tokenizer.decode(tokenizer.encode(tf.constant(["slowest"]))).numpy() == [
        b"slowest"
    ]


def test_config_validation_and_json_round_trip():
    assert TokenizerConfig().normalization == "NFKC"
    assert TokenizerConfig(ops="core").normalization == "none"
    with pytest.raises(ValueError, match="kind must be one of"):
        TokenizerConfig(kind="bpe")
    with pytest.raises(ValueError, match="ops must be one of"):
        TokenizerConfig(ops="icu")
    with pytest.raises(ValueError, match="Unicode normalization needs tensorflow_text"):
        TokenizerConfig(ops="core", normalization="NFKC")
    with pytest.raises(ValueError, match="kind='subword' needs tensorflow_text"):
        TokenizerConfig(kind="subword", ops="core")
    with pytest.raises(ValueError, match="normalization must be one of"):
        TokenizerConfig(normalization="NFX")
    config = TokenizerConfig(kind="char", split_digits=True, max_vocab_size=99)
    assert TokenizerConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="Unknown TokenizerConfig keys"):
        TokenizerConfig.from_dict({"kind": "word", "colour": "red"})


def test_build_tokenizer_accepts_a_dataset():
    dataset = tf.data.Dataset.from_tensor_slices(["a b", "b c"])
    tokenizer = build_tokenizer(dataset, TokenizerConfig(max_vocab_size=6))
    assert tokenizer.vocabulary.tokens[4:] == ["b", "a"]


def test_tokenizer_runs_in_tf_function_and_tf_data(tokenizers):
    tokenizer = tokenizers["word-tf_text"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(texts):
        return tokenizer.decode(tokenizer.encode(texts).to_tensor())

    assert _strings(round_trip(tf.constant(TEXTS))) == _strings(
        tokenizer.normalize(tf.constant(TEXTS))
    )
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(2).map(tokenizer.encode)
    assert [r.to_list() for r in dataset] == [
        tokenizer.encode(tf.constant(TEXTS[:2])).to_list(),
        tokenizer.encode(tf.constant(TEXTS[2:])).to_list(),
    ]


def _run_in_a_fresh_process(script):
    """Runs ``script`` in a new Python (nothing of this process imported); its
    exit status must be 0."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _graph_op_types(concrete_function):
    graph_def = concrete_function.graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


@pytest.mark.parametrize("name", list(CONFIGS))
def test_which_ops_each_option_uses(tokenizers, name):
    """ops='core' graphs hold only ops in tf.raw_ops (tensorflow_text ops are not)."""
    tokenizer = tokenizers[name]
    encode = tf.function(tokenizer.encode).get_concrete_function(
        tf.TensorSpec([None], tf.string)
    )
    decode = tf.function(tokenizer.decode).get_concrete_function(
        tf.TensorSpec([None, None], tf.int32)
    )
    assert not [op for op in _graph_op_types(decode) if not hasattr(tf.raw_ops, op)]
    non_core = sorted(
        op for op in _graph_op_types(encode) if not hasattr(tf.raw_ops, op)
    )
    if tokenizer.config.ops == "core":
        assert non_core == []
    else:
        assert non_core  # e.g. CaseFoldUTF8, TFText>WhitespaceTokenizeWithOffsetsV2


def _export_core_tokenizer(export_dir):
    """A core tokenizer's SavedModel, exported as serving/ does (keras'
    ExportArchive, tables tracked explicitly)."""
    tokenizer = build_tokenizer(TEXTS, TokenizerConfig(kind="word", ops="core"))

    def serve(text):
        ids = tokenizer.encode(text).to_tensor()
        return {"ids": ids, "text": tokenizer.decode(ids)}

    archive = keras.export.ExportArchive()
    archive.track(tokenizer)
    archive.add_endpoint(
        "serving_default",
        serve,
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
    )
    archive.write_out(export_dir, verbose=False)


@pytest.mark.slow
def test_core_tokenizer_serves_under_session_loader_without_tensorflow_text(
    served_in_a_fresh_process,
):
    """A core tokenizer's SavedModel loads where tensorflow_text is not imported
    (the fresh process asserts it is not, before it imports it for the
    SentencePiece models)."""
    report = served_in_a_fresh_process["report"]
    assert report["core"] == ["hello, world!", "hello <unk>"]


def test_subword_tokenizer_survives_saved_model(tmp_path, tokenizers):
    tokenizer = tokenizers["subword"]
    module = tf.Module()
    module.tokenizer = tokenizer
    module.encode = tf.function(
        tokenizer.encode, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    texts = tf.constant(TEXTS)
    assert loaded.encode(texts).to_list() == tokenizer.encode(texts).to_list()


def test_tokenizer_type_checks():
    vocab = build_vocabulary([["a"]])
    with pytest.raises(TypeError, match="config must be a TokenizerConfig"):
        Tokenizer({"kind": "word"}, vocab)
    with pytest.raises(TypeError, match="vocabulary must be a Vocabulary"):
        Tokenizer(TokenizerConfig(), ["a"])


# Letters, marks, digits, punctuation, symbols and assorted whitespace.
_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(
            whitelist_categories=(
                "Lu",
                "Ll",
                "Lt",
                "Lo",
                "Mn",
                "Nd",
                "No",
                "P",
                "S",
                "Zs",
            )
        ),
        st.sampled_from(list(" \t\n\u00a0\u2028\ufb01ß#" + JOINER)),
    ),
    max_size=30,
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(texts=st.lists(_TEXT, min_size=1, max_size=4))
@pytest.mark.parametrize(
    "config",
    [
        TokenizerConfig(kind="word"),
        TokenizerConfig(kind="word", ops="core", split_digits=True),
        TokenizerConfig(kind="char"),
        TokenizerConfig(kind="char", ops="core"),
        TokenizerConfig.for_target("word", split_digits=True),
        TokenizerConfig.for_target("word", ops="core"),
    ],
    ids=["word", "word-core-digits", "char", "char-core", "target", "target-core"],
)
def test_round_trip_property(config, texts):
    """decode(encode(t)) == normalize(t) given a vocabulary covering t.

    Also: no empty tokens, no whitespace in word tokens, normalize is idempotent.
    """
    strings = tf.constant(texts)
    tokens = split_text(strings, config)
    for token in tokens.flat_values.numpy().tolist():
        assert token  # never an empty token
        if config.kind == "word":
            assert not any(c.isspace() for c in token.decode("utf-8"))
    vocabulary = build_vocabulary(
        [[t.decode("utf-8") for t in tokens.flat_values.numpy().tolist()]]
    )
    tokenizer = Tokenizer(config, vocabulary)
    normalized = tokenizer.normalize(strings)
    assert _strings(tokenizer.decode(tokenizer.encode(strings))) == _strings(normalized)
    if not config.lowercase and config.normalization == "none":
        assert _strings(normalized) == [" ".join(t.split()) for t in texts]
    assert _strings(normalize_text(normalized, config)) == _strings(normalized)


# SentencePiece ---------------------------------------------------------------


@pytest.fixture(scope="module")
def german_sentencepiece():
    """A target-side SentencePiece tokenizer learned from German sentences."""
    return build_tokenizer(
        GERMAN, TokenizerConfig.for_target("sentencepiece", max_vocab_size=300)
    )


def test_sentencepiece_round_trip_on_german(german_sentencepiece):
    tokenizer = german_sentencepiece
    texts = tf.constant(GERMAN)
    ids = tokenizer.encode(texts)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert UNK_ID not in ids.flat_values.numpy().tolist()
    # The target config gives the text back as written.
    assert _strings(tokenizer.decode(ids)) == GERMAN
    assert _strings(tokenizer.detokenize(tokenizer.tokenize(texts))) == GERMAN
    # Unseen sentences over the same characters, whitespace runs collapsed.
    unseen = ["Der  Hund fährt\tBoot über den Fluss.", "Ein Mädchen liest 42 Bücher."]
    assert _strings(tokenizer.decode(tokenizer.encode(tf.constant(unseen)))) == [
        "Der Hund fährt Boot über den Fluss.",
        "Ein Mädchen liest 42 Bücher.",
    ]
    single = tokenizer.encode(tf.constant(GERMAN[0]))
    assert single.shape.rank == 1
    assert tokenizer.decode(single).numpy().decode() == GERMAN[0]


def test_sentencepiece_reserved_ids(german_sentencepiece):
    tokenizer = german_sentencepiece
    vocabulary = tokenizer.vocabulary
    assert vocabulary.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert vocabulary.token_to_id(
        tf.constant(["<pad>", "<unk>", "<s>", "</s>"])
    ).numpy().tolist() == [PAD_ID, UNK_ID, START_ID, END_ID]
    # The vocabulary is the model's pieces in id order: the pieces `tokenize`
    # gives are the vocabulary's tokens of `encode`'s ids.
    texts = tf.constant(GERMAN[:3])
    assert (
        vocabulary.token_to_id(tokenizer.tokenize(texts)).to_list()
        == tokenizer.encode(texts).to_list()
    )
    ids = tokenizer.encode(texts).flat_values.numpy().tolist()
    assert not {PAD_ID, START_ID, END_ID} & set(ids)
    # An unknown character becomes <unk>; decode shows SentencePiece's surface.
    unknown = tokenizer.encode(tf.constant("Ein Ω.")).numpy().tolist()
    assert UNK_ID in unknown
    assert "\u2047" in tokenizer.decode(unknown).numpy().decode()


def test_sentencepiece_decode_stops_at_end_and_drops_padding_and_start(
    german_sentencepiece,
):
    tokenizer = german_sentencepiece
    ids = tokenizer.encode(tf.constant(GERMAN[:2])).to_list()
    rows = [
        [START_ID] + ids[0] + [END_ID] + ids[1],  # after </s>: ignored
        ids[1] + [PAD_ID, PAD_ID],
    ]
    width = max(len(r) for r in rows)
    padded = tf.constant([r + [PAD_ID] * (width - len(r)) for r in rows])
    assert _strings(tokenizer.decode(padded)) == [GERMAN[0], GERMAN[1]]


def test_sentencepiece_source_side_normalizes_first():
    tokenizer = build_tokenizer(
        GERMAN, TokenizerConfig(kind="sentencepiece", max_vocab_size=300)
    )
    assert tokenizer.config.lowercase
    texts = tf.constant(["ＥＩＮ  Hund.", GERMAN[1]])
    assert _strings(tokenizer.decode(tokenizer.encode(texts))) == _strings(
        tokenizer.normalize(texts)
    )
    assert _strings(tokenizer.normalize(texts))[0] == "ein hund."


def test_sentencepiece_runs_in_tf_data_and_tf_function(german_sentencepiece):
    tokenizer = german_sentencepiece
    dataset = tf.data.Dataset.from_tensor_slices(GERMAN).batch(8).map(tokenizer.encode)
    eager = tokenizer.encode(tf.constant(GERMAN)).to_list()
    assert [row for batch in dataset for row in batch.to_list()] == eager
    decode = tf.function(
        tokenizer.decode, input_signature=[tf.TensorSpec([None, None], tf.int32)]
    )
    padded = tokenizer.encode(tf.constant(GERMAN)).to_tensor()
    assert _strings(decode(padded)) == GERMAN


def _export_sentencepiece_tokenizers(export_dir, target):
    """A SavedModel with two SentencePiece tokenizers (a source and ``target``);
    returns what its signature must give for PROBE."""
    source = build_tokenizer(
        [f"zug {n} fährt ab." for n in range(100)],
        TokenizerConfig(kind="sentencepiece", max_vocab_size=40),
    )

    def serve(text):
        ids = target.encode(text).to_tensor()
        return {
            "text": target.decode(ids),
            "source_ids": source.encode(text).to_tensor(),
            "target_ids": ids,
        }

    archive = keras.export.ExportArchive()
    archive.track(source)
    archive.track(target)
    archive.add_endpoint(
        "serving_default",
        serve,
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
    )
    archive.write_out(export_dir, verbose=False)
    return {
        "text": PROBE,
        "source_ids": source.encode(tf.constant(PROBE)).to_tensor().numpy().tolist(),
        "target_ids": target.encode(tf.constant(PROBE)).to_tensor().numpy().tolist(),
    }


PROBE = GERMAN[:3]
# One fresh process loads both SavedModels: the core tokenizer's first, under
# the session loader, before anything imports tensorflow_text; then, with it
# imported (it registers the SentencePiece ops), the SentencePiece one under
# the TF2 loader and the session loader.
SERVE_SCRIPT = """
import json
import sys
import tensorflow as tf

def session_run(export_dir, fetch, texts):
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        loader = tf.compat.v1.saved_model.loader
        meta = loader.load(session, ["serve"], export_dir)
        signature = meta.signature_def["serving_default"]
        names = {{
            k: v.name for k, v in signature.outputs.items() if fetch in (None, k)
        }}
        return session.run(names, {{signature.inputs["text"].name: texts}})

def plain(outputs):
    return {{
        k: [t.decode("utf-8") for t in v.tolist()] if k == "text" else v.tolist()
        for k, v in outputs.items()
    }}

core = session_run({core!r}, "text", ["Hello, World!", "hello moon"])
assert "tensorflow_text" not in sys.modules
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

loaded = tf.saved_model.load({sentencepiece!r})
tf2 = loaded.signatures["serving_default"](text=tf.constant({probe!r}))
tf2 = plain({{k: v.numpy() for k, v in tf2.items()}})
out = session_run({sentencepiece!r}, None, {probe!r})  # every output
report = {{"core": plain(core)["text"], "tf2": tf2, "session": plain(out)}}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def served_in_a_fresh_process(tmp_path_factory, german_sentencepiece):
    """The two SavedModels (`_export_core_tokenizer`,
    `_export_sentencepiece_tokenizers`) loaded by SERVE_SCRIPT in one fresh
    process: its ``report`` and the SentencePiece ``expected`` outputs."""
    root = tmp_path_factory.mktemp("served")
    core, sentencepiece = str(root / "core"), str(root / "sentencepiece")
    _export_core_tokenizer(core)
    expected = _export_sentencepiece_tokenizers(sentencepiece, german_sentencepiece)
    script = SERVE_SCRIPT.format(core=core, sentencepiece=sentencepiece, probe=PROBE)
    result = _run_in_a_fresh_process(script)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return {"report": report, "expected": expected}


@pytest.mark.slow
def test_sentencepiece_tokenizers_serve_under_both_loaders(served_in_a_fresh_process):
    """The models travel inside the SavedModel; two of them stay two models.

    tensorflow-text 2.21 names each model's resource op after the tokenizer's
    name; two SentencepieceTokenizers of one name came back from loading sharing
    one model (a source and a target model: the target decoded with the source's
    pieces). Each Tokenizer names its model after the model's digest.
    """
    expected = served_in_a_fresh_process["expected"]
    assert expected["source_ids"] != expected["target_ids"]
    report = served_in_a_fresh_process["report"]
    assert report["tf2"] == expected
    assert report["session"] == expected
