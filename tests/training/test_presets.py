"""The presets state only what differs from the defaults, and only real fields."""

import dataclasses

import pytest

from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.config.presets import PRESETS, preset_configs

CLASSES = {"model": ModelConfig, "train": TrainConfig}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_names_real_fields_and_only_values_that_differ(name):
    assert set(PRESETS[name]) == set(CLASSES)
    for part, cls in CLASSES.items():
        defaults = {field.name: field.default for field in dataclasses.fields(cls)}
        values = PRESETS[name][part]
        assert values, f"{name} {part}: a preset that changes nothing"
        assert set(values) <= set(defaults), sorted(set(values) - set(defaults))
        same = sorted(key for key, value in values.items() if value == defaults[key])
        assert same == [], f"{name} {part}: equal to the default: {same}"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_configs_are_the_defaults_with_the_preset_over_them(name):
    model_config, train_config = preset_configs(name)
    for part, config in (("model", model_config), ("train", train_config)):
        for key, value in dataclasses.asdict(config).items():
            expected = PRESETS[name][part].get(
                key, dataclasses.asdict(CLASSES[part]())[key]
            )
            assert value == (list(expected) if isinstance(value, list) else expected)
