"""A run's settings, config.json: written and read back."""

import json

import pytest

from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.run_directory.settings import load_run_config, save_run_config


def test_a_config_without_later_fields_reads_as_it_was_trained(tmp_path):
    path = tmp_path / "config.json"
    save_run_config(path, ModelConfig(), TrainConfig())
    payload = json.loads(path.read_text())
    for name in TrainConfig.ADDED_LATER:
        del payload["train"][name]
    path.write_text(json.dumps(payload))
    _, train_config = load_run_config(path)
    for name, value in TrainConfig.ADDED_LATER.items():
        assert getattr(train_config, name) == value


def test_a_damaged_config_is_one_line_naming_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model": ')
    with pytest.raises(ValueError, match="config.json is not a JSON configuration"):
        load_run_config(path)
