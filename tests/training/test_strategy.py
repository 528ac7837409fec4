"""Strategy selection; the TPU path without a TPU; the TPU audit of train's own step;
mixed precision.
"""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.cli import build_parser
from keras_selfattn.config import same_training
from keras_selfattn.models import ModelConfig
from keras_selfattn.training import TrainConfig, get_strategy
from keras_selfattn.training.data.run_tokenizer import tokenizer_configs
from keras_selfattn.training.distribute.distributed import worker_role
from keras_selfattn.training.distribute.loss_scale import SyncedLossScaleOptimizer
from keras_selfattn.training.distribute.tpu_audit import audit_train_step
from keras_selfattn.training.fit.compiled_model import uses_xla
from keras_selfattn.training.fit.train import (
    build_and_compile,
    make_training_datasets,
)
from tests.training.cluster import free_ports

TINY_MODEL = ModelConfig(
    num_hiddens=16,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=32,
    decoder_units=16,
    embedding_dim=8,
    dropout=0.0,
    max_source_len=24,
    max_target_len=12,
)


def tiny_config(**overrides):
    values = {
        "epochs": 1,
        "batch_size": 16,
        "warmup_steps": 1,
        "seed": 3,
        "target_tokenizer": "char",
        "max_pairs": 120,
    }
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="module")
def prepared():
    pairs = text.load_bundled_dates()[:120]
    config = tiny_config()
    splits = text.split_pairs(pairs, config.split, seed=config.seed)
    tokenizer = text.PairTokenizer.build(splits.train, *tokenizer_configs(config))
    return splits, tokenizer


# --- choosing a strategy --------------------------------------------------------


def test_strategy_names_and_the_default(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="strategy must be one of"):
        get_strategy("horovod")
    assert get_strategy("auto") is tf.distribute.get_strategy()  # no GPUs, no TF_CONFIG
    assert worker_role(get_strategy("default")).is_chief
    with pytest.raises(ValueError, match="needs TF_CONFIG naming at least two tasks"):
        get_strategy("multi_worker")


def test_placement_does_not_block_resuming():
    assert same_training(
        tiny_config(),
        tiny_config(strategy="multi_worker", worker_timeout=5.0, tpu="local"),
    )
    assert not same_training(tiny_config(), tiny_config(batch_size=32))
    with pytest.raises(ValueError, match="worker_timeout"):
        tiny_config(worker_timeout=0)


def test_cli_flags_for_the_new_fields():
    args = build_parser().parse_args(
        [
            "train",
            "--data",
            "x.tsv",
            "--out",
            "run",
            "--tpu",
            "grpc://10.0.0.2:8470",
            "--worker-timeout",
            "30",
            "--max-pairs",
            "5",
            "--mixed-precision",
            "mixed_bfloat16",
            "--no-jit-compile",
            "--strategy",
            "tpu",
            "--bucket-spacing",
            "geometric",
            "--adam-beta-2",
            "0.98",
        ]
    )
    assert (args.tpu, args.worker_timeout, args.max_pairs) == (
        "grpc://10.0.0.2:8470",
        30.0,
        5,
    )
    assert (args.mixed_precision, args.jit_compile, args.strategy) == (
        "mixed_bfloat16",
        False,
        "tpu",
    )
    assert (args.bucket_spacing, args.adam_beta_2) == ("geometric", 0.98)
    with pytest.raises(ValueError, match="bucket_spacing='log'"):
        TrainConfig(bucket_spacing="log")


# --- the TPU path, without a TPU -----------------------------------------------


def test_asking_for_a_tpu_without_one_is_a_clear_error():
    with pytest.raises(ValueError, match="strategy='tpu' but no TPU was found"):
        get_strategy("tpu")  # TPUClusterResolver cannot even name one here
    port = free_ports(1)[0]
    started = time.monotonic()
    with pytest.raises(
        ValueError, match=rf"nothing answered at 127.0.0.1:{port} within 1 s"
    ):
        get_strategy(
            "tpu", tpu=f"grpc://127.0.0.1:{port}", worker_timeout=1
        )  # TensorFlow would wait forever
    assert time.monotonic() - started < 10
    with pytest.raises(
        ValueError, match=r"grpc:// address must be HOST:PORT. Received: 'tpu-host'"
    ):
        get_strategy("tpu", tpu="grpc://tpu-host", worker_timeout=1)


# (The command line's one line for it, in a real process:
# tests/test_quiet_tensorflow.py.)


@pytest.mark.slow
def test_the_train_step_is_ready_for_a_tpu(prepared):
    """Static shapes in, the whole step lowered to XLA HLO, no op run on the host."""
    splits, tokenizer = prepared
    config = tiny_config(
        jit_compile=True, length_buckets=1
    )  # one bucket: static shapes
    train_ds, valid_ds, steps = make_training_datasets(
        splits, tokenizer, TINY_MODEL, config
    )
    strategy = tf.distribute.get_strategy()
    model = build_and_compile(tokenizer, TINY_MODEL, config, strategy, steps)
    audit = audit_train_step(model, train_ds)
    assert audit.ok, (
        audit.compile_error,
        audit.host_ops,
        audit.string_ops,
        audit.dynamic_shape_ops,
    )
    assert (
        audit.input_shapes["0/source"][0] == config.batch_size and audit.static_inputs
    )
    assert "ENTRY" in audit.hlo and not audit.dynamic_shape_ops
    assert {"PyFunc", "EagerPyFunc", "PrintV2"}.isdisjoint(audit.op_types)
    # The audit sees what would break a TPU: a partial last batch (validation keeps
    # it)...
    assert not audit_train_step(model, valid_ds).static_inputs


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "mixed_precision": "mixed_float16",
            "ema_momentum": 0.9,
            "accumulate_steps": 2,
            # The retrace comes from tf.function, with or without XLA (the adam
            # case keeps train's default, XLA); XLA's compile of this optimizer's
            # step took most of this file's time.
            "jit_compile": False,
        },
    ],
    ids=["adam", "loss_scaled_averaged_accumulating"],
)
def test_fit_traces_the_train_step_once(prepared, overrides):
    """The optimizer's variables exist before ``fit`` (`build_and_compile` builds
    it), for every optimizer `train` makes: TensorFlow traces a function whose
    first trace creates variables a second time, so slots made in the step cost
    a second trace of the whole model."""
    splits, tokenizer = prepared
    config = tiny_config(**overrides)
    keras.config.set_dtype_policy(overrides.get("mixed_precision", "float32"))
    train_ds, _, steps = make_training_datasets(splits, tokenizer, TINY_MODEL, config)
    strategy = tf.distribute.get_strategy()
    model = build_and_compile(tokenizer, TINY_MODEL, config, strategy, steps)
    assert model.optimizer.built
    traces = []
    train_step = model.train_step

    def counted_train_step(data):
        traces.append(data)  # runs once a trace, not a step
        return train_step(data)

    model.train_step = counted_train_step
    history = model.fit(train_ds, epochs=1, steps_per_epoch=2, shuffle=False, verbose=0)
    assert len(traces) == 1
    assert np.all(np.isfinite(history.history["loss"]))


# --- mixed precision ------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "scaled"),
    [("mixed_float16", True), ("mixed_bfloat16", False), ("float32", False)],
)
def test_keras_wraps_only_float16_in_loss_scaling(policy, scaled):
    """Verifies the claim the training code relies on.

    Keras 3's compile wraps the optimizer itself for float16.
    """
    keras.config.set_dtype_policy(policy)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(), "mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) is scaled


def test_train_uses_the_replica_synced_loss_scaling(prepared):
    _splits, tokenizer = prepared
    for policy, expected in (
        ("mixed_float16", SyncedLossScaleOptimizer),
        ("mixed_bfloat16", keras.optimizers.Adam),
    ):
        keras.config.set_dtype_policy(policy)
        model = build_and_compile(
            tokenizer,
            TINY_MODEL,
            tiny_config(mixed_precision=policy),
            tf.distribute.get_strategy(),
            4,
        )
        assert type(model.optimizer) is expected
        assert model.get_layer("logits").compute_dtype == "float32"


def test_adam_settings_reach_the_optimizer(prepared):
    _splits, tokenizer = prepared
    config = tiny_config(adam_beta_2=0.98, adam_epsilon=1e-9, clipnorm=0.0)
    model = build_and_compile(
        tokenizer, TINY_MODEL, config, tf.distribute.get_strategy(), 4
    )
    assert model.optimizer.beta_2 == 0.98 and model.optimizer.epsilon == 1e-9
    assert model.optimizer.clipnorm is None  # 0 turns clipping off
    defaults = build_and_compile(
        tokenizer, TINY_MODEL, tiny_config(), tf.distribute.get_strategy(), 4
    ).optimizer
    assert (defaults.beta_2, defaults.epsilon) == (0.999, 1e-7)  # Keras' own


@pytest.mark.parametrize(
    ("jit_compile", "expected"), [(None, False), (True, True), (False, False)]
)
def test_xla_is_what_was_asked_and_none_leaves_it_to_the_device(
    prepared, jit_compile, expected
):
    """None (``--preset small``) decides by the devices: no GPU here, so no XLA;
    an explicit choice is kept either way."""
    _splits, tokenizer = prepared
    assert not tf.config.list_logical_devices("GPU")  # what this test assumes
    config = tiny_config(jit_compile=jit_compile)
    assert uses_xla(config) is expected
    model = build_and_compile(
        tokenizer, TINY_MODEL, config, tf.distribute.get_strategy(), 4
    )
    assert model.jit_compile is expected


@pytest.mark.parametrize(
    ("field", "value"),
    [("adam_beta_2", 1.0), ("adam_beta_2", 0.0), ("adam_epsilon", 0.0)],
)
def test_bad_adam_settings_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=rf"{field}={value!r}"):
        TrainConfig(**{field: value})


def test_threads_after_tensorflow_started_is_refused_by_name():
    from keras_selfattn.training.distribute.strategy import set_threads

    tf.constant(1.0) + 1.0  # TensorFlow's pools now exist
    set_threads(None)  # leaves them
    pools = tf.config.threading.get_intra_op_parallelism_threads()
    asked = pools + 3
    with pytest.raises(RuntimeError, match=f"Received: threads={asked}"):
        set_threads(asked)
    assert tf.config.threading.get_intra_op_parallelism_threads() == pools
    with pytest.raises(ValueError, match="threads=0"):
        TrainConfig(threads=0)
