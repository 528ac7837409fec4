"""`train`: sentence pairs in, a run directory with a trained model out."""

import contextlib
import csv
import dataclasses
import json
import pathlib
import shutil
import tempfile

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.models import (
    MaskedAccuracy,
    ModelConfig,
    build_seq2seq,
    masked_loss,
)
from keras_selfattn.training.backup import (
    WorkerBackup,
    backed_up_epochs,
    restore_backup,
    worker_backup_dir,
)
from keras_selfattn.training.config import (
    TrainConfig,
    load_run_config,
    same_training,
    save_run_config,
)
from keras_selfattn.training.distributed import (
    all_workers_values,
    lost_peers_are_errors,
    worker_role,
)
from keras_selfattn.training.keras_fix import keras_multi_worker_fix
from keras_selfattn.training.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.per_replica_xla import use_per_replica_xla
from keras_selfattn.training.strategy import get_strategy

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
METRICS_FILE = "metrics.json"
SPLITS_DIR = "splits"
BACKUP_DIR = "backup"


@dataclasses.dataclass
class TrainResult:
    """What `train` returns: the trained model and everything needed to use it."""

    run_dir: pathlib.Path
    model: keras.Model
    tokenizer: text.PairTokenizer
    model_config: ModelConfig
    train_config: TrainConfig
    history: dict
    test_pairs: list
    worker_index: int = 0
    is_chief: bool = (
        True  # False: another worker wrote run_dir; this one's files are gone
    )


def load_pairs(data, max_pairs=None):
    """Pairs from a TSV path, a list of pairs, or the bundled corpus when ``data`` is None."""
    if data is None:
        pairs = text.load_bundled_dates()
    elif isinstance(data, (str, pathlib.Path)):
        pairs = text.read_pairs(data)
    else:
        pairs = [tuple(pair) for pair in data]
    if not pairs:
        raise ValueError(f"No sentence pairs to train on. Received: data={data!r}")
    return pairs if max_pairs is None else pairs[:max_pairs]


def _tokenizer_configs(train_config):
    def config(kind, split_digits, make=text.TokenizerConfig):
        return make(
            kind=kind, ops=train_config.tokenizer_ops, split_digits=split_digits
        )

    return (
        config(train_config.source_tokenizer, train_config.split_digits),
        # The target keeps its case and Unicode form: text comes back as written.
        config(
            train_config.target_tokenizer,
            train_config.split_digits,
            text.TokenizerConfig.for_target,
        ),
    )


def _longest(pairs, tokenizer):
    """Longest source and target among ``pairs``, in tokens (the target with its end id)."""
    lengths = text.encode_pairs(pairs, tokenizer).map(
        lambda s, t: (tf.size(s), tf.size(t))
    )
    longest_source = longest_target = 1
    for sources, targets in lengths.batch(8192).as_numpy_iterator():
        longest_source = max(longest_source, int(sources.max()))
        longest_target = max(longest_target, int(targets.max()) + 1)
    return longest_source, longest_target


@contextlib.contextmanager
def dtype_policy(name):
    """Sets Keras' global dtype policy to ``name`` (e.g. ``"mixed_bfloat16"``) inside the block.

    Layers created inside take it; the previous policy comes back on exit, even
    after an error::

        with dtype_policy("mixed_bfloat16"):
            model = build_seq2seq(...)
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def make_training_datasets(
    splits, tokenizer, model_config, train_config, initial_epoch=0
):
    """The training and validation datasets of `train`, and the steps per epoch.

    Every batch has static shapes (what XLA and TPUs need): ``batch_size`` pairs
    (the global batch; the last partial training batch is dropped), padded to the
    longest sequence of the training split capped by the model's limits (longer
    pairs are dropped). Tokenization runs on the host inside ``tf.data``; the
    auto-shard policy is DATA (`text.make_dataset`). The training stream is
    repeated and is a function of the seed only: ``initial_epoch`` skips the
    batches of the epochs already trained, so a resumed run sees what an
    uninterrupted run would.

    Returns:
        ``(train_ds, valid_ds, steps_per_epoch)``.
    """
    longest_source, longest_target = _longest(splits.train, tokenizer)
    dataset_options = {
        "max_source_length": min(longest_source, model_config.max_source_len),
        "max_target_length": min(longest_target, model_config.max_target_len + 1),
        "pad_to_max_length": True,
        "seed": train_config.seed,
    }
    steps_per_epoch = max(1, len(splits.train) // train_config.batch_size)
    # One shuffled stream over the repeated pairs, with a fixed order: Keras
    # iterates a distributed dataset once more for its symbolic build, and with a
    # reshuffle per iteration the training order would depend on that.
    pairs = text.make_dataset(
        splits.train,
        tokenizer,
        batch_size=train_config.batch_size,
        shuffle=False,
        prefetch=False,
        **dataset_options,
    ).unbatch()
    options = tf.data.Options()
    options.deterministic = True
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    train_ds = (
        pairs.repeat()
        .shuffle(
            len(splits.train), seed=train_config.seed, reshuffle_each_iteration=False
        )
        .batch(train_config.batch_size, drop_remainder=True)
        .skip(initial_epoch * steps_per_epoch)
        .with_options(options)
        .prefetch(tf.data.AUTOTUNE)
    )
    valid_ds = text.make_dataset(
        splits.validation,
        tokenizer,
        batch_size=train_config.batch_size,
        shuffle=False,
        **dataset_options,
    )
    return train_ds, valid_ds, steps_per_epoch


def build_and_compile(tokenizer, model_config, train_config, strategy, steps_per_epoch):
    """The compiled model of `train`; call it in ``strategy.scope()`` under the run's dtype policy.

    Adam with warm-up and cosine decay; with ``mixed_float16`` a
    `SyncedLossScaleOptimizer` around it. XLA (``train_config.jit_compile``): Keras
    compiles the whole step on one replica; with several replicas each replica's
    forward and backward pass is compiled (`use_per_replica_xla`), because Keras'
    whole-step XLA fails there; on a TPU the strategy compiles the step itself.
    """
    replicas = strategy.num_replicas_in_sync
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    model = build_seq2seq(
        tokenizer.source_vocab_size,
        tokenizer.target_vocab_size,
        model_config,
        seed=train_config.seed,
    )
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(
            1, steps_per_epoch * train_config.epochs - train_config.warmup_steps
        ),
        warmup_target=train_config.learning_rate,
        warmup_steps=train_config.warmup_steps,
        alpha=0.05,
    )
    optimizer = keras.optimizers.Adam(schedule, clipnorm=train_config.clipnorm or None)
    if train_config.mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling; bfloat16 has float32's
        # exponent range and needs none.
        optimizer = SyncedLossScaleOptimizer(optimizer)
    per_replica_xla = train_config.jit_compile and replicas > 1 and not tpu
    model.compile(
        optimizer=optimizer,
        loss=masked_loss(),
        metrics=[MaskedAccuracy()],
        jit_compile=bool(train_config.jit_compile and not per_replica_xla and not tpu),
    )
    if per_replica_xla:
        use_per_replica_xla(model)
    return model


def train(
    data=None,
    run_dir="runs/latest",
    model_config=None,
    train_config=None,
    verbose=1,
    callbacks=(),
):
    """Trains a `build_seq2seq` model on sentence pairs with ``model.fit``.

    The pairs are split (train / validation / test, deterministic for the seed),
    vocabularies are learned from the training split only, and the model is
    trained with checkpoints of the best validation loss, early stopping, and a
    backup every epoch: rerunning the same call after a crash resumes from the
    last finished epoch, on the batches an uninterrupted run would have seen.
    The run directory receives ``model.keras`` (the best model), ``config.json``,
    the vocabularies and ``tokenizer.json``, ``history.csv`` and the three splits
    as TSV files.

    Distributed (``train_config.strategy``, see `get_strategy`): the strategy is
    created first, the model is built and compiled in its scope, and
    ``train_config.batch_size`` is the global batch, split across the replicas.
    With several workers every worker runs this same call; the chief writes
    ``run_dir``, the others write to a temporary directory that is removed at the
    end, and every worker keeps its own backups in ``run_dir/backup/worker-<i>``.

    Args:
        data: a ``source<TAB>target`` TSV path, a list of pairs, or None for the
            bundled corpus.
        run_dir: the run directory (created; reused when resuming).
        model_config: a `ModelConfig` (default: ``ModelConfig()``).
        train_config: a `TrainConfig` (default: ``TrainConfig()``).
        verbose: Keras ``fit`` verbosity (1 shows the progress bar).
        callbacks: extra Keras callbacks.

    Returns:
        A `TrainResult`.
    """
    model_config = model_config or ModelConfig()
    train_config = train_config or TrainConfig()
    # First, before any TensorFlow op: multi-worker collectives are configured at start-up.
    strategy = get_strategy(
        train_config.strategy,
        tpu=train_config.tpu,
        worker_timeout=train_config.worker_timeout,
    )
    role = worker_role(strategy)
    replicas = strategy.num_replicas_in_sync
    if train_config.batch_size % replicas:
        raise ValueError(
            f"batch_size is the global batch and must split evenly across the {replicas} replicas. "
            f"Received: batch_size={train_config.batch_size}"
        )
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    backup_root = run_dir / BACKUP_DIR
    backup_dir = worker_backup_dir(backup_root, role.index)
    # The chief writes the run directory; the other workers run the same
    # callbacks (saving may read synchronized variables) into a scratch directory.
    if role.is_chief:
        work_dir = run_dir
    else:
        work_dir = pathlib.Path(
            tempfile.mkdtemp(prefix=f"keras-selfattn-worker{role.index}-")
        )
    try:
        # A peer lost mid-run (a collective failing) becomes one clear error naming it.
        with lost_peers_are_errors(role, run_dir):
            return _train(
                data,
                run_dir,
                work_dir,
                backup_root,
                backup_dir,
                strategy,
                role,
                model_config,
                train_config,
                verbose,
                callbacks,
            )
    finally:
        if not role.is_chief:
            shutil.rmtree(work_dir, ignore_errors=True)


def _train(
    data,
    run_dir,
    work_dir,
    backup_root,
    backup_dir,
    strategy,
    role,
    model_config,
    train_config,
    verbose,
    callbacks,
):
    if role.is_chief:
        resuming = (run_dir / CONFIG_FILE).exists() and backup_root.exists()
        if resuming:
            saved_model_config, saved_train_config = load_run_config(
                run_dir / CONFIG_FILE
            )
            if saved_model_config != model_config or not same_training(
                saved_train_config, train_config
            ):
                raise ValueError(
                    f"{run_dir} holds an interrupted run with a different configuration; "
                    "resume it with the same settings or choose another run directory. "
                    f"Saved: {dataclasses.asdict(saved_model_config)} {dataclasses.asdict(saved_train_config)}"
                )
    else:
        resuming = backup_dir.exists()

    keras.utils.set_random_seed(train_config.seed)
    pairs = load_pairs(data, train_config.max_pairs)
    splits = text.split_pairs(pairs, train_config.split, seed=train_config.seed)
    if not splits.train or not splits.validation:
        raise ValueError(
            f"Too few pairs to split: {len(pairs)} pairs gave {len(splits.train)} for training and "
            f"{len(splits.validation)} for validation. Received: split={train_config.split}"
        )
    if (work_dir / text.pair_tokenizer.TOKENIZER_CONFIG_FILE).exists() and resuming:
        tokenizer = text.PairTokenizer.load(work_dir)
    else:
        tokenizer = text.PairTokenizer.build(
            splits.train, *_tokenizer_configs(train_config)
        )
        tokenizer.save(work_dir)
    split_dir = work_dir / SPLITS_DIR
    for name in ("train", "validation", "test"):
        text.write_pairs(split_dir / f"{name}.tsv", getattr(splits, name))
    save_run_config(work_dir / CONFIG_FILE, model_config, train_config)

    # The workers resume together, from the newest epoch they all have a backup of.
    newest = all_workers_values(
        strategy, max(backed_up_epochs(backup_dir), default=0), role
    )
    initial_epoch = min(newest)
    if initial_epoch and initial_epoch not in backed_up_epochs(backup_dir):
        raise ValueError(
            f"The workers' backups disagree (newest epochs by worker: {newest}) and {backup_dir} has no backup "
            f"of epoch {initial_epoch}; remove {backup_root} to start the run again."
        )
    if role.is_chief and resuming:
        _truncate_history(work_dir / HISTORY_FILE, initial_epoch)

    train_ds, valid_ds, steps_per_epoch = make_training_datasets(
        splits, tokenizer, model_config, train_config, initial_epoch=initial_epoch
    )
    with dtype_policy(train_config.mixed_precision):
        with strategy.scope():
            model = build_and_compile(
                tokenizer, model_config, train_config, strategy, steps_per_epoch
            )
            state = (
                restore_backup(model, backup_dir, initial_epoch)
                if initial_epoch
                else {}
            )
        fit_callbacks = [
            keras.callbacks.ModelCheckpoint(
                str(work_dir / MODEL_FILE),
                monitor="val_loss",
                save_best_only=True,
                initial_value_threshold=state.get("best"),
            ),
            keras.callbacks.EarlyStopping(
                monitor="val_loss",
                patience=train_config.patience,
                restore_best_weights=True,
            ),
            keras.callbacks.CSVLogger(str(work_dir / HISTORY_FILE), append=True),
            # After the callbacks above: a backup of epoch N means they finished epoch N.
            WorkerBackup(backup_dir, monitor="val_loss", best=state.get("best")),
            *callbacks,
        ]
        with keras_multi_worker_fix(strategy):
            history = model.fit(
                train_ds,
                validation_data=valid_ds,
                epochs=train_config.epochs,
                initial_epoch=initial_epoch,
                steps_per_epoch=steps_per_epoch,
                callbacks=fit_callbacks,
                shuffle=False,  # the dataset is already shuffled, with the run's seed
                verbose=verbose,
            )
        # Finished: the backups go (every worker its own; then the shared folder).
        shutil.rmtree(backup_dir, ignore_errors=True)
        all_workers_values(strategy, 0, role)  # a barrier: every worker removed its own
        with contextlib.suppress(OSError):
            backup_root.rmdir()
        # The best checkpoint is the result (early stopping restores it only when it stops early).
        model = keras.saving.load_model(work_dir / MODEL_FILE)
    return TrainResult(
        run_dir=run_dir,
        model=model,
        tokenizer=tokenizer,
        model_config=model_config,
        train_config=train_config,
        history={
            k: [float(v) for v in values] for k, values in history.history.items()
        },
        test_pairs=list(splits.test),
        worker_index=role.index,
        is_chief=role.is_chief,
    )


def _truncate_history(path, epochs):
    """Keeps the rows of ``history.csv`` for the first ``epochs`` epochs (a resumed run redoes the rest)."""
    if not path.exists():
        return
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return
    header, body = rows[0], rows[1:]
    column = header.index("epoch") if "epoch" in header else None
    kept = [
        row
        for row in body
        if column is None
        or (row and row[column].isdigit() and int(row[column]) < epochs)
    ]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *kept])


def write_metrics(run_dir, metrics):
    """Writes ``metrics.json`` in the run directory."""
    path = pathlib.Path(run_dir) / METRICS_FILE
    path.write_text(
        json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return path


__all__ = [
    "TrainResult",
    "build_and_compile",
    "dtype_policy",
    "load_pairs",
    "make_training_datasets",
    "train",
    "write_metrics",
]
