"""Training: the `train` function, strategies, tf.distribute's needs.

The names below are what a user calls. `TrainConfig` lives in
`keras_selfattn.config` (Keras-free, so that reading a run directory needs no
trainer) and is named here too. The tools that `train` applies for you live in
their own modules:
`keras_selfattn.training.distribute.keras_fix.keras_multi_worker_fix` (wrap your own
``model.fit`` under MultiWorkerMirroredStrategy in it) and
`keras_selfattn.training.distribute.per_replica_xla.use_per_replica_xla`.
"""

from keras_selfattn.config import TrainConfig
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.training.distribute.distributed import PeerUnreachableError
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.strategy import (
    STRATEGIES,
    get_strategy,
    split_cpu,
)
from keras_selfattn.training.distribute.tpu_audit import audit_train_step
from keras_selfattn.training.fit.train import TrainResult, dtype_policy, train

__all__ = [
    "STRATEGIES",
    "PeerUnreachableError",
    "SyncedLossScaleOptimizer",
    "TrainConfig",
    "TrainResult",
    "audit_train_step",
    "dtype_policy",
    "get_strategy",
    "load_run_config",
    "split_cpu",
    "train",
]
