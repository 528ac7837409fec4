"""Learning-rate schedules of a compiled model (registered for ``.keras`` loading).

A compiled ``model.keras`` stores its optimizer with its schedule, so the schedule
lives beside the model's loss and registers with it: ``import keras,
keras_selfattn`` is enough to load a compiled model in a fresh process.
"""

import keras

__all__ = ["InverseSquareRootSchedule"]


@keras.saving.register_keras_serializable(package="keras_selfattn")
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak``, then ``peak * sqrt(warmup_steps / step)``.

    The Transformer's schedule (Vaswani et al. 2017, eq. 3) written with its peak
    learning rate instead of ``d_model ** -0.5``: step ``warmup_steps`` has
    ``peak``, step ``4 * warmup_steps`` half of it. It does not depend on the
    length of the run.

    Args:
        peak: the learning rate at the end of the warm-up.
        warmup_steps: steps of the linear warm-up (0: none; then ``peak`` at step
            1, decaying as ``1 / sqrt(step)``).
    """

    def __init__(self, peak, warmup_steps):
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0  # Keras counts from 0
        warmup = float(max(1, self.warmup_steps))
        return self.peak * keras.ops.minimum(
            step / warmup, keras.ops.sqrt(warmup / keras.ops.maximum(step, warmup))
        )

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}
