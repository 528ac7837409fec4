"""`train`: sentence pairs in, a run directory with a trained model out."""

import dataclasses
import json
import pathlib

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.models import MaskedAccuracy, ModelConfig, build_seq2seq, masked_loss
from keras_selfattn.training.config import TrainConfig, load_run_config, save_run_config
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
    def config(kind, split_digits):
        return text.TokenizerConfig(kind=kind, ops=train_config.tokenizer_ops, split_digits=split_digits)

    return (
        config(train_config.source_tokenizer, train_config.split_digits),
        config(train_config.target_tokenizer, train_config.split_digits),
    )


def _longest(pairs, tokenizer):
    """Longest source and target among ``pairs``, in tokens (the target with its end id)."""
    lengths = text.encode_pairs(pairs, tokenizer).map(lambda s, t: (tf.size(s), tf.size(t)))
    longest_source = longest_target = 1
    for sources, targets in lengths.batch(8192).as_numpy_iterator():
        longest_source = max(longest_source, int(sources.max()))
        longest_target = max(longest_target, int(targets.max()) + 1)
    return longest_source, longest_target


def train(data=None, run_dir="runs/latest", model_config=None, train_config=None, verbose=1, callbacks=()):
    """Trains a `build_seq2seq` model on sentence pairs with ``model.fit``.

    The pairs are split (train / validation / test, deterministic for the seed),
    vocabularies are learned from the training split only, and the model is
    trained with checkpoints of the best validation loss, early stopping, and a
    backup every epoch: rerunning the same call after a crash resumes from the
    last finished epoch. The run directory receives ``model.keras`` (the best
    model), ``config.json``, the vocabularies and ``tokenizer.json``,
    ``history.csv`` and the three splits as TSV files.

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
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resuming = (run_dir / CONFIG_FILE).exists() and (run_dir / BACKUP_DIR).exists()
    if resuming:
        saved_model_config, saved_train_config = load_run_config(run_dir / CONFIG_FILE)
        if (saved_model_config, saved_train_config) != (model_config, train_config):
            raise ValueError(
                f"{run_dir} holds an interrupted run with a different configuration; "
                "resume it with the same settings or choose another run directory. "
                f"Saved: {dataclasses.asdict(saved_model_config)} {dataclasses.asdict(saved_train_config)}"
            )

    keras.utils.set_random_seed(train_config.seed)
    pairs = load_pairs(data, train_config.max_pairs)
    splits = text.split_pairs(pairs, train_config.split, seed=train_config.seed)
    if not splits.train or not splits.validation:
        raise ValueError(
            f"Too few pairs to split: {len(pairs)} pairs gave {len(splits.train)} for training and "
            f"{len(splits.validation)} for validation. Received: split={train_config.split}"
        )
    if (run_dir / text.pair_tokenizer.TOKENIZER_CONFIG_FILE).exists() and resuming:
        tokenizer = text.PairTokenizer.load(run_dir)
    else:
        tokenizer = text.PairTokenizer.build(splits.train, *_tokenizer_configs(train_config))
        tokenizer.save(run_dir)
    split_dir = run_dir / SPLITS_DIR
    for name in ("train", "validation", "test"):
        text.write_pairs(split_dir / f"{name}.tsv", getattr(splits, name))
    save_run_config(run_dir / CONFIG_FILE, model_config, train_config)

    # Static shapes for XLA: pad every batch to the longest sequence of the
    # training data (capped by the model's limits); longer pairs are dropped.
    longest_source, longest_target = _longest(splits.train, tokenizer)
    max_source = min(longest_source, model_config.max_source_len)
    max_target = min(longest_target, model_config.max_target_len + 1)
    strategy = get_strategy(train_config.strategy)
    dataset_options = dict(
        max_source_length=max_source,
        max_target_length=max_target,
        pad_to_max_length=True,
        seed=train_config.seed,
    )
    # Repeated, with a fixed number of steps per epoch: every epoch is a full
    # pass's worth of fresh shuffled batches and Keras knows the epoch length.
    train_ds = text.make_dataset(
        splits.train, tokenizer, batch_size=train_config.batch_size, drop_remainder=True, **dataset_options
    ).repeat()
    valid_ds = text.make_dataset(
        splits.validation, tokenizer, batch_size=train_config.batch_size, shuffle=False, **dataset_options
    )
    steps_per_epoch = max(1, len(splits.train) // train_config.batch_size)

    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(train_config.mixed_precision)
    try:
        with strategy.scope():
            model = build_seq2seq(
                tokenizer.source_vocab_size, tokenizer.target_vocab_size, model_config, seed=train_config.seed
            )
            schedule = keras.optimizers.schedules.CosineDecay(
                initial_learning_rate=0.0,
                decay_steps=max(1, steps_per_epoch * train_config.epochs - train_config.warmup_steps),
                warmup_target=train_config.learning_rate,
                warmup_steps=train_config.warmup_steps,
                alpha=0.05,
            )
            optimizer = keras.optimizers.Adam(schedule, clipnorm=train_config.clipnorm or None)
            model.compile(
                optimizer=optimizer,
                loss=masked_loss(),
                metrics=[MaskedAccuracy()],
                jit_compile=train_config.jit_compile,
            )
        fit_callbacks = [
            keras.callbacks.BackupAndRestore(str(run_dir / BACKUP_DIR)),
            keras.callbacks.ModelCheckpoint(str(run_dir / MODEL_FILE), monitor="val_loss", save_best_only=True),
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=train_config.patience, restore_best_weights=True),
            keras.callbacks.CSVLogger(str(run_dir / HISTORY_FILE), append=True),
            *callbacks,
        ]
        history = model.fit(
            train_ds,
            validation_data=valid_ds,
            epochs=train_config.epochs,
            steps_per_epoch=steps_per_epoch,
            callbacks=fit_callbacks,
            shuffle=False,  # the dataset is already shuffled, with the run's seed
            verbose=verbose,
        )
        # The best checkpoint is the result (early stopping restores it only when it stops early).
        model = keras.saving.load_model(run_dir / MODEL_FILE)
    finally:
        keras.config.set_dtype_policy(previous_policy)
    return TrainResult(
        run_dir=run_dir,
        model=model,
        tokenizer=tokenizer,
        model_config=model_config,
        train_config=train_config,
        history={k: [float(v) for v in values] for k, values in history.history.items()},
        test_pairs=list(splits.test),
    )


def write_metrics(run_dir, metrics):
    """Writes ``metrics.json`` in the run directory."""
    path = pathlib.Path(run_dir) / METRICS_FILE
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


__all__ = ["TrainResult", "load_pairs", "train", "write_metrics"]
