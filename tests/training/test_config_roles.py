"""The field roles of `TrainConfig`: declared once on each field, read from there."""

import dataclasses

from keras_selfattn import config as config_lib
from keras_selfattn.config import TrainConfig, fields_with_role


def test_the_role_lists_are_the_ones_runs_were_saved_with():
    # data.json records exactly these settings: another list would make every
    # interrupted run refuse to resume ("the data settings changed").
    assert config_lib.DATA_FIELDS == (
        "seed",
        "split",
        "max_pairs",
        "max_validation_pairs",
        "max_test_pairs",
        "skip_malformed",
    )
    assert config_lib.PLACEMENT_FIELDS == (
        "strategy",
        "tpu",
        "worker_timeout",
        "log_every",
        "tensorboard",  # output only: a run resumes with it on or off
        "threads",  # the same steps on another thread count
    )
    assert TrainConfig.VOCAB_FIELDS == (
        "source_tokenizer",
        "target_tokenizer",
        "source_sentencepiece_model",
        "target_sentencepiece_model",
        "source_vocab_size",
        "target_vocab_size",
        "split_digits",
        "tokenizer_ops",
        "vocab_sample_lines",
        "skip_malformed",
        "strict_columns",
    )
    assert config_lib.CONTINUATION_FIELDS == (
        "epochs",
        "patience",  # a larger one continues a run that stopped early
        "train_steps",
        "eval_every",
        "save_every",
    )


def test_a_field_declared_without_roles_has_none():
    @dataclasses.dataclass
    class Extended(TrainConfig):
        new_setting: int = 3

    for role in ("vocab", "data", "placement", "continuation"):
        assert "new_setting" not in fields_with_role(Extended, role)
    assert fields_with_role(Extended, "data") == config_lib.DATA_FIELDS


def test_the_data_settings_are_json_values():
    settings = config_lib.data_settings(TrainConfig(split=(0.5, 0.25, 0.25)))
    assert settings["split"] == [0.5, 0.25, 0.25]
    assert set(settings) == set(config_lib.DATA_FIELDS)
