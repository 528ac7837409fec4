"""Shared fixtures: two tiny trained runs (tensorflow-text and core-only tokenizers),
each exported once, for every test module of tests/serving (session scope: the
2-core machine trains each model once, about 20 s)."""

import pathlib

import pytest

from keras_selfattn import serving, text
from keras_selfattn.models import ModelConfig
from keras_selfattn.training import TrainConfig, train

# Small, but trained enough (6 short epochs) that translations differ between
# sentences, so equality with `keras-selfattn translate` means something.
TINY_MODEL = ModelConfig(
    num_hiddens=32, num_heads=2, num_layers=1, ffn_hiddens=64, dropout=0.0, decoder_units=32,
    embedding_dim=16, max_source_len=12, max_target_len=12,
)
NUM_PAIRS = 600
BEAM_SIZE = serving.DEFAULT_BEAM_SIZE


def train_tiny(run_dir, tokenizer_ops):
    config = TrainConfig(
        epochs=6, batch_size=32, learning_rate=1e-2, warmup_steps=5, patience=100, jit_compile=False,
        source_tokenizer="word", target_tokenizer="char", split_digits=True, tokenizer_ops=tokenizer_ops,
    )
    return train(text.load_bundled_dates()[:NUM_PAIRS], run_dir, TINY_MODEL, config, verbose=0).run_dir


@pytest.fixture(scope="session")
def text_run_dir(tmp_path_factory):
    """A run whose tokenizers use tensorflow-text ops (case folding, whitespace tokenizer)."""
    return train_tiny(tmp_path_factory.mktemp("text_run"), "tensorflow_text")


@pytest.fixture(scope="session")
def core_run_dir(tmp_path_factory):
    """A run whose tokenizers use core TensorFlow ops only (TokenizerConfig(ops="core"))."""
    return train_tiny(tmp_path_factory.mktemp("core_run"), "core")


@pytest.fixture(scope="session")
def text_export(text_run_dir, tmp_path_factory):
    """BASE/1 of the tensorflow-text run."""
    base = tmp_path_factory.mktemp("exports") / "translator"
    return serving.export_run(text_run_dir, base)


@pytest.fixture(scope="session")
def core_export(core_run_dir, tmp_path_factory):
    """BASE/1 of the core-ops run."""
    base = tmp_path_factory.mktemp("core_exports") / "translator"
    return serving.export_run(core_run_dir, base)


@pytest.fixture(scope="session")
def sample_texts(text_run_dir):
    """Held-out sources of the run, plus sentences that exercise the edges of the tokenizer."""
    held_out = [source for source, _ in text.read_pairs(pathlib.Path(text_run_dir) / "splits" / "test.tsv")[:16]]
    return held_out + [
        "",                                   # no tokens: "" with score 0
        "   ",                                # blank
        "qwxz vbnmk",                         # only unknown words
        "Mercredi 14 JUILLET 1989 à midi, le quatorzième jour du mois",  # longer than max_source_len
        "ｆｕｌｌ-width ２０２０",                 # NFKC / case folding differ from core lowercasing
    ]
