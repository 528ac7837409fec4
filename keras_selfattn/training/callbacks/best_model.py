"""The best model of a run: ``model.keras``, kept by the chosen validation figure.

`BestModel` reads its figure from the logs `validation.Validation` wrote: the
validation loss (``best_by="loss"``, lowest wins) or the chrF or BLEU of the
validation translations (``"chrf"``, ``"bleu"``, highest wins). The model is
written under a temporary name and renamed into place, so a kill mid-write keeps
the previous best. `better` is the one comparison; early stopping uses it too.
"""

import pathlib

import keras

from keras_selfattn.choices import BEST_BY
from keras_selfattn.run_directory.atomic import replace_atomically

__all__ = ["BestModel", "best_by_for", "better", "monitored", "save_model_atomically"]


def best_by_for(best_by, translations):
    """The figure a run keeps its best model by: ``best_by`` (checked against
    `choices.BEST_BY`), or ``"loss"`` when validation translates nothing
    (``translations`` false: no chrF or BLEU to compare)."""
    if best_by not in BEST_BY:
        raise ValueError(
            f"best_by must be one of {', '.join(map(repr, BEST_BY))}. "
            f"Received: best_by={best_by!r}"
        )
    return best_by if translations else "loss"


def monitored(best_by):
    """The log key holding the ``best_by`` figure (``val_loss``, ``val_chrf``...)."""
    return "val_" + best_by


def better(value, best, best_by):
    """Whether ``value`` beats ``best`` (None: nothing yet): lower loss, higher
    chrF or BLEU."""
    if best is None:
        return True
    return value < best if best_by == "loss" else value > best


def save_model_atomically(model, path):
    """``model.save`` to a temporary file beside ``path``, then renamed onto it
    (`replace_atomically`: a failed save names ``path``)."""
    return replace_atomically(model.save, path)


class BestModel(keras.callbacks.Callback):
    """Saves the model at each validation whose ``best_by`` figure is the best yet.

    Args:
        plan: the run's `StepPlan` (which periods end in a validation).
        model_path: where the best model is written (atomically).
        best_by: ``"loss"``, ``"chrf"`` or ``"bleu"`` (`best_by_for`).
        best: the best figure so far (resuming), or None.

    Attributes:
        improved: whether the last validation saved the model.
    """

    def __init__(self, plan, model_path, best_by, best=None):
        super().__init__()
        self.plan = plan
        self.model_path = pathlib.Path(model_path)
        self.best_by = best_by_for(best_by, translations=True)
        self.best = best
        self.improved = False

    def on_epoch_end(self, epoch, logs=None):
        if not self.plan.evaluates(epoch + 1):
            return
        value = float(logs[monitored(self.best_by)])
        self.improved = better(value, self.best, self.best_by)
        if self.improved:
            self.best = value
            save_model_atomically(self.model, self.model_path)
