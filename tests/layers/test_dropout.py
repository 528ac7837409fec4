"""`HashDropout`: the bits against a NumPy lowbias32, the mask's statistics, the
Keras Dropout contract (seeds, inference, noise_shape, saving) and bad rates."""

import keras
import numpy as np
import pytest

from keras_selfattn.layers import HashDropout
from keras_selfattn.layers.dropout import hash_bits


def numpy_mix(x):
    """lowbias32, written out in NumPy uint32 arithmetic (wrapping multiplies)."""
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x = (x.astype(np.uint64) * 0x7FEB352D % 2**32).astype(np.uint32)
    x ^= x >> np.uint32(15)
    x = (x.astype(np.uint64) * 0x846CA68B % 2**32).astype(np.uint32)
    x ^= x >> np.uint32(16)
    return x


def numpy_bits(shape, seed):
    s0, s1 = (np.uint32(s % 2**32) for s in seed)
    key = numpy_mix(np.array(s0 ^ numpy_mix(np.array((int(s1) + 0x9E3779B9) % 2**32))))
    index = np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
    return numpy_mix(numpy_mix(index) ^ key)


@pytest.mark.parametrize("seed", [(0, 0), (1234, 5), (-3, 2**31 - 1)])
def test_bits_match_numpy(seed):
    got = hash_bits((4, 6, 7), np.array(seed, "int32"))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(got), numpy_bits((4, 6, 7), seed)
    )


def _masks(layer, shape, calls):
    ones = np.ones(shape, "float32")
    return [
        keras.ops.convert_to_numpy(layer(ones, training=True)) for _ in range(calls)
    ]


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_kept_fraction_and_scale(rate):
    (out,) = _masks(HashDropout(rate, seed=3), (200, 500), 1)
    n = out.size
    kept = (out != 0).mean()
    # Within 5 standard deviations of the binomial.
    assert abs(kept - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
    np.testing.assert_allclose(out[out != 0], 1 / (1 - rate), rtol=1e-6)
    # The expectation of the output is the input.
    assert abs(out.mean() - 1) < 5 * np.sqrt(rate / (1 - rate) / n)


def test_masks_are_independent_across_calls_and_neighbours():
    first, second = (m != 0 for m in _masks(HashDropout(0.5, seed=1), (100, 400), 2))
    n = first.size
    bound = 5 / np.sqrt(n)

    def correlation(a, b):
        return np.corrcoef(a.ravel().astype(float), b.ravel().astype(float))[0, 1]

    assert abs(correlation(first, second)) < bound  # two calls
    assert abs(correlation(first[:, :-1], first[:, 1:])) < bound  # along a row
    assert abs(correlation(first[:-1], first[1:])) < bound  # along a column
    assert not np.array_equal(first, second)


def test_the_same_seed_draws_the_same_masks_and_another_seed_others():
    a = _masks(HashDropout(0.3, seed=11), (8, 64), 3)
    b = _masks(HashDropout(0.3, seed=11), (8, 64), 3)
    c = _masks(HashDropout(0.3, seed=12), (8, 64), 3)
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)


def test_inference_rate_zero_and_rate_one():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    np.testing.assert_array_equal(HashDropout(0.5, seed=1)(x, training=False), x)
    np.testing.assert_array_equal(HashDropout(0.0)(x, training=True), x)
    np.testing.assert_array_equal(HashDropout(1.0, seed=1)(x, training=True), 0 * x)


def test_noise_shape_broadcasts_the_mask():
    layer = HashDropout(0.5, noise_shape=(None, 1, 6), seed=2)
    (out,) = _masks(layer, (5, 7, 6), 1)
    # One mask per (batch, feature), the same at every step.
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1], out.shape))
    assert 0 < (out == 0).mean() < 1


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function")
def test_compiled_by_xla_it_draws_the_same_masks():
    import tensorflow as tf

    eager, compiled = HashDropout(0.3, seed=4), HashDropout(0.3, seed=4)
    step = tf.function(lambda x: compiled(x, training=True), jit_compile=True)
    x = tf.ones((6, 50))
    for _ in range(2):
        np.testing.assert_array_equal(step(x), eager(x, training=True))


def test_saved_and_loaded_with_the_keras_dropout_config(tmp_path):
    inputs = keras.Input((10,))
    model = keras.Model(inputs, HashDropout(0.4, seed=5, name="drop")(inputs))
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.get_layer("drop"), HashDropout)
    assert loaded.get_layer("drop").get_config() == model.get_layer("drop").get_config()
    # The same configuration as Keras' Dropout: a Keras Dropout model's config
    # builds a HashDropout and back.
    config = keras.layers.Dropout(0.4, seed=5).get_config()
    assert HashDropout.from_config(config).get_config() == config


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_bad_rates_are_refused_by_name(rate):
    with pytest.raises(ValueError, match=f"rate.*Received: rate={rate}"):
        HashDropout(rate)
