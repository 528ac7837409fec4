"""Training: configuration, strategy selection, the `train` function, and what tf.distribute needs.

The names below are what a user calls. The tools that `train` applies for you
live in their own modules: `keras_selfattn.training.keras_fix.keras_multi_worker_fix`
(wrap your own ``model.fit`` under MultiWorkerMirroredStrategy in it) and
`keras_selfattn.training.per_replica_xla.use_per_replica_xla`.
"""

from keras_selfattn.training.config import TrainConfig, load_run_config
from keras_selfattn.training.distributed import PeerUnreachableError
from keras_selfattn.training.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.strategy import STRATEGIES, get_strategy, split_cpu
from keras_selfattn.training.tpu_audit import audit_train_step
from keras_selfattn.training.train import TrainResult, dtype_policy, train

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
