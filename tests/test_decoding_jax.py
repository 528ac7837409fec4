"""The searches on JAX: jitted once per setting, with the model's current weights.

These tests run only under KERAS_BACKEND=jax (tests/test_jax_backend.py runs this
file, and tests/test_decoding.py, in a JAX subprocess); under TensorFlow
tests/test_decoding_graphs.py checks the same things of the tf.function cache.
"""

import gc
import weakref

import keras
import numpy as np
import pytest

from keras_selfattn import decoding
from keras_selfattn.decoding import beam_search_decode, greedy_decode
from tests.test_decoding import SOURCE, tiny_model

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax", reason="the JAX backend's jitted searches"
)


def test_searches_are_jitted_once_per_setting():
    import jax

    model = tiny_model()
    first = greedy_decode(model, SOURCE, 6)
    greedy_decode(model, SOURCE[:1, :3], 6)  # another batch size and source length
    beam = beam_search_decode(model, SOURCE, 3, 6)
    beam_search_decode(model, SOURCE[:2], 3, 6)
    assert sorted(decoding.search._GRAPHS[model]) == [
        ("beam", 3, 6, 0.6),
        ("greedy", 6, False),
    ]
    assert isinstance(first["ids"], jax.Array) and isinstance(beam["ids"], jax.Array)
    # Trimmed after the jitted loop to the steps taken: the longest translation.
    assert first["ids"].shape[1] == int(np.max(np.asarray(first["lengths"])))
    assert beam["ids"].shape[:2] == (3, 3)


def test_a_jitted_search_decodes_with_the_current_weights():
    """The weights are arguments of the jitted function, not constants of its trace:
    after new weights, the cached search answers as a fresh model would."""
    model = tiny_model()
    before = greedy_decode(model, SOURCE, 6)
    kernel, bias = model.logits_dense.get_weights()
    model.logits_dense.set_weights([-6.0 * kernel, bias])
    after = greedy_decode(model, SOURCE, 6)
    fresh = tiny_model()
    fresh.set_weights(model.get_weights())
    expected = greedy_decode(fresh, SOURCE, 6)
    np.testing.assert_array_equal(np.asarray(after["ids"]), np.asarray(expected["ids"]))
    np.testing.assert_allclose(
        np.asarray(after["scores"]), np.asarray(expected["scores"]), atol=1e-5
    )
    assert not np.allclose(np.asarray(after["scores"]), np.asarray(before["scores"]))


def test_jitted_searches_do_not_keep_the_model_alive():
    model = tiny_model()
    beam_search_decode(model, SOURCE, 2, 4)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
