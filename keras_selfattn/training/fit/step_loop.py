"""Training by steps in ``model.fit``: the plan, validation every N steps, the input.

``model.fit`` runs "epochs" of `StepPlan.period` steps, the greatest common
divisor of the validation and backup cadences; `StopAtStep` ends the run at
`StepPlan.total_steps` (the last period may be shorter). `StepEvaluation` runs
the validation when a cadence says so and always at the last step, keeps the
best model (``model.keras``, written under a temporary name and renamed into
place, so a kill mid-write keeps the previous best), stops early after
``patience`` validations without a better loss, and logs the loss, the
validation loss and the target tokens per second (`progress.TrainingSpeed`,
the one definition of the speed; `ProgressLog` lives in ``progress.py``). The
input a resumed run
continues on is `keras_selfattn.training.run.resume.ResumableInput` (resuming
is read in one place).
"""

import dataclasses
import math
import os
import pathlib
import sys

import keras

from keras_selfattn.choices import BEST_BY
from keras_selfattn.run_directory.atomic import replace_atomically
from keras_selfattn.run_directory.history import (
    HISTORY_PERIOD,
    HISTORY_STEP,
    append_history,
)
from keras_selfattn.training.fit.progress import (  # noqa: F401  (their home)
    ProgressLog,
    target_tokens,
)

__all__ = [
    "HistoryLog",
    "ProgressLog",
    "StepEvaluation",
    "StepPlan",
    "StopAtStep",
    "plan_steps",
    "save_model_atomically",
]


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """How many steps, and when to validate and back up.

    Attributes:
        total_steps: optimizer steps in all.
        eval_every: steps between validations.
        save_every: steps between backups.
        period: steps per Keras epoch (``gcd(eval_every, save_every)``).
        steps_per_epoch: steps in a data epoch (None in step mode).
    """

    total_steps: int
    eval_every: int
    save_every: int
    period: int
    steps_per_epoch: int | None = None

    @property
    def periods(self) -> int:
        """Keras epochs of the whole run."""
        return math.ceil(self.total_steps / self.period)

    def step_after(self, periods_done: int) -> int:
        """The step count once ``periods_done`` periods are trained."""
        return min(periods_done * self.period, self.total_steps)

    def evaluates(self, periods_done: int) -> bool:
        step = self.step_after(periods_done)
        return step % self.eval_every == 0 or step == self.total_steps

    def backs_up(self, periods_done: int) -> bool:
        step = self.step_after(periods_done)
        return step % self.save_every == 0 or step == self.total_steps


def plan_steps(train_config, train_pairs: int | None) -> StepPlan:
    """The `StepPlan` of a `TrainConfig`.

    ``train_pairs`` counts an epoch (needed without ``train_steps``).
    """
    steps_per_epoch = None
    if train_config.train_steps:
        total = train_config.train_steps
        eval_every = train_config.eval_every or 1000
    else:
        if train_pairs is None:
            raise ValueError("epochs need the number of training pairs")
        steps_per_epoch = max(1, train_pairs // train_config.batch_size)
        total = train_config.epochs * steps_per_epoch
        eval_every = train_config.eval_every or steps_per_epoch
    eval_every = min(eval_every, total)
    save_every = min(train_config.save_every or eval_every, total)
    return StepPlan(
        total, eval_every, save_every, math.gcd(eval_every, save_every), steps_per_epoch
    )


def save_model_atomically(model, path):
    """``model.save`` to a temporary file beside ``path``, then renamed onto it
    (`replace_atomically`: a failed save names ``path``)."""
    return replace_atomically(model.save, path)


class StopAtStep(keras.callbacks.Callback):
    """Counts the steps from ``step`` (a resumed run's start); stops at ``total_steps``.

    Counted in Python: under a distribution strategy the optimizer's step counter
    is a distributed variable, not a number.
    """

    def __init__(self, total_steps, step=0):
        super().__init__()
        self.total_steps = total_steps
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step >= self.total_steps:
            self.model.stop_training = True


class StepEvaluation(keras.callbacks.Callback):
    """Validation on the plan's cadence, the best model kept, early stopping, the log.

    Every validation computes the validation loss and, with a ``watch`` (a
    `watch.ValidationWatch`), the chrF/BLEU of greedy translations of a bounded
    sample, three examples and the health check; all go into the logs
    (``history.csv``) and, when ``verbose``, the log lines. The best model and
    early stopping follow ``best_by``.

    Args:
        plan: the `StepPlan`.
        validation: the validation dataset (known cardinality).
        model_path: where the best model is written (atomically).
        patience: validations without a better ``best_by`` score before stopping.
        best: the best ``best_by`` score so far (resuming).
        wait: validations since the best (resuming).
        speed: the run's `progress.TrainingSpeed` (the tokens/s figure), or None.
        verbose: print the lines of each validation.
        watch: a `watch.ValidationWatch`, or None (loss only).
        best_by: ``"loss"`` (lowest validation loss), ``"chrf"`` or ``"bleu"``
            (highest score of the watch's translations; without a ``watch``,
            ``"loss"``); `TrainConfig.best_by` holds the default.
    """

    def __init__(
        self,
        plan,
        validation,
        model_path,
        patience,
        best=None,
        wait=0,
        speed=None,
        verbose=True,
        watch=None,
        *,
        best_by,
    ):
        super().__init__()
        if best_by not in BEST_BY:
            raise ValueError(
                f"best_by must be one of {', '.join(map(repr, BEST_BY))}. "
                f"Received: best_by={best_by!r}"
            )
        self.plan = plan
        self.validation = validation
        self.model_path = pathlib.Path(model_path)
        self.patience = patience
        self.best = best
        self.wait = wait
        self.speed = speed
        self.verbose = verbose
        self.watch = watch
        self.best_by = best_by if watch is not None else "loss"
        self.health = None
        self.examples = {}  # the last validation's examples (history.csv columns)
        self.tokens_per_second = None
        self._mark = None

    def _improved(self, value):
        if self.best is None:
            return True
        return value < self.best if self.best_by == "loss" else value > self.best

    def _watch(self, logs):
        """Translations, scores and the health check into ``logs``; the log lines."""
        scores, self.examples, self.health = self.watch(self.model)
        logs.update(scores)
        summary = (
            f"  chrF {scores['val_chrf']:.2f}  BLEU {scores['val_bleu']:.2f}"
            f"  distinct {scores['val_distinct']:.2f}"
            f"  source dependence {scores['val_source_dependence']:.3f}"
            + (
                f"  top-3 share {scores['val_top_share']:.2f}"
                if "val_top_share" in scores
                else ""
            )
            + f"  ({len(self.watch.pairs)} validation pairs, greedy)"
        )
        return [summary] + [f"  {example}" for example in self.examples.values()]

    def _alarm(self, step):
        if self.health is not None and not self.health.ok:
            print(
                f"keras-selfattn: warning: step {step}: the model is not translating: "
                + "; ".join(self.health.problems),
                file=sys.stderr,
                flush=True,
            )

    def on_train_begin(self, logs=None):
        self._mark = self.speed.reading() if self.speed else None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        periods_done = epoch + 1
        if not self.plan.evaluates(periods_done):
            self._no_validation(logs)
            return
        self._measure_speed()
        val_loss, watch_lines = self._validate(logs)
        value = val_loss if self.best_by == "loss" else logs["val_" + self.best_by]
        improved = self._keep_if_best(value)
        self._stop_early(improved)
        step = self.plan.step_after(periods_done)
        if self.verbose:
            self._print(step, logs, val_loss, improved, watch_lines)
        self._alarm(step)
        self._mark = self.speed.reading() if self.speed else None

    def _no_validation(self, logs):
        """An epoch without validation: its columns of ``history.csv`` empty."""
        logs["val_loss"] = logs["cpu_seconds"] = float("nan")
        for key in self.watch.log_keys() if self.watch else ():
            logs[key] = float("nan")
        self.examples = (
            dict.fromkeys(self.watch.example_keys(), "") if self.watch else {}
        )

    def _measure_speed(self):
        """Target tokens/s of training since the last validation (or None)."""
        if self.speed is not None and self._mark is not None:
            self.tokens_per_second = self.speed.rate_since(self._mark)

    def _validate(self, logs):
        """The validation loss and the watch's scores into ``logs``.

        Returns:
            ``(val_loss, the watch's log lines)``.
        """
        results = self.model.evaluate(self.validation, verbose=0, return_dict=True)
        for name, value in results.items():
            logs["val_" + name] = value
        times = os.times()
        logs["cpu_seconds"] = times.user + times.system  # this process, so far
        watch_lines = self._watch(logs) if self.watch is not None else []
        return float(results["loss"]), watch_lines

    def _keep_if_best(self, value):
        """The best-model choice: saves the model when ``value`` is the best so far."""
        improved = self._improved(value)
        if improved:
            self.best = value
            save_model_atomically(self.model, self.model_path)
        return improved

    def _stop_early(self, improved):
        """Early stopping: ``patience`` validations without a better score."""
        if improved:
            self.wait = 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.model.stop_training = True

    def _print(self, step, logs, val_loss, improved, watch_lines):
        """The log lines of one validation."""
        speed = (
            f"  {self.tokens_per_second:,.0f} target tokens/s"
            if self.tokens_per_second is not None
            else ""
        )
        print(
            f"step {step}/{self.plan.total_steps}  "
            f"loss {float(logs.get('loss', 'nan')):.4f}"
            f"  val_loss {val_loss:.4f}{speed}  {logs['cpu_seconds']:,.0f} CPU-s"
            + (f"  best by {self.best_by}" if improved else ""),
            flush=True,
        )
        for line in watch_lines:
            print(line, flush=True)


class HistoryLog(keras.callbacks.Callback):
    """``history.csv``: a row per period, keyed by ``step``, with Keras' logs and
    the validation examples (`run_directory.history.append_history`; ``epoch`` is Keras'
    period, from 0).

    The examples (text) stay out of Keras' logs, which Keras averages.

    Args:
        path: the CSV file (appended to: a resumed run continues it).
        evaluation: the run's `StepEvaluation`.
        plan: the run's `StepPlan` (the step of each period).
    """

    def __init__(self, path, evaluation, plan):
        super().__init__()
        self.path = pathlib.Path(path)
        self.evaluation = evaluation
        self.plan = plan

    def on_epoch_end(self, epoch, logs=None):
        row = {name: _cell(value) for name, value in (logs or {}).items()}
        row.update(self.evaluation.examples)
        row[HISTORY_STEP] = self.plan.step_after(epoch + 1)
        row[HISTORY_PERIOD] = epoch
        append_history(self.path, row)


def _cell(value):
    """A log value as history.csv writes it: text as it is, a number as a float."""
    if isinstance(value, str):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
