"""Every public layer composes in a user's functional model (the fast tier).

Each case calls a layer of ``keras_selfattn.layers.__all__`` on ``keras.Input``s
whose batch (and lengths, where the layer allows them) are unknown, then
`run_composition_test` predicts, fits one step, saves to ``.keras`` and loads
it back. `tests/harness.run_layer_test` checks more of each layer (mixed
precision, XLA, a fresh process), several of those in the slow tier; these
cases keep the composition itself in the fast one, and add what the harness
does not do: ``BahdanauDecoderCell`` inside ``keras.layers.RNN``, its states
from ``get_initial_state_for_memory`` on the ``keras.Input`` memory.
"""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

import keras_selfattn.layers
from keras_selfattn.layers import (
    BahdanauAttention,
    BahdanauDecoder,
    BahdanauDecoderCell,
    HashDropout,
    LearnedPositionalEncoding,
    MultiHeadSelfAttention,
    PositionalEncoding,
)
from tests.harness import run_composition_test

RNG = np.random.default_rng(7)
B, T, S, E, DM, UNITS = 2, 5, 3, 3, 6, 4
SEQUENCE = RNG.normal(size=(B, T, UNITS)).astype("float32")
MEMORY = RNG.normal(size=(B, T, DM)).astype("float32")
TARGETS = RNG.normal(size=(B, S, E)).astype("float32")
LENS = np.array([5, 2], "int32")  # the first row keeps every position


def _positional_encoding(x):
    # No weights of its own: the Dense before it is what the fit step moves,
    # through the layer's gradient.
    h = keras.layers.Dense(UNITS)(x["sequence"])
    return PositionalEncoding(num_hiddens=UNITS, max_len=8, dropout=0.1, seed=1)(h)


def _learned_positional_encoding(x):
    return LearnedPositionalEncoding(num_hiddens=UNITS, max_len=8)(x["sequence"])


def _hash_dropout(x):
    return HashDropout(0.5, seed=2)(keras.layers.Dense(UNITS)(x["sequence"]))


def _multi_head_self_attention(x):
    return MultiHeadSelfAttention(num_hiddens=UNITS, num_heads=2, dropout=0.1)(
        x["sequence"], valid_lens=x["lens"], return_attention_scores=True
    )


def _bahdanau_attention(x):
    return BahdanauAttention(units=UNITS)(
        x["targets"], x["memory"], valid_lens=x["lens"]
    )


def _bahdanau_decoder(x):
    return BahdanauDecoder(units=UNITS, dropout=0.2, seed=3)(
        x["targets"],
        x["memory"],
        memory_valid_lens=x["lens"],
        return_attention_scores=True,
    )


def _decoder_cell_in_keras_rnn(x, cell):
    """The cell's own error message's way: keras.layers.RNN with the states of
    get_initial_state_for_memory, made on the keras.Input memory."""
    states = cell.get_initial_state_for_memory(x["memory"], memory_valid_lens=x["lens"])
    return keras.layers.RNN(cell, return_sequences=True)(
        x["targets"], initial_state=states
    )


CASES = {
    PositionalEncoding: (_positional_encoding, ["sequence"]),
    LearnedPositionalEncoding: (_learned_positional_encoding, ["sequence"]),
    HashDropout: (_hash_dropout, ["sequence"]),
    MultiHeadSelfAttention: (_multi_head_self_attention, ["sequence", "lens"]),
    BahdanauAttention: (_bahdanau_attention, ["targets", "memory", "lens"]),
    BahdanauDecoder: (_bahdanau_decoder, ["targets", "memory", "lens"]),
}
ARRAYS = {"sequence": SEQUENCE, "memory": MEMORY, "targets": TARGETS, "lens": LENS}


def test_every_public_layer_has_a_case():
    public_layers = {
        obj
        for name in keras_selfattn.layers.__all__
        if inspect.isclass(obj := getattr(keras_selfattn.layers, name))
        and issubclass(obj, keras.layers.Layer)
    }
    # The cell's case is test_decoder_cell_in_keras_rnn_matches_stepping_the_cell.
    assert public_layers == set(CASES) | {BahdanauDecoderCell}


@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")
@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_composes_fits_saves_and_loads(cls, tmp_path):
    compose, names = CASES[cls]
    run_composition_test(compose, {n: ARRAYS[n] for n in names}, tmp_path)


@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")
def test_decoder_cell_in_keras_rnn_matches_stepping_the_cell(tmp_path):
    """BahdanauDecoderCell's case: inside keras.layers.RNN in a functional model
    (whose steps project the memory themselves), then against the same cell
    stepped eagerly from states made on arrays (keys projected once), on a
    batch, a memory and targets of other sizes than the model was fit on, and
    a first row whose memory keeps one position only."""
    cell = BahdanauDecoderCell(units=UNITS, num_layers=2, dropout=0.2, seed=4)
    model, _ = run_composition_test(
        lambda x: _decoder_cell_in_keras_rnn(x, cell),
        {"targets": TARGETS, "memory": MEMORY, "lens": LENS},
        tmp_path,
        check_rows=False,  # other sizes below
    )
    targets = RNG.normal(size=(3, 6, E)).astype("float32")
    memory = RNG.normal(size=(3, 2, DM)).astype("float32")
    lens = np.array([1, 2, 2], "int32")
    predicted = model.predict(
        {"targets": targets, "memory": memory, "lens": lens}, verbose=0
    )
    states = cell.get_initial_state_for_memory(memory, memory_valid_lens=lens)
    assert cell.unpack_states(states).projected_keys.shape == (3, 2, UNITS)
    for t in range(targets.shape[1]):
        output, states = cell(targets[:, t], states)
        np.testing.assert_allclose(
            predicted[:, t], ops.convert_to_numpy(output), rtol=1e-5, atol=1e-5
        )


def test_decoder_cell_states_on_keras_inputs_refuse_bad_lengths():
    cell = BahdanauDecoderCell(units=UNITS)
    memory = keras.Input((None, DM))
    with pytest.raises(ValueError, match=r"memory_valid_lens must have shape"):
        cell.get_initial_state_for_memory(
            memory, memory_valid_lens=keras.Input((3,), dtype="int32")
        )
    with pytest.raises(ValueError, match="known memory_dim"):
        cell.get_initial_state_for_memory(keras.Input((None, None)))


def test_valid_lens_to_mask_for_keys_against_numpy():
    from keras_selfattn.layers.masking import valid_lens_to_mask_for_keys

    keys = np.zeros((3, 4, 2), "float32")
    lens = np.array([0, 2, 9], "int32")
    expected = np.arange(4)[None, :] < lens[:, None]
    got = valid_lens_to_mask_for_keys(lens, keys)
    np.testing.assert_array_equal(ops.convert_to_numpy(got), expected)
    # Symbolic: unknown batch and length.
    inputs = keras.Input((), dtype="int32"), keras.Input((None, 2))
    model = keras.Model(inputs, valid_lens_to_mask_for_keys(*inputs))
    np.testing.assert_array_equal(model.predict([lens, keys], verbose=0), expected)
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(batch,\)\."):
        valid_lens_to_mask_for_keys(np.ones((3, 4), "int32"), keys)
    with pytest.raises(ValueError, match="integer lengths"):
        valid_lens_to_mask_for_keys(np.ones((3,), bool), keys)
