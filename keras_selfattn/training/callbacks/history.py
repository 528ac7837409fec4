"""``history.csv``: a row per period, written as the run goes."""

import pathlib

import keras

from keras_selfattn.run_directory.history import (
    HISTORY_PERIOD,
    HISTORY_STEP,
    append_history,
)

__all__ = ["HistoryLog"]


class HistoryLog(keras.callbacks.Callback):
    """``history.csv``: a row per period, keyed by ``step``, with Keras' logs and
    the validation examples (`run_directory.history.append_history`; ``epoch`` is Keras'
    period, from 0).

    The examples (text) stay out of Keras' logs, which Keras averages.

    Args:
        path: the CSV file (appended to: a resumed run continues it).
        validation: the run's `validation.Validation` (its examples).
        plan: the run's `StepPlan` (the step of each period).
    """

    def __init__(self, path, validation, plan):
        super().__init__()
        self.path = pathlib.Path(path)
        self.validation = validation
        self.plan = plan

    def on_epoch_end(self, epoch, logs=None):
        row = {name: _cell(value) for name, value in (logs or {}).items()}
        row.update(self.validation.examples)
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
