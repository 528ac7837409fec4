"""Ends a run at its plan's last step."""

import keras

from keras_selfattn.stopping import raise_if_swallowed

__all__ = ["StopAtStep"]


class StopAtStep(keras.callbacks.Callback):
    """Counts the steps from ``step`` (a resumed run's start); stops at ``total_steps``.

    Counted in Python: under a distribution strategy the optimizer's step counter
    is a distributed variable, not a number. Each step also raises a stopping
    signal again whose first raise was lost (`stopping.raise_if_swallowed`).
    """

    def __init__(self, total_steps, step=0):
        super().__init__()
        self.total_steps = total_steps
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        raise_if_swallowed()  # a stopping signal whose exception Python dropped
        self.step += 1
        if self.step >= self.total_steps:
            self.model.stop_training = True
