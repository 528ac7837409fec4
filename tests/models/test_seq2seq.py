import dataclasses
import json

import keras
import numpy as np
import pytest
from keras import ops

import keras_selfattn
from keras_selfattn.models import (
    DecoderBridge,
    DeepOutput,
    MaskedAccuracy,
    MaskedCrossEntropy,
    ModelConfig,
    Seq2Seq,
    TransformerEncoderBlock,
    build_seq2seq,
    masked_loss,
)
from tests.harness import run_layer_test

TINY = {
    "num_hiddens": 16,
    "num_heads": 2,
    "num_layers": 2,
    "ffn_hiddens": 32,
    "decoder_units": 16,
    "embedding_dim": 8,
}
SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 4, 0, 0, 0, 0]], "int32")
TARGET_IN = np.array([[2, 4, 5, 6], [2, 7, 0, 0]], "int32")


def tiny_model(**overrides):
    return build_seq2seq(20, 10, **{**TINY, "dropout": 0.0, **overrides})


def predict(model, source=SOURCE, target_in=TARGET_IN):
    return model.predict({"source": source, "target_in": target_in}, verbose=0)


def test_inputs_outputs_and_summary():
    model = tiny_model()
    assert set(model.input) == {"source", "target_in"}
    assert model.output.shape == (None, None, 10)
    assert predict(model).shape == (2, 4, 10)
    lines = []
    model.summary(print_fn=lines.append)
    summary = "\n".join(lines)
    for name in (
        "source_embedding",
        "positional_encoding",
        "encoder_block_1",
        "bridge",
        "decoder",
        "logits",
    ):
        assert name in summary
    assert keras_selfattn.build_seq2seq is build_seq2seq


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"norm_first": True},
        {"rnn_type": "lstm", "decoder_layers": 2},
        {"attention_score": "scaled_dot"},
    ],
)
def test_extra_source_padding_changes_nothing_and_reordering_does(options):
    model = tiny_model(**options)
    base = predict(model)
    padded = predict(model, np.pad(SOURCE, ((0, 0), (0, 5))))
    np.testing.assert_allclose(padded, base, atol=1e-5)
    reordered = SOURCE.copy()
    reordered[0, :4] = reordered[0, [3, 2, 1, 0]]
    assert not np.allclose(predict(model, reordered)[0], base[0], atol=1e-4)
    # Target positions after a padded one do not affect earlier logits (causal decoder).
    changed = TARGET_IN.copy()
    changed[0, 3] = 9
    np.testing.assert_allclose(
        predict(model, target_in=changed)[0, :3], base[0, :3], atol=1e-5
    )


def test_keras_save_and_load_give_identical_outputs(tmp_path):
    model = tiny_model(dropout=0.2)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(predict(loaded), predict(model))


def test_same_seed_same_weights():
    def weights(seed):
        keras.utils.set_random_seed(seed)
        return [w.copy() for w in tiny_model().get_weights()]

    first, again, other = weights(3), weights(3), weights(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_loss_and_accuracy_ignore_padding():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 10)).astype("float32")
    y_true = np.array([[4, 5, 3, 0], [6, 3, 0, 0]], "int32")
    keep = y_true != 0
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, y_true[..., None], -1)[..., 0][
        keep
    ].mean()
    got = float(masked_loss()(y_true, logits))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # The padding logits may be anything: the loss does not move.
    logits_changed = logits.copy()
    logits_changed[~keep] = 100.0
    np.testing.assert_allclose(
        float(masked_loss()(y_true, logits_changed)), expected, rtol=1e-5
    )

    metric = MaskedAccuracy()
    metric.update_state(y_true, logits)
    expected_accuracy = (logits.argmax(-1) == y_true)[keep].mean()
    np.testing.assert_allclose(float(metric.result()), expected_accuracy, rtol=1e-6)


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
def test_one_fit_step_with_xla_lowers_the_loss():
    model = tiny_model(num_layers=1)  # one encoder block: a smaller XLA program
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=masked_loss(),
        metrics=[MaskedAccuracy()],
        jit_compile=True,
    )
    target_out = np.array([[4, 5, 6, 3], [7, 3, 0, 0]], "int32")
    history = model.fit(
        {"source": SOURCE, "target_in": TARGET_IN}, target_out, epochs=3, verbose=0
    )
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source_vocab_size": 3, "target_vocab_size": 10}, "source_vocab_size=3"),
        (
            {"source_vocab_size": 20, "target_vocab_size": 10.5},
            "target_vocab_size=10.5",
        ),
    ],
)
def test_bad_vocabulary_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_seq2seq(**kwargs)


def test_config_rejects_unknown_fields_and_round_trips():
    with pytest.raises(ValueError, match="num_hidden"):
        ModelConfig.from_dict({"num_hidden": 3})
    config = ModelConfig(num_layers=3, norm_first=True)
    assert ModelConfig.from_dict(dataclasses.asdict(config)) == config


@pytest.mark.parametrize(
    "options, weights, fresh_process_load",
    [
        ({"norm_first": False}, 10, False),
        ({"norm_first": True}, 10, True),
        ({"norm_first": True, "max_relative_position": 2}, 12, False),
    ],
    ids=["post_norm", "pre_norm", "pre_norm_relative"],
)
def test_encoder_block_through_the_harness(
    options, weights, fresh_process_load, tmp_path
):
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(
        TransformerEncoderBlock,
        {"num_hiddens": 8, "num_heads": 2, "ffn_hiddens": 16, **options},
        {"inputs": x},
        expected_output_shapes=[(2, 5, 8)],
        expected_num_trainable_weights=weights,
        mixed_precision_atol=3e-2,
        # One fresh-process load is enough here: whole models are reloaded in
        # test_keras_save_and_load_give_identical_outputs and test_positions.py.
        run_fresh_process_load=fresh_process_load,
        tmp_path=tmp_path,
    )


def test_bridge_is_the_masked_mean():
    bridge = DecoderBridge(4, 2)
    memory = np.random.default_rng(0).normal(size=(2, 3, 6)).astype("float32")
    mask = np.array([[True, True, False], [True, False, False]])
    states = bridge(memory, mask=mask)
    kernel, bias = bridge.projections[1].get_weights()
    mean = np.stack([memory[0, :2].mean(0), memory[1, :1].mean(0)])
    np.testing.assert_allclose(
        ops.convert_to_numpy(states[1]), np.tanh(mean @ kernel + bias), atol=1e-5
    )


# ------------------------------------------------------------- the decoding API
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rnn_type": "lstm", "decoder_layers": 2, "norm_first": True},
        {"attention_heads": 2, "tie_embeddings": True, "embedding_dim": 16},
        {"deep_output_hiddens": 24, "tie_embeddings": True, "embedding_dim": 16},
        {"deep_output_hiddens": 8, "rnn_type": "lstm", "attentional_output": False},
    ],
)
def test_decode_steps_equal_the_full_pass(options):
    model = tiny_model(**options)
    assert isinstance(model, Seq2Seq)
    full = predict(model)
    state = model.initial_decoder_state(SOURCE)
    encoded = model.encode(SOURCE)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(encoded["memory_mask"]), SOURCE != 0
    )
    assert len(encoded["initial_state"]) == model.decoder.cell.num_recurrent_states
    for t in range(TARGET_IN.shape[1]):
        weights = ops.convert_to_numpy(model.decoder_attention(state))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.all(weights[SOURCE == 0] == 0)
        logits, state = model.decode_step(TARGET_IN[:, t], state)
        assert logits.dtype == "float32"
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, t], atol=1e-5)


@pytest.mark.parametrize(
    "options", [{}, {"rnn_type": "lstm", "decoder_layers": 2, "norm_first": True}]
)
def test_kept_context_gives_the_logits_of_attending_twice(options):
    """decode_step reuses the context its output attended to as the next step's
    (one attention a step): the same logits, bit for bit, as the cell's own call
    and decoder_output, which attend twice."""
    model = tiny_model(**options)
    cell = model.decoder.cell
    state = model.initial_decoder_state(SOURCE)
    cell_state = state[:-1]  # the state ends with the kept context
    for t in range(TARGET_IN.shape[1]):
        logits, state = model.decode_step(TARGET_IN[:, t], state)
        embedded = model.target_embedding(ops.convert_to_tensor(TARGET_IN[:, t]))
        output, cell_state = cell(embedded, cell_state, training=False)
        expected = model._logits(cell.decoder_output(output, cell_state))
        np.testing.assert_array_equal(
            ops.convert_to_numpy(logits), ops.convert_to_numpy(expected)
        )


def test_reorder_decoder_state_gathers_only_the_recurrent_states():
    model = tiny_model()
    state = model.initial_decoder_state(SOURCE)
    cell = model.decoder.cell
    _, state = model.decode_step(np.array([2, 2], "int32"), state)
    swapped = model.reorder_decoder_state(state, np.array([1, 0]))
    # The state ends with the next step's context (attentional output), kept
    # with its hypothesis.
    np.testing.assert_array_equal(
        ops.convert_to_numpy(swapped[-1]), ops.convert_to_numpy(state[-1])[::-1]
    )
    before, after = cell.unpack_states(state[:-1]), cell.unpack_states(swapped[:-1])
    np.testing.assert_array_equal(
        ops.convert_to_numpy(after.recurrent[0]),
        ops.convert_to_numpy(before.recurrent[0])[::-1],
    )
    assert after.memory is before.memory


def test_config_round_trip_rebuilds_the_same_model():
    model = tiny_model(position="rotary", rnn_type="lstm")
    config = json.loads(json.dumps(model.get_config()))
    assert config["config"]["position"] == "rotary" and config["seed"] is None
    clone = Seq2Seq.from_config(config)
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(predict(clone), predict(model))
    assert model.model_config == ModelConfig(
        **{**vars(ModelConfig()), **config["config"]}
    )


def test_mixed_precision_policy_survives_a_keras_round_trip(tmp_path):
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = tiny_model()
    keras.config.set_dtype_policy("float32")
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.decoder.cell.compute_dtype == "bfloat16"
    assert loaded.logits_dense.compute_dtype == "float32"
    np.testing.assert_array_equal(predict(loaded), predict(model))
    # Saved again from where the default is float32 (a resumed run, `average`):
    # the policy is the layers', not the global one at load (Keras' functional
    # model does not keep the dtype it is given).
    loaded.save(tmp_path / "again.keras")
    again = keras.saving.load_model(tmp_path / "again.keras")
    assert again.decoder.cell.compute_dtype == "bfloat16"
    np.testing.assert_array_equal(predict(again), predict(model))


def test_with_dtype_policy_runs_a_bfloat16_model_in_float32(tmp_path):
    from keras_selfattn.models.saving import load_model, with_dtype_policy

    keras.config.set_dtype_policy("mixed_bfloat16")
    model = tiny_model()
    keras.config.set_dtype_policy("float32")
    model.save(tmp_path / "model.keras")
    copy = load_model(tmp_path / "model.keras", dtype="float32")
    assert copy.decoder.cell.compute_dtype == "float32"
    assert {layer.compute_dtype for layer in copy._flatten_layers()} == {"float32"}
    assert copy.get_config()["dtype"]["config"]["name"] == "float32"
    for ours, theirs in zip(copy.get_weights(), model.get_weights(), strict=True):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    # exactly a float32 model holding the same weights; close to the bfloat16 one
    reference = tiny_model()
    reference.set_weights(model.get_weights())
    np.testing.assert_array_equal(predict(copy), predict(reference))
    np.testing.assert_allclose(predict(copy), predict(model), atol=0.1)
    assert with_dtype_policy(copy, "float32") is copy  # already there: itself
    with pytest.raises(ValueError, match="dtype=.*float33"):
        with_dtype_policy(model, "float33")
    with pytest.raises(ValueError, match="dtype=.*float33"):
        load_model(tmp_path / "model.keras", dtype="float33")
    with pytest.raises(TypeError, match="Received: model of type Dense"):
        with_dtype_policy(keras.layers.Dense(2), "float32")


# --------------------------------------------------------------------- the loss
def test_label_smoothing_against_a_hand_computation_and_keras():
    logits = np.array([[[2.0, 0.0, 1.0, -1.0], [0.5, 0.5, 3.0, 0.0]]], "float32")
    y_true = np.array([[2, 0]])  # the second position is padding
    eps = 0.2
    log_p = logits[0, 0] - np.log(np.exp(logits[0, 0]).sum())
    # smoothed target: (1 - eps) on class 2, eps / 4 on each of the 4 classes
    hand = -((1 - eps) * log_p[2] + eps / 4 * log_p.sum())
    got = float(masked_loss(label_smoothing=eps)(y_true, logits))
    np.testing.assert_allclose(got, hand, rtol=1e-6)
    # A peer: Keras' dense cross-entropy with the same smoothing, padding weighted 0.
    one_hot = np.eye(4, dtype="float32")[y_true]
    peer = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=eps)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype("float32")
    y_true = rng.integers(1, 7, size=(3, 5))
    y_true[0, 3:] = 0
    y_true[2, 1:] = 0
    keep = (y_true != 0).astype("float32")
    one_hot = np.eye(7, dtype="float32")[y_true]
    expected = float(peer(one_hot, logits, sample_weight=keep)) * keep.size / keep.sum()
    np.testing.assert_allclose(
        float(masked_loss(label_smoothing=eps)(y_true, logits)), expected, rtol=1e-5
    )
    # Padding logits do not matter; eps = 0 is the plain loss.
    changed = logits.copy()
    changed[y_true == 0] = 1e4
    np.testing.assert_allclose(
        float(masked_loss(label_smoothing=eps)(y_true, changed)), expected, rtol=1e-5
    )
    plain = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    np.testing.assert_allclose(
        float(masked_loss()(y_true, logits)), float(plain(y_true, logits)), rtol=1e-6
    )
    with pytest.raises(ValueError, match="label_smoothing=1.0"):
        masked_loss(label_smoothing=1.0)


def test_label_smoothed_gradient_against_numpy():
    """d loss / d logits = (softmax(z) - smoothed target) / real tokens, 0 at padding:
    the one log-softmax the loss computes gives the textbook gradient."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 4, 6)).astype("float32") * 3
    y_true = rng.integers(1, 6, size=(2, 4))
    y_true[1, 2:] = 0
    eps = 0.1
    z = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(z)
        loss = masked_loss(label_smoothing=eps)(y_true, z)
    got = tape.gradient(loss, z).numpy()
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    smoothed = (1 - eps) * np.eye(6)[y_true] + eps / 6
    real = (y_true != 0)[..., None]
    expected = np.where(real, p - smoothed, 0.0) / real.sum()
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_masked_loss_compiles_both_ways_and_serializes(tmp_path):
    """compile(loss=masked_loss) and (loss=masked_loss(...)); a .keras round trip."""
    model = tiny_model(num_layers=1)
    target_out = np.array([[4, 5, 6, 3], [7, 3, 0, 0]], "int32")
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    logits = predict(model)
    for loss, smoothing in (
        (masked_loss, 0.0),
        (masked_loss(label_smoothing=0.1), 0.1),
    ):
        model.compile(optimizer="sgd", loss=loss)
        value = model.evaluate(inputs, target_out, verbose=0)
        reference = MaskedCrossEntropy(label_smoothing=smoothing)(target_out, logits)
        np.testing.assert_allclose(value, float(reference), rtol=1e-5)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.loss.label_smoothing == 0.1
    np.testing.assert_allclose(
        loaded.evaluate(inputs, target_out, verbose=0), value, rtol=1e-6
    )


# ------------------------------------------------ tied embeddings, heads
def test_tied_embeddings_score_outputs_against_the_embedding_matrix(tmp_path):
    model = tiny_model(tie_embeddings=True, embedding_dim=16)
    names = [w.path for w in model.weights]
    assert not any(name.startswith("logits") for name in names)
    untied = tiny_model(embedding_dim=16)
    # One matrix at both ends: V * D fewer weights (the bias stays).
    assert untied.count_params() - model.count_params() == 10 * 16
    table = ops.convert_to_numpy(model.target_embedding.embeddings)
    bias = ops.convert_to_numpy(model.target_embedding.bias)
    state = model.initial_decoder_state(SOURCE)
    embedded = model.target_embedding(np.array([2, 2], "int32"))
    np.testing.assert_allclose(ops.convert_to_numpy(embedded), table[[2, 2]])
    cell = model.decoder.cell
    output, states = cell(embedded, state[:-1])  # the state ends with the context
    hidden = ops.convert_to_numpy(cell.decoder_output(output, states))
    logits, _ = model.decode_step(np.array([2, 2], "int32"), state)
    np.testing.assert_allclose(
        ops.convert_to_numpy(logits), hidden @ table.T + bias, atol=1e-5
    )
    path = tmp_path / "tied.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(predict(loaded), predict(model))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"tie_embeddings": True}, r"tie_embeddings needs embedding_dim == decoder"),
        ({"attention_heads": 3}, r"decoder_units must be divisible by attention_h"),
        ({"attention_heads": 0}, r"attention_heads"),
        ({"deep_output_hiddens": -1}, r"deep_output_hiddens.*-1"),
        ({"deep_output_hiddens": 2.5}, r"deep_output_hiddens"),
    ],
)
def test_decoder_options_are_checked_in_the_config(overrides, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{**TINY, **overrides})


# ------------------------------------------------------- the deep output
def _numpy_deep_output(x, layer):
    """The book's feed-forward sublayer, pre-layer-norm, in NumPy:
    x + relu(LN(x) W1 + b1) W2 + b2 (no dropout at inference)."""
    gamma, beta = (ops.convert_to_numpy(w) for w in layer.norm.weights)
    w1, b1 = (ops.convert_to_numpy(w) for w in layer.inner.weights)
    w2, b2 = (ops.convert_to_numpy(w) for w in layer.outer.weights)
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    normed = (x - mean) / np.sqrt(variance + 1e-5) * gamma + beta
    return x + np.maximum(normed @ w1 + b1, 0.0) @ w2 + b2


def test_deep_output_through_the_harness_and_against_numpy(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(
        DeepOutput,
        {"units": 8, "hidden_units": 12, "dropout": 0.1, "seed": 3},
        {"inputs": x},
        expected_output_shapes=[(2, 5, 8)],
        expected_num_trainable_weights=6,
        mixed_precision_atol=3e-2,
        run_fresh_process_load=False,
        tmp_path=tmp_path,
    )
    layer = DeepOutput(8, 12, dropout=0.1, seed=3)
    layer.build(x.shape)
    rng = np.random.default_rng(1)
    layer.set_weights(
        [rng.normal(size=w.shape).astype("float32") for w in layer.weights]
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(x)),
        _numpy_deep_output(x, layer),
        rtol=1e-4,
        atol=1e-4,
    )
    # Training: dropout on the residual branch only, so x survives where it drops.
    dropped = ops.convert_to_numpy(layer(x, training=True))
    assert not np.allclose(dropped, _numpy_deep_output(x, layer), atol=1e-4)
    mask = np.array([[True] * 5, [True, True, False, False, False]])
    assert layer.compute_mask(x, mask) is mask


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 8, "hidden_units": 0}, r"hidden_units.*0"),
        ({"units": 0, "hidden_units": 4}, r"units.*0"),
        ({"units": 8, "hidden_units": 4, "dropout": 1.5}, r"dropout.*1.5"),
    ],
)
def test_deep_output_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeepOutput(**kwargs)


def test_deep_output_refuses_inputs_of_another_width():
    with pytest.raises(ValueError, match=r"units=8.*inputs.shape=\(2, 3, 6\)"):
        DeepOutput(8, 4)(np.zeros((2, 3, 6), "float32"))


def test_the_deep_output_sits_between_the_decoder_and_the_tied_output_layer():
    model = tiny_model(deep_output_hiddens=24, tie_embeddings=True, embedding_dim=16)
    plain = tiny_model(tie_embeddings=True, embedding_dim=16)
    # Its six weights: LN (2 * 16), inner (16 * 24 + 24), outer (24 * 16 + 16).
    assert (
        model.count_params() - plain.count_params() == 32 + 16 * 24 + 24 + 24 * 16 + 16
    )
    state = model.initial_decoder_state(SOURCE)
    cell = model.decoder.cell
    embedded = model.target_embedding(np.array([2, 2], "int32"))
    output, states = cell(embedded, state[:-1])  # the state ends with the context
    hidden = ops.convert_to_numpy(cell.decoder_output(output, states))
    table = ops.convert_to_numpy(model.target_embedding.embeddings)
    bias = ops.convert_to_numpy(model.target_embedding.bias)
    expected = _numpy_deep_output(hidden, model.deep_output) @ table.T + bias
    logits, _ = model.decode_step(np.array([2, 2], "int32"), state)
    np.testing.assert_allclose(ops.convert_to_numpy(logits), expected, atol=1e-5)


# Slow: a save, a load and a training of the model (about 8 CPU-s).
@pytest.mark.slow
def test_a_tied_model_with_a_deep_output_saves_loads_and_trains(tmp_path):
    """Tied embeddings and a deep output in one model (one training trace for
    both): a .keras round trip gives identical outputs, the mask stays on the
    ids (none on the logits), fit lowers the loss and moves every weight of the
    deep output."""
    model = tiny_model(
        deep_output_hiddens=24, tie_embeddings=True, embedding_dim=16, num_layers=1
    )
    assert getattr(model.output, "_keras_mask", None) is None
    path = tmp_path / "deep.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.model_config.deep_output_hiddens == 24
    assert loaded.model_config.tie_embeddings
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded(inputs, training=False)),
        ops.convert_to_numpy(model(inputs, training=False)),
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=masked_loss)
    data = (inputs, np.roll(TARGET_IN, -1, 1))
    before = model.get_layer("deep_output").get_weights()
    loss_before = model.evaluate(*data, verbose=0)
    model.fit(*data, epochs=5, verbose=0)
    assert model.evaluate(*data, verbose=0) < loss_before
    after = model.get_layer("deep_output").get_weights()
    assert all(not np.array_equal(b, a) for b, a in zip(before, after))
