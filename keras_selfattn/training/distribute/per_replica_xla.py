"""XLA on the multi-replica path: each replica's forward and backward pass compiled.

Keras 3 compiles the whole distributed step with XLA, which fails when the
replicas sit on several devices; `use_per_replica_xla` compiles only what each
replica computes and leaves the all-reduce and the optimizer update to
tf.distribute.
"""

import types

import keras
import tensorflow as tf

__all__ = ["use_per_replica_xla"]


def use_per_replica_xla(model):
    """Compiles each replica's forward and backward pass with XLA.

    Keras 3 puts the whole distributed step (``strategy.run`` and the reduction of
    the logs) into one ``tf.function(jit_compile=True)``; XLA then places the step
    on one device and fails to read the other replicas' variables ("Trying to
    access resource ... located in device CPU:1 from device CPU:0"), and the
    all-reduce cannot be compiled either. Keras' ``jit_compile="auto"`` therefore
    turns XLA off under tf.distribute. This replaces ``model``'s train step (on the
    instance only: nothing is saved with the model) by one that compiles the
    forward pass, the loss and the gradients of each replica with XLA, and leaves
    the all-reduce, the optimizer update and the metrics outside, where
    tf.distribute runs them. Compile the model with ``jit_compile=False``.
    """
    if getattr(model.train_step, "keras_selfattn_per_replica_xla", False):
        return model

    def forward_backward(x, y, sample_weight):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
            )
            scaled_loss = model.optimizer.scale_loss(loss)
        return y_pred, loss, tape.gradient(scaled_loss, model.trainable_variables)

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        # A new function for every trace: each replica traces the step on its own
        # device and must capture its own copies of the variables.
        compiled = tf.function(forward_backward, jit_compile=True)
        y_pred, loss, gradients = compiled(x, y, sample_weight)
        self.optimizer.apply(gradients, self.trainable_variables)
        # Keras' own step tracks the loss un-scaled for distribution (the compiled
        # loss is divided by the number of replicas), weighted by the batch size.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        loss_tracker = next(metric for metric in self.metrics if metric.name == "loss")
        batch = tf.shape(tf.nest.flatten(x)[0])[0]
        loss_tracker.update_state(
            loss * tf.cast(replicas, loss.dtype), sample_weight=batch
        )
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    train_step.keras_selfattn_per_replica_xla = True
    model.train_step = types.MethodType(train_step, model)
    model.train_function = None  # retrace with the new step
    return model
