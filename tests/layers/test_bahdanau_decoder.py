"""Tests of BahdanauDecoder (and of the cell it runs, step by step).

The central check: a Python loop calling the cell step by step gives the same
hidden states, attention weights and final states as the full-sequence decoder.
"""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import (
    BahdanauAttention,
    BahdanauDecoder,
    BahdanauDecoderCell,
)
from tests.harness import check_docstring, run_layer_test
from tests.layers.test_bahdanau_attention import numpy_attention, run_docstring_example

B, T, S, E, DM, UNITS = 2, 5, 4, 3, 6, 8
RNG = np.random.default_rng(1)
TARGETS = RNG.normal(size=(B, S, E)).astype("float32")  # embedded targets
MEMORY = RNG.normal(size=(B, T, DM)).astype("float32")  # encoder outputs
VALID_LENS = np.array([3, 5], dtype="int32")

CONFIGS = [
    pytest.param({"rnn_type": "gru", "num_layers": 1}, id="gru-1"),
    pytest.param({"rnn_type": "gru", "num_layers": 2}, id="gru-2"),
    pytest.param({"rnn_type": "lstm", "num_layers": 1}, id="lstm-1"),
    pytest.param({"rnn_type": "lstm", "num_layers": 2}, id="lstm-2"),
    pytest.param(
        {
            "rnn_type": "gru",
            "num_layers": 3,
            "attentional_output": True,
            "residual": True,
            "layer_norm": True,
        },
        id="gru-3-rnmt",
    ),
    pytest.param(
        {"rnn_type": "lstm", "num_layers": 2, "attentional_output": True},
        id="lstm-2-attentional",
    ),
    pytest.param(
        {"rnn_type": "gru", "num_layers": 1, "attention_heads": 2},
        id="gru-1-two-heads",
    ),
]


def np_(x):
    return np.asarray(ops.convert_to_numpy(x))


def randomize_weights(layer, scale=0.5):
    """Non-zero biases too, so that a reference sees every term."""
    for w in layer.weights:
        w.assign(RNG.normal(size=w.shape).astype("float32") * scale)


def num_recurrent(config):
    return config["num_layers"] * (2 if config["rnn_type"] == "lstm" else 1)


def random_initial_state(config):
    return [
        RNG.normal(size=(B, UNITS)).astype("float32")
        for _ in range(num_recurrent(config))
    ]


def step_by_step(cell, targets, memory, memory_valid_lens=None, initial_state=None):
    """The decoding loop a greedy decoder runs, one cell call per step.

    Also collects, before each step, the attention weights of the query that step
    uses, computed from the raw memory (not the projected keys in the states).
    """
    states = cell.get_initial_state_for_memory(
        memory, memory_valid_lens=memory_valid_lens, initial_state=initial_state
    )
    outputs, weights = [], []
    for t in range(targets.shape[1]):
        query = cell.top_hidden_state(states)
        _, w = cell.attention(query, memory, valid_lens=memory_valid_lens)
        weights.append(np_(w))
        output, states = cell(targets[:, t], states)
        outputs.append(np_(cell.decoder_output(output, states)))
    final = [np_(s) for s in cell.unpack_states(states).recurrent]
    return np.stack(outputs, 1), np.stack(weights, 1), final, states


# ------------------------------------------------------------------ harness
@pytest.mark.slow
def test_harness_decoder_gru_with_attention_scores(tmp_path):
    run_layer_test(
        BahdanauDecoder,
        {"units": UNITS},
        {"inputs": TARGETS, "memory": MEMORY, "memory_valid_lens": VALID_LENS},
        expected_output_shapes=[(B, S, UNITS), (B, S, T)],
        expected_num_trainable_weights=6,
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


@pytest.mark.slow
def test_harness_decoder_lstm_two_layers_dropout_initial_and_final_state(tmp_path):
    config = {"rnn_type": "lstm", "num_layers": 2}
    run_layer_test(
        BahdanauDecoder,
        {"units": UNITS, "dropout": 0.2, "seed": 4, **config},
        {
            "inputs": TARGETS,
            "memory": MEMORY,
            "initial_state": random_initial_state(config),
        },
        expected_output_shapes=[(B, S, UNITS)] + [(B, UNITS)] * 4,
        expected_num_trainable_weights=9,
        call_kwargs={"return_state": True},
        tmp_path=tmp_path,
    )


@pytest.mark.slow
def test_harness_decoder_rnmt_options(tmp_path):
    """Attentional output, residual and layer-normalized stacking, two attention
    heads, with dropout."""
    config = {"rnn_type": "gru", "num_layers": 2}
    run_layer_test(
        BahdanauDecoder,
        {
            "units": UNITS,
            "dropout": 0.2,
            "seed": 3,
            "attentional_output": True,
            "residual": True,
            "layer_norm": True,
            "attention_heads": 2,
            **config,
        },
        {"inputs": TARGETS, "memory": MEMORY, "memory_valid_lens": VALID_LENS},
        # attention 3, two GRU cells 6, one layer norm 2, the output projection 2
        expected_output_shapes=[(B, S, UNITS), (B, S, T)],
        expected_num_trainable_weights=13,
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


def layer_norm_np(x, gamma, beta, epsilon=1e-5):
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_rnmt_options_match_a_reference():
    """One step of a 2-layer residual, layer-normalized GRU cell with the
    attentional output, recomputed from its parts: NumPy layer norm, NumPy
    additive attention (test_bahdanau_attention's reference), NumPy tanh(W[h;c])."""
    cell = BahdanauDecoderCell(
        UNITS, num_layers=2, attentional_output=True, residual=True, layer_norm=True
    )
    initial = random_initial_state({"rnn_type": "gru", "num_layers": 2})
    states = cell.get_initial_state_for_memory(
        MEMORY, memory_valid_lens=VALID_LENS, initial_state=initial
    )
    cell.build(TARGETS[:, 0].shape, [s.shape for s in states])
    randomize_weights(cell)
    states = cell.get_initial_state_for_memory(
        MEMORY, memory_valid_lens=VALID_LENS, initial_state=initial
    )
    output, new_states = cell(TARGETS[:, 0], states)
    mask = (np.arange(T) < VALID_LENS[:, None])[:, None, :]
    # The first query: the residual stream of the initial states, h0 + h1.
    query = initial[0] + initial[1]
    context, _ = numpy_attention(cell.attention, query, MEMORY, mask=mask)
    x = np.concatenate([TARGETS[:, 0], context], -1)
    h0, _ = cell.rnn_cells[0](x, [initial[0]])
    gamma, beta = (np_(w) for w in cell.layer_norms[0].weights)
    h1, _ = cell.rnn_cells[1](layer_norm_np(np_(h0), gamma, beta), [initial[1]])
    np.testing.assert_allclose(np_(output), np_(h0) + np_(h1), atol=1e-5)
    recurrent = cell.unpack_states(new_states).recurrent
    np.testing.assert_allclose(np_(recurrent[0]), np_(h0), atol=1e-6)
    np.testing.assert_allclose(np_(recurrent[1]), np_(h1), atol=1e-6)
    # The next query is the residual stream's output, h0 + h1.
    np.testing.assert_allclose(
        np_(cell.top_hidden_state(new_states)), np_(output), atol=1e-6
    )
    # The attentional vector: tanh(W [out; c]) with c the context of out.
    out_context, _ = numpy_attention(cell.attention, np_(output), MEMORY, mask=mask)
    kernel, bias = (np_(w) for w in cell.output_projection.weights)
    expected = np.tanh(np.concatenate([np_(output), out_context], -1) @ kernel + bias)
    np.testing.assert_allclose(
        np_(cell.decoder_output(output, new_states)), expected, atol=1e-5
    )


def test_rnmt_options_are_checked_and_serialized():
    with pytest.raises(ValueError, match="residual must be True or False"):
        BahdanauDecoder(UNITS, residual="yes")
    decoder = BahdanauDecoder(UNITS, num_layers=2, attentional_output=True)
    config = decoder.get_config()
    assert config["attentional_output"] is True and config["residual"] is False
    clone = BahdanauDecoder.from_config(config)
    assert clone.cell.attentional_output and not clone.cell.layer_norm
    # One layer: nothing to stack, so no layer norm weights are made.
    assert BahdanauDecoderCell(UNITS, layer_norm=True).layer_norms == []


# The options the decoder shares with its cell: the cell's constructor arguments.
CELL_OPTIONS = [
    name
    for name in inspect.signature(BahdanauDecoderCell.__init__).parameters
    if name not in ("self", "kwargs")
]


def test_the_decoder_keeps_its_options_and_hands_them_to_its_cell():
    """As keras.layers.MultiHeadAttention keeps its options: plain attributes
    of the instance, normalized, listed by get_config; the cell gets the same."""
    decoder = BahdanauDecoder(
        np.int64(UNITS),
        rnn_type="lstm",
        num_layers=2,
        attention_heads=2,
        residual=True,
        seed=np.int32(5),
        kernel_initializer="he_normal",
        unroll=False,
    )
    assert decoder.attention_heads == 2 and decoder.cell.attention.heads == 2
    assert decoder.rnn_type == "lstm" and decoder.cell.states_per_layer == 2
    config, cell_config = decoder.get_config(), decoder.cell.get_config()
    assert set(CELL_OPTIONS) < set(inspect.signature(BahdanauDecoder).parameters)
    for name in [*CELL_OPTIONS, "unroll"]:
        assert name in vars(decoder), name  # not a property reading the cell
        value = getattr(decoder, name)
        if name.endswith("_initializer"):
            assert isinstance(value, keras.initializers.Initializer), name
            value = keras.initializers.serialize(value)
        assert config[name] == value, name
        assert name == "unroll" or cell_config[name] == value, name
    assert type(decoder.units) is int and type(decoder.seed) is int
    assert config["kernel_initializer"]["class_name"] == "HeNormal"
    clone = BahdanauDecoder.from_config(config)
    assert clone.get_config() == config
    with pytest.raises(ValueError, match=r"units must be divisible by heads"):
        BahdanauDecoder(UNITS, attention_heads=3)
    with pytest.raises(ValueError, match=r"Received: attention_heads=0"):
        BahdanauDecoder(UNITS, attention_heads=0)
    with pytest.raises(ValueError, match=r"Received: units=8\.0"):
        BahdanauDecoder(8.0)


@pytest.mark.parametrize("cls", [BahdanauDecoder, BahdanauDecoderCell])
def test_docstring_documents_every_argument_and_example_runs(cls):
    check_docstring(cls)
    run_docstring_example(cls)


# ---------------------------------------------------- step by step == full
@pytest.mark.parametrize("config", CONFIGS)
def test_step_by_step_equals_full_sequence(config):
    decoder = BahdanauDecoder(units=UNITS, **config)
    initial_state = random_initial_state(config)
    decoder.build(TARGETS.shape, MEMORY.shape)
    randomize_weights(decoder)
    hidden, scores, final = decoder(
        TARGETS,
        MEMORY,
        memory_valid_lens=VALID_LENS,
        initial_state=initial_state,
        return_attention_scores=True,
        return_state=True,
    )
    loop_hidden, loop_weights, loop_final, states = step_by_step(
        decoder.cell, TARGETS, MEMORY, VALID_LENS, initial_state
    )
    np.testing.assert_allclose(np_(hidden), loop_hidden, atol=1e-5)
    np.testing.assert_allclose(np_(scores), loop_weights, atol=1e-5)
    assert len(final) == decoder.cell.num_recurrent_states
    for f, l in zip(final, loop_final):
        np.testing.assert_allclose(np_(f), l, atol=1e-5)
    # The memory states come back unchanged from every step.
    parts = decoder.cell.unpack_states(states)
    np.testing.assert_array_equal(np_(parts.memory), MEMORY)
    np.testing.assert_array_equal(
        np_(parts.memory_mask), (np.arange(T) < VALID_LENS[:, None])
    )
    # Weights sum to 1 over the valid memory positions, 0 beyond.
    np.testing.assert_allclose(np_(scores).sum(-1), 1.0, atol=1e-5)
    assert np.all(np_(scores)[0, :, 3:] == 0)


def test_continuing_from_returned_states_equals_one_pass():
    """Decoding S steps, then the rest from the returned states, equals one pass."""
    decoder = BahdanauDecoder(units=UNITS, rnn_type="lstm", num_layers=2)
    full = decoder(TARGETS, MEMORY, memory_valid_lens=VALID_LENS)
    first, states = decoder(
        TARGETS[:, :2], MEMORY, memory_valid_lens=VALID_LENS, return_state=True
    )
    second = decoder(
        TARGETS[:, 2:], MEMORY, memory_valid_lens=VALID_LENS, initial_state=states
    )
    np.testing.assert_allclose(
        np.concatenate([np_(first), np_(second)], 1), np_(full), atol=1e-5
    )


def test_matches_numpy_reference_gru_two_layers():
    """d2l's decoder written out in NumPy: additive attention + 2 stacked GRUs."""
    decoder = BahdanauDecoder(units=UNITS, num_layers=2)
    decoder(TARGETS, MEMORY)
    randomize_weights(decoder)
    hidden = np_(decoder(TARGETS, MEMORY, memory_valid_lens=VALID_LENS))

    cell = decoder.cell
    mask = (np.arange(T) < VALID_LENS[:, None])[:, None, :]

    def gru(layer, x, h):
        kernel, recurrent, bias = (np_(w).astype(np.float64) for w in layer.weights)
        xz, xr, xh = np.split(x @ kernel + bias[0], 3, -1)
        hz, hr, hh = np.split(h @ recurrent + bias[1], 3, -1)
        z = 1 / (1 + np.exp(-(xz + hz)))
        r = 1 / (1 + np.exp(-(xr + hr)))
        return z * h + (1 - z) * np.tanh(xh + r * hh)

    h = [np.zeros((B, UNITS))] * 2
    expected = []
    for t in range(S):
        context, _ = numpy_attention(cell.attention, h[-1], MEMORY, mask=mask)
        x = np.concatenate([TARGETS[:, t], context], -1)
        bottom = gru(cell.rnn_cells[0], x, h[0])
        h = [bottom, gru(cell.rnn_cells[1], bottom, h[1])]
        expected.append(h[-1])
    np.testing.assert_allclose(hidden, np.stack(expected, 1), atol=1e-5)


# ---------------------------------------------------------------- masking
def test_memory_padding_beyond_valid_lens_changes_nothing():
    decoder = BahdanauDecoder(units=UNITS, rnn_type="lstm")
    hidden, scores = decoder(
        TARGETS, MEMORY, memory_valid_lens=VALID_LENS, return_attention_scores=True
    )
    junk = RNG.normal(size=(B, 3, DM)).astype("float32") * 100
    padded = np.concatenate([MEMORY, junk], 1)
    hidden_p, scores_p = decoder(
        TARGETS, padded, memory_valid_lens=VALID_LENS, return_attention_scores=True
    )
    np.testing.assert_allclose(np_(hidden_p), np_(hidden), atol=1e-6)
    np.testing.assert_allclose(np_(scores_p)[:, :, :T], np_(scores), atol=1e-6)
    assert np.all(np_(scores_p)[:, :, T:] == 0)


def test_keras_mask_of_memory_equals_memory_valid_lens():
    """An encoder Embedding(mask_zero=True) in a functional model: memory_mask."""
    source_ids = np.array([[4, 2, 7, 0, 0], [1, 3, 5, 6, 2]], dtype="int32")
    valid_lens = (source_ids != 0).sum(-1).astype("int32")
    embedding = keras.layers.Embedding(10, DM, mask_zero=True)
    decoder = BahdanauDecoder(units=UNITS)

    ids_in = keras.Input((None,), dtype="int32")
    targets_in = keras.Input((None, E))
    outputs = decoder(targets_in, embedding(ids_in), return_attention_scores=True)
    model = keras.Model([targets_in, ids_in], outputs)
    hidden_masked, scores_masked = model.predict([TARGETS, source_ids], verbose=0)

    memory = np_(embedding(source_ids))  # a plain array: no mask attached
    hidden, scores = decoder(
        TARGETS, memory, memory_valid_lens=valid_lens, return_attention_scores=True
    )
    np.testing.assert_allclose(hidden_masked, np_(hidden), atol=1e-5)
    np.testing.assert_allclose(scores_masked, np_(scores), atol=1e-5)
    assert np.all(scores_masked[0, :, 3:] == 0)
    # Without any mask the padding would be attended to.
    unmasked = np_(decoder(TARGETS, memory))
    assert not np.allclose(unmasked, np_(hidden), atol=1e-5)


@pytest.mark.slow
def test_seq2seq_model_with_masks_trains_under_xla_and_reloads(tmp_path):
    """The shape of the package's seq2seq model: masked embeddings, a GRU encoder
    whose final state starts the decoder, memory_mask from the encoder's mask; one
    fit step with jit_compile=True, then .keras save and load."""
    source_ids = np.array([[4, 2, 7, 0, 0], [1, 3, 5, 6, 2]], dtype="int32")
    target_ids = np.array([[1, 3, 2, 0], [1, 2, 2, 4]], dtype="int32")
    labels = np.array([[3, 2, 9, 0], [2, 2, 4, 9]], dtype="int32")
    source_in = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    memory, state = keras.layers.GRU(UNITS, return_sequences=True, return_state=True)(
        keras.layers.Embedding(10, E, mask_zero=True)(source_in)
    )
    hidden = BahdanauDecoder(UNITS, seed=0)(
        keras.layers.Embedding(10, E, mask_zero=True)(target_in),
        memory,
        initial_state=state,
    )
    logits = keras.layers.Dense(10)(hidden)
    model = keras.Model({"source": source_in, "target_in": target_in}, logits)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    inputs = {"source": source_ids, "target_in": target_ids}
    history = model.fit(inputs, labels, epochs=2, batch_size=B, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    # Plain calls from here on: only the training step needs the XLA compile.
    expected = np_(model(inputs, training=False))
    path = tmp_path / "seq2seq.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        np_(reloaded(inputs, training=False)), expected, atol=1e-6
    )
    # Padding beyond each source's length does not matter.
    longer = {"source": np.pad(source_ids, ((0, 0), (0, 2))), "target_in": target_ids}
    np.testing.assert_allclose(np_(model(longer, training=False)), expected, atol=1e-5)


def test_target_mask_passes_through_and_does_not_alter_the_recurrence():
    target_ids = np.array([[3, 1, 0, 0], [2, 2, 4, 1]], dtype="int32")
    embedding = keras.layers.Embedding(10, E, mask_zero=True)
    decoder = BahdanauDecoder(units=UNITS)
    ids_in = keras.Input((None,), dtype="int32")
    memory_in = keras.Input((None, DM))
    hidden = decoder(embedding(ids_in), memory_in)
    assert hidden._keras_mask is not None  # the target mask reaches H
    model = keras.Model([ids_in, memory_in], hidden)
    expected = decoder(np_(embedding(target_ids)), MEMORY)
    np.testing.assert_allclose(
        model.predict([target_ids, MEMORY], verbose=0), np_(expected), atol=1e-5
    )


def test_fully_masked_memory_gives_finite_outputs_and_zero_weights():
    decoder = BahdanauDecoder(units=UNITS, dtype="mixed_float16")
    hidden, scores = decoder(
        TARGETS,
        MEMORY,
        memory_valid_lens=np.array([0, 5], dtype="int32"),
        return_attention_scores=True,
    )
    assert np.all(np.isfinite(np_(hidden)))
    assert np.all(np_(scores)[0] == 0)


# ------------------------------------------------------------------ shapes
def test_symbolic_shapes_with_t_different_from_s():
    decoder = BahdanauDecoder(units=UNITS, rnn_type="lstm", num_layers=2)
    targets = keras.Input((S, E))
    memory = keras.Input((T, DM))
    hidden, scores, states = decoder(
        targets, memory, return_attention_scores=True, return_state=True
    )
    assert tuple(hidden.shape) == (None, S, UNITS)
    assert tuple(scores.shape) == (None, S, T)
    assert [tuple(s.shape) for s in states] == [(None, UNITS)] * 4
    assert tuple(decoder(targets, memory).shape) == (None, S, UNITS)
    spec = decoder.compute_output_spec(
        keras.KerasTensor((B, S, E)),
        keras.KerasTensor((B, T, DM)),
        return_attention_scores=True,
    )
    assert [tuple(x.shape) for x in spec] == [(B, S, UNITS), (B, S, T)]
    assert decoder.compute_output_shape((B, S, E), (B, T, DM)) == (B, S, UNITS)
    # Unknown lengths.
    hidden, scores = decoder(
        keras.Input((None, E)), keras.Input((None, DM)), return_attention_scores=True
    )
    assert tuple(scores.shape) == (None, None, None)
    # Eager agrees with the symbolic shapes.
    hidden, scores = decoder(TARGETS, MEMORY, return_attention_scores=True)
    assert tuple(hidden.shape) == (B, S, UNITS) and tuple(scores.shape) == (B, S, T)


# ----------------------------------------------------------------- dropout
def test_dropout_active_only_in_training():
    decoder = BahdanauDecoder(units=UNITS, num_layers=2, dropout=0.5, seed=11)
    inference = np_(decoder(TARGETS, MEMORY, training=False))
    np.testing.assert_array_equal(
        np_(decoder(TARGETS, MEMORY, training=False)), inference
    )
    training = np_(decoder(TARGETS, MEMORY, training=True))
    assert not np.allclose(training, inference)
    # training=True: a step-by-step loop with states drawn for training is
    # consistent with itself (the masks are part of the states).
    cell = decoder.cell
    states = cell.get_initial_state_for_memory(MEMORY, training=True)
    assert len(cell.unpack_states(states).dropout_masks) == 1
    mask = np_(cell.unpack_states(states).dropout_masks[0])
    assert set(np.unique(mask)) <= {0.0, 2.0} and (mask == 0).any()


# ---------------------------------------------------------- bad arguments
@pytest.mark.parametrize("cls", [BahdanauDecoder, BahdanauDecoderCell])
@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"units": 0}, r"units must be a positive integer. Received: units=0"),
        ({"units": 8.0}, r"Received: units=8\.0"),
        (
            {"units": 8, "num_layers": 0},
            r"num_layers must be a positive integer. Received: num_layers=0",
        ),
        (
            {"units": 8, "rnn_type": "rnn"},
            r"rnn_type must be one of.*Received: rnn_type='rnn'",
        ),
        (
            {"units": 8, "dropout": 1.5},
            r"dropout must be a float in \[0, 1\). Received: dropout=1\.5",
        ),
        (
            {"units": 8, "attention_score": "cosine"},
            r"Received: attention_score='cosine'",
        ),
        ({"units": 8, "seed": 1.5}, r"Received: seed=1\.5"),
    ],
)
def test_bad_arguments_raise_value_error(cls, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        cls(**kwargs)


def test_bad_call_arguments_raise_value_error():
    decoder = BahdanauDecoder(units=UNITS, rnn_type="lstm")
    with pytest.raises(
        ValueError, match=r"initial_state must be a list of 2 tensors.*Received: 1"
    ):
        decoder(TARGETS, MEMORY, initial_state=np.zeros((B, UNITS), "float32"))
    with pytest.raises(
        ValueError, match=r"attention_score='dot' needs memory_dim == units"
    ):
        BahdanauDecoder(units=UNITS, attention_score="dot")(TARGETS, MEMORY)
    cell = BahdanauDecoderCell(units=UNITS)
    with pytest.raises(ValueError, match="get_initial_state_for_memory"):
        _ = cell.state_size


@pytest.mark.parametrize("score", ["dot", "general", "scaled_dot"])
def test_luong_scores_in_the_decoder(score):
    decoder = BahdanauDecoder(units=DM, attention_score=score)
    hidden, scores = decoder(
        TARGETS, MEMORY, memory_valid_lens=VALID_LENS, return_attention_scores=True
    )
    loop_hidden, loop_weights, _, _ = step_by_step(
        decoder.cell, TARGETS, MEMORY, VALID_LENS
    )
    np.testing.assert_allclose(np_(hidden), loop_hidden, atol=1e-5)
    np.testing.assert_allclose(np_(scores), loop_weights, atol=1e-5)
    assert isinstance(decoder.cell.attention, BahdanauAttention)
    assert decoder.cell.attention.score == score


# ------------------------------------------- input checks, layout, masking
def test_rank_2_memory_is_refused_by_name():
    with pytest.raises(
        ValueError, match=r"memory must have shape.*memory.shape=\(2, 6\)"
    ):
        BahdanauDecoder(units=UNITS)(TARGETS, MEMORY[:, 0])


def test_inputs_without_an_embedding_axis_are_refused_by_name():
    with pytest.raises(
        ValueError, match=r"inputs must have shape.*inputs_shape=\(2, 4\)"
    ):
        BahdanauDecoder(units=UNITS)(TARGETS[:, :, 0], MEMORY)


def test_memory_valid_lens_for_another_batch_are_refused():
    with pytest.raises(ValueError, match=r"memory_valid_lens.shape=\(1,\)"):
        BahdanauDecoder(units=UNITS)(TARGETS, MEMORY, memory_valid_lens=np.array([3]))
