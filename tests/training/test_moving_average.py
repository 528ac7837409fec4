"""The weights' moving average (TrainConfig.ema_momentum, MovingAverageAdam).

The reference is the recursion written out in NumPy over the weights a run
actually took after each update: ``a_0 = w_0`` (the weights after the first
update), ``a_t = d_t a_{t-1} + (1 - d_t) w_t`` with
``d_t = min(m, (1 + t) / (10 + t))``.
"""

import json
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.models import saving
from keras_selfattn.models.optimizers import MovingAverageAdam, moving_average_decay
from keras_selfattn.run_directory.layout import backup_file
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.fit.compiled_model import build_and_compile
from keras_selfattn.training.moving_average import (
    SwapInMovingAverage,
    moving_average_in,
    swap_moving_average,
)
from keras_selfattn.training.resume.backup import restore_backup
from tests.training.test_accumulation import MODEL  # the same tiny model, no dropout

VOCAB = types.SimpleNamespace(source_vocab_size=50, target_vocab_size=50)
MOMENTUM = 0.95


def _model(jit_compile=False, ema_momentum=MOMENTUM):
    config = TrainConfig(
        jit_compile=jit_compile,
        warmup_steps=2,
        learning_rate=1e-2,
        seed=1,
        ema_momentum=ema_momentum,
    )
    return build_and_compile(
        VOCAB, MODEL, config, tf.distribute.get_strategy(), steps_per_epoch=4
    )


def _batches(count, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            {
                "source": rng.integers(4, 50, (4, 6), dtype="int32"),
                "target_in": rng.integers(4, 50, (4, 5), dtype="int32"),
            },
            rng.integers(4, 50, (4, 5), dtype="int32"),
        )
        for _ in range(count)
    ]


def _reference_average(trajectory, momentum):
    average = [w.copy() for w in trajectory[0]]
    for t, weights in enumerate(trajectory[1:], start=1):
        decay = min(momentum, (1 + t) / (10 + t))
        average = [decay * a + (1 - decay) * w for a, w in zip(average, weights)]
    return average


def _trainable(model):
    return [w.numpy().copy() for w in model.trainable_variables]


def _assert_close(first, second):
    for a, b in zip(first, second, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_decay_warms_up_to_the_momentum():
    decays = [float(moving_average_decay(0.999, t)) for t in (0, 1, 90, 8991, 10**6)]
    np.testing.assert_allclose(
        decays, [1 / 10, 2 / 11, 91 / 100, 0.999, 0.999], rtol=1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_average_is_the_recursion_over_the_weights_taken(jit_compile):
    model = _model(jit_compile)
    trajectory = []
    for inputs, labels in _batches(14):
        model.train_on_batch(inputs, labels)
        trajectory.append(_trainable(model))
    average = [a.numpy() for a in model.optimizer.moving_average]
    _assert_close(average, _reference_average(trajectory, MOMENTUM))
    # ... and it is not simply the last weights
    assert not np.allclose(average[0], trajectory[-1][0])


def test_swapping_puts_the_average_in_and_twice_changes_nothing():
    model = _model()
    for inputs, labels in _batches(5):
        model.train_on_batch(inputs, labels)
    weights = _trainable(model)
    average = [a.numpy().copy() for a in model.optimizer.moving_average]
    with moving_average_in(model):
        _assert_close(_trainable(model), average)
        inputs, _ = _batches(1, seed=3)[0]
        by_average = model.predict_on_batch(inputs)
    _assert_close(_trainable(model), weights)
    _assert_close([a.numpy() for a in model.optimizer.moving_average], average)
    swap_moving_average(model)
    swap_moving_average(model)
    _assert_close(_trainable(model), weights)
    assert not np.allclose(by_average, model.predict_on_batch(inputs))


def test_a_model_without_an_average_is_refused_by_swap_and_left_by_the_context():
    plain = _model(ema_momentum=0.0)
    assert type(plain.optimizer) is keras.optimizers.Adam
    with pytest.raises(ValueError, match="MovingAverageAdam.*Received: optimizer="):
        swap_moving_average(plain)
    with moving_average_in(plain) as same:
        assert same is plain


class _Recorder(keras.callbacks.Callback):
    """The trainable weights after every batch and at every period's end."""

    def __init__(self):
        super().__init__()
        self.after_batch, self.at_period_end = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.after_batch.append(_trainable(self.model))

    def on_epoch_end(self, epoch, logs=None):
        self.at_period_end.append(_trainable(self.model))


def _dataset(batches):
    inputs = {
        key: np.concatenate([b[0][key] for b in batches]) for key in batches[0][0]
    }
    labels = np.concatenate([b[1] for b in batches])
    return tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(4)


class _BackupAtFirstPeriodEnd(keras.callbacks.Callback):
    """Writes a backup of period 0 as WorkerBackup does: at the period's end,
    after the swap (the average in the model, the weights in the optimizer)."""

    def __init__(self, directory):
        super().__init__()
        self.directory = directory

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            self.model.save_weights(backup_file(self.directory, 1, "weights"))
            backup_file(self.directory, 1, "state").write_text(json.dumps({"epoch": 1}))


@pytest.fixture(scope="module")
def two_periods(tmp_path_factory):
    """Two periods of three updates with the average swapped in at each period's
    end and a backup of period 0 taken after the swap (as `train` orders its
    callbacks): the weights after every batch and at every period's end, the
    initial weights, the batches and the backup. Trained once for the two tests
    below."""
    batches = _batches(6, seed=5)
    model = _model()
    initial = model.get_weights()
    recorder = _Recorder()
    backup = tmp_path_factory.mktemp("moving_average_backup")
    model.fit(
        _dataset(batches),
        epochs=2,
        steps_per_epoch=3,
        callbacks=[SwapInMovingAverage(), _BackupAtFirstPeriodEnd(backup), recorder],
        verbose=0,
    )
    return types.SimpleNamespace(
        batches=batches, initial=initial, recorder=recorder, backup=backup
    )


@pytest.mark.slow  # a model trained
def test_callbacks_after_the_swap_see_the_average_and_training_its_own_weights(
    two_periods,
):
    recorder = two_periods.recorder
    # Period ends hold the average of the weights the batches trained to ...
    _assert_close(
        recorder.at_period_end[0],
        _reference_average(recorder.after_batch[:3], MOMENTUM),
    )
    _assert_close(
        recorder.at_period_end[1], _reference_average(recorder.after_batch, MOMENTUM)
    )
    # ... and period 2 trained on from its own weights, not from the average:
    # the same updates applied without the callback give the same weights.
    plain = _model()
    plain.set_weights(two_periods.initial)
    for inputs, labels in two_periods.batches:
        plain.train_on_batch(inputs, labels)
    _assert_close(_trainable(plain), recorder.after_batch[-1])


@pytest.mark.slow  # a model trained
def test_a_run_resumed_from_a_backup_taken_with_the_average_in_is_exact(two_periods):
    # The interrupted run is the uninterrupted one up to its backup of period 0,
    # taken after the swap.
    resumed = _model()
    resumed.set_weights(two_periods.initial)
    restore_backup(resumed, two_periods.backup, 1)
    resumed_recorder = _Recorder()
    resumed.fit(
        _dataset(two_periods.batches[3:]),
        initial_epoch=1,
        epochs=2,
        steps_per_epoch=3,
        callbacks=[SwapInMovingAverage(), resumed_recorder],
        verbose=0,
    )
    recorder = two_periods.recorder
    _assert_close(resumed_recorder.after_batch[-1], recorder.after_batch[-1])
    _assert_close(resumed_recorder.at_period_end[-1], recorder.at_period_end[-1])


def test_the_optimizer_round_trips_through_its_config_and_a_keras_file(tmp_path):
    optimizer = MovingAverageAdam(learning_rate=1e-3, ema_momentum=0.99)
    config = optimizer.get_config()
    assert (config["ema_momentum"], config["use_ema"]) == (0.99, True)
    again = MovingAverageAdam.from_config(config)
    assert again.peak_ema_momentum == 0.99
    model = _model()
    model.train_on_batch(*_batches(1)[0])
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = saving.load_model(path)
    assert isinstance(loaded.optimizer, MovingAverageAdam)
    assert loaded.optimizer.peak_ema_momentum == MOMENTUM


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5])
def test_a_momentum_outside_0_1_is_refused_by_name(value):
    with pytest.raises(ValueError, match=f"ema_momentum.*Received.*{value}"):
        TrainConfig(ema_momentum=value)
    with pytest.raises(
        ValueError, match=f"ema_momentum.*Received: ema_momentum={value}"
    ):
        MovingAverageAdam(ema_momentum=value)
