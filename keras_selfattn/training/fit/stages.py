"""The stages of one `train` call, in order, and the values they pass on.

`keras_selfattn.training.fit.train` starts the strategy and claims the run
directory (a `WorkerPlace`), then runs these: check a resumed configuration,
prepare the data and the tokenizers (`PreparedData`), agree with the other
workers where to restart (`Restart`), build the batches (`Batches`) and the model
(`BuiltModel`, restoring a backup), fit with the callbacks (`FitOutcome`) and
finish (`FinishedRun`: the best model, the summary). Each stage takes what it
needs as arguments and returns what it makes; nothing is set on a shared record.
"""

import dataclasses
import pathlib

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.config import TrainConfig, same_training
from keras_selfattn.models import ModelConfig, saving
from keras_selfattn.run_directory.layout import CONFIG_FILE, HISTORY_FILE, MODEL_FILE
from keras_selfattn.run_directory.settings import load_run_config, save_run_config
from keras_selfattn.training.callbacks.best_model import BestModel
from keras_selfattn.training.callbacks.validation import Validation, clock_reading
from keras_selfattn.training.data import run_batches
from keras_selfattn.training.data import run_data as run_data_lib
from keras_selfattn.training.data.run_shortlist import write_run_shortlist
from keras_selfattn.training.data.run_tokenizer import load_or_learn_tokenizer
from keras_selfattn.training.distribute.distributed import WorkerRole
from keras_selfattn.training.distribute.keras_fix import keras_multi_worker_fix
from keras_selfattn.training.fit.compiled_model import build_and_compile
from keras_selfattn.training.fit.fit_callbacks import fit_callbacks
from keras_selfattn.training.fit.step_plan import StepPlan, plan_steps
from keras_selfattn.training.resume.backup import (
    read_backup,
    restore_backup,
    stopped_early,
)
from keras_selfattn.training.resume.restart import agree_on_restart, truncate_history
from keras_selfattn.training.resume.run_state import mark_finished as mark_run_finished
from keras_selfattn.training.resume.run_state import prune_backups


@dataclasses.dataclass(frozen=True)
class TrainCall:
    """What one `train` call was given (``verbose`` already a level: 0, 1 or 2),
    and when it started (`validation.clock_reading`: the run's CPU and wall
    seconds count from there)."""

    run_dir: pathlib.Path
    model_config: ModelConfig
    train_config: TrainConfig
    data: object  # as `train` takes it: path(s), pattern(s), pairs, or None
    valid_data: object
    test_data: object
    vocab: object
    verbose: int
    callbacks: tuple
    started: tuple = dataclasses.field(default_factory=clock_reading)


@dataclasses.dataclass(frozen=True)
class WorkerPlace:
    """Where this worker trains and writes.

    Attributes:
        strategy: the `tf.distribute.Strategy`.
        role: this worker's `WorkerRole`.
        run_dir: the run directory.
        work_dir: where this worker writes: ``run_dir`` on the chief, a scratch
            directory on the other workers.
        backup_dir: this worker's own backups (`backup.worker_backup_dir`).
        resuming: the run directory holds an interrupted run.
        fresh: the run directory was new (missing or empty).
        created: this call created the run directory.
        verbose: what this worker prints: the call's level on the chief, 0 elsewhere.
    """

    strategy: tf.distribute.Strategy
    role: WorkerRole
    run_dir: pathlib.Path
    work_dir: pathlib.Path
    backup_dir: pathlib.Path
    resuming: bool
    fresh: bool
    created: bool
    verbose: int

    @property
    def replicas(self):
        return self.strategy.num_replicas_in_sync

    @property
    def tpu(self):
        return isinstance(self.strategy, tf.distribute.TPUStrategy)


@dataclasses.dataclass(frozen=True)
class PreparedData:
    """The run's data record, its tokenizers and its step plan."""

    run_data: run_data_lib.RunData
    tokenizer: text.PairTokenizer
    plan: StepPlan


@dataclasses.dataclass(frozen=True)
class Restart:
    """Where the run restarts: the backup all workers resume from (``epoch``,
    periods trained; 0: none), and whether the run's steps are done there (its
    last step, or an early stop): the call then trains nothing and finishes it."""

    epoch: int
    done: bool


@dataclasses.dataclass(frozen=True)
class Batches:
    """The validation batches, ``fit``'s input and the stream's counters.

    ``resumable`` saves the input iterator in each backup (None: it cannot be
    checkpointed, a resumed run replays the batches instead).
    """

    counters: text.stream.StreamCounters
    validation: tf.data.Dataset
    training: object
    resumable: object


@dataclasses.dataclass(frozen=True)
class BuiltModel:
    """The compiled model and the state of the backup restored into it (best,
    wait, the counts and health it recorded; empty for a fresh start)."""

    model: keras.Model
    restored: dict


@dataclasses.dataclass(frozen=True)
class FitOutcome:
    """What ``fit`` leaves: Keras' history of this call, the step reached, the
    last validation and the best model kept."""

    history: keras.callbacks.History
    steps: int
    validation: Validation
    best_model: BestModel


@dataclasses.dataclass(frozen=True)
class FinishedRun:
    """The best model, loaded, and the run's summary (``training.json``)."""

    model: keras.Model
    summary: dict


def check_resumed_config(call, place):
    """An interrupted run resumes only with the configuration it started with."""
    if not (place.resuming and place.role.is_chief):
        return
    saved_model_config, saved_train_config = load_run_config(
        place.run_dir / CONFIG_FILE
    )
    if saved_model_config != call.model_config or not same_training(
        saved_train_config, call.train_config
    ):
        raise ValueError(
            f"{place.run_dir} holds an interrupted run with a different "
            "configuration; resume it with the same settings or choose another run "
            f"directory. Saved: {dataclasses.asdict(saved_model_config)} "
            f"{dataclasses.asdict(saved_train_config)}"
        )


def prepare_data(call, place):
    """The `PreparedData` of the call; writes ``config.json``."""
    config = call.train_config
    run_data = run_data_lib.prepare_run_data(
        text.bundled_dates_path() if call.data is None else call.data,
        place.work_dir,
        config,
        valid_data=call.valid_data,
        test_data=call.test_data,
    )
    if place.verbose:
        print(run_data.describe())
    tokenizer = load_or_learn_tokenizer(
        call.vocab, place.work_dir, place.resuming, run_data, config
    )
    save_run_config(place.work_dir / CONFIG_FILE, call.model_config, config)
    probe = text.stream.StreamCounters.create()
    if not run_batches.first_pass_fits(
        run_data, tokenizer, call.model_config, config, probe
    ):
        raise ValueError(
            "No training pair fits the model: "
            + run_batches.length_report(probe.values(), call.model_config)
        )
    return PreparedData(run_data, tokenizer, plan_steps(config, run_data.train_pairs))


def agree_on_restart_point(call, place, plan):
    """The `Restart` all workers agree on; says where a resumed run restarts."""
    epoch = agree_on_restart(place.strategy, place.role, place.backup_dir)
    restart = Restart(epoch, bool(epoch) and run_done_at(call, place, plan, epoch))
    if place.role.is_chief and place.resuming:
        truncate_history(place.work_dir / HISTORY_FILE, plan, epoch)
    if place.verbose and epoch:
        done = " (its steps are done: finishing the run)" if restart.done else ""
        print(f"resuming from step {plan.step_after(epoch)}{done}")
    return restart


def run_done_at(call, place, plan, epoch):
    """Whether the run's steps are done at the backup of ``epoch``: its plan's
    last step, or an early stop (`backup.stopped_early`)."""
    if plan.step_after(epoch) == plan.total_steps:
        return True
    state = read_backup(place.backup_dir, epoch)
    return stopped_early(state, call.train_config.patience)


def prepare_batches(call, place, data, restart):
    """The `Batches`: training resumes from the `Restart` point."""
    buckets = 1 if place.tpu else call.train_config.length_buckets
    counters = text.stream.StreamCounters.create()
    validation = run_batches.validation_batches(
        data.run_data.validation,
        data.tokenizer,
        call.model_config,
        call.train_config,
        replicas=place.replicas,
        num_buckets=buckets,
    )
    training, resumable = run_batches.training_input(
        place.strategy,
        place.role,
        data.run_data,
        data.tokenizer,
        call.model_config,
        call.train_config,
        counters=counters,
        num_buckets=buckets,
        resume=(place.backup_dir, restart.epoch, data.plan),
        checkpointable=place.replicas == 1 and not place.tpu,
    )
    return Batches(counters, validation, training, resumable)


def build_model(call, place, data, restart):
    """The `BuiltModel`: built and compiled in the strategy's scope, the backup
    of the `Restart` point restored into it."""
    plan = data.plan
    with place.strategy.scope():
        model = build_and_compile(
            data.tokenizer,
            call.model_config,
            call.train_config,
            place.strategy,
            plan.steps_per_epoch or plan.total_steps,
            total_steps=plan.total_steps,
        )
        restored = {}
        if restart.epoch:
            restored = restore_backup(model, place.backup_dir, restart.epoch)
    return BuiltModel(model, restored)


def fit(call, place, data, batches, built, restart):
    """The `FitOutcome` of training from the `Restart` point to the plan's end
    (nothing, when the run's steps are done there)."""
    callbacks = fit_callbacks(call, place, data, batches, built.restored, restart.epoch)
    last = restart.epoch if restart.done else data.plan.periods
    with keras_multi_worker_fix(place.strategy):
        history = built.model.fit(
            batches.training,
            epochs=last,
            initial_epoch=restart.epoch,
            steps_per_epoch=data.plan.period,
            callbacks=callbacks.all,
            shuffle=False,  # the dataset is already shuffled, with the run's seed
            verbose=0,  # the progress is ours, in steps (`fit_callbacks.progress_log`)
        )
    return FitOutcome(
        history, callbacks.stopper.step, callbacks.validation, callbacks.best_model
    )


def finish(call, place, batches, built, outcome):
    """The `FinishedRun`: the summary, the newest backup kept, the best model
    loaded; `mark_finished` then marks the run finished.

    The best checkpoint, not the last step's weights, becomes the model.
    """
    counts, health = whole_run_figures(batches, built.restored, outcome)
    summary = {
        "steps": outcome.steps,
        "pairs_read": counts["pairs"],
        "dropped_for_length": counts["too_long"],
        "malformed_lines_skipped": counts["malformed"],
        "lines_with_extra_columns": counts["extra_columns"],
        "best_by": outcome.best_model.best_by,
        "best": outcome.best_model.best,
        "health": health,
    }
    prune_backups(place.backup_dir, place.strategy, place.role)
    if place.verbose:
        print(run_batches.length_report(counts, call.model_config))
        if call.train_config.skip_malformed:
            print(f"{counts['malformed']} malformed lines skipped")
        if counts["extra_columns"]:
            print(text.stream.extra_columns_report(counts["extra_columns"]))
    return FinishedRun(saving.load_model(place.work_dir / MODEL_FILE), summary)


def whole_run_figures(batches, restored, outcome):
    """``(counts, health)`` of the whole run: the stream's counts and the last
    validation's health (a dict, or None without translations).

    A call that trained no period (it finishes an interrupted run whose steps
    were done) read no batch and validated nothing: the figures are those its
    last backup recorded (`backup.WorkerBackup`), as the interrupted call had
    them.
    """
    counts = batches.counters.values()
    health = outcome.validation.health
    health = None if health is None else health.to_dict()
    if outcome.history.epoch:
        return counts, health
    return restored.get("counts", counts), restored.get("health", health)


def write_shortlist(call, place, data):
    """Writes the run's vocabulary shortlist (the chief): its training pairs
    counted once more as they stream (`run_shortlist.write_run_shortlist`), so
    that translate, evaluate and export with ``--shortlist`` read it."""
    if place.role.is_chief:
        write_run_shortlist(
            place.work_dir, data.run_data, call.train_config, data.tokenizer
        )


def mark_finished(place, summary):
    """Writes ``training.json`` (the chief): the run is complete.

    Last: until then the run is an interrupted one whose steps are done, and
    the same call finishes it.
    """
    if place.role.is_chief:
        mark_run_finished(place.work_dir, summary)
