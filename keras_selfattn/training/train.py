"""`train`: sentence pairs in, a run directory with a trained model out."""

import dataclasses
import functools
import json
import pathlib
import shutil
import tempfile

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.models import (
    ModelConfig,
)
from keras_selfattn.training import run_batches
from keras_selfattn.training import run_data as run_data_lib
from keras_selfattn.training.backup import (
    WorkerBackup,
    restore_backup,
    worker_backup_dir,
)
from keras_selfattn.training.compiled_model import build_and_compile, dtype_policy
from keras_selfattn.training.config import (
    TrainConfig,
    load_run_config,
    same_training,
    save_run_config,
)
from keras_selfattn.training.continuation import reopen_finished_run
from keras_selfattn.training.distributed import (
    lost_peers_are_errors,
    worker_role,
)
from keras_selfattn.training.keras_fix import keras_multi_worker_fix
from keras_selfattn.training.resume import (
    agree_on_restart,
    truncate_history,
)
from keras_selfattn.training.resume import (
    truncate_history as _truncate_history,  # noqa: F401  (tests import it from here)
)
from keras_selfattn.training.run_batches import (
    make_training_datasets,
)
from keras_selfattn.training.run_dir import finish_run
from keras_selfattn.training.run_lock import hold_and_claim_run_dir
from keras_selfattn.training.run_tokenizer import load_or_learn_tokenizer
from keras_selfattn.training.run_tokenizer import (
    tokenizer_configs as _tokenizer_configs,  # noqa: F401  (benchmarks import it from here)
)
from keras_selfattn.training.step_loop import (
    HistoryLog,
    ProgressLog,
    StepEvaluation,
    StopAtStep,
    plan_steps,
)
from keras_selfattn.training.strategy import get_strategy
from keras_selfattn.training.watch import ValidationWatch

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
    ``max_test_pairs``, drawn from a window at the head of the stream: 50,000
    pairs with the defaults, whatever the corpus size). The vocabularies come
    from ``vocab`` or are learned from the first ``vocab_sample_lines`` training
    pairs. Batches are bucketed by length (`TrainConfig.length_buckets`).
    Training runs ``train_steps`` steps
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
    the vocabularies, ``tokenizer.json``, ``history.csv`` (a row per period),
    ``training.json`` (steps, pairs dropped for length) and ``splits/``.

    Distributed (``train_config.strategy``, see `get_strategy`): the strategy is
    created first, the model is built and compiled in its scope, and
    ``train_config.batch_size`` is the global batch, split across the replicas.
    With several workers every worker runs this same call; the chief writes
    ``run_dir``, the others write to a temporary directory that is removed at the
    end, and every worker keeps its own backups in ``run_dir/backup/worker-<i>``.
    With several replicas a resumed run skips the batches trained on (a
    distributed iterator cannot be checkpointed).

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
    # The chief holds the run directory's lock (run_lock.py) before writing anything;
    # a finished run that this call only trains longer continues (continuation.py).
    reopen = functools.partial(
        reopen_finished_run,
        model_config=model_config,
        train_config=train_config,
        data=data,
        valid_data=valid_data,
        test_data=test_data,
        verbose=bool(verbose),
    )
    state, created, lock = (
        hold_and_claim_run_dir(run_dir, overwrite=overwrite, reopen=reopen)
        if role.is_chief
        else (None, False, None)
    )
    run_dir = pathlib.Path(run_dir)
    backup_root = run_dir / BACKUP_DIR
    backup_dir = worker_backup_dir(backup_root, role.index)
    resuming = state == "interrupted" if role.is_chief else backup_dir.exists()
    # The chief writes the run directory; the other workers run the same
    # callbacks (saving may read synchronized variables) into a scratch directory.
    work_dir = (
        run_dir
        if role.is_chief
        else pathlib.Path(
            tempfile.mkdtemp(prefix=f"keras-selfattn-worker{role.index}-")
        )
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
    except BaseException as error:
        if created and not backup_root.exists():  # nothing to resume: leave nothing
            shutil.rmtree(run_dir, ignore_errors=True)
        malformed = text.stream.malformed_line_error(error)
        if isinstance(error, tf.errors.InvalidArgumentError) and malformed:
            raise malformed from None
        raise
    finally:
        if not role.is_chief:
            shutil.rmtree(work_dir, ignore_errors=True)
        if lock is not None:
            lock.release()


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
    if verbose and role.is_chief:
        print(run_data.describe())
    tokenizer = load_or_learn_tokenizer(
        vocab, work_dir, resuming, run_data, train_config
    )
    save_run_config(work_dir / CONFIG_FILE, model_config, train_config)
    probe = text.stream.StreamCounters.create()
    if not run_batches.first_pass_fits(
        run_data, tokenizer, model_config, train_config, probe
    ):
        raise ValueError(
            "No training pair fits the model: "
            + run_batches.length_report(probe.values(), model_config)
        )
    plan = plan_steps(train_config, run_data.train_pairs)

    initial_epoch = agree_on_restart(strategy, role, backup_dir)
    if role.is_chief and resuming:
        truncate_history(work_dir / HISTORY_FILE, initial_epoch)

    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    buckets = 1 if tpu else train_config.length_buckets
    counters = text.stream.StreamCounters.create()
    valid_ds = run_batches.validation_batches(
        run_data.validation,
        tokenizer,
        model_config,
        train_config,
        replicas=strategy.num_replicas_in_sync,
        num_buckets=buckets,
    )
    fit_input, resumable = run_batches.training_input(
        strategy,
        role,
        run_data,
        tokenizer,
        model_config,
        train_config,
        counters=counters,
        num_buckets=buckets,
        resume=(backup_dir, initial_epoch, plan),
        checkpointable=strategy.num_replicas_in_sync == 1 and not tpu,
    )

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
        stopper = StopAtStep(plan.total_steps, plan.step_after(initial_epoch))
        watch = (
            ValidationWatch(
                run_data.validation,
                tokenizer,
                model_config,
                sample_size=train_config.validation_translations,
            )
            if train_config.validation_translations and not tpu
            else None
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
            watch=watch,
            best_by=train_config.best_by,
        )
        progress = (
            [
                ProgressLog(
                    train_config.log_every,
                    plan.total_steps,
                    step=plan.step_after(initial_epoch),
                    counters=counters,
                )
            ]
            if train_config.log_every and verbose == 2 and role.is_chief
            else []
        )
        fit_callbacks = [
            stopper,
            *progress,
            evaluation,
            HistoryLog(work_dir / HISTORY_FILE, evaluation),
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
            "steps": stopper.step,
            "pairs_read": counts["pairs"],
            "dropped_for_length": counts["too_long"],
            "malformed_lines_skipped": counts["malformed"],
            "lines_with_extra_columns": counts["extra_columns"],
            "best_by": evaluation.best_by,
            "best": evaluation.best,
            "health": None
            if evaluation.health is None
            else evaluation.health.to_dict(),
        }
        finish_run(work_dir, backup_dir, summary, strategy, role)
        if verbose and role.is_chief:
            print(run_batches.length_report(counts, model_config))
            if train_config.skip_malformed:
                print(f"{counts['malformed']} malformed lines skipped")
            if counts["extra_columns"]:
                print(text.stream.extra_columns_report(counts["extra_columns"]))
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
