"""Tests of BahdanauDecoderCell on its own: a Keras RNN cell and its states list."""

import keras
import numpy as np
import pytest

from keras_selfattn.layers import BahdanauDecoder, BahdanauDecoderCell
from tests.harness import run_layer_test
from tests.layers.test_bahdanau_decoder import (
    CONFIGS,
    DM,
    MEMORY,
    RNG,
    TARGETS,
    UNITS,
    VALID_LENS,
    B,
    E,
    T,
    np_,
    num_recurrent,
    random_initial_state,
)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")
def test_harness_cell(tmp_path):
    """The cell alone, called on one step with an explicit states list.

    The key projection is an input here (it is computed once per sequence, outside
    the step), so the attention's key kernel gets no gradient from this model.
    """
    states = random_initial_state({"rnn_type": "gru", "num_layers": 2}) + [
        MEMORY,
        RNG.normal(size=(B, T, UNITS)).astype("float32"),  # projected keys
        np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype="float32"),  # memory mask
    ]
    run_layer_test(
        BahdanauDecoderCell,
        {"units": UNITS, "num_layers": 2},
        {"inputs": TARGETS[:, 0], "states": states},
        expected_output_shapes=[(B, UNITS)] + [s.shape for s in states],
        expected_num_trainable_weights=9,
        tmp_path=tmp_path,
    )


def test_keras_rnn_runs_the_cell_directly():
    """The cell is a real Keras RNN cell: keras.layers.RNN with the memory states."""
    decoder = BahdanauDecoder(units=UNITS)
    expected = decoder(TARGETS, MEMORY, memory_valid_lens=VALID_LENS)
    cell = decoder.cell
    assert cell.state_size == [UNITS, DM, UNITS, 1] and cell.output_size == UNITS
    rnn = keras.layers.RNN(cell, return_sequences=True)
    states = cell.get_initial_state_for_memory(MEMORY, memory_valid_lens=VALID_LENS)
    np.testing.assert_allclose(
        np_(rnn(TARGETS, initial_state=states)), np_(expected), atol=1e-6
    )
    with pytest.raises(ValueError, match="get_initial_state_for_memory"):
        keras.layers.RNN(cell)(TARGETS)


@pytest.mark.parametrize("config", CONFIGS)
def test_the_cell_exists_before_build_and_names_its_state_layout(config):
    decoder = BahdanauDecoder(units=UNITS, dropout=0.5, **config)
    cell = decoder.cell
    assert isinstance(cell, BahdanauDecoderCell) and not cell.built
    states = cell.get_initial_state_for_memory(MEMORY, training=True)
    parts = cell.unpack_states(states)
    assert len(parts.recurrent) == num_recurrent(config) == cell.num_recurrent_states
    assert len(parts.dropout_masks) == config["num_layers"] - 1
    np.testing.assert_array_equal(np_(parts.memory), MEMORY)
    assert [id(s) for s in cell.pack_states(parts)] == [id(s) for s in states]
    hidden = parts.recurrent[:: 2 if config["rnn_type"] == "lstm" else 1]
    if config.get("residual"):  # the query is the residual stream: the sum of h's
        np.testing.assert_allclose(
            np_(cell.top_hidden_state(states)), np_(sum(hidden)), atol=1e-6
        )
    else:
        assert cell.top_hidden_state(states) is hidden[-1]
    with pytest.raises(ValueError, match="states must be a list of"):
        cell.unpack_states(states[:-1])


def test_stepping_the_cell_on_a_masked_embedding_is_silent():
    """The README pattern: the training Embedding(mask_zero=True), step by step."""
    import warnings

    embedding = keras.layers.Embedding(10, E, mask_zero=True)
    decoder = BahdanauDecoder(units=UNITS)
    tokens = np.array([[2, 4, 0, 0], [2, 5, 6, 0]], "int32")
    full = decoder(embedding(tokens), MEMORY, memory_valid_lens=VALID_LENS)
    cell = decoder.cell
    states = cell.get_initial_state_for_memory(MEMORY, memory_valid_lens=VALID_LENS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in range(tokens.shape[1]):
            step_input = embedding(tokens[:, t])
            assert getattr(step_input, "_keras_mask", None) is not None
            output, states = cell(step_input, states)
            np.testing.assert_allclose(np_(output), np_(full)[:, t], atol=1e-5)
