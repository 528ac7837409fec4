"""Training: configuration, strategy selection, the `train` function, and what tf.distribute needs."""

from keras_selfattn.training.backup import (
    WorkerBackup,
    backed_up_epochs,
    restore_backup,
)
from keras_selfattn.training.config import TrainConfig, load_run_config, save_run_config
from keras_selfattn.training.distributed import PeerUnreachableError
from keras_selfattn.training.keras_fix import keras_multi_worker_fix
from keras_selfattn.training.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.per_replica_xla import use_per_replica_xla
from keras_selfattn.training.strategy import STRATEGIES, get_strategy, split_cpu
from keras_selfattn.training.tpu_audit import audit_train_step
from keras_selfattn.training.train import (
    TrainResult,
    dtype_policy,
    load_pairs,
    train,
    write_metrics,
)

__all__ = [
    "STRATEGIES",
    "PeerUnreachableError",
    "SyncedLossScaleOptimizer",
    "TrainConfig",
    "TrainResult",
    "WorkerBackup",
    "audit_train_step",
    "backed_up_epochs",
    "dtype_policy",
    "get_strategy",
    "keras_multi_worker_fix",
    "load_pairs",
    "load_run_config",
    "restore_backup",
    "save_run_config",
    "split_cpu",
    "train",
    "use_per_replica_xla",
    "write_metrics",
]
