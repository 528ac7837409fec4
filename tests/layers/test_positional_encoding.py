import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import LearnedPositionalEncoding, PositionalEncoding
from keras_selfattn.layers.positional_encoding import sinusoidal_table
from tests.harness import check_docstring, jit_compiled, run_layer_test


def book_formula(max_len, d):
    """d2l eq. 11.6.2 written directly, in float64."""
    P = np.zeros((max_len, d))
    for i in range(max_len):
        for j in range((d + 1) // 2):
            angle = i / 10000 ** (2 * j / d)
            P[i, 2 * j] = np.sin(angle)
            if 2 * j + 1 < d:
                P[i, 2 * j + 1] = np.cos(angle)
    return P


@pytest.mark.parametrize(
    "cls, mixed_precision_atol",
    [(PositionalEncoding, 1e-2), (LearnedPositionalEncoding, 2e-2)],
)
def test_harness(cls, mixed_precision_atol, tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    out = run_layer_test(
        cls,
        {"num_hiddens": 8, "max_len": 20},
        {"inputs": x},
        expected_output_shapes=[(2, 6, 8)],
        expected_num_trainable_weights=0 if cls is PositionalEncoding else 1,
        mixed_precision_atol=mixed_precision_atol,
        tmp_path=tmp_path,
    )
    # The fixed table is the book's (the learned one moved in the harness' fit
    # steps: its X + P is checked in test_learned_positional_encoding.py).
    if cls is PositionalEncoding:
        np.testing.assert_allclose(out[0], x + book_formula(6, 8), atol=1e-6)


def test_docstring_documents_every_argument():
    check_docstring(PositionalEncoding)


def test_book_columns_6_to_9_for_60_positions_and_32_dims():
    """The figure of d2l 11.6: columns 6-9 against the formula."""
    encoding_dim, num_steps = 32, 60
    pe = PositionalEncoding(encoding_dim, 0.0)
    X = pe(np.zeros((1, num_steps, encoding_dim), "float32"), training=False)
    P = ops.convert_to_numpy(pe.P)[:, : X.shape[1], :]
    i = np.arange(num_steps)
    for col in (6, 7, 8, 9):
        j = col // 2
        angle = i / 10000 ** (2 * j / encoding_dim)
        expected = np.sin(angle) if col % 2 == 0 else np.cos(angle)
        np.testing.assert_allclose(P[0, :, col], expected, atol=1e-6)
        np.testing.assert_allclose(
            ops.convert_to_numpy(X)[0, :, col], expected, atol=1e-6
        )
    assert (
        pe.P.shape == (1, 1000, 32)
        and keras.backend.standardize_dtype(pe.P.dtype) == "float32"
    )


@pytest.mark.parametrize("delta", [1, 7, 50])
def test_relative_position_is_a_fixed_rotation(delta):
    """d2l eq. 11.6.3: a 2x2 rotation that depends only on delta maps pair i to
    i+delta."""
    d, max_len = 32, 400
    P = sinusoidal_table(max_len, d).astype(np.float64)
    for j in range(d // 2):
        omega = 1.0 / 10000 ** (2 * j / d)
        rotation = np.array(
            [
                [np.cos(delta * omega), np.sin(delta * omega)],
                [-np.sin(delta * omega), np.cos(delta * omega)],
            ]
        )
        pairs = P[: max_len - delta, 2 * j : 2 * j + 2]  # (N, 2): (sin, cos) at i
        shifted = P[delta:, 2 * j : 2 * j + 2]  # the same at i + delta
        np.testing.assert_allclose(pairs @ rotation.T, shifted, atol=1e-5)


def test_table_is_exact_at_long_positions():
    """Computed in float64 and rounded once: no drift at position 2048 (keras-hub's
    float16 table is 0.78 off)."""
    table = sinusoidal_table(4096, 256)
    np.testing.assert_allclose(table, book_formula(4096, 256)[:], atol=1e-6)


def test_odd_num_hiddens_follows_the_formula_and_ends_with_a_sine():
    pe = PositionalEncoding(num_hiddens=7, max_len=30)
    P = ops.convert_to_numpy(pe.P)[0]
    np.testing.assert_allclose(P, book_formula(30, 7), atol=1e-6)
    i = np.arange(30)
    np.testing.assert_allclose(P[:, 6], np.sin(i / 10000 ** (6 / 7)), atol=1e-6)


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEncoding])
def test_start_offset_matches_the_full_pass(cls):
    x = np.random.default_rng(1).normal(size=(2, 12, 16)).astype("float32")
    pe = cls(16, max_len=12)
    full = ops.convert_to_numpy(pe(x))
    for t in range(12):
        step = ops.convert_to_numpy(pe(x[:, t : t + 1], start=t))
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-6)
    # A tensor start (as inside a decoding loop) gives the same rows.
    step = ops.convert_to_numpy(pe(x[:, 5:8], start=ops.convert_to_tensor(5, "int32")))
    np.testing.assert_allclose(step, full[:, 5:8], atol=1e-6)


def test_too_long_input_names_both_numbers():
    pe = PositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match=r"11.*max_len=10"):
        pe(np.zeros((1, 11, 8), "float32"))
    with pytest.raises(ValueError, match=r"8 \+ 3 = 11.*max_len=10"):
        pe(np.zeros((1, 3, 8), "float32"), start=8)


def test_wrong_width_names_both_numbers():
    with pytest.raises(ValueError, match=r"inputs.shape\[-1\]=6, num_hiddens=8"):
        PositionalEncoding(8)(np.zeros((1, 3, 6), "float32"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_hiddens": 0}, "num_hiddens=0"),
        ({"num_hiddens": 8.0}, "num_hiddens=8.0"),
        ({"num_hiddens": 8, "max_len": -1}, "max_len=-1"),
        ({"num_hiddens": 8, "dropout": 1.0}, "dropout=1.0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        PositionalEncoding(**kwargs)


def test_dropout_applies_after_the_addition_only_in_training():
    x = np.zeros((4, 10, 16), "float32")
    pe = PositionalEncoding(16, dropout=0.5, seed=3)
    table = ops.convert_to_numpy(pe.P)[:, :10]
    inference = ops.convert_to_numpy(pe(x, training=False))
    np.testing.assert_allclose(inference, np.broadcast_to(table, x.shape), atol=1e-6)
    trained = ops.convert_to_numpy(pe(x, training=True))
    kept = trained != 0
    assert 0.3 < kept.mean() < 0.7
    # Survivors are (X + P) / (1 - rate): dropout came after the addition.
    np.testing.assert_allclose(
        trained[kept], (np.broadcast_to(table, x.shape) / 0.5)[kept], atol=1e-5
    )


def test_keras_mask_passes_through():
    ids = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    h = PositionalEncoding(8)(h)
    model = keras.Model(ids, h)
    layer = model.layers[-1]
    mask = layer.compute_mask(None, ops.convert_to_tensor([[True, False]]))
    assert ops.convert_to_numpy(mask).tolist() == [[True, False]]
    assert ops.convert_to_numpy(model(np.array([[3, 0]]))).shape == (1, 2, 8)


# ------------------------------------------------------------------ input checks
@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEncoding])
def test_start_known_at_the_call_is_checked_by_name(cls):
    layer = cls(num_hiddens=8, max_len=10)
    x = np.zeros((1, 5, 8), "float32")
    for start in (-2, np.int64(-2), ops.convert_to_tensor(-2)):
        with pytest.raises(ValueError, match="Received: start=-2"):
            layer(x, start=start)
    with pytest.raises(ValueError, match=r"7 \+ 5 = 12, max_len=10"):
        layer(x, start=ops.convert_to_tensor(7))  # an eager tensor is known now


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEncoding])
def test_positions_known_only_at_run_time_outside_the_table_are_nan(cls):
    """Under XLA a bad start cannot raise: the rows outside the table are NaN."""
    layer = cls(num_hiddens=8, max_len=10)
    x = np.zeros((1, 5, 8), "float32")
    expected = ops.convert_to_numpy(layer(x, start=3))  # builds the layer eagerly
    run = jit_compiled(lambda x, start: layer(x, start=start))
    np.testing.assert_allclose(
        ops.convert_to_numpy(run(x, np.int32(3))), expected, atol=1e-6
    )
    late = ops.convert_to_numpy(run(x, np.int32(7)))[0]  # positions 7..11
    np.testing.assert_allclose(late[:3], ops.convert_to_numpy(layer.P)[0, 7:], 1e-6)
    assert np.isnan(late[3:]).all()
    assert np.isnan(ops.convert_to_numpy(run(x, np.int32(-1)))[0, 0]).all()
