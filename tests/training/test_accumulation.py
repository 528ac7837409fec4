"""Gradient accumulation (TrainConfig.accumulate_steps): N micro-batches, one update.

The loss of a batch is the mean over its real target tokens, and Keras' Adam
applies the mean of the N accumulated gradients: so N micro-batches with the
same number of real target tokens each (here every row has the same lengths,
no padding) give exactly the gradient of the one batch that holds them all.
Dropout is off: the micro-batches and the large batch then compute the same
function.
"""

import json
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.models import ModelConfig
from keras_selfattn.run_directory.layout import backup_file
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.fit.compiled_model import build_and_compile
from keras_selfattn.training.resume.backup import restore_backup

MODEL = ModelConfig(
    num_hiddens=16,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=32,
    decoder_units=16,
    embedding_dim=8,
    dropout=0.0,
    max_source_len=8,
    max_target_len=8,
)
VOCAB = types.SimpleNamespace(source_vocab_size=200, target_vocab_size=200)
ROWS, SOURCE_LEN, TARGET_LEN = 4, 6, 5


def _model(accumulate_steps):
    config = TrainConfig(
        accumulate_steps=accumulate_steps, jit_compile=False, warmup_steps=3, seed=1
    )
    return build_and_compile(
        VOCAB, MODEL, config, tf.distribute.get_strategy(), steps_per_epoch=10
    )


def _distinct_ids(rng, shape):
    """Ids >= 4 (no padding, no reserved id), each used once."""
    return rng.permutation(np.arange(4, 200, dtype="int32"))[: np.prod(shape)].reshape(
        shape
    )


def _micro_batches(updates, steps, seed=0):
    """``updates * steps`` batches of ROWS rows; no id repeats within an update.

    Distinct ids: Keras' Adam (TensorFlow) takes an embedding's gradient as
    IndexedSlices and squares each slice before summing repeated rows, while
    the mean of accumulated gradients is dense; with repeated ids a large batch
    and its micro-batches would differ by that (Keras', not accumulation's).
    """
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(updates):
        source = _distinct_ids(rng, (steps, ROWS, SOURCE_LEN))
        target_in = _distinct_ids(rng, (steps, ROWS, TARGET_LEN))
        labels = rng.integers(4, 200, (steps, ROWS, TARGET_LEN), dtype="int32")
        for i in range(steps):
            inputs = {"source": source[i], "target_in": target_in[i]}
            batches.append((inputs, labels[i]))
    return batches


def _joined(batches):
    inputs = {
        key: np.concatenate([b[0][key] for b in batches]) for key in batches[0][0]
    }
    return inputs, np.concatenate([b[1] for b in batches])


def _train(model, batches):
    for inputs, labels in batches:
        model.train_on_batch(inputs, labels)


def _assert_same_weights(first, second):
    for a, b in zip(first.get_weights(), second.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@pytest.mark.slow
@pytest.mark.parametrize("steps", [3])
def test_n_micro_batches_give_the_weights_of_one_n_times_larger_batch(steps):
    batches = _micro_batches(2, steps)
    accumulating, large = _model(steps), _model(1)
    initial = accumulating.get_weights()
    large.set_weights(initial)
    _train(accumulating, batches)  # two updates of `steps` micro-batches
    _train(large, [_joined(batches[:steps]), _joined(batches[steps:])])
    assert int(accumulating.optimizer.iterations) == 2
    moved = [
        not np.allclose(a, b)
        for a, b in zip(accumulating.get_weights(), initial, strict=True)
    ]
    assert any(moved)
    _assert_same_weights(accumulating, large)


@pytest.mark.slow
def test_resume_mid_accumulation_is_exact(tmp_path):
    """A backup (WorkerBackup's save_weights) taken between two micro-batches of an
    update holds the accumulated gradients: the resumed run ends where an
    uninterrupted one does."""
    batches = _micro_batches(1, 4, seed=1)
    uninterrupted = _model(4)
    # The interrupted run is the uninterrupted one up to its backup.
    _train(uninterrupted, batches[:2])
    uninterrupted.save_weights(backup_file(tmp_path, 1, "weights"))
    backup_file(tmp_path, 1, "state").write_text(json.dumps({"epoch": 1}))
    _train(uninterrupted, batches[2:])
    resumed = _model(4)
    restore_backup(resumed, tmp_path, 1)
    accumulated = [
        v.numpy() for v in resumed.optimizer.variables if "accumulat" in v.path
    ]
    assert accumulated and any(np.abs(a).sum() > 0 for a in accumulated)
    _train(resumed, batches[2:])
    assert int(resumed.optimizer.iterations) == 1
    _assert_same_weights(resumed, uninterrupted)


def test_accumulate_steps_must_be_positive():
    with pytest.raises(ValueError, match="accumulate_steps.*Received.*0"):
        TrainConfig(accumulate_steps=0)
