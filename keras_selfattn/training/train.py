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
from keras_selfattn.text.learn_vocab import learn_pair_tokenizer
from keras_selfattn.training import run_data as run_data_lib
from keras_selfattn.training.backup import (
    WorkerBackup,
    backed_up_epochs,
    input_checkpoint,
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
    SyncedLossScaleOptimizer,
    all_workers_values,
    keras_multi_worker_fix,
    lost_peers_are_errors,
    use_per_replica_xla,
    worker_role,
)
from keras_selfattn.training.run_dir import claim_run_dir, mark_finished
from keras_selfattn.training.step_loop import (
    ResumableInput,
    StepEvaluation,
    StopAtStep,
    plan_steps,
)
from keras_selfattn.training.strategy import get_strategy

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
METRICS_FILE = "metrics.json"
SPLITS_DIR = run_data_lib.SPLITS_DIR
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
    summary: dict | None = (
        None  # steps, pairs read and dropped for length (training.json)
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
    def config(kind, split_digits):
        return text.TokenizerConfig(
            kind=kind, ops=train_config.tokenizer_ops, split_digits=split_digits
        )

    return (
        config(train_config.source_tokenizer, train_config.split_digits),
        config(train_config.target_tokenizer, train_config.split_digits),
    )


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


def make_training_datasets(splits, tokenizer, model_config, train_config):
    """Training and validation datasets from pairs in memory, and the steps per epoch.

    The batches of `train` (`run_data.shuffled_batches`: the training pairs
    repeated, tokenized and length-checked in ``tf.data``, shuffled in a bounded
    buffer, batched by length with the last partial batch of each bucket
    dropped), for small data given as lists (``splits.train``,
    ``splits.validation``). With ``length_buckets=1`` every shape is static.

    Returns:
        ``(train_ds, valid_ds, steps_per_epoch)``.
    """
    train = list(splits.train)
    pairs = tf.data.Dataset.from_tensor_slices(
        (
            tf.constant([s for s, _ in train], tf.string, shape=[len(train)]),
            tf.constant([t for _, t in train], tf.string, shape=[len(train)]),
        )
    ).repeat()
    train_ds = run_data_lib.shuffled_batches(
        pairs, tokenizer, model_config, train_config
    ).prefetch(tf.data.AUTOTUNE)
    valid_ds = run_data_lib.validation_batches(
        list(splits.validation), tokenizer, model_config, train_config
    )
    return train_ds, valid_ds, max(1, len(train) // train_config.batch_size)


def build_and_compile(
    tokenizer, model_config, train_config, strategy, steps_per_epoch, total_steps=None
):
    """The compiled model of `train`; call it in ``strategy.scope()`` under the run's dtype policy.

    Adam with warm-up and cosine decay over ``total_steps`` (default:
    ``steps_per_epoch * epochs``); with ``mixed_float16`` a
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
            1,
            (total_steps or steps_per_epoch * train_config.epochs)
            - train_config.warmup_steps,
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
    *,
    valid_data=None,
    test_data=None,
    vocab=None,
    overwrite=False,
):
    """Trains a `build_seq2seq` model on sentence pairs streamed from files, with ``model.fit``.

    The data is streamed (`text.stream`): nothing proportional to the corpus is
    held in memory. Validation and test pairs come from ``valid_data`` /
    ``test_data`` or are held out of ``data`` by a fingerprint of the source
    text (`text.fingerprint_split`, at most ``max_validation_pairs`` /
    ``max_test_pairs``). The vocabularies come from ``vocab`` or are learned
    from the first ``vocab_sample_lines`` training pairs. Batches are bucketed by
    length (`TrainConfig.length_buckets`). Training runs ``train_steps`` steps
    (or ``epochs`` epochs), validates every ``eval_every`` steps keeping the best
    model (``model.keras``, replaced atomically) and stopping early after
    ``patience`` validations without progress, and backs up every
    ``save_every`` steps: rerunning the same call after a crash resumes from the
    last backup (weights, optimizer, step, early stopping, dropout seeds, and on
    one replica the input iterator itself) on the batches an uninterrupted run
    would have seen. A finished run or a directory holding anything else is
    refused unless ``overwrite``; an interrupted run whose data or configuration
    changed is refused, naming what changed. A failed call leaves no run
    directory it created behind (unless a backup exists to resume from).

    The run directory receives ``model.keras``, ``config.json``, ``data.json``,
    the vocabularies and ``tokenizer.json``, ``history.csv`` (one row per
    period), ``training.json`` (the end: steps, pairs dropped for length) and
    the held-out pairs in ``splits/``.

    Distributed (``train_config.strategy``, see `get_strategy`): the strategy is
    created first, the model is built and compiled in its scope, and
    ``train_config.batch_size`` is the global batch, split across the replicas.
    With several workers every worker runs this same call; the chief writes
    ``run_dir``, the others write to a temporary directory that is removed at the
    end, and every worker keeps its own backups in ``run_dir/backup/worker-<i>``.
    With several replicas a resumed run skips the batches already trained on
    (a distributed iterator cannot be checkpointed).

    Args:
        data: file path(s) or glob pattern(s) of ``source<TAB>target`` lines
            (``.gz`` read), a list of pairs (small data: written to
            ``run_dir/pairs.tsv`` and streamed), or None for the bundled corpus.
        run_dir: the run directory (created; reused when resuming).
        model_config: a `ModelConfig` (default: ``ModelConfig()``).
        train_config: a `TrainConfig` (default: ``TrainConfig()``).
        verbose: Keras ``fit`` verbosity (1 shows the progress bar).
        callbacks: extra Keras callbacks.
        valid_data: validation file pattern(s) (default: held out of ``data``).
        test_data: test file pattern(s) (default: held out of ``data``).
        vocab: a directory with ``tokenizer.json`` and the vocabularies
            (`workflows.build_vocab`'s output or a run directory).
        overwrite: replace a finished run or a directory holding other files.

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
    created = False
    if role.is_chief:
        state, created = claim_run_dir(run_dir, overwrite=overwrite)
        resuming = state == "interrupted"
    run_dir = pathlib.Path(run_dir)
    backup_root = run_dir / BACKUP_DIR
    backup_dir = worker_backup_dir(backup_root, role.index)
    if not role.is_chief:
        resuming = backup_dir.exists()
    # The chief writes the run directory; the other workers run the same
    # callbacks (saving may read synchronized variables) into a scratch directory.
    if role.is_chief:
        work_dir = run_dir
    else:
        work_dir = pathlib.Path(
            tempfile.mkdtemp(prefix=f"keras-selfattn-worker{role.index}-")
        )
    inputs = {"data": data, "valid_data": valid_data, "test_data": test_data}
    try:
        # A peer lost mid-run (a collective failing) becomes one clear error naming it.
        with lost_peers_are_errors(role, run_dir):
            return _train(
                inputs,
                vocab,
                run_dir,
                work_dir,
                backup_dir,
                strategy,
                role,
                resuming,
                model_config,
                train_config,
                verbose,
                callbacks,
            )
    except tf.errors.InvalidArgumentError as error:
        malformed = text.stream.malformed_line_error(error)
        if malformed is None:
            raise
        raise malformed from None
    except BaseException:
        if created and not backup_root.exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        if not role.is_chief:
            shutil.rmtree(work_dir, ignore_errors=True)


def _load_or_learn_tokenizer(vocab, work_dir, resuming, run_data, train_config):
    if resuming and (work_dir / text.pair_tokenizer.TOKENIZER_CONFIG_FILE).exists():
        return text.PairTokenizer.load(work_dir)
    wanted = _tokenizer_configs(train_config)
    if vocab is not None:
        tokenizer = text.PairTokenizer.load(vocab)
        for side, config, expected in zip(
            ("source", "target"),
            (tokenizer.source.config, tokenizer.target.config),
            wanted,
            strict=True,
        ):
            for name in ("kind", "ops", "split_digits"):
                if getattr(config, name) != getattr(expected, name):
                    raise ValueError(
                        f"The {side} vocabulary in {vocab} was built with {name}="
                        f"{getattr(config, name)!r}, but this run asks for "
                        f"{getattr(expected, name)!r}; pass the same tokenizer options"
                    )
    else:
        tokenizer = learn_pair_tokenizer(
            run_data_lib.training_pairs(run_data, train_config),
            *wanted,
            sample_lines=train_config.vocab_sample_lines,
        )
    tokenizer.save(work_dir)
    return tokenizer


def _length_report(counts, model_config):
    pairs, dropped = counts["pairs"], counts["too_long"]
    share = dropped / pairs if pairs else 0.0
    return (
        f"{dropped} of {pairs} pairs read ({share:.1%}) dropped for length: longer "
        f"than max_source_len={model_config.max_source_len} source tokens or "
        f"max_target_len={model_config.max_target_len} target tokens"
    )


def _train(
    inputs,
    vocab,
    run_dir,
    work_dir,
    backup_dir,
    strategy,
    role,
    resuming,
    model_config,
    train_config,
    verbose,
    callbacks,
):
    backup_root = backup_dir.parent
    if resuming and role.is_chief:
        saved_model_config, saved_train_config = load_run_config(run_dir / CONFIG_FILE)
        if saved_model_config != model_config or not same_training(
            saved_train_config, train_config
        ):
            raise ValueError(
                f"{run_dir} holds an interrupted run with a different configuration; "
                "resume it with the same settings or choose another run directory. "
                f"Saved: {dataclasses.asdict(saved_model_config)} {dataclasses.asdict(saved_train_config)}"
            )
    keras.utils.set_random_seed(train_config.seed)
    data = inputs["data"]
    run_data = run_data_lib.prepare_run_data(
        text.bundled_dates_path() if data is None else data,
        work_dir,
        train_config,
        valid_data=inputs["valid_data"],
        test_data=inputs["test_data"],
    )
    tokenizer = _load_or_learn_tokenizer(
        vocab, work_dir, resuming, run_data, train_config
    )
    save_run_config(work_dir / CONFIG_FILE, model_config, train_config)
    probe = text.stream.StreamCounters.create()
    if not run_data_lib.first_pass_fits(
        run_data, tokenizer, model_config, train_config, probe
    ):
        raise ValueError(
            "No training pair fits the model: "
            + _length_report(probe.values(), model_config)
        )
    plan = plan_steps(train_config, run_data.train_pairs)

    # The workers resume together, from the newest backup they all have.
    newest = all_workers_values(
        strategy, max(backed_up_epochs(backup_dir), default=0), role
    )
    initial_epoch = min(newest)
    if initial_epoch and initial_epoch not in backed_up_epochs(backup_dir):
        raise ValueError(
            f"The workers' backups disagree (newest backups by worker: {newest}) and {backup_dir} has no backup "
            f"{initial_epoch}; remove {backup_root} to start the run again."
        )
    if role.is_chief and resuming:
        _truncate_history(work_dir / HISTORY_FILE, initial_epoch)

    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    buckets = 1 if tpu else train_config.length_buckets
    counters = text.stream.StreamCounters.create()
    train_ds = run_data_lib.training_stream(
        run_data,
        tokenizer,
        model_config,
        train_config,
        counters=counters,
        replicas=strategy.num_replicas_in_sync,
        workers=role.count,
        num_buckets=buckets,
    )
    valid_ds = run_data_lib.validation_batches(
        run_data.validation,
        tokenizer,
        model_config,
        train_config,
        replicas=strategy.num_replicas_in_sync,
        num_buckets=buckets,
    )
    resumable = None
    restart_point = (
        input_checkpoint(backup_dir, initial_epoch) if initial_epoch else None
    )
    if strategy.num_replicas_in_sync == 1 and not tpu:
        resumable = ResumableInput(train_ds, counters.variables())
        fit_input = resumable.dataset
        if restart_point is not None:
            resumable.restore_from(restart_point)
    if resumable is None or (initial_epoch and restart_point is None):
        # Replayed: the batches already trained on are read again and skipped.
        fit_input = train_ds.skip(plan.step_after(initial_epoch))

    with dtype_policy(train_config.mixed_precision):
        with strategy.scope():
            model = build_and_compile(
                tokenizer,
                model_config,
                train_config,
                strategy,
                plan.steps_per_epoch or plan.total_steps,
                total_steps=plan.total_steps,
            )
            state = (
                restore_backup(model, backup_dir, initial_epoch)
                if initial_epoch
                else {}
            )
        evaluation = StepEvaluation(
            plan,
            valid_ds,
            work_dir / MODEL_FILE,
            train_config.patience,
            best=state.get("best"),
            wait=state.get("wait", 0),
            counters=counters,
            verbose=bool(verbose) and role.is_chief,
        )
        fit_callbacks = [
            StopAtStep(plan.total_steps),
            evaluation,
            keras.callbacks.CSVLogger(str(work_dir / HISTORY_FILE), append=True),
            # After the callbacks above: a backup of period N means they finished it.
            WorkerBackup(
                backup_dir, plan=plan, evaluation=evaluation, resumable=resumable
            ),
            *callbacks,
        ]
        with keras_multi_worker_fix(strategy):
            history = model.fit(
                fit_input,
                epochs=plan.periods,
                initial_epoch=initial_epoch,
                steps_per_epoch=plan.period,
                callbacks=fit_callbacks,
                shuffle=False,  # the dataset is already shuffled, with the run's seed
                verbose=verbose,
            )
        counts = counters.values()
        summary = {
            "steps": int(model.optimizer.iterations),
            "pairs_read": counts["pairs"],
            "dropped_for_length": counts["too_long"],
            "malformed_lines_skipped": counts["malformed"],
            "best_val_loss": evaluation.best,
        }
        if role.is_chief:
            mark_finished(work_dir, summary)
        # Finished: the backups go (every worker its own; then the shared folder).
        shutil.rmtree(backup_dir, ignore_errors=True)
        all_workers_values(strategy, 0, role)  # a barrier: every worker removed its own
        with contextlib.suppress(OSError):
            backup_root.rmdir()
        if verbose and role.is_chief:
            print(_length_report(counts, model_config))
            if train_config.skip_malformed:
                print(f"{counts['malformed']} malformed lines skipped")
        # The best checkpoint is the result.
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
        test_pairs=list(run_data.test),
        worker_index=role.index,
        is_chief=role.is_chief,
        summary=summary,
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
