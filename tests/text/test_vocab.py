"""Vocabulary: reserved ids, lookups, files, building from counts."""

import pytest
import tensorflow as tf

from keras_selfattn.text import vocab as vocab_lib
from keras_selfattn.text.vocab import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    Vocabulary,
    build_vocabulary,
    learn_wordpiece_vocabulary,
)


def test_reserved_ids_are_module_constants():
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)
    assert RESERVED_TOKENS == ("<pad>", "<unk>", "<s>", "</s>")
    vocab = build_vocabulary([["x"]])
    for index, token in enumerate(RESERVED_TOKENS):
        assert vocab.tokens[index] == token
        assert int(vocab.token_to_id(tf.constant(token))) == index


def test_unknown_tokens_map_to_unk_id_and_unknown_ids_to_unk_token():
    vocab = Vocabulary(list(RESERVED_TOKENS) + ["a", "b"])
    ids = vocab.token_to_id(tf.ragged.constant([["a", "zzz"], ["b"]]))
    assert ids.dtype == tf.int32
    assert ids.to_list() == [[4, UNK_ID], [5]]
    assert vocab.id_to_token(tf.constant([5, 6, -1])).numpy().tolist() == [
        b"b",
        b"<unk>",
        b"<unk>",
    ]


def test_build_vocabulary_orders_by_count_then_code_point():
    vocab = build_vocabulary([["b", "a", "c"], ["b", "a"], ["<s>", "b"]])
    assert vocab.tokens == list(RESERVED_TOKENS) + ["b", "a", "c"]
    assert build_vocabulary({"b": 3, "a": 2, "c": 1}).tokens == vocab.tokens


def test_build_vocabulary_limits():
    counts = {"a": 5, "b": 4, "c": 1}
    assert build_vocabulary(counts, max_size=5).tokens[4:] == ["a"]
    assert build_vocabulary(counts, min_count=2).tokens[4:] == ["a", "b"]
    with pytest.raises(ValueError, match="max_size must be at least 4"):
        build_vocabulary(counts, max_size=3)


def test_saved_and_loaded_vocabulary_gives_identical_ids(tmp_path):
    # A space token (character vocabularies) and non-ASCII tokens survive the file.
    vocab = build_vocabulary([["été", " ", "a", "\u2028x", "\x1cy"]])
    path = vocab.save(tmp_path / "sub" / "vocab.txt")
    assert path.read_bytes().endswith(b"\n")
    loaded = Vocabulary.load(path)
    assert loaded.tokens == vocab.tokens
    tokens = tf.constant(vocab.tokens + ["missing"])
    assert (
        loaded.token_to_id(tokens).numpy().tolist()
        == vocab.token_to_id(tokens).numpy().tolist()
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty"),
        ("<pad>\n<unk>\n<s>\n", "must start with the reserved tokens"),
        ("<unk>\n<pad>\n<s>\n</s>\n", "must start with the reserved tokens"),
        ("<pad>\n<unk>\n<s>\n</s>\n\na\n", r"vocab.txt:5: empty line"),
        ("<pad>\n<unk>\n<s>\n</s>\na\na\n", "duplicate token 'a'"),
    ],
)
def test_load_rejects_bad_files_naming_them(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        Vocabulary.load(path)
    assert "vocab.txt" in str(info.value)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="Vocabulary file not found"):
        Vocabulary.load(tmp_path / "nope.txt")


def test_constructor_rejects_bad_tokens():
    with pytest.raises(ValueError, match="non-empty and contain no newline"):
        Vocabulary(list(RESERVED_TOKENS) + ["a\nb"])
    with pytest.raises(ValueError, match="reserved tokens"):
        Vocabulary(["a"])


def test_learn_wordpiece_vocabulary_covers_the_alphabet():
    vocab = learn_wordpiece_vocabulary({"lower": 5, "lowest": 3, "newer": 2}, 40)
    assert tuple(vocab.tokens[:4]) == RESERVED_TOKENS
    for char in "lowerstn":
        assert char in vocab.tokens
        assert "##" + char in vocab.tokens


def test_vocabulary_is_trackable_by_a_saved_model(tmp_path):
    vocab = build_vocabulary([["a", "b"]])
    module = tf.Module()
    module.vocab = vocab
    module.lookup = tf.function(
        vocab.token_to_id, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    assert loaded.lookup(tf.constant(["b", "x"])).numpy().tolist() == [5, UNK_ID]


def test_module_all_names_exist():
    for name in vocab_lib.__all__:
        assert hasattr(vocab_lib, name)
