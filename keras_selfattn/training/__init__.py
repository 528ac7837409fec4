"""Training: configuration, strategies, the `train` function, tf.distribute's needs.

The names below are what a user calls; all but `TrainConfig` load on first use
(the run directory's layout reads ``keras_selfattn.training.config``, which runs
this file first). The tools that `train`
applies for you live in their own modules:
`keras_selfattn.training.distribute.keras_fix.keras_multi_worker_fix` (wrap your own
``model.fit`` under MultiWorkerMirroredStrategy in it) and
`keras_selfattn.training.distribute.per_replica_xla.use_per_replica_xla`.
"""

import importlib

from keras_selfattn.training.config import TrainConfig

# The names that load on first use, and their modules. `keras_selfattn.run_directory`
# (below training) reads `keras_selfattn.training.config`, which runs this file:
# importing `train` here at once would import the run directory half made.
_ON_FIRST_USE = {
    "load_run_config": "keras_selfattn.run_directory.settings",
    "PeerUnreachableError": "keras_selfattn.training.distribute.distributed",
    "SyncedLossScaleOptimizer": "keras_selfattn.training.distribute.loss_scale",
    "STRATEGIES": "keras_selfattn.training.distribute.strategy",
    "get_strategy": "keras_selfattn.training.distribute.strategy",
    "split_cpu": "keras_selfattn.training.distribute.strategy",
    "audit_train_step": "keras_selfattn.training.distribute.tpu_audit",
    "TrainResult": "keras_selfattn.training.fit.train",
    "dtype_policy": "keras_selfattn.training.fit.train",
    "train": "keras_selfattn.training.fit.train",
}


def __getattr__(name):
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))


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
