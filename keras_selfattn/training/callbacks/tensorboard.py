"""TensorBoard event files of a run, in ``RUN_DIR/tensorboard`` (`TENSORBOARD_DIR`).

`TensorBoardLog` writes, with ``tf.summary`` (scalars keyed by the step, the
number of batches trained):

- every ``log_every`` steps and at the end of every period: ``train/loss``,
  ``train/learning_rate`` and ``train/target_tokens_per_second`` (the one
  definition of `progress.TrainingSpeed`, the figure of the log lines);
- at every validation: every ``val_*`` figure of the logs under
  ``validation/`` (loss, accuracy, chrF, BLEU, the health check's distinct
  ratio and source dependence), ``health/ok`` (1 or 0), the examples as text
  (``validation/examples``) and the attention of the first validation pair as an
  image (``validation/attention``, target rows x source columns, white = 1).

The files are written by TensorFlow; *reading* them needs the ``tensorboard``
package (``pip install keras-selfattn[tensorboard]``): `tensorboard_installed`
says whether it is there, and `TrainConfig.tensorboard` (on by default) writes
them only then. Open them with ``tensorboard --logdir RUN_DIR/tensorboard``.
"""

import importlib.util
import math

import keras
import numpy as np
import tensorflow as tf

__all__ = ["TensorBoardLog", "attention_image", "tensorboard_installed"]

_PIXELS = 8  # an attention weight is a square of this many pixels


def tensorboard_installed():
    """Whether the ``tensorboard`` package (the viewer) is importable."""
    return importlib.util.find_spec("tensorboard") is not None


def attention_image(weights):
    """A (1, rows, columns, 1) float image of attention ``weights`` (S, T) in [0, 1].

    Each weight becomes a ``_PIXELS``-wide square; white is weight 1.
    """
    weights = np.clip(np.asarray(weights, "float32"), 0.0, 1.0)
    weights = np.repeat(np.repeat(weights, _PIXELS, axis=0), _PIXELS, axis=1)
    return weights[None, :, :, None]


class TensorBoardLog(keras.callbacks.Callback):
    """Writes the run's summaries (see the module docstring); after `Validation`.

    Args:
        log_dir: the event files' folder (``RUN_DIR/tensorboard``).
        plan: the run's `StepPlan`.
        speed: the run's `progress.TrainingSpeed`.
        every: steps between two ``train/`` points (0: once a period).
        step: the step the run starts from (resuming).
        validation: the run's `validation.Validation` (its examples, health and
            watch: the attention image), or None.
    """

    def __init__(self, log_dir, plan, speed, every, step=0, validation=None):
        super().__init__()
        self.log_dir = str(log_dir)
        self.plan = plan
        self.speed = speed
        self.every = every
        self.step = step
        self.validation = validation
        self.watch = None if validation is None else validation.watch
        self.writer = None
        self._mark = None

    def on_train_begin(self, logs=None):
        self.writer = tf.summary.create_file_writer(self.log_dir)
        self._mark = self.speed.reading()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.every and self.step % self.every == 0:
            self._write_training(logs)

    def _write_training(self, logs):
        loss = float((logs or {}).get("loss", math.nan))
        rate = self.speed.rate_since(self._mark)
        self._mark = self.speed.reading()
        learning_rate = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )
        with self.writer.as_default(step=self.step):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/learning_rate", learning_rate)
            if rate is not None:
                tf.summary.scalar("train/target_tokens_per_second", rate)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.step = self.plan.step_after(epoch + 1)
        if not self.every or self.step % self.every:
            self._write_training(logs)
        if self.plan.evaluates(epoch + 1):
            self._write_validation(logs)
        self.writer.flush()

    def _write_validation(self, logs):
        health = None if self.validation is None else self.validation.health
        with self.writer.as_default(step=self.step):
            for key, value in sorted(logs.items()):
                number = isinstance(value, (int, float)) and not math.isnan(value)
                if key.startswith("val_") and number:
                    tf.summary.scalar("validation/" + key[4:], float(value))
            if health is not None:
                tf.summary.scalar("health/ok", float(health.ok))
            examples = [] if self.validation is None else self.validation.examples
            lines = [f"    {example}" for example in dict(examples).values() if example]
            if lines:  # indented: TensorBoard shows the text as Markdown
                tf.summary.text("validation/examples", "\n\n".join(lines))
            weights = self._attention()
            if weights is not None:
                tf.summary.image("validation/attention", attention_image(weights))

    def _attention(self):
        """The greedy attention weights of the first validation pair, or None."""
        if self.watch is None or not self.watch.pairs:
            return None
        translator = self.watch.translator(self.model)
        source = self.watch.pairs[0][0]
        (translation,) = translator.translate([source], return_attention=True)
        attention = translation.attention
        if attention is None or not np.size(attention):
            return None
        return attention

    def on_train_end(self, logs=None):
        if self.writer is not None:
            self.writer.close()
