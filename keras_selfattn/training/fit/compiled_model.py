"""The compiled model of a run: dtype policy, seq2seq model, optimizer, XLA choice."""

import contextlib

import keras
import tensorflow as tf

from keras_selfattn.models import MaskedAccuracy, build_seq2seq, masked_loss
from keras_selfattn.models.optimizers import MovingAverageAdam
from keras_selfattn.models.schedules import InverseSquareRootSchedule
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.per_replica_xla import use_per_replica_xla

__all__ = ["build_and_compile", "dtype_policy", "uses_xla"]


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
    epochs``); with ``accumulate_steps`` N > 1, Adam's own
    ``gradient_accumulation_steps`` (an update every N batches, on the mean of
    their gradients) and the schedule stretched by N (`_schedule`); with
    ``mixed_float16`` a
    `SyncedLossScaleOptimizer` around it. XLA (`uses_xla`): Keras
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
    adam_options = {
        "learning_rate": _schedule(
            train_config, total_steps or steps_per_epoch * train_config.epochs
        ),
        "beta_2": train_config.adam_beta_2,
        "epsilon": train_config.adam_epsilon,
        "clipnorm": train_config.clipnorm or None,
        "gradient_accumulation_steps": (
            train_config.accumulate_steps if train_config.accumulate_steps > 1 else None
        ),
    }
    if train_config.ema_momentum:
        optimizer = MovingAverageAdam(
            ema_momentum=train_config.ema_momentum, **adam_options
        )
    else:
        optimizer = keras.optimizers.Adam(**adam_options)
    if train_config.mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling; bfloat16 has float32's
        # exponent range and needs none.
        optimizer = SyncedLossScaleOptimizer(optimizer)
    xla = uses_xla(train_config)
    per_replica_xla = xla and replicas > 1 and not tpu
    model.compile(
        optimizer=optimizer,
        loss=masked_loss(label_smoothing=train_config.label_smoothing),
        metrics=[MaskedAccuracy()],
        jit_compile=xla and not per_replica_xla and not tpu,
    )
    if per_replica_xla:
        use_per_replica_xla(model)
    return model


def uses_xla(train_config):
    """Whether the train step is compiled with XLA: ``train_config.jit_compile``,
    or where that is None, whether TensorFlow sees a GPU (on a TPU the strategy
    compiles the step whatever this says). Why None means no XLA on CPUs: the
    field's entry in `TrainConfig`.
    """
    if train_config.jit_compile is not None:
        return train_config.jit_compile
    return bool(tf.config.list_logical_devices("GPU"))


def _schedule(train_config, total_batches):
    """The learning-rate schedule, in batches, of a schedule stated in updates.

    Keras calls a schedule with the batches seen (micro-batches when
    accumulating), Adam's bias correction counts updates. With N =
    ``accumulate_steps`` the warm-up and the decay are stretched by N, so that
    the inverse square root schedule gives update ``k`` of an accumulating run
    exactly the rate of step ``k`` of a run on N-times-larger batches (cosine:
    within one update).
    """
    stretch = train_config.accumulate_steps
    warmup = train_config.warmup_steps * stretch
    if train_config.lr_schedule == "inverse_sqrt":
        return InverseSquareRootSchedule(train_config.learning_rate, warmup)
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(1, total_batches - warmup),
        warmup_target=train_config.learning_rate,
        warmup_steps=warmup,
        alpha=0.05,
    )
