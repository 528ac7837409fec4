"""The weights' moving average in the model at every period's end.

With ``ema_momentum`` > 0 the validation, the best model, the kept checkpoints
and the backups all hold the exponential moving average of the weights
(`models.optimizers.MovingAverageAdam`); training continues on the model's own.
"""

import keras

from keras_selfattn.training.fit.averaging import swap_moving_average

__all__ = ["SwapInMovingAverage"]


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
