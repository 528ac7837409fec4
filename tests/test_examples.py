"""Every example runs: one short step each (the smoke test the examples promise)."""

import importlib.util
import pathlib

import pytest

from keras_selfattn.models import ModelConfig
from keras_selfattn.text import load_bundled_dates
from keras_selfattn.training import TrainConfig, train

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layers_in_your_model():
    history = load("layers_in_your_model").main(
        ["--epochs", "1", "--steps-per-epoch", "2"]
    )
    assert len(history.history["loss"]) == 1


def test_train_on_tsv(tmp_path):
    from keras_selfattn.text import write_pairs

    data = write_pairs(tmp_path / "pairs.tsv", load_bundled_dates()[:300])
    metrics = load("train_on_tsv").main(
        ["--data", str(data), "--epochs", "1", "--steps-per-epoch", "2"]
    )
    assert 0.0 <= metrics["exact_match"] <= 1.0


def test_translate_and_plot(tmp_path):
    tiny = ModelConfig(
        num_hiddens=16,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=32,
        decoder_units=16,
        embedding_dim=8,
        max_target_len=12,
    )
    train(
        load_bundled_dates()[:200],
        tmp_path / "run",
        tiny,
        TrainConfig(
            epochs=1,
            target_tokenizer="char",
            warmup_steps=1,
            jit_compile=False,  # the example's subject is translating and plotting
            length_buckets=1,
        ),
        verbose=0,
    )
    beams = load("translate_and_plot").main(
        [
            "--model",
            str(tmp_path / "run"),
            "--out",
            str(tmp_path / "png"),
            "--beam",
            "2",
            "14 juillet 1989",
        ]
    )
    assert len(beams) == 1
    assert (tmp_path / "png" / "attention_0.png").read_bytes()[:4] == b"\x89PNG"
