"""Two replicas on one CPU: run by test_mirrored.py in a fresh process.

``python mirrored_checks.py OUT.json``.

The CPU must be split into two logical devices before TensorFlow initializes its
devices, so this cannot run inside pytest's process. Every check trains the same
few steps from the same initial weights on the same global batches and writes
what it measured to OUT.json; the test asserts on it.
"""

import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_selfattn.training.distribute.strategy import split_cpu

split_cpu(2)  # before any TensorFlow op

import keras
import numpy as np
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.models import ModelConfig
from keras_selfattn.training import TrainConfig, dtype_policy, get_strategy
from keras_selfattn.training.data.run_tokenizer import tokenizer_configs
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.per_replica_xla import use_per_replica_xla
from keras_selfattn.training.fit.train import (
    build_and_compile,
    make_training_datasets,
)

MODEL = ModelConfig(
    num_hiddens=16,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=32,
    decoder_units=16,
    embedding_dim=8,
    dropout=0.0,
    max_source_len=24,
    max_target_len=12,
    # The smallest graphs to trace (tracing is most of each fit's CPU): dot
    # attention scores, the decoder's state as its output.
    attention_score="dot",
    attentional_output=False,
)
STEPS = 3
TIMINGS = []


def config(**overrides):
    # clipnorm=0: Keras 3 clips each replica's gradient before the all-reduce, so
    # with clipping on, N replicas differ from one by design
    # (see docs/distributed-training.md).
    values = {
        "epochs": 1,
        "batch_size": 32,
        "warmup_steps": 1,
        "learning_rate": 1e-2,
        "seed": 3,
        "target_tokenizer": "char",
        "clipnorm": 0.0,
        "jit_compile": False,
    }
    values.update(overrides)
    return TrainConfig(**values)


PAIRS = text.load_bundled_dates()[:160]
SPLITS = text.split_pairs(PAIRS, (0.8, 0.1, 0.1), seed=3)
TOKENIZER = text.PairTokenizer.build(SPLITS.train, *tokenizer_configs(config()))


def fit(strategy_name, **overrides):
    """Trains STEPS steps; returns (strategy, model, per-step losses, weights,
    initial weights)."""
    train_config = config(**overrides)
    strategy = get_strategy(strategy_name)
    keras.utils.set_random_seed(train_config.seed)
    train_ds, _, steps_per_epoch = make_training_datasets(
        SPLITS, TOKENIZER, MODEL, train_config
    )
    with dtype_policy(train_config.mixed_precision):
        with strategy.scope():
            model = build_and_compile(
                TOKENIZER, MODEL, train_config, strategy, steps_per_epoch
            )
        initial = [np.asarray(w.numpy(), np.float32) for w in model.trainable_weights]
        losses = []
        logger = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: losses.append(logs["loss"])
        )
        started = time.monotonic()
        model.fit(
            train_ds, epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[logger]
        )
        TIMINGS.append((strategy_name, overrides, round(time.monotonic() - started, 1)))
    trained = [np.asarray(w.numpy(), np.float32) for w in model.trainable_weights]
    return strategy, model, [float(x) for x in losses], trained, initial


def largest_difference(first, second):
    return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second, strict=True))


def largest_update(weights, initial):
    return max(
        float(np.max(np.abs(a - b))) for a, b in zip(weights, initial, strict=True)
    )


def small_model_xla():
    """A small embedding + dense model: one replica vs two.

    One replica uses Keras' whole-step XLA; two, per-replica XLA.
    """
    rng = np.random.default_rng(0)
    x = rng.integers(1, 50, size=(64, 6)).astype("int32")
    y = rng.integers(0, 5, size=(64,)).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True)

    def trained(strategy_name):
        strategy = get_strategy(strategy_name)
        keras.utils.set_random_seed(1)
        with strategy.scope():
            model = keras.Sequential(
                [
                    keras.Input((6,), dtype="int32"),
                    keras.layers.Embedding(50, 8),
                    keras.layers.GlobalAveragePooling1D(),
                    keras.layers.Dense(16, activation="relu"),
                    keras.layers.Dense(5),
                ]
            )
            model.compile(
                keras.optimizers.Adam(1e-2),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=strategy.num_replicas_in_sync == 1,
            )
            if strategy.num_replicas_in_sync > 1:
                use_per_replica_xla(model)
        history = model.fit(dataset, epochs=2, verbose=0)
        return (
            model,
            history.history["loss"],
            [w.numpy() for w in model.trainable_weights],
        )

    one, losses_one, weights_one = trained("default")
    two, losses_two, weights_two = trained("mirrored")
    return {
        "small_losses_one": losses_one,
        "small_losses_two": losses_two,
        "small_difference": largest_difference(weights_one, weights_two),
        "small_keras_jit_one": one.jit_compile,
        "small_per_replica_xla_two": bool(
            getattr(two.train_step, "keras_selfattn_per_replica_xla", False)
        ),
    }


def loss_scale_check(optimizer_class):
    """Replica 1's gradient overflows, replica 0's does not: skipped everywhere?"""
    strategy = get_strategy("mirrored")
    with strategy.scope():
        variable = keras.Variable(np.ones(3, np.float32), name="w")
        optimizer = optimizer_class(keras.optimizers.SGD(0.1))
        optimizer.build([variable])

    @tf.function
    def step():
        def replica_step():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            gradient = tf.where(
                tf.equal(replica, 1), tf.fill([3], np.float32(np.inf)), tf.ones([3])
            )
            optimizer.apply([gradient], [variable])

        strategy.run(replica_step)

    step()
    return {
        "finite_weights": bool(np.all(np.isfinite(variable.numpy()))),
        "weights": variable.numpy().tolist(),
        "scale": float(optimizer.dynamic_scale.numpy()),
    }


def main(out):
    results = {}
    strategy_1, _model_1, losses_1, weights_1, initial = fit("default")
    strategy_2, _model_2, losses_2, weights_2, _ = fit("mirrored")
    results["replicas"] = [
        strategy_1.num_replicas_in_sync,
        strategy_2.num_replicas_in_sync,
    ]
    results["float32"] = {
        "losses_one": losses_1,
        "losses_two": losses_2,
        "weight_difference": largest_difference(weights_1, weights_2),
    }
    # How far the few steps moved the weights from where they started, for scale.
    results["float32"]["update"] = largest_update(weights_1, initial)

    # XLA on two replicas: `train` compiles each replica's forward and backward
    # pass (Keras' whole-step XLA fails there). The decision, on the real model:
    xla_config = config(jit_compile=True)
    strategy = get_strategy("mirrored")
    with strategy.scope():
        decided = build_and_compile(TOKENIZER, MODEL, xla_config, strategy, 4)
    results["jit"] = {
        "per_replica_xla": bool(
            getattr(decided.train_step, "keras_selfattn_per_replica_xla", False)
        ),
        "keras_whole_step_jit": decided.jit_compile,
    }
    # ...and the mechanism, on a small model (compiling the seq2seq step with XLA
    # twice, once per replica, takes minutes on two shared cores; the whole
    # seq2seq step is compiled by test_strategy.py's TPU check):
    results["jit"].update(small_model_xla())
    # Mixed precision on two replicas (without XLA: its compile time is paid above).
    for policy in ("mixed_float16", "mixed_bfloat16"):
        _, model, losses, weights, _ = fit("mirrored", mixed_precision=policy)
        results[policy] = {
            "losses": losses,
            "optimizer": type(model.optimizer).__name__,
            "loss_scaled": isinstance(
                model.optimizer, keras.optimizers.LossScaleOptimizer
            ),
            "finite": bool(all(np.all(np.isfinite(w)) for w in weights)),
            "difference_to_float32": largest_difference(weights, weights_1),
            "compute_dtype": model.get_layer("decoder").compute_dtype,
            "logits_dtype": model.get_layer("logits").compute_dtype,
        }
    results["loss_scale_synced"] = loss_scale_check(SyncedLossScaleOptimizer)
    results["loss_scale_stock"] = loss_scale_check(keras.optimizers.LossScaleOptimizer)
    results["timings"] = [
        f"{name} {overrides}: {seconds} s" for name, overrides, seconds in TIMINGS
    ]
    pathlib.Path(out).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
