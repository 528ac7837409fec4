"""The weights' exponential moving average during training (``--ema-momentum``).

The optimizer that keeps the average, `models.optimizers.MovingAverageAdam`, is
saved with the model and lives beside it; here is what training does with it:

- `swap_moving_average` exchanges a model's weights with their moving average;
  `moving_average_in` holds the average in the model inside a ``with`` block;
  `keeps_moving_average` says whether a model has one yet.
- `SwapInMovingAverage`, the callback `train` places first with
  ``ema_momentum`` > 0: the validation, the best model, the kept checkpoints and
  the backups all hold the average; training continues on the model's own weights.

Checkpoint averaging (``keras-selfattn average``), a different idea, is
`training.checkpoint_averaging`.
"""

import contextlib

import keras
import tensorflow as tf

__all__ = [
    "SwapInMovingAverage",
    "keeps_moving_average",
    "moving_average_in",
    "swap_moving_average",
]


def _averaging_optimizer(model):
    """``model``'s `MovingAverageAdam` (also inside a loss-scale wrapper), or None."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    return optimizer if hasattr(optimizer, "moving_average") else None


def keeps_moving_average(model):
    """Whether ``model``'s optimizer holds a moving average of its weights yet."""
    optimizer = _averaging_optimizer(model)
    return optimizer is not None and optimizer.built


def swap_moving_average(model):
    """Exchanges ``model``'s trainable weights with their moving average.

    After it the model holds the average and the optimizer the weights, so a
    second call undoes the first. Both kinds of variables are saved by
    ``model.save`` and by the backups, so a state saved between two swaps
    resumes exactly once the swap is undone. Works in a `tf.distribute`
    strategy's scope (every replica's copy is exchanged).

    Args:
        model: a model compiled with `models.optimizers.MovingAverageAdam`,
            trained at least one step (the average exists from then on).

    Raises:
        ValueError: the model's optimizer keeps no moving average, or has not
            been built yet.
    """
    if not keeps_moving_average(model):
        raise ValueError(
            "swap_moving_average needs a model compiled with MovingAverageAdam "
            "(train --ema-momentum) whose optimizer has been built. Received: "
            f"optimizer={getattr(model, 'optimizer', None)!r}"
        )
    averages = _averaging_optimizer(model).moving_average
    for weight, average in zip(model.trainable_variables, averages):
        if average is None:
            continue
        kept = tf.identity(weight.value)  # a copy, not a view of the variable
        weight.assign(average.value)
        average.assign(kept)


@contextlib.contextmanager
def moving_average_in(model):
    """``with moving_average_in(model):`` the model holds the average inside the block.

    A model without a moving average (``ema_momentum`` 0) is left as it is.
    """
    if not keeps_moving_average(model):
        yield model
        return
    swap_moving_average(model)
    try:
        yield model
    finally:
        swap_moving_average(model)


class SwapInMovingAverage(keras.callbacks.Callback):
    """The average in the model at the end of every period, its own weights in it.

    Placed first among ``model.fit``'s callbacks: at the end of each period it
    swaps the moving average into the model (the callbacks after it validate,
    save and back up the average), at the start of the next it swaps the
    training weights back. The state at a period boundary is therefore always
    "average in the model"; so the first period of a run resumed from a
    backup swaps back too, and a resumed run continues on exactly the weights
    it would have trained on. Only period 0 of a fresh run starts on its
    initial weights, with nothing to swap back.
    """

    def on_epoch_begin(self, epoch, logs=None):
        if epoch > 0:
            swap_moving_average(self.model)

    def on_epoch_end(self, epoch, logs=None):
        swap_moving_average(self.model)
