"""BahdanauDecoder(unroll=...): the unrolled and the symbolic loops agree."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import BahdanauDecoder

RNG = np.random.default_rng(3)
INPUTS = RNG.normal(size=(3, 4, 5)).astype("float32")
MEMORY = RNG.normal(size=(3, 6, 7)).astype("float32")
VALID_LENS = np.array([6, 2, 0], "int32")  # the last sequence's memory is fully masked


def decoders(**kwargs):
    layers = {
        unroll: BahdanauDecoder(8, unroll=unroll, **kwargs)
        for unroll in (False, True, "auto")
    }
    for layer in layers.values():
        layer(INPUTS, MEMORY)
    weights = layers[False].get_weights()
    for layer in layers.values():
        layer.set_weights(weights)
    return layers


def run(layer, training):
    hidden, scores, states = layer(
        INPUTS,
        MEMORY,
        memory_valid_lens=VALID_LENS,
        return_attention_scores=True,
        return_state=True,
        training=training,
    )
    return [ops.convert_to_numpy(t) for t in (hidden, scores, *states)]


@pytest.mark.parametrize("kwargs", [{}, {"rnn_type": "lstm", "num_layers": 2}])
@pytest.mark.parametrize("training", [False, True])
def test_unrolled_equals_symbolic_loop(kwargs, training):
    layers = decoders(**kwargs)
    expected = run(layers[False], training)
    for unroll in (True, "auto"):
        for got, want in zip(run(layers[unroll], training), expected):
            np.testing.assert_allclose(got, want, atol=1e-6, err_msg=f"unroll={unroll}")


def test_gradients_agree_in_a_compiled_training_step():
    layers = decoders()
    targets = RNG.normal(size=(3, 4, 8)).astype("float32")
    results = {}
    for unroll, layer in layers.items():
        inputs = keras.Input((4, 5), batch_size=3)
        memory = keras.Input((6, 7), batch_size=3)
        model = keras.Model([inputs, memory], layer(inputs, memory))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
        model.train_on_batch([INPUTS, MEMORY], targets)
        results[unroll] = [ops.convert_to_numpy(w) for w in layer.weights]
    for unroll in (True, "auto"):
        for got, want in zip(results[unroll], results[False]):
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"unroll={unroll}")


def test_config_round_trip_and_old_configs():
    layer = BahdanauDecoder(8, unroll=False)
    assert layer.get_config()["unroll"] is False
    assert BahdanauDecoder.from_config(layer.get_config()).unroll is False
    old_config = {k: v for k, v in layer.get_config().items() if k != "unroll"}
    assert BahdanauDecoder.from_config(old_config).unroll == "auto"


def test_bad_unroll():
    with pytest.raises(
        ValueError, match="unroll must be 'auto', True or False. Received: unroll='yes'"
    ):
        BahdanauDecoder(8, unroll="yes")
