"""The compiled model of a run: dtype policy, seq2seq model, optimizer, XLA choice."""

import contextlib

import keras
import tensorflow as tf

from keras_selfattn.models import MaskedAccuracy, build_seq2seq, masked_loss
from keras_selfattn.models.schedules import InverseSquareRootSchedule
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.per_replica_xla import use_per_replica_xla

__all__ = ["build_and_compile", "dtype_policy"]


@contextlib.contextmanager
def dtype_policy(name):
    """Sets Keras' global dtype policy to ``name`` (``"mixed_bfloat16"``...) in a block.

    Layers created inside take it; the previous policy comes back on exit, even
    after an error::

        with dtype_policy("mixed_bfloat16"):
            model = build_seq2seq(...)
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def build_and_compile(
    tokenizer, model_config, train_config, strategy, steps_per_epoch, total_steps=None
):
    """The compiled model of `train`: call it in ``strategy.scope()``, under the policy.

    Adam with warm-up, then (``train_config.lr_schedule``) inverse square root
    decay or cosine decay over ``total_steps`` (default: ``steps_per_epoch *
    epochs``); with ``mixed_float16`` a
    `SyncedLossScaleOptimizer` around it. XLA (``train_config.jit_compile``): Keras
    compiles the whole step on one replica; with several replicas each replica's
    forward and backward pass is compiled (`use_per_replica_xla`), because Keras'
    whole-step XLA fails there; on a TPU the strategy compiles the step itself.
    """
    replicas = strategy.num_replicas_in_sync
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    model = build_seq2seq(
        tokenizer.source_vocab_size,
        tokenizer.target_vocab_size,
        model_config,
        seed=train_config.seed,
    )
    if train_config.lr_schedule == "inverse_sqrt":
        schedule = InverseSquareRootSchedule(
            train_config.learning_rate, train_config.warmup_steps
        )
    else:
        schedule = keras.optimizers.schedules.CosineDecay(
            initial_learning_rate=0.0,
            decay_steps=max(
                1,
                (total_steps or steps_per_epoch * train_config.epochs)
                - train_config.warmup_steps,
            ),
            warmup_target=train_config.learning_rate,
            warmup_steps=train_config.warmup_steps,
            alpha=0.05,
        )
    optimizer = keras.optimizers.Adam(schedule, clipnorm=train_config.clipnorm or None)
    if train_config.mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling; bfloat16 has float32's
        # exponent range and needs none.
        optimizer = SyncedLossScaleOptimizer(optimizer)
    per_replica_xla = train_config.jit_compile and replicas > 1 and not tpu
    model.compile(
        optimizer=optimizer,
        loss=masked_loss(label_smoothing=train_config.label_smoothing),
        metrics=[MaskedAccuracy()],
        jit_compile=bool(train_config.jit_compile and not per_replica_xla and not tpu),
    )
    if per_replica_xla:
        use_per_replica_xla(model)
    return model
