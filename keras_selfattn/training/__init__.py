"""Training: configuration, strategies, the `train` function, tf.distribute's needs.

The names below are what a user calls; they load on first use
(``keras_selfattn.training.config`` imports no Keras). The tools that `train`
applies for you live in their own modules:
`keras_selfattn.training.distribute.keras_fix.keras_multi_worker_fix` (wrap your own
``model.fit`` under MultiWorkerMirroredStrategy in it) and
`keras_selfattn.training.distribute.per_replica_xla.use_per_replica_xla`.
"""

from keras_selfattn._lazy import lazy_package

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

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "STRATEGIES": "keras_selfattn.training.distribute.strategy",
        "PeerUnreachableError": "keras_selfattn.training.distribute.distributed",
        "SyncedLossScaleOptimizer": "keras_selfattn.training.distribute.loss_scale",
        "TrainConfig": "keras_selfattn.training.config",
        "TrainResult": "keras_selfattn.training.fit.train",
        "audit_train_step": "keras_selfattn.training.distribute.tpu_audit",
        "dtype_policy": "keras_selfattn.training.fit.train",
        "get_strategy": "keras_selfattn.training.distribute.strategy",
        "load_run_config": "keras_selfattn.run_directory.settings",
        "split_cpu": "keras_selfattn.training.distribute.strategy",
        "train": "keras_selfattn.training.fit.train",
    },
    # The subpackages by idea; the modules' old flat names (``training.backup``,
    # ...) still import, with a DeprecationWarning (keras_selfattn/_moved.py).
    submodules=(
        "backup",
        "config",
        "data",
        "distribute",
        "distributed",
        "fit",
        "keras_fix",
        "loss_scale",
        "per_replica_xla",
        "run",
        "strategy",
        "tpu_audit",
    ),
)
