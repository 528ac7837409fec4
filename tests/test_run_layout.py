"""The run directory's layout: one owner of its names, no TensorFlow."""

import json
import subprocess
import sys

import pytest

from keras_selfattn import run_layout
from keras_selfattn.models.config import ModelConfig
from keras_selfattn.run_layout import RunLayout
from keras_selfattn.training.config import TrainConfig


def test_the_paths_are_the_names_under_the_run_directory(tmp_path):
    run = RunLayout(tmp_path)
    assert run.model == tmp_path / "model.keras"
    assert run.test_split == tmp_path / "splits" / "test.tsv"
    assert run.worker_backup(1) == tmp_path / "backup" / "worker-1"
    assert run.checkpoint(120) == tmp_path / "checkpoints" / "step-00000120.keras"
    assert run_layout.checkpoint_step(run.checkpoint(120)) == 120
    assert run_layout.checkpoint_step(tmp_path / "step-x.keras") is None
    state = run_layout.backup_file(run.worker_backup(0), 3, "state")
    assert state.name == "epoch-00003.json"
    assert run_layout.backup_epoch(state) == 3


def test_a_bad_backup_part_is_named():
    with pytest.raises(ValueError, match="part='model'"):
        run_layout.backup_file("backup", 1, "model")


def test_reading_the_layout_imports_no_tensorflow_or_keras():
    code = (
        "import sys, keras_selfattn.run_layout; "
        "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_config_without_later_fields_reads_as_it_was_trained(tmp_path):
    path = tmp_path / "config.json"
    run_layout.save_run_config(path, ModelConfig(), TrainConfig())
    payload = json.loads(path.read_text())
    for name in TrainConfig.ADDED_LATER:
        del payload["train"][name]
    path.write_text(json.dumps(payload))
    _, train_config = run_layout.load_run_config(path)
    for name, value in TrainConfig.ADDED_LATER.items():
        assert getattr(train_config, name) == value


def test_a_damaged_config_is_one_line_naming_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model": ')
    with pytest.raises(ValueError, match="config.json is not a JSON configuration"):
        run_layout.load_run_config(path)
