"""The settings of a training run, Keras-free: `TrainConfig`, its presets, the checks.

`TrainConfig` (``train_config``) is saved as JSON in every run directory, so the
run directory's readers import it without the trainer; the presets (``presets``)
pair it with a `keras_selfattn.models.ModelConfig`; ``checks`` holds the type and
range checks both configurations use.
"""

from keras_selfattn.config.train_config import (
    CONTINUATION_FIELDS,
    DATA_FIELDS,
    PLACEMENT_FIELDS,
    TrainConfig,
    data_settings,
    fields_with_role,
    same_training,
)

__all__ = [
    "CONTINUATION_FIELDS",
    "DATA_FIELDS",
    "PLACEMENT_FIELDS",
    "TrainConfig",
    "data_settings",
    "fields_with_role",
    "same_training",
]
