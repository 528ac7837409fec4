"""attention_weights_model: every attention layer's weights from a trained model."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import MultiHeadSelfAttention
from keras_selfattn.models import attention_weights_model
from tests.models.test_seq2seq import SOURCE, TARGET_IN, tiny_model


def test_seq2seq_weights_equal_a_manual_computation_and_skip_padding():
    model = tiny_model()
    weights = attention_weights_model(model).predict(
        {"source": SOURCE, "target_in": TARGET_IN}, verbose=0
    )
    assert sorted(weights) == ["decoder", "encoder_block_0", "encoder_block_1"]
    lengths = (SOURCE != 0).sum(1)
    # Encoder block 0 by hand: its attention on the embedded, positioned source,
    # masked by valid lengths (another route than the Keras mask the model uses).
    embedded = model.position(model.source_embedding(SOURCE), training=False)
    block = model.encoder_blocks[0]
    if block.norm_first:  # pre-layer-norm blocks attend over the normalized input
        embedded = block.attention_norm(embedded)
    _, expected = block.attention(
        ops.convert_to_numpy(embedded), valid_lens=lengths, return_attention_scores=True
    )
    np.testing.assert_allclose(
        weights["encoder_block_0"], ops.convert_to_numpy(expected), atol=1e-5
    )
    # The decoder's weights, step by step through the model's decoding API.
    state = model.initial_decoder_state(SOURCE)
    steps = []
    for t in range(TARGET_IN.shape[1]):
        steps.append(ops.convert_to_numpy(model.decoder_attention(state)))
        _, state = model.decode_step(TARGET_IN[:, t], state)
    np.testing.assert_allclose(weights["decoder"], np.stack(steps, 1), atol=1e-5)
    # No weight on padding, anywhere.
    padding = SOURCE == 0
    assert np.all(
        weights["decoder"][padding[:, None, :].repeat(TARGET_IN.shape[1], 1)] == 0
    )
    for name in ("encoder_block_0", "encoder_block_1"):
        keys = np.broadcast_to(padding[:, None, None, :], weights[name].shape)
        assert np.all(weights[name][keys] == 0)
    np.testing.assert_allclose(weights["decoder"].sum(-1), 1.0, atol=1e-5)


def test_a_users_own_functional_model_and_bad_input():
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    x = MultiHeadSelfAttention(8, 2, name="self_attention")(x)
    model = keras.Model(ids, keras.layers.Dense(3)(x))
    source = np.array([[4, 5, 0], [6, 0, 0]], "int32")
    weights = attention_weights_model(model).predict(source, verbose=0)
    assert weights["self_attention"].shape == (2, 2, 3, 3)
    assert np.all(weights["self_attention"][0, :, :, 2] == 0)
    assert np.all(weights["self_attention"][1, :, :, 1:] == 0)
    plain = keras.Model(ids, keras.layers.Dense(3)(keras.layers.Embedding(10, 8)(ids)))
    with pytest.raises(ValueError, match="no attention layer"):
        attention_weights_model(plain)
