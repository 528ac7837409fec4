"""Early stopping: ``patience`` validations without a better ``best_by`` figure.

Not Keras' own `keras.callbacks.EarlyStopping`: that one resets its count and
its best at every ``fit`` call and compares every epoch, where a run validates
only on the periods its plan says and a resumed run continues the count it
backed up (``wait``, ``best``).
"""

import keras

from keras_selfattn.training.callbacks.best_model import better, monitored

__all__ = ["EarlyStopping"]


class EarlyStopping(keras.callbacks.Callback):
    """Stops training after ``patience`` validations without a better figure.

    Reads the ``best_by`` figure `validation.Validation` wrote into the logs and
    compares it as `best_model.BestModel` does (`best_model.better`).

    Args:
        plan: the run's `StepPlan` (which periods end in a validation).
        patience: validations without a better figure before stopping.
        best_by: ``"loss"``, ``"chrf"`` or ``"bleu"``.
        best: the best figure so far (resuming), or None.
        wait: validations since the best (resuming).
    """

    def __init__(self, plan, patience, best_by, best=None, wait=0):
        super().__init__()
        self.plan = plan
        self.patience = patience
        self.best_by = best_by
        self.best = best
        self.wait = wait

    def on_epoch_end(self, epoch, logs=None):
        if not self.plan.evaluates(epoch + 1):
            return
        value = float(logs[monitored(self.best_by)])
        if better(value, self.best, self.best_by):
            self.best = value
            self.wait = 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.model.stop_training = True
