"""What a run prints while it trains, and how fast it trains.

`fit_verbosity` chooses what is printed; `ProgressBar` (a terminal) or
`ProgressLog` (a log file) show the steps, `ValidationLog` the lines of each
validation, and `TrainingSpeed` measures the speed they all show.

One definition of the speed for every figure a run shows (the progress lines,
the validation lines, TensorBoard's ``train/target_tokens_per_second``):
**target tokens per second of training**, the real target tokens (``</s>``
included) of the training batches the stream made, divided by the seconds spent
inside training steps. The first step of the run (tracing and compiling) and
everything between steps (validation, backups, checkpoints) are left out, so a
validation line does not show a lower figure than the progress line before it.
"""

import sys
import time

import keras

__all__ = [
    "ProgressBar",
    "ProgressLog",
    "TrainingSpeed",
    "ValidationLog",
    "clock",
    "estimated_validation_steps",
    "fit_verbosity",
    "target_tokens",
]


def fit_verbosity(verbose):
    """What `train` prints, as 0, 1 or 2: the one place the choice is made.

    - 0: nothing while training (the summary lines at the end included);
    - 1: a progress bar over the run's steps (loss, target tokens/s), the data
      summary and the lines of each validation;
    - 2: the same, with a line every ``log_every`` steps (step, loss, target
      tokens/s, ETA) instead of the bar: for a log file, ``nohup``, a notebook;
    - ``"auto"``: 1 when stdout is a terminal, else 2 (the command line passes
      it, or 0 for ``--quiet``).
    """
    if verbose == "auto":
        return 1 if sys.stdout.isatty() else 2
    if verbose not in (0, 1, 2) or isinstance(verbose, float):
        raise ValueError(
            f"verbose must be 'auto', 0, 1 or 2. Received: verbose={verbose!r}"
        )
    return int(verbose)


def target_tokens(counters):
    """Target tokens the training stream has read so far (0 without counters)."""
    return int(counters.target_tokens.numpy()) if counters else 0


class TrainingSpeed(keras.callbacks.Callback):
    """Counts the seconds spent in training steps and the target tokens they read.

    Put it first in the callbacks: a step is timed from its
    ``on_train_batch_begin`` to its ``on_train_batch_end``.

    Args:
        counters: `text.stream.StreamCounters` of the training stream (None: no
            tokens are counted and every rate is None).
    """

    def __init__(self, counters=None):
        super().__init__()
        self.counters = counters
        self.seconds = 0.0
        self._tokens_before = None  # tokens read once the first step ended
        self._began = None

    def on_train_batch_begin(self, batch, logs=None):
        self._began = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._tokens_before is None:  # the first step traces and compiles
            self._tokens_before = target_tokens(self.counters)
        else:
            self.seconds += time.perf_counter() - self._began

    def reading(self):
        """``(seconds in steps, target tokens)`` so far, for `rate_since`."""
        if self._tokens_before is None:
            return (0.0, 0)
        return (self.seconds, target_tokens(self.counters) - self._tokens_before)

    def rate_since(self, mark):
        """Target tokens per second of training since ``mark`` (a `reading`), or
        None (no counters, or no timed step since)."""
        seconds, tokens = self.reading()
        if not self.counters or seconds <= mark[0]:
            return None
        return (tokens - mark[1]) / (seconds - mark[0])


def clock(seconds):
    """``seconds`` as ``h:mm:ss`` (an ETA)."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


# A validation's work in training steps, for the ETA before one was timed: a
# validation batch is a forward pass (about a third of a training step: no
# gradient, no update); a greedy search decodes a token per step for a batch of
# translations, a forward pass of the decoder whose cost on a small model is the
# ops' overhead more than the batch's arithmetic (about half a training step,
# measured on a CPU).
VALIDATION_BATCH_STEPS = 1 / 3
DECODING_STEP_STEPS = 1 / 2


def estimated_validation_steps(
    validation_batches, translations=0, max_target_len=0, search_batch=256
):
    """A validation's cost in training steps, estimated before one was timed.

    Args:
        validation_batches: batches of the validation loss.
        translations: validation pairs translated greedily (0: none).
        max_target_len: tokens a translation decodes at most.
        search_batch: translations decoded together (`Translator.translate`'s
            ``batch_size``).
    """
    searches = -(-translations // search_batch)  # ceil
    return (
        VALIDATION_BATCH_STEPS * validation_batches
        + DECODING_STEP_STEPS * searches * max_target_len
    )


class ProgressLog(keras.callbacks.Callback):
    """A progress line every ``every`` steps: loss, target tokens/s and the ETA.

    For logs that are not a terminal (a batch job, ``nohup``, a notebook cell's
    file), where Keras' progress bar prints nothing until a period ends. One
    line per step shown, the last step's included; a validation's figures are
    `ValidationLog`'s own line.

    The ETA counts the steps left at the seconds a step takes and, with a
    ``plan``, the validations left at the seconds a validation took (the time
    between the last step of a validating period and the next step: the
    validation, its backup and checkpoints): each a moving average (weight
    ``smoothing`` for the newest). The run's first step (tracing and compiling)
    is left out: the first line whose interval has a step past it shows an ETA,
    a line before it shows "ETA --". Until a validation was timed, each
    validation left counts as ``validation_steps`` steps, and the first one also
    as the first step's extra seconds (it traces the evaluation and the
    translations as the first step traced training).

    Args:
        every: steps between two lines.
        total_steps: the run's last step.
        step: the step the run starts from (resuming).
        speed: the run's `TrainingSpeed` (None: no tokens/s figure).
        smoothing: the newest interval's weight in the moving average.
        plan: the run's `StepPlan`, whose validations the ETA counts (None:
            steps only).
        validation_steps: a validation's cost in training steps, counted until
            one was timed (`estimated_validation_steps`; None: validations are
            counted only once one was timed).
    """

    def __init__(
        self,
        every,
        total_steps,
        step=0,
        speed=None,
        smoothing=0.3,
        plan=None,
        validation_steps=None,
    ):
        super().__init__()
        self.every = every
        self.total_steps = total_steps
        self.step = step
        self.speed = speed or TrainingSpeed()
        self.smoothing = smoothing
        self.plan = plan
        self.validation_steps = validation_steps
        self.seconds_per_step = None  # the moving averages
        self.seconds_per_validation = None
        self._first_step = None  # the seconds of the run's first step
        self._mark = None
        self._step_seconds = [0.0, 0]  # timed steps since the last line: (s, steps)
        self._began = None
        self._ended = None  # when the last step ended
        self._validating = False  # a validation runs before the next step
        self._epoch = 0

    def on_train_begin(self, logs=None):
        self._mark = (time.perf_counter(), self.step, self.speed.reading())

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self._validating = self.plan is not None and self.plan.evaluates(epoch + 1)

    def on_train_batch_begin(self, batch, logs=None):
        self._began = time.perf_counter()
        if self._validating and self._ended is not None:
            took = self._began - self._ended
            self.seconds_per_validation = self._moved(self.seconds_per_validation, took)
        self._validating = False

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._ended is None:  # the first step traces and compiles
            self._first_step = None if self._began is None else now - self._began
        else:
            self._step_seconds[0] += now - self._began
            self._step_seconds[1] += 1
        self._ended = now
        self.step += 1
        if self.step % self.every and self.step < self.total_steps:
            return
        self._average()
        rate = self.speed.rate_since(self._mark[2])
        loss = float((logs or {}).get("loss", float("nan")))
        print(
            f"step {self.step}/{self.total_steps}  loss {loss:.4f}"
            + ("" if rate is None else f"  {rate:,.0f} target tokens/s")
            + f"  ETA {self._eta()}",
            flush=True,
        )
        self._mark = (now, self.step, self.speed.reading())

    def _eta(self):
        if self.seconds_per_step is None:
            return "--"
        seconds = self.seconds_per_step * (self.total_steps - self.step)
        return clock(seconds + self._validations_left())

    def _validations_left(self):
        """The seconds of the validations left: timed, or estimated before."""
        if self.plan is None:
            return 0.0
        left = sum(
            self.plan.evaluates(period)
            for period in range(self._epoch + 1, self.plan.periods + 1)
        )
        if self.seconds_per_validation is not None:
            return self.seconds_per_validation * left
        if self.validation_steps is None or not left:
            return 0.0
        tracing = max(0.0, (self._first_step or 0.0) - self.seconds_per_step)
        return self.seconds_per_step * self.validation_steps * left + tracing

    def _average(self):
        """Folds the steps timed since the last line into `seconds_per_step`."""
        seconds, steps = self._step_seconds
        self._step_seconds = [0.0, 0]
        if not steps:  # only the first step (tracing and compiling) so far
            return
        self.seconds_per_step = self._moved(self.seconds_per_step, seconds / steps)

    def _moved(self, average, value):
        if average is None:
            return value
        return average + self.smoothing * (value - average)


class ProgressBar(keras.callbacks.Callback):
    """Keras' progress bar over the run's steps (a terminal): step, loss, tokens/s.

    One bar from the step the run starts from to its last step (not one per
    period: Keras' own bar counts periods as "epochs"); the lines of a validation
    start below it.

    Args:
        plan: the run's `StepPlan`.
        step: the step the run starts from (resuming).
        speed: the run's `TrainingSpeed` (None: no tokens/s figure).
    """

    def __init__(self, plan, step=0, speed=None):
        super().__init__()
        self.plan = plan
        self.step = step
        self.speed = speed or TrainingSpeed()
        self.bar = None
        self._mark = None

    def on_train_begin(self, logs=None):
        self.bar = keras.utils.Progbar(
            self.plan.total_steps,
            stateful_metrics=["loss", "target tokens/s"],
            unit_name="step",
        )
        self._mark = self.speed.reading()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        values = [("loss", float((logs or {}).get("loss", float("nan"))))]
        rate = self.speed.rate_since(self._mark)
        if rate is not None:
            values.append(("target tokens/s", rate))
        self.bar.update(self.step, values=values)

    def on_epoch_end(self, epoch, logs=None):
        if self.plan.evaluates(epoch + 1) and self.step < self.plan.total_steps:
            print(flush=True)  # the validation's lines start on a line of their own
            self._mark = self.speed.reading()


class ValidationLog(keras.callbacks.Callback):
    """The lines of each validation, from the logs the callbacks before it wrote.

    A line of its own (``validation at step N/T:``, under the step's progress
    line) with the loss, the validation loss, the target tokens/s of
    training since the previous validation, the process' CPU seconds and, when
    the model was kept, "best by ..."; with validation translations, their
    scores and examples below it.

    Args:
        plan: the run's `StepPlan`.
        validation: the run's `validation.Validation` (its watch and examples).
        best_model: the run's `best_model.BestModel` (whether it improved).
        speed: the run's `TrainingSpeed`, or None (no tokens/s figure).
    """

    def __init__(self, plan, validation, best_model, speed=None):
        super().__init__()
        self.plan = plan
        self.validation = validation
        self.best_model = best_model
        self.speed = speed
        self.tokens_per_second = None
        self._mark = None

    def on_train_begin(self, logs=None):
        self._mark = self.speed.reading() if self.speed else None

    def on_epoch_end(self, epoch, logs=None):
        if not self.plan.evaluates(epoch + 1):
            return
        if self.speed is not None and self._mark is not None:
            self.tokens_per_second = self.speed.rate_since(self._mark)
        step = self.plan.step_after(epoch + 1)
        for line in [self._step_line(step, logs), *self._watch_lines(logs)]:
            print(line, flush=True)
        self._mark = self.speed.reading() if self.speed else None

    def _step_line(self, step, logs):
        speed = (
            f"  {self.tokens_per_second:,.0f} target tokens/s"
            if self.tokens_per_second is not None
            else ""
        )
        improved = self.best_model.improved
        return (
            f"validation at step {step}/{self.plan.total_steps}:  "
            f"loss {float(logs.get('loss', 'nan')):.4f}"
            f"  val_loss {float(logs['val_loss']):.4f}{speed}"
            f"  {logs['cpu_seconds']:,.0f} CPU-s"
            + (f"  best by {self.best_model.best_by}" if improved else "")
        )

    def _watch_lines(self, logs):
        """The translations' scores and examples (none without a watch)."""
        watch = self.validation.watch
        if watch is None:
            return []
        summary = (
            f"  chrF {logs['val_chrf']:.2f}  BLEU {logs['val_bleu']:.2f}"
            f"  distinct {logs['val_distinct']:.2f}"
            f"  source dependence {logs['val_source_dependence']:.3f}"
            + (
                f"  top-3 share {logs['val_top_share']:.2f}"
                if "val_top_share" in logs
                else ""
            )
            + f"  ({len(watch.pairs)} validation pairs, greedy)"
        )
        examples = self.validation.examples.values()
        return [summary] + [f"  {example}" for example in examples]
