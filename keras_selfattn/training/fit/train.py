"""`train`: sentence pairs in, a run directory with a trained model out."""

import dataclasses
import functools
import pathlib
import shutil
import tempfile

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.models import (
    ModelConfig,
)
from keras_selfattn.run_layout import (
    BACKUP_DIR,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    HISTORY_FILE,
    MODEL_FILE,
    SPLITS_DIR,  # noqa: F401  (cli.py imports it from here)
    load_run_config,
    save_run_config,
)
from keras_selfattn.training import run_batches
from keras_selfattn.training import run_data as run_data_lib
from keras_selfattn.training.averaging import KeepCheckpoints
from keras_selfattn.training.backup import (
    WorkerBackup,
    restore_backup,
    worker_backup_dir,
)
from keras_selfattn.training.compiled_model import build_and_compile, dtype_policy
from keras_selfattn.training.config import (
    TrainConfig,
    same_training,
)
from keras_selfattn.training.continuation import reopen_finished_run
from keras_selfattn.training.distributed import (
    WorkerRole,
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
    StepPlan,
    StopAtStep,
    plan_steps,
)
from keras_selfattn.training.strategy import get_strategy
from keras_selfattn.training.watch import ValidationWatch

# MODEL_FILE, CONFIG_FILE and SPLITS_DIR stay importable from here for the
# command line (keras_selfattn/cli.py); their home is keras_selfattn.run_layout.


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
    """Pairs from a TSV path, a list of pairs, or (``data`` None) the bundled corpus."""
    if data is None:
        pairs = text.load_bundled_dates()
    elif isinstance(data, (str, pathlib.Path)):
        pairs = text.read_pairs(data)
    else:
        pairs = [tuple(pair) for pair in data]
    if not pairs:
        raise ValueError(f"No sentence pairs to train on. Received: data={data!r}")
    return pairs if max_pairs is None else pairs[:max_pairs]


def train(  # long by its docstring only (the public contract); the body is 30 lines
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
    """Trains a `build_seq2seq` model with ``model.fit`` on pairs streamed from files.

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
    run = _Run(
        run_dir=pathlib.Path(run_dir),
        model_config=model_config or ModelConfig(),
        train_config=train_config or TrainConfig(),
        inputs={
            "data": data,
            "valid_data": valid_data,
            "test_data": test_data,
            "vocab": vocab,
        },
        verbose=verbose,
        callbacks=callbacks,
    )
    # First, before any TensorFlow op: multi-worker collectives are configured
    # at start-up.
    _start_strategy(run)
    created, lock = _claim_run_dir(run, run_dir, overwrite)
    try:
        # A peer lost mid-run (a collective failing) becomes one clear error naming it.
        with lost_peers_are_errors(run.role, run.run_dir):
            return _train(run)
    except BaseException as error:
        if created and not run.backup_root.exists():  # nothing to resume: leave nothing
            shutil.rmtree(run.run_dir, ignore_errors=True)
        malformed = text.stream.malformed_line_error(error)
        if isinstance(error, tf.errors.InvalidArgumentError) and malformed:
            raise malformed from None
        raise
    finally:
        if not run.role.is_chief:
            shutil.rmtree(run.work_dir, ignore_errors=True)
        if lock is not None:
            lock.release()


@dataclasses.dataclass
class _Run:
    """One `train` call: what it was given, then what its stages set, in order."""

    run_dir: pathlib.Path
    model_config: ModelConfig
    train_config: TrainConfig
    inputs: dict  # data, valid_data, test_data (as `train` takes them) and vocab
    verbose: int
    callbacks: tuple
    # _start_strategy
    strategy: tf.distribute.Strategy | None = None
    role: WorkerRole | None = None
    # _claim_run_dir
    resuming: bool = False
    work_dir: pathlib.Path | None = None  # run_dir on the chief, scratch elsewhere
    # _prepare_data
    run_data: run_data_lib.RunData | None = None
    tokenizer: text.PairTokenizer | None = None
    plan: StepPlan | None = None
    # _agree_on_restart
    initial_epoch: int = 0
    # _prepare_batches
    counters: text.stream.StreamCounters | None = None
    valid_batches: tf.data.Dataset | None = None
    fit_input: object = None
    resumable: object = None
    # _build_model
    model: keras.Model | None = None
    restored: dict = dataclasses.field(default_factory=dict)
    # _fit
    stopper: StopAtStep | None = None
    evaluation: StepEvaluation | None = None
    history: keras.callbacks.History | None = None
    # _finish
    summary: dict | None = None

    @property
    def backup_root(self):
        return self.run_dir / BACKUP_DIR

    @property
    def backup_dir(self):
        """This worker's own backups (`worker_backup_dir`)."""
        return worker_backup_dir(self.backup_root, self.role.index)

    @property
    def replicas(self):
        return self.strategy.num_replicas_in_sync

    @property
    def tpu(self):
        return isinstance(self.strategy, tf.distribute.TPUStrategy)

    @property
    def chief_verbose(self):
        """Whether this worker prints: the chief, when ``verbose``."""
        return bool(self.verbose) and self.role.is_chief


def _start_strategy(run):
    """Sets ``strategy`` and ``role``; the global batch must split over the replicas."""
    config = run.train_config
    run.strategy = get_strategy(
        config.strategy, tpu=config.tpu, worker_timeout=config.worker_timeout
    )
    run.role = worker_role(run.strategy)
    if config.batch_size % run.replicas:
        raise ValueError(
            "batch_size is the global batch and must split evenly across the "
            f"{run.replicas} replicas. Received: batch_size={config.batch_size}"
        )


def _claim_run_dir(run, given_run_dir, overwrite):
    """Sets ``resuming`` and ``work_dir``; returns ``(created, lock)`` (chief only).

    ``given_run_dir`` is ``run_dir`` as the caller wrote it: a remote URL
    (``gs://...``) is refused by name, before `pathlib.Path` folds its ``//``.

    The chief holds the run directory's lock (run_lock.py) before writing
    anything; a finished run that this call only trains longer continues
    (continuation.py). The chief writes the run directory; the other workers run
    the same callbacks (saving may read synchronized variables) into a scratch
    directory.
    """
    if not run.role.is_chief:
        run.resuming = run.backup_dir.exists()
        prefix = f"keras-selfattn-worker{run.role.index}-"
        run.work_dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
        return False, None
    reopen = functools.partial(
        reopen_finished_run,
        model_config=run.model_config,
        train_config=run.train_config,
        data=run.inputs["data"],
        valid_data=run.inputs["valid_data"],
        test_data=run.inputs["test_data"],
        verbose=bool(run.verbose),
    )
    state, created, lock = hold_and_claim_run_dir(
        given_run_dir, overwrite=overwrite, reopen=reopen
    )
    run.resuming = state == "interrupted"
    run.work_dir = run.run_dir
    return created, lock


def _train(run):
    """The stages of a run, in order; each reads what those before it set on ``run``."""
    _check_resumed_config(run)
    keras.utils.set_random_seed(run.train_config.seed)
    _prepare_data(run)
    _agree_on_restart(run)
    _prepare_batches(run)
    with dtype_policy(run.train_config.mixed_precision):
        _build_model(run)
        _fit(run)
        _finish(run)
    return TrainResult(
        run_dir=run.run_dir,
        model=run.model,
        tokenizer=run.tokenizer,
        model_config=run.model_config,
        train_config=run.train_config,
        history={
            k: [float(v) for v in values] for k, values in run.history.history.items()
        },
        test_pairs=list(run.run_data.test),
        worker_index=run.role.index,
        is_chief=run.role.is_chief,
        summary=run.summary,
    )


def _check_resumed_config(run):
    """An interrupted run resumes only with the configuration it started with."""
    if not (run.resuming and run.role.is_chief):
        return
    saved_model_config, saved_train_config = load_run_config(run.run_dir / CONFIG_FILE)
    if saved_model_config != run.model_config or not same_training(
        saved_train_config, run.train_config
    ):
        raise ValueError(
            f"{run.run_dir} holds an interrupted run with a different configuration; "
            "resume it with the same settings or choose another run directory. "
            f"Saved: {dataclasses.asdict(saved_model_config)} "
            f"{dataclasses.asdict(saved_train_config)}"
        )


def _prepare_data(run):
    """Sets ``run_data``, ``tokenizer`` and ``plan``; writes ``config.json``."""
    data, config = run.inputs["data"], run.train_config
    run.run_data = run_data_lib.prepare_run_data(
        text.bundled_dates_path() if data is None else data,
        run.work_dir,
        config,
        valid_data=run.inputs["valid_data"],
        test_data=run.inputs["test_data"],
    )
    if run.chief_verbose:
        print(run.run_data.describe())
    run.tokenizer = load_or_learn_tokenizer(
        run.inputs["vocab"], run.work_dir, run.resuming, run.run_data, config
    )
    save_run_config(run.work_dir / CONFIG_FILE, run.model_config, config)
    probe = text.stream.StreamCounters.create()
    if not run_batches.first_pass_fits(
        run.run_data, run.tokenizer, run.model_config, config, probe
    ):
        raise ValueError(
            "No training pair fits the model: "
            + run_batches.length_report(probe.values(), run.model_config)
        )
    run.plan = plan_steps(config, run.run_data.train_pairs)


def _agree_on_restart(run):
    """Sets ``initial_epoch``, the backup all workers resume from (0: none)."""
    run.initial_epoch = agree_on_restart(run.strategy, run.role, run.backup_dir)
    if run.role.is_chief and run.resuming:
        truncate_history(run.work_dir / HISTORY_FILE, run.initial_epoch)


def _prepare_batches(run):
    """Sets ``counters``, ``valid_batches``, ``fit_input`` and ``resumable``."""
    buckets = 1 if run.tpu else run.train_config.length_buckets
    run.counters = text.stream.StreamCounters.create()
    run.valid_batches = run_batches.validation_batches(
        run.run_data.validation,
        run.tokenizer,
        run.model_config,
        run.train_config,
        replicas=run.replicas,
        num_buckets=buckets,
    )
    run.fit_input, run.resumable = run_batches.training_input(
        run.strategy,
        run.role,
        run.run_data,
        run.tokenizer,
        run.model_config,
        run.train_config,
        counters=run.counters,
        num_buckets=buckets,
        resume=(run.backup_dir, run.initial_epoch, run.plan),
        checkpointable=run.replicas == 1 and not run.tpu,
    )


def _build_model(run):
    """Sets ``model``, built and compiled in the strategy's scope, and ``restored``.

    ``restored`` is the state of the backup resumed from (best, wait), or empty.
    """
    plan = run.plan
    with run.strategy.scope():
        run.model = build_and_compile(
            run.tokenizer,
            run.model_config,
            run.train_config,
            run.strategy,
            plan.steps_per_epoch or plan.total_steps,
            total_steps=plan.total_steps,
        )
        if run.initial_epoch:
            run.restored = restore_backup(run.model, run.backup_dir, run.initial_epoch)


def _fit(run):
    """Sets ``history``: trains from ``initial_epoch`` to the plan's end."""
    fit_callbacks = _fit_callbacks(run)
    with keras_multi_worker_fix(run.strategy):
        run.history = run.model.fit(
            run.fit_input,
            epochs=run.plan.periods,
            initial_epoch=run.initial_epoch,
            steps_per_epoch=run.plan.period,
            callbacks=fit_callbacks,
            shuffle=False,  # the dataset is already shuffled, with the run's seed
            verbose=run.verbose,
        )


def _kept_checkpoints(run):
    """`KeepCheckpoints` when ``keep_checkpoints`` > 0 (for checkpoint averaging)."""
    keep = run.train_config.keep_checkpoints
    if not keep:
        return []
    return [KeepCheckpoints(run.work_dir / CHECKPOINTS_DIR, keep, run.plan)]


def _fit_callbacks(run):
    """``model.fit``'s callbacks, in order; sets ``stopper`` and ``evaluation``."""
    config, plan = run.train_config, run.plan
    run.stopper = StopAtStep(plan.total_steps, plan.step_after(run.initial_epoch))
    run.evaluation = StepEvaluation(
        plan,
        run.valid_batches,
        run.work_dir / MODEL_FILE,
        config.patience,
        best=run.restored.get("best"),
        wait=run.restored.get("wait", 0),
        counters=run.counters,
        verbose=run.chief_verbose,
        watch=_validation_watch(run),
        best_by=config.best_by,
    )
    return [
        run.stopper,
        *_progress_log(run),
        run.evaluation,
        *_kept_checkpoints(run),
        HistoryLog(run.work_dir / HISTORY_FILE, run.evaluation),
        # After the callbacks above: a backup of period N means they finished it.
        WorkerBackup(
            run.backup_dir,
            plan=plan,
            evaluation=run.evaluation,
            resumable=run.resumable,
        ),
        *run.callbacks,
    ]


def _validation_watch(run):
    """The translations and health check of each validation (None: not on a TPU)."""
    if not run.train_config.validation_translations or run.tpu:
        return None
    return ValidationWatch(
        run.run_data.validation,
        run.tokenizer,
        run.model_config,
        sample_size=run.train_config.validation_translations,
    )


def _progress_log(run):
    """``[ProgressLog]`` when the chief logs lines (``verbose=2``), else ``[]``."""
    config = run.train_config
    if not (config.log_every and run.verbose == 2 and run.role.is_chief):
        return []
    step = run.plan.step_after(run.initial_epoch)
    return [
        ProgressLog(
            config.log_every, run.plan.total_steps, step=step, counters=run.counters
        )
    ]


def _finish(run):
    """Sets ``summary`` (``training.json``), ends the run, loads the best model.

    The best checkpoint, not the last step's weights, becomes ``model``.
    """
    counts = run.counters.values()
    evaluation = run.evaluation
    run.summary = {
        "steps": run.stopper.step,
        "pairs_read": counts["pairs"],
        "dropped_for_length": counts["too_long"],
        "malformed_lines_skipped": counts["malformed"],
        "lines_with_extra_columns": counts["extra_columns"],
        "best_by": evaluation.best_by,
        "best": evaluation.best,
        "health": None if evaluation.health is None else evaluation.health.to_dict(),
    }
    finish_run(run.work_dir, run.backup_dir, run.summary, run.strategy, run.role)
    if run.chief_verbose:
        print(run_batches.length_report(counts, run.model_config))
        if run.train_config.skip_malformed:
            print(f"{counts['malformed']} malformed lines skipped")
        if counts["extra_columns"]:
            print(text.stream.extra_columns_report(counts["extra_columns"]))
    run.model = keras.saving.load_model(run.work_dir / MODEL_FILE)


__all__ = [
    "TrainResult",
    "build_and_compile",
    "dtype_policy",
    "load_pairs",
    "make_training_datasets",
    "train",
]
