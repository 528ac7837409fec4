"""``keras-selfattn train --out RUN`` on a run there, with ``--preset`` or ``--vocab``:
the settings they give are taken where they agree with the run or may change,
and refused in one line where they may not. Checked on what the command
prepares (`commands.prepare`, which configures before training starts) and on
its refusals; the run directory is written as a run leaves it, without training.
"""

import json

import pytest

from keras_selfattn import text
from keras_selfattn.cli.commands import prepare
from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.config.presets import preset_configs
from keras_selfattn.jobs import build_vocab
from keras_selfattn.run_directory.layout import (
    BACKUP_DIR,
    CONFIG_FILE,
    DATA_FILE,
    FINISHED_FILE,
)
from keras_selfattn.run_directory.settings import save_run_config
from keras_selfattn.run_directory.vocabulary_settings import (
    train_config_with_vocabulary,
)
from keras_selfattn.training.data.run_data import data_fingerprint
from tests.bad_input_cases import run_in_process


@pytest.fixture
def pairs(tmp_path):
    return str(text.write_pairs(tmp_path / "pairs.tsv", text.load_bundled_dates()[:40]))


def _stored_run(run, data, model_config, train_config, state):
    """``run`` as `train` leaves it for a rerun: its settings and data record,
    and a backup (interrupted) or its summary (finished)."""
    run.mkdir()
    save_run_config(run / CONFIG_FILE, model_config, train_config)
    _, fingerprint = data_fingerprint(data, train_config)
    record = {"fingerprint": fingerprint, "split": None, "train_pairs": 40}
    (run / DATA_FILE).write_text(json.dumps(record))
    (run / BACKUP_DIR).mkdir()
    if state == "finished":
        (run / FINISHED_FILE).write_text(json.dumps({"steps": 12}))
    return run


def _refusal(argv):
    """The one line a refused command prints (exit 2)."""
    result = run_in_process(argv)
    assert result.status == 2, result
    (line,) = result.stderr.splitlines()
    return line


def test_a_rerun_takes_the_preset_it_was_trained_with(tmp_path, pairs, capsys):
    small_model, small_train = preset_configs("small")
    trained = TrainConfig(**{**vars(small_train), "epochs": 3})
    run = _stored_run(tmp_path / "run", pairs, small_model, trained, "interrupted")

    args = prepare(["train", "--out", str(run), "--preset", "small", "--epochs", "3"])
    assert (args.model_config, args.train_config) == (small_model, trained)
    assert args.data == [pairs] and args.valid_data is None
    assert capsys.readouterr().out == (
        f"{run} holds an interrupted run: using the settings and data it recorded "
        "(config.json, data.json)\n"
    )

    # The preset's own epochs (15) may not change an interrupted run.
    line = _refusal(["train", "--out", str(run), "--preset", "small"])
    assert line.startswith(
        f"keras-selfattn: error: --preset small contradicts the interrupted run in "
        f"{run}: its config.json records epochs=3, this call received 15; resume it "
        "first"
    ), line
    # Another preset's model: refused by its first field that differs.
    line = _refusal(["train", "--out", str(run), "--preset", "base"])
    assert "--preset base contradicts the interrupted run" in line, line
    assert "records num_hiddens=256, this call received 512" in line, line
    assert "leave it out to keep the run's" in line, line


def test_a_finished_run_continues_for_the_preset_s_epochs(tmp_path, pairs, capsys):
    """On a finished run the preset's length may change: it is applied and said."""
    small_model, small_train = preset_configs("small")
    trained = TrainConfig(**{**vars(small_train), "epochs": 3})
    run = _stored_run(tmp_path / "run", pairs, small_model, trained, "finished")

    args = prepare(["train", "--out", str(run), "--preset", "small"])
    assert args.model_config == small_model
    assert args.train_config == small_train  # epochs 15, the rest as recorded
    assert capsys.readouterr().out == (
        f"{run} holds a finished run: using the settings and data it recorded "
        "(config.json, data.json); changed: epochs 3 -> 15\n"
    )


def test_a_rerun_takes_the_vocabulary_it_was_trained_on(tmp_path, pairs, capsys):
    chars = tmp_path / "chars"
    build_vocab(
        pairs,
        chars,
        TrainConfig(source_tokenizer="char", target_tokenizer="char"),
        verbose=False,
    )
    trained = train_config_with_vocabulary(TrainConfig(train_steps=4), chars)
    assert (trained.source_tokenizer, trained.target_tokenizer) == ("char", "char")
    run = _stored_run(tmp_path / "run", pairs, ModelConfig(), trained, "interrupted")

    args = prepare(["train", "--out", str(run), "--vocab", str(chars)])
    assert args.train_config == trained
    assert args.vocab == str(chars)
    assert capsys.readouterr().out.endswith(
        "(config.json, data.json)\n"  # nothing changed
    )

    # A vocabulary of other tokenizers contradicts the run's.
    words = tmp_path / "words"
    build_vocab(pairs, words, TrainConfig(source_tokenizer="word"), verbose=False)
    capsys.readouterr()
    line = _refusal(["train", "--out", str(run), "--vocab", str(words)])
    assert line == (
        f"keras-selfattn: error: --vocab {words} contradicts the interrupted run in "
        f"{run}: its config.json records source_tokenizer='char', this call "
        "received 'word'; leave it out to keep the run's, or train a new run in "
        "another --out (--overwrite replaces this one)"
    )
    # A flag typed that contradicts the vocabulary: refused naming both.
    line = _refusal(
        ["train", "--out", str(run), "--vocab", str(chars)]
        + ["--target-tokenizer", "word"]
    )
    assert f"--target-tokenizer word contradicts the vocabulary in {chars}" in line
    assert "tokenizer.json records target_tokenizer='char'" in line, line
