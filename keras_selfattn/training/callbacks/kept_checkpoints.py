"""The checkpoints kept for averaging: ``RUN_DIR/checkpoints/step-<step>.keras``.

`train` adds `KeepCheckpoints` when ``keep_checkpoints`` > 0; ``keras-selfattn
average`` (`training.checkpoint_averaging.average_run`) averages what it kept.
"""

import pathlib

import keras

from keras_selfattn.run_directory.atomic import replace_atomically
from keras_selfattn.run_directory.layout import checkpoint_file, checkpoint_files
from keras_selfattn.training.resume.backup import keep_newest

__all__ = ["KeepCheckpoints"]


class KeepCheckpoints(keras.callbacks.Callback):
    """Saves the model after every validation; keeps the newest ``keep`` files.

    Args:
        directory: where the ``step-<step>.keras`` files go (created).
        keep: positive int, how many to keep.
        plan: the run's `step_plan.StepPlan` (which epochs end in a validation,
            and at which step).
    """

    def __init__(self, directory, keep, plan):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.keep = keep
        self.plan = plan

    def on_epoch_end(self, epoch, logs=None):
        if not self.plan.evaluates(epoch + 1):
            return
        step = self.plan.step_after(epoch + 1)
        self.directory.mkdir(parents=True, exist_ok=True)
        replace_atomically(self.model.save, checkpoint_file(self.directory, step))
        keep_newest(
            checkpoint_files(self.directory),
            self.keep,
            lambda path: path.unlink(missing_ok=True),
        )
