"""The compiled model of a run: dtype policy, seq2seq model, optimizer, XLA choice."""

import contextlib
import os
import pathlib

import keras
import tensorflow as tf

from keras_selfattn.models import MaskedAccuracy, build_seq2seq, masked_loss
from keras_selfattn.models.optimizers import MovingAverageAdam
from keras_selfattn.models.schedules import InverseSquareRootSchedule
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.per_replica_xla import use_per_replica_xla

__all__ = [
    "build_and_compile",
    "dtype_policy",
    "native_bfloat16",
    "training_policy",
    "uses_xla",
]


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


def training_policy(train_config, tpu=False):
    """The dtype policy a run trains under: ``train_config.mixed_precision``, or
    where that is ``"auto"``, ``"mixed_bfloat16"`` on a device that multiplies
    bfloat16 natively (`native_bfloat16`) and ``"float32"`` elsewhere.

    ``"auto"`` is resolved at each start, as ``jit_compile=None`` is: the
    config keeps ``"auto"``, the saved model the policy it was built under.
    It never picks ``"mixed_float16"`` (loss scaling, a narrower range).
    """
    if train_config.mixed_precision != "auto":
        return train_config.mixed_precision
    return "mixed_bfloat16" if native_bfloat16(tpu=tpu) else "float32"


# oneDNN's CPU ISA names (ONEDNN_MAX_CPU_ISA) that include bfloat16 products:
# AVX512_CORE_BF16, AVX512_CORE_FP16, AVX512_CORE_AMX(_FP16), AVX10_1_512(_AMX...),
# AVX10_2_512(...); "ALL" and "DEFAULT" cap nothing.
_BF16_ISA_MARKS = ("BF16", "FP16", "AMX", "AVX10", "ALL", "DEFAULT")


def native_bfloat16(tpu=False, gpus=None, cpuinfo=None, environ=None):
    """Whether the training step's device multiplies bfloat16 natively, so that
    ``mixed_bfloat16`` makes the step cheaper rather than dearer.

    - a TPU: yes;
    - GPUs (``gpus``: their compute capabilities; default: what TensorFlow
      sees): yes when every one is Ampere or newer (8.0+);
    - a CPU: yes when its flags (``cpuinfo``: the text of ``/proc/cpuinfo``;
      unreadable: no) include ``avx512_bf16`` or ``amx_bf16`` and oneDNN may
      use them (``environ``: default ``os.environ``; ``TF_ENABLE_ONEDNN_OPTS=0``
      or an ``ONEDNN_MAX_CPU_ISA`` below bfloat16: no).

    Measured on an AVX-512 CPU with ``avx512_bf16``, and with oneDNN held below
    bfloat16: benchmarks/RESULTS.md, "Step cost".
    """
    if tpu:
        return True
    if gpus is None:
        gpus = [
            tf.config.experimental.get_device_details(gpu).get("compute_capability")
            for gpu in tf.config.list_physical_devices("GPU")
        ]
    if gpus:
        return all(capability and tuple(capability) >= (8, 0) for capability in gpus)
    environ = os.environ if environ is None else environ
    if environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() in ("0", "false"):
        return False
    isa = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if isa and not any(mark in isa for mark in _BF16_ISA_MARKS):
        return False
    if cpuinfo is None:
        try:
            cpuinfo = pathlib.Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: no flags to read
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


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
    if train_config.mixed_precision == "mixed_float16":  # "auto" never picks it
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
    # Adam's slots now, not in the first trace of the train step: a tf.function
    # whose first trace creates variables is traced a second time, and Keras
    # builds the optimizer before `fit` only under a distribution strategy.
    model.optimizer.build(model.trainable_variables)
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
