"""The settings of a run, Keras-free: `ModelConfig`, `TrainConfig`, presets, checks.

Both configurations (``model_config``, ``train_config``) are saved as JSON in
every run directory, so the run directory's readers import them without the
model or the trainer; the presets (``presets``) pair one of each; ``checks``
holds the type and range checks both use. `ModelConfig` is also
``keras_selfattn.ModelConfig`` and ``keras_selfattn.models.ModelConfig``,
`TrainConfig` ``keras_selfattn.training.TrainConfig``.
"""

from keras_selfattn.config.model_config import ModelConfig
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
    "ModelConfig",
    "TrainConfig",
    "data_settings",
    "fields_with_role",
    "same_training",
]
