"""``model.fit``'s callbacks for one `train` call, in the order a period's end
runs them (`fit_callbacks`), and those read once ``fit`` returns."""

import dataclasses
import math

import keras

from keras_selfattn.run_directory.history import read_history
from keras_selfattn.run_directory.layout import (
    CHECKPOINTS_DIR,
    HISTORY_FILE,
    MODEL_FILE,
    TENSORBOARD_DIR,
)
from keras_selfattn.training.callbacks.best_model import BestModel, best_by_for
from keras_selfattn.training.callbacks.early_stopping import EarlyStopping
from keras_selfattn.training.callbacks.health import HealthAlarm
from keras_selfattn.training.callbacks.history import HistoryLog
from keras_selfattn.training.callbacks.kept_checkpoints import KeepCheckpoints
from keras_selfattn.training.callbacks.progress import (
    ProgressBar,
    ProgressLog,
    TrainingSpeed,
    ValidationLog,
    estimated_validation_steps,
)
from keras_selfattn.training.callbacks.stop_at_step import StopAtStep
from keras_selfattn.training.callbacks.tensorboard import (
    TensorBoardLog,
    tensorboard_installed,
)
from keras_selfattn.training.callbacks.validation import (
    RunClock,
    Validation,
    ValidationWatch,
)
from keras_selfattn.training.moving_average import SwapInMovingAverage
from keras_selfattn.training.resume.backup import WorkerBackup


@dataclasses.dataclass(frozen=True)
class FitCallbacks:
    """The callbacks given to ``fit`` (``all``, in order) and those whose state
    the run reads after it: the step reached, the last validation, the best model."""

    all: list[keras.callbacks.Callback]
    stopper: StopAtStep
    validation: Validation
    best_model: BestModel


def fit_callbacks(call, place, data, batches, restored, initial_epoch):
    """The `FitCallbacks` of a `train` call (`stages.TrainCall`) on this worker
    (`stages.WorkerPlace`), resumed from the backup state ``restored`` of
    ``initial_epoch``.

    A period's end runs them in this order: `Validation` writes the figures
    into ``logs``, and every callback after it reads them there.
    """
    config, plan = call.train_config, data.plan
    step = plan.step_after(initial_epoch)
    stopper = StopAtStep(plan.total_steps, step)
    speed = TrainingSpeed(batches.counters)
    watch = validation_watch(call, place, data)
    best_by = best_by_for(config.best_by, translations=watch is not None)
    best = restored.get("best")
    clock = run_clock(call, place, initial_epoch)
    validation = Validation(plan, batches.validation, watch, clock)
    best_model = BestModel(plan, place.work_dir / MODEL_FILE, best_by, best=best)
    early_stopping = EarlyStopping(
        plan, config.patience, best_by, best=best, wait=restored.get("wait", 0)
    )
    # First: every callback after it sees the average at a period's end.
    average = [SwapInMovingAverage()] if config.ema_momentum else []
    callbacks = [
        *average,
        speed,  # times the steps
        stopper,
        *progress_log(call, place, plan, step, speed, batches, watch),
        validation,
        best_model,
        early_stopping,
        *validation_log(place, plan, validation, best_model, speed),
        HealthAlarm(plan, validation),
        *tensorboard_log(config, place, plan, step, speed, validation),
        *kept_checkpoints(config, place, plan),
        HistoryLog(place.work_dir / HISTORY_FILE, validation, plan),
        # After the callbacks above: a backup of period N means they finished it.
        WorkerBackup(
            place.backup_dir,
            plan=plan,
            best_model=best_model,
            early_stopping=early_stopping,
            resumable=batches.resumable,
            validation=validation,
            counters=batches.counters,
        ),
        *call.callbacks,
    ]
    return FitCallbacks(callbacks, stopper, validation, best_model)


def run_clock(call, place, initial_epoch):
    """The `RunClock` of the call, counting from its start (``call.started``) on
    from what ``history.csv``'s last row counted, for a resumed or continued run
    (``initial_epoch`` > 0: its rows past the restart point are dropped already)."""
    rows = read_history(place.work_dir / HISTORY_FILE) if initial_epoch else []
    before = tuple(
        max([_seconds(row.get(name)) for row in rows], default=0.0)
        for name in CLOCK_COLUMNS
    )
    return RunClock(before, call.started)


# The history.csv columns of `RunClock`'s figures.
CLOCK_COLUMNS = ("cpu_seconds", "wall_seconds")


def _seconds(cell):
    """A history cell as seconds: 0 where empty or not a finite number."""
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def validation_watch(call, place, data):
    """The translations and health check of each validation (None: not on a TPU)."""
    if not call.train_config.validation_translations or place.tpu:
        return None
    return ValidationWatch(
        data.run_data.validation,
        data.tokenizer,
        call.model_config,
        sample_size=call.train_config.validation_translations,
    )


def progress_log(call, place, plan, step, speed, batches, watch):
    """The chief's progress in steps from ``step``: ``[ProgressBar]``
    (``verbose=1``), ``[ProgressLog]`` (``verbose=2``, every ``log_every``
    steps, its ETA counting a validation as the validation ``batches`` and the
    ``watch``'s translations until one was timed), else ``[]``."""
    config = call.train_config
    if not place.role.is_chief:
        return []
    if place.verbose == 1:
        return [ProgressBar(plan, step=step, speed=speed)]
    if place.verbose == 2 and config.log_every:
        validation_steps = estimated_validation_steps(
            max(0, int(batches.validation.cardinality())),
            len(watch.pairs) if watch is not None else 0,
            call.model_config.max_target_len,
        )
        return [
            ProgressLog(
                config.log_every,
                plan.total_steps,
                step=step,
                speed=speed,
                plan=plan,
                validation_steps=validation_steps,
            )
        ]
    return []


def validation_log(place, plan, validation, best_model, speed):
    """``[ValidationLog]`` when this worker prints (`stages.WorkerPlace.verbose`)."""
    if not place.verbose:
        return []
    return [ValidationLog(plan, validation, best_model, speed)]


def tensorboard_log(config, place, plan, step, speed, validation):
    """``[TensorBoardLog]`` on the chief when ``tensorboard`` is on and installed."""
    if not (config.tensorboard and place.role.is_chief):
        return []
    if not tensorboard_installed():
        if place.verbose:
            print(
                "TensorBoard logs off: the tensorboard package is not installed "
                "(pip install keras-selfattn[tensorboard])"
            )
        return []
    return [
        TensorBoardLog(
            place.work_dir / TENSORBOARD_DIR,
            plan,
            speed,
            config.log_every,
            step=step,
            validation=validation,
        )
    ]


def kept_checkpoints(config, place, plan):
    """`KeepCheckpoints` when ``keep_checkpoints`` > 0 (for checkpoint averaging)."""
    if not config.keep_checkpoints:
        return []
    return [
        KeepCheckpoints(place.work_dir / CHECKPOINTS_DIR, config.keep_checkpoints, plan)
    ]
