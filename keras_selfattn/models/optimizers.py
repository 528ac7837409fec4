"""Optimizers of a compiled model (registered for ``.keras`` loading, as the schedules).

`MovingAverageAdam`: Adam that also keeps an exponential moving average of the
weights, with the average's decay warmed up over the first updates.
"""

import keras
from keras import ops

__all__ = ["MovingAverageAdam", "moving_average_decay"]


def moving_average_decay(ema_momentum, iterations):
    """The decay of the weights' average at an update: ``min(m, (1 + t) / (10 + t))``.

    ``t`` is the number of updates before this one. The warm-up is
    `tf.train.ExponentialMovingAverage`'s ``num_updates`` rule: early in a run
    the average forgets quickly (after 90 updates it spans about the last tenth
    of the run), so that it never mixes in the initial weights; from update
    ``(10m - 1) / (1 - m)`` on (8,991 for m = 0.999) the decay is ``m``.

    Args:
        ema_momentum: the largest decay, in [0, 1).
        iterations: ``t``, a scalar tensor or number.

    Returns:
        A float32 scalar tensor.
    """
    t = ops.cast(iterations, "float32")
    return ops.minimum(ema_momentum, (1.0 + t) / (10.0 + t))


@keras.saving.register_keras_serializable(package="keras_selfattn")
class MovingAverageAdam(keras.optimizers.Adam):
    """Adam keeping an exponential moving average of the weights (Polyak averaging).

    Keras' ``Adam(use_ema=True)`` with one change: the average's decay at update
    ``t`` is `moving_average_decay` ``min(ema_momentum, (1 + t) / (10 + t))``
    rather than ``ema_momentum`` from the first update, so the average is
    usable at any point of a run (with a fixed 0.999, a third of the average
    after 1,000 updates would still be the weights of the first few hundred).
    The average starts as the weights after the first update. The model keeps
    training on its own weights; `keras_selfattn.training.moving_average.
    swap_moving_average` exchanges the two (``train --ema-momentum`` validates,
    keeps and exports the average). With ``gradient_accumulation_steps`` the
    average is updated every batch (``iterations`` counts batches).

    Args:
        ema_momentum: the largest decay of the average, in [0, 1) (0.999:
            about the last 1,000 updates once warmed up).
        **kwargs: `keras.optimizers.Adam`'s arguments (``use_ema`` is always
            True here).

    Example:

    >>> optimizer = MovingAverageAdam(learning_rate=1e-3, ema_momentum=0.999)
    >>> optimizer.get_config()["ema_momentum"]
    0.999
    """

    def __init__(self, learning_rate=0.001, ema_momentum=0.999, **kwargs):
        if not 0 <= ema_momentum < 1:
            raise ValueError(
                f"ema_momentum must be in [0, 1). Received: ema_momentum={ema_momentum}"
            )
        kwargs.pop("use_ema", None)  # always on (from_config passes it back)
        # Adam's __init__ stores ema_momentum through the setter below.
        super().__init__(
            learning_rate=learning_rate,
            use_ema=True,
            ema_momentum=ema_momentum,
            **kwargs,
        )

    # Keras' update of the average reads ``self.ema_momentum`` (a number in
    # Adam); here it is the warmed-up decay of the current update, a tensor.
    @property
    def ema_momentum(self):
        return moving_average_decay(self.peak_ema_momentum, self.iterations)

    @ema_momentum.setter
    def ema_momentum(self, value):
        self.peak_ema_momentum = float(value)

    @property
    def moving_average(self):
        """The averaged weights, in the order of the trainable variables built on."""
        return list(self._model_variables_moving_average)

    def finalize_variable_values(self, var_list):
        # `model.fit` ends by writing the average into the weights; the training
        # code decides what is saved (`swap_moving_average`), so nothing here.
        pass

    def get_config(self):
        config = super().get_config()
        config["ema_momentum"] = self.peak_ema_momentum
        return config
