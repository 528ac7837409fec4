"""Mixed float16 under tf.distribute: loss scaling that skips a step on all replicas."""

import keras
import tensorflow as tf

__all__ = ["SyncedLossScaleOptimizer"]


@keras.saving.register_keras_serializable(package="keras_selfattn")
class SyncedLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` deciding skip-or-apply over all replicas.

    Keras 3 decides "apply this step, or skip it and halve the loss scale" from
    each replica's own gradients *before* they are all-reduced (its comment
    assumes they already were). When one replica overflows and another does not,
    stock Keras either applies an inf/NaN update (one worker with several
    devices: it takes the first replica's answer) or lets the workers take
    different branches around the all-reduce (several workers: a hang). Here the
    replicas first agree (one scalar all-reduce, in replica context, before any
    of Keras' own synchronization): if any gradient anywhere is not finite, every
    replica's gradients are marked non-finite and every replica skips the step.
    """

    def apply(self, grads, trainable_variables=None):
        context = tf.distribute.get_replica_context()
        grads = list(grads)
        if context is not None and context.num_replicas_in_sync > 1 and grads:
            local = tf.cast(tf.logical_not(self.check_finite(grads)), tf.float32)
            anywhere = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
            # Poison one dense gradient (an embedding's may be IndexedSlices).
            index = next(
                (
                    i
                    for i, g in enumerate(grads)
                    if g is not None and not isinstance(g, tf.IndexedSlices)
                ),
                next(i for i, g in enumerate(grads) if g is not None),
            )
            gradient = tf.convert_to_tensor(grads[index])
            grads[index] = gradient + tf.where(
                anywhere > 0,
                tf.constant(float("nan"), gradient.dtype),
                tf.zeros([], gradient.dtype),
            )
        return super().apply(grads, trainable_variables)
