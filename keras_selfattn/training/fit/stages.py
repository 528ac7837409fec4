"""The stages of one `train` call, in order, on one `RunState`.

`keras_selfattn.training.fit.train` claims the run directory, starts the
strategy and then runs these: check a resumed configuration, prepare the data
and the tokenizers, agree with the other workers where to restart, build the
batches and the model (restoring a backup), fit with the callbacks (validation,
backups, kept checkpoints, progress) and finish (the best model, the summary).
Each stage reads what the stages before it set on the `RunState`.
"""

import dataclasses
import pathlib

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.config import (
    TrainConfig,
    same_training,
)
from keras_selfattn.models import (
    ModelConfig,
    saving,
)
from keras_selfattn.run_directory.layout import (
    BACKUP_DIR,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    HISTORY_FILE,
    MODEL_FILE,
    TENSORBOARD_DIR,
)
from keras_selfattn.run_directory.settings import load_run_config, save_run_config
from keras_selfattn.training.callbacks.best_model import BestModel, best_by_for
from keras_selfattn.training.callbacks.early_stopping import EarlyStopping
from keras_selfattn.training.callbacks.health import HealthAlarm
from keras_selfattn.training.callbacks.history import HistoryLog
from keras_selfattn.training.callbacks.kept_checkpoints import KeepCheckpoints
from keras_selfattn.training.callbacks.moving_average import SwapInMovingAverage
from keras_selfattn.training.callbacks.progress import (
    ProgressBar,
    ProgressLog,
    TrainingSpeed,
    ValidationLog,
)
from keras_selfattn.training.callbacks.stop_at_step import StopAtStep
from keras_selfattn.training.callbacks.tensorboard import (
    TensorBoardLog,
    tensorboard_installed,
)
from keras_selfattn.training.callbacks.validation import Validation, ValidationWatch
from keras_selfattn.training.data import run_batches
from keras_selfattn.training.data import run_data as run_data_lib
from keras_selfattn.training.data.run_tokenizer import load_or_learn_tokenizer
from keras_selfattn.training.distribute.distributed import (
    WorkerRole,
)
from keras_selfattn.training.distribute.keras_fix import keras_multi_worker_fix
from keras_selfattn.training.fit.compiled_model import build_and_compile
from keras_selfattn.training.fit.step_plan import StepPlan, plan_steps
from keras_selfattn.training.run.backup import (
    WorkerBackup,
    restore_backup,
    worker_backup_dir,
)
from keras_selfattn.training.run.resume import (
    agree_on_restart,
    truncate_history,
)
from keras_selfattn.training.run.run_dir import mark_finished as mark_run_finished
from keras_selfattn.training.run.run_dir import prune_backups


@dataclasses.dataclass
class RunState:
    """One `train` call: what it was given, then what its stages set, in order."""

    run_dir: pathlib.Path
    model_config: ModelConfig
    train_config: TrainConfig
    inputs: dict  # data, valid_data, test_data (as `train` takes them) and vocab
    verbose: int  # 0: silent, 1: a progress bar, 2: progress lines
    callbacks: tuple
    # _start_strategy
    strategy: tf.distribute.Strategy | None = None
    role: WorkerRole | None = None
    # _claim_run_dir
    resuming: bool = False
    fresh: bool = False  # the run directory was new (missing or empty)
    work_dir: pathlib.Path | None = None  # run_dir on the chief, scratch elsewhere
    # prepare_data
    run_data: run_data_lib.RunData | None = None
    tokenizer: text.PairTokenizer | None = None
    plan: StepPlan | None = None
    # agree_on_restart
    initial_epoch: int = 0
    # prepare_batches
    counters: text.stream.StreamCounters | None = None
    valid_batches: tf.data.Dataset | None = None
    fit_input: object = None
    resumable: object = None
    # build_model
    model: keras.Model | None = None
    restored: dict = dataclasses.field(default_factory=dict)
    # fit
    stopper: StopAtStep | None = None
    speed: TrainingSpeed | None = None
    validation: Validation | None = None
    best_model: BestModel | None = None
    history: keras.callbacks.History | None = None
    # finish
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


def check_resumed_config(run):
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


def prepare_data(run):
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


def agree_on_restart_epoch(run):
    """Sets ``initial_epoch``, the backup all workers resume from (0: none), and
    says where a resumed run restarts."""
    run.initial_epoch = agree_on_restart(run.strategy, run.role, run.backup_dir)
    if run.role.is_chief and run.resuming:
        truncate_history(run.work_dir / HISTORY_FILE, run.plan, run.initial_epoch)
    if run.chief_verbose and run.initial_epoch:
        step = run.plan.step_after(run.initial_epoch)
        done = " (its steps are done: finishing the run)"
        print(
            f"resuming from step {step}{done if step == run.plan.total_steps else ''}"
        )


def prepare_batches(run):
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


def build_model(run):
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


def fit(run):
    """Sets ``history``: trains from ``initial_epoch`` to the plan's end."""
    callbacks = fit_callbacks(run)
    with keras_multi_worker_fix(run.strategy):
        run.history = run.model.fit(
            run.fit_input,
            epochs=run.plan.periods,
            initial_epoch=run.initial_epoch,
            steps_per_epoch=run.plan.period,
            callbacks=callbacks,
            shuffle=False,  # the dataset is already shuffled, with the run's seed
            verbose=0,  # the progress is ours, in steps (`progress_log`)
        )


def kept_checkpoints(run):
    """`KeepCheckpoints` when ``keep_checkpoints`` > 0 (for checkpoint averaging)."""
    keep = run.train_config.keep_checkpoints
    if not keep:
        return []
    return [KeepCheckpoints(run.work_dir / CHECKPOINTS_DIR, keep, run.plan)]


def fit_callbacks(run):
    """``model.fit``'s callbacks, in order; sets ``stopper``, ``speed``,
    ``validation`` and ``best_model``.

    A period's end runs them in this order: `Validation` writes the figures
    into ``logs``, and every callback after it reads them there.
    """
    config, plan = run.train_config, run.plan
    run.stopper = StopAtStep(plan.total_steps, plan.step_after(run.initial_epoch))
    run.speed = TrainingSpeed(run.counters)
    watch = validation_watch(run)
    best_by = best_by_for(config.best_by, translations=watch is not None)
    best = run.restored.get("best")
    run.validation = Validation(plan, run.valid_batches, watch)
    run.best_model = BestModel(plan, run.work_dir / MODEL_FILE, best_by, best=best)
    early_stopping = EarlyStopping(
        plan, config.patience, best_by, best=best, wait=run.restored.get("wait", 0)
    )
    # First: every callback after it sees the average at a period's end.
    average = [SwapInMovingAverage()] if config.ema_momentum else []
    return [
        *average,
        run.speed,  # times the steps
        run.stopper,
        *progress_log(run),
        run.validation,
        run.best_model,
        early_stopping,
        *validation_log(run),
        HealthAlarm(plan, run.validation),
        *tensorboard_log(run, run.validation),
        *kept_checkpoints(run),
        HistoryLog(run.work_dir / HISTORY_FILE, run.validation, plan),
        # After the callbacks above: a backup of period N means they finished it.
        WorkerBackup(
            run.backup_dir,
            plan=plan,
            best_model=run.best_model,
            early_stopping=early_stopping,
            resumable=run.resumable,
        ),
        *run.callbacks,
    ]


def validation_log(run):
    """``[ValidationLog]`` when this worker prints (`RunState.chief_verbose`)."""
    if not run.chief_verbose:
        return []
    return [ValidationLog(run.plan, run.validation, run.best_model, run.speed)]


def validation_watch(run):
    """The translations and health check of each validation (None: not on a TPU)."""
    if not run.train_config.validation_translations or run.tpu:
        return None
    return ValidationWatch(
        run.run_data.validation,
        run.tokenizer,
        run.model_config,
        sample_size=run.train_config.validation_translations,
    )


def progress_log(run):
    """The chief's progress in steps: ``[ProgressBar]`` (``verbose=1``),
    ``[ProgressLog]`` (``verbose=2``, every ``log_every`` steps), else ``[]``."""
    if not run.role.is_chief:
        return []
    step = run.plan.step_after(run.initial_epoch)
    if run.verbose == 1:
        return [ProgressBar(run.plan, step=step, speed=run.speed)]
    if run.verbose == 2 and run.train_config.log_every:
        every = run.train_config.log_every
        return [
            ProgressLog(
                every, run.plan.total_steps, step=step, speed=run.speed, plan=run.plan
            )
        ]
    return []


def tensorboard_log(run, validation):
    """``[TensorBoardLog]`` on the chief when ``tensorboard`` is on and installed."""
    if not (run.train_config.tensorboard and run.role.is_chief):
        return []
    if not tensorboard_installed():
        if run.chief_verbose:
            print(
                "TensorBoard logs off: the tensorboard package is not installed "
                "(pip install keras-selfattn[tensorboard])"
            )
        return []
    return [
        TensorBoardLog(
            run.work_dir / TENSORBOARD_DIR,
            run.plan,
            run.speed,
            run.train_config.log_every,
            step=run.plan.step_after(run.initial_epoch),
            validation=validation,
        )
    ]


def finish(run):
    """Sets ``summary`` (``training.json``), keeps the newest backup, loads the
    best model; `mark_finished` then marks the run finished.

    The best checkpoint, not the last step's weights, becomes ``model``.
    """
    counts = run.counters.values()
    health = run.validation.health
    run.summary = {
        "steps": run.stopper.step,
        "pairs_read": counts["pairs"],
        "dropped_for_length": counts["too_long"],
        "malformed_lines_skipped": counts["malformed"],
        "lines_with_extra_columns": counts["extra_columns"],
        "best_by": run.best_model.best_by,
        "best": run.best_model.best,
        "health": None if health is None else health.to_dict(),
    }
    prune_backups(run.backup_dir, run.strategy, run.role)
    if run.chief_verbose:
        print(run_batches.length_report(counts, run.model_config))
        if run.train_config.skip_malformed:
            print(f"{counts['malformed']} malformed lines skipped")
        if counts["extra_columns"]:
            print(text.stream.extra_columns_report(counts["extra_columns"]))
    run.model = saving.load_model(run.work_dir / MODEL_FILE)


def mark_finished(run):
    """Writes ``training.json`` (the chief): the run is complete.

    Last: until then the run is an interrupted one whose steps are done, and
    the same call finishes it.
    """
    if run.role.is_chief:
        mark_run_finished(run.work_dir, run.summary)
