"""Training: configuration, strategy selection and the `train` function."""

from keras_selfattn.training.config import TrainConfig, load_run_config, save_run_config
from keras_selfattn.training.strategy import STRATEGIES, get_strategy
from keras_selfattn.training.train import TrainResult, load_pairs, train, write_metrics

__all__ = [
    "STRATEGIES",
    "TrainConfig",
    "TrainResult",
    "get_strategy",
    "load_pairs",
    "load_run_config",
    "save_run_config",
    "train",
    "write_metrics",
]
