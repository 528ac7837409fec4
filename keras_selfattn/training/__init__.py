"""Training: configuration, strategy selection, the `train` function, and what tf.distribute needs."""

from keras_selfattn._lazy import lazy_package

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

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "WorkerBackup": "keras_selfattn.training.backup",
        "backed_up_epochs": "keras_selfattn.training.backup",
        "restore_backup": "keras_selfattn.training.backup",
        "TrainConfig": "keras_selfattn.training.config",
        "load_run_config": "keras_selfattn.training.config",
        "save_run_config": "keras_selfattn.training.config",
        "PeerUnreachableError": "keras_selfattn.training.distributed",
        "SyncedLossScaleOptimizer": "keras_selfattn.training.distributed",
        "audit_train_step": "keras_selfattn.training.distributed",
        "keras_multi_worker_fix": "keras_selfattn.training.distributed",
        "use_per_replica_xla": "keras_selfattn.training.distributed",
        "STRATEGIES": "keras_selfattn.training.strategy",
        "get_strategy": "keras_selfattn.training.strategy",
        "split_cpu": "keras_selfattn.training.strategy",
        "TrainResult": "keras_selfattn.training.train",
        "dtype_policy": "keras_selfattn.training.train",
        "load_pairs": "keras_selfattn.training.train",
        "train": "keras_selfattn.training.train",
        "write_metrics": "keras_selfattn.training.train",
    },
    submodules=(
        "backup",
        "config",
        "distributed",
        "strategy",
    ),
)
