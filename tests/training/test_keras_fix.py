"""The keras-team/keras#20585 fix: its version guard, and that it is scoped.

The multi-worker tests (test_multi_worker.py) show that it works, and that stock
Keras still fails without it.
"""

import inspect

import keras
import pytest
import tensorflow as tf

from keras_selfattn.training.distribute import keras_fix
from keras_selfattn.training.distribute.keras_fix import (
    KERAS_FIX_ENV,
    keras_multi_worker_fix,
    keras_needs_multi_worker_fix,
)


@pytest.fixture(autouse=True)
def _guard_by_version(monkeypatch):
    monkeypatch.delenv(KERAS_FIX_ENV, raising=False)


@pytest.mark.parametrize(
    ("version", "needed"),
    [
        ("3.0.0", True),
        ("3.5.0", True),
        ("3.15.1", True),
        ("3.15.2rc0", True),
        ("3.16.0", False),
        ("4.0.0", False),
        ("2.15.0", False),
        ("2.21.0", False),
    ],
)
def test_the_guard_covers_the_known_broken_releases(version, needed):
    assert keras_needs_multi_worker_fix(version) is needed


def test_the_environment_overrides_the_guard(monkeypatch):
    monkeypatch.setenv(KERAS_FIX_ENV, "on")
    assert keras_needs_multi_worker_fix("9.0.0")
    monkeypatch.setenv(KERAS_FIX_ENV, "off")
    assert not keras_needs_multi_worker_fix("3.15.1")
    monkeypatch.setenv(KERAS_FIX_ENV, "sometimes")
    with pytest.raises(ValueError, match=KERAS_FIX_ENV):
        keras_needs_multi_worker_fix()


def _stock_keras_has_the_bugs():
    """Reads the installed Keras: are the two lines the fix replaces still there?"""
    trainer = keras_fix._keras_tf_trainer()
    build = inspect.getsource(trainer.TensorFlowTrainer._maybe_symbolic_build)
    reduce = inspect.getsource(trainer.reduce_per_replica)
    compact = "".join(build.split())
    bug_1 = (
        'self.distribute_strategy.reduce("MEAN",maybe_distributed_data_batch' in compact
    )  # a data batch
    bug_2 = 'strategy.reduce("MEAN",v,axis=0)' in "".join(
        reduce.split()
    )  # scalars along axis 0
    return bug_1 and bug_2


def test_the_guard_is_right_for_the_installed_keras():
    """The fix is applied exactly when the installed Keras still has both bugs.

    If this fails after a Keras upgrade: the bugs are gone (narrow
    KERAS_FIX_VERSIONS) or still there in a release outside the range (widen it,
    after test_multi_worker.py passes with it).
    """
    assert keras_needs_multi_worker_fix() == _stock_keras_has_the_bugs(), (
        keras.__version__
    )


def test_the_fix_is_scoped_to_multi_worker_fits(monkeypatch):
    trainer = keras_fix._keras_tf_trainer()
    stock = (
        trainer.TensorFlowTrainer._maybe_symbolic_build,
        trainer.reduce_per_replica,
    )
    # Not multi-worker: nothing is replaced.
    with keras_multi_worker_fix(tf.distribute.get_strategy()) as active:
        assert not active
        assert trainer.reduce_per_replica is stock[1]
    # Forced on (no strategy given): replaced inside, restored after, nesting is safe.
    monkeypatch.setenv(KERAS_FIX_ENV, "on")
    with keras_multi_worker_fix() as active:
        assert active
        with keras_multi_worker_fix():
            assert trainer.reduce_per_replica.keras_selfattn_fix
        assert trainer.TensorFlowTrainer._maybe_symbolic_build.keras_selfattn_fix
        assert trainer.reduce_per_replica is not stock[1]
    assert (
        trainer.TensorFlowTrainer._maybe_symbolic_build,
        trainer.reduce_per_replica,
    ) == stock


def test_a_newer_keras_runs_stock_with_a_warning(monkeypatch):
    monkeypatch.setattr(keras_fix, "KERAS_FIX_VERSIONS", ((3, 0), (3, 1)))
    if keras_needs_multi_worker_fix():
        pytest.skip("the installed Keras is 3.0.x")
    with (
        pytest.warns(UserWarning, match=KERAS_FIX_ENV),
        keras_multi_worker_fix() as active,
    ):
        assert not active


def test_the_fixed_reduction_keeps_single_worker_behaviour(monkeypatch):
    """Outside multi-worker mode the wrapped reduction defers to Keras' own."""
    monkeypatch.setenv(KERAS_FIX_ENV, "on")
    strategy = tf.distribute.get_strategy()
    values = {"loss": tf.constant(1.5), "accuracy": tf.constant([0.25, 0.5])}
    with keras_multi_worker_fix():
        reduced = keras_fix._keras_tf_trainer().reduce_per_replica(
            values, strategy, "auto"
        )
    assert float(reduced["loss"]) == 1.5 and reduced["accuracy"].shape == (2,)
