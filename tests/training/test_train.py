"""train(): run directory contents, resuming after an interruption, bad input."""

import csv

import keras
import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.inference import Translator, evaluate
from keras_selfattn.models import ModelConfig
from keras_selfattn.training import TrainConfig, load_run_config, train

pytestmark = pytest.mark.slow

TINY_MODEL = ModelConfig(
    num_hiddens=16,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=32,
    decoder_units=16,
    embedding_dim=8,
    dropout=0.0,
    max_source_len=24,
    max_target_len=12,
)


def tiny_train_config(**overrides):
    # XLA is covered by tests/models and the CLI tests; here compiling would dominate.
    values = {
        "epochs": 2,
        "batch_size": 32,
        "source_tokenizer": "word",
        "target_tokenizer": "char",
        "warmup_steps": 5,
        "max_pairs": 300,
        "seed": 3,
        "jit_compile": False,
    }
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="module")
def pairs():
    return text.load_bundled_dates()[:400]


def test_run_directory_holds_everything(tmp_path, pairs):
    result = train(pairs, tmp_path / "run", TINY_MODEL, tiny_train_config(), verbose=0)
    run = tmp_path / "run"
    for name in (
        "model.keras",
        "config.json",
        "source_vocab.txt",
        "target_vocab.txt",
        "tokenizer.json",
        "history.csv",
        "splits/train.tsv",
        "splits/validation.tsv",
        "splits/test.tsv",
    ):
        assert (run / name).exists(), name
    assert not (run / "backup").exists()  # removed once training finished
    model_config, train_config = load_run_config(run / "config.json")
    assert model_config == TINY_MODEL and train_config == tiny_train_config()
    assert (
        len(result.history["loss"]) == 2
        and result.history["loss"][1] < result.history["loss"][0]
    )
    translator = Translator.load(run)
    metrics = evaluate(translator, result.test_pairs[:20])
    assert (
        set(metrics) >= {"bleu", "chrf", "exact_match", "count"}
        and metrics["count"] == 20
    )
    assert 0.0 <= metrics["exact_match"] <= 1.0


def test_same_seed_same_weights(tmp_path, pairs):
    config = tiny_train_config(epochs=1, max_pairs=120)
    first = train(
        pairs, tmp_path / "a", TINY_MODEL, config, verbose=0
    ).model.get_weights()
    second = train(
        pairs, tmp_path / "b", TINY_MODEL, config, verbose=0
    ).model.get_weights()
    assert all(np.array_equal(x, y) for x, y in zip(first, second))


class StopAfterEpoch(keras.callbacks.Callback):
    """Simulates a crash at the end of an epoch (after the backup was written)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("simulated crash")


def test_an_interrupted_run_resumes_from_its_last_epoch(tmp_path, pairs):
    run = tmp_path / "run"
    config = tiny_train_config(epochs=3)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(pairs, run, TINY_MODEL, config, verbose=0, callbacks=[StopAfterEpoch(1)])
    assert (run / "backup").exists()
    result = train(pairs, run, TINY_MODEL, config, verbose=0)
    assert len(result.history["loss"]) == 1  # only the third epoch was left to run
    with open(run / "history.csv") as handle:
        epochs = [int(row["epoch"]) for row in csv.DictReader(handle)]
    assert epochs == [0, 1, 2]
    with pytest.raises(ValueError, match="different configuration"):
        (run / "backup").mkdir()
        train(pairs, run, TINY_MODEL, tiny_train_config(epochs=4), verbose=0)


def test_bad_input(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.tsv"):
        train(empty, tmp_path / "run", TINY_MODEL, tiny_train_config(), verbose=0)
    with pytest.raises(ValueError, match="Too few pairs"):
        train(
            [("a b", "c")] * 2,
            tmp_path / "run2",
            TINY_MODEL,
            tiny_train_config(),
            verbose=0,
        )
    with pytest.raises(ValueError, match="epochs=0"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="mixed_precision"):
        TrainConfig(mixed_precision="float8")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        Translator.load(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="missing model.keras"):
        Translator.load(tmp_path)
