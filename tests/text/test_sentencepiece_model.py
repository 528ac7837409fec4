"""SentencePiece models: learned with our reserved ids, or a user's .model rewritten to
them."""

import io
import random

import pytest
import sentencepiece
import tensorflow as tf

from keras_selfattn.reserved_ids import RESERVED_TOKENS
from keras_selfattn.text import sentencepiece_model as sentencepiece_lib
from keras_selfattn.text.tokenizers import TokenizerConfig, build_tokenizer
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.data.run_tokenizer import tokenizer_configs
from tests.text.german_sentences import GERMAN


def generated_lines(count=300, seed=0):
    """A few hundred generated German-like lines (enough for a small model)."""
    words = [
        "haus",
        "maus",
        "baum",
        "katze",
        "hund",
        "läuft",
        "schnell",
        "über",
        "die",
        "straße",
        "grün",
        "rot",
        "ein",
        "eine",
        "der",
        "Mann",
        "Frau",
        "Kind",
        "spielt",
        "im",
        "Park",
    ]
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + "."
        for _ in range(count)
    ]


def user_model(tmp_path, **options):
    """A .model file trained with sentencepiece's own defaults (unk 0, bos 1, eos 2, no
    pad)."""
    writer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(generated_lines()),
        model_writer=writer,
        vocab_size=60,
        minloglevel=2,
        **options,
    )
    path = tmp_path / "user.model"
    path.write_bytes(writer.getvalue())
    return path


def test_learned_model_has_our_reserved_ids():
    model = sentencepiece_lib.train_sentencepiece_model(GERMAN, 200)
    pieces = sentencepiece_lib.sentencepiece_pieces(model)
    assert tuple(pieces[:4]) == RESERVED_TOKENS
    # Already canonical: nothing to rewrite.
    assert sentencepiece_lib.canonical_sentencepiece_model(model) == model
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    ids = (processor.pad_id(), processor.unk_id(), processor.bos_id())
    assert ids + (processor.eos_id(),) == (0, 1, 2, 3)
    # Identity normalization: pieces spell the text as given (case, "ß", "„").
    assert processor.decode(processor.encode(GERMAN)) == GERMAN


def test_vocabulary_size_is_a_soft_limit():
    model = sentencepiece_lib.train_sentencepiece_model(GERMAN[:5], 8000)
    size = len(sentencepiece_lib.sentencepiece_pieces(model))
    assert 4 < size < 8000  # too few types for 8000: fewer pieces, no error


def test_split_digits():
    texts = [f"Zug {n} fährt um {n % 24}:{n % 60:02d} Uhr." for n in range(300)]
    model = sentencepiece_lib.train_sentencepiece_model(texts, 100, split_digits=True)
    pieces = sentencepiece.SentencePieceProcessor(model_proto=model).encode(
        "Zug 1234", out_type=str
    )
    assert pieces[-4:] == ["1", "2", "3", "4"] or pieces[-4:] == ["▁1", "2", "3", "4"]


def test_no_sentences_is_a_clear_error():
    with pytest.raises(ValueError, match="SentencePiece could not learn"):
        sentencepiece_lib.train_sentencepiece_model(["", ""], 100)


def test_user_model_with_default_special_ids_is_rewritten(tmp_path):
    path = user_model(tmp_path)
    original = sentencepiece.SentencePieceProcessor(model_file=str(path))
    assert (original.unk_id(), original.bos_id(), original.eos_id()) == (0, 1, 2)
    assert original.pad_id() == -1

    model = sentencepiece_lib.read_sentencepiece_model(path, "--target-x")
    rewritten = sentencepiece.SentencePieceProcessor(model_proto=model)
    assert (rewritten.pad_id(), rewritten.unk_id()) == (0, 1)
    assert (rewritten.bos_id(), rewritten.eos_id()) == (2, 3)
    # One piece more (<pad>), the others in their order after our four.
    assert rewritten.get_piece_size() == original.get_piece_size() + 1
    assert [rewritten.id_to_piece(i) for i in range(4, rewritten.get_piece_size())] == [
        original.id_to_piece(i) for i in range(3, original.get_piece_size())
    ]
    # The same segmentation.
    lines = generated_lines(20, seed=7) + ["Zebra haus"]
    assert rewritten.encode(lines, out_type=str) == original.encode(lines, out_type=str)

    # Used by a tokenizer: same pieces in the graph, text back, reserved ids.
    tokenizer = build_tokenizer(
        None,
        TokenizerConfig.for_target("sentencepiece", sentencepiece_model=str(path)),
    )
    assert tuple(tokenizer.vocabulary.tokens[:4]) == RESERVED_TOKENS
    texts = generated_lines(20, seed=7)
    tokens = tokenizer.tokenize(tf.constant(texts)).to_list()
    assert [[t.decode() for t in row] for row in tokens] == original.encode(
        texts, out_type=str
    )
    decoded = tokenizer.decode(tokenizer.encode(tf.constant(texts)))
    assert [t.decode() for t in decoded.numpy()] == texts


def test_user_model_with_a_piece_spelled_like_a_reserved_token_is_refused(tmp_path):
    path = user_model(tmp_path, user_defined_symbols=["<pad>"])
    with pytest.raises(ValueError, match=r"--opt .*user.model.*<pad>"):
        sentencepiece_lib.read_sentencepiece_model(path, "--opt")


@pytest.mark.parametrize("side", ["source", "target"])
def test_missing_or_corrupt_model_names_the_option_and_the_path(tmp_path, side):
    option = f"--{side}-sentencepiece-model"
    missing = tmp_path / "missing.model"
    config = TrainConfig(
        **{
            f"{side}_tokenizer": "sentencepiece",
            f"{side}_sentencepiece_model": str(missing),
        }
    )
    with pytest.raises(FileNotFoundError, match=f"{option} {missing}: no such file"):
        tokenizer_configs(config)
    for name, content in (("corrupt.model", b"not a model"), ("empty.model", b"")):
        corrupt = tmp_path / name
        corrupt.write_bytes(content)
        config = TrainConfig(
            **{
                f"{side}_tokenizer": "sentencepiece",
                f"{side}_sentencepiece_model": str(corrupt),
            }
        )
        with pytest.raises(
            ValueError, match=f"{option} {corrupt}: not a SentencePiece model"
        ):
            tokenizer_configs(config)


def test_model_option_needs_the_sentencepiece_kind():
    with pytest.raises(ValueError, match="source_tokenizer='sentencepiece'"):
        TrainConfig(source_sentencepiece_model="m.model")
    with pytest.raises(ValueError, match="kind='sentencepiece'"):
        TokenizerConfig(kind="word", sentencepiece_model="m.model")
    with pytest.raises(ValueError, match="needs tensorflow_text"):
        TokenizerConfig(kind="sentencepiece", ops="core")
