import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import LearnedPositionalEncoding
from tests.harness import check_docstring


def test_docstring_documents_every_argument():
    check_docstring(LearnedPositionalEncoding)


def test_output_is_input_plus_table_rows():
    x = np.random.default_rng(1).normal(size=(2, 7, 8)).astype("float32")
    pe = LearnedPositionalEncoding(8, max_len=10)
    y = ops.convert_to_numpy(pe(x))
    table = ops.convert_to_numpy(pe.position_embeddings)
    np.testing.assert_allclose(y, x + table[None, :7], atol=1e-6)
    assert pe.P.shape == (1, 10, 8)
    np.testing.assert_array_equal(ops.convert_to_numpy(pe.P)[0], table)
    # Random, not zero: positions differ before any training step.
    assert np.std(table) > 0.01 and not np.allclose(table[0], table[1])
    assert [w.path.split("/")[-1] for w in pe.trainable_weights] == [
        "position_embeddings"
    ]


# The start offset is tested with PositionalEncoding's (test_positional_encoding.py).


def test_only_rows_that_were_seen_get_gradients():
    """Length generalization fails by construction: rows past the training length never
    move."""
    pe = LearnedPositionalEncoding(4, max_len=8)
    x_in = keras.Input((None, 4))
    model = keras.Model(x_in, pe(x_in))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    before = ops.convert_to_numpy(pe.position_embeddings).copy()
    model.fit(
        np.zeros((4, 5, 4), "float32"),
        np.ones((4, 5, 4), "float32"),
        epochs=1,
        verbose=0,
    )
    after = ops.convert_to_numpy(pe.position_embeddings)
    assert not np.allclose(after[:5], before[:5])
    np.testing.assert_array_equal(after[5:], before[5:])


def test_mixed_precision_keeps_a_float32_table():
    pe = LearnedPositionalEncoding(8, max_len=10, dtype="mixed_float16")
    y = pe(np.zeros((1, 4, 8), "float32"))
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert keras.backend.standardize_dtype(pe.position_embeddings.dtype) == "float32"


def test_too_long_input_and_wrong_width_name_both_numbers():
    pe = LearnedPositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match=r"8 \+ 3 = 11.*max_len=10"):
        pe(np.zeros((1, 3, 8), "float32"), start=8)
    with pytest.raises(ValueError, match=r"inputs.shape\[-1\]=6, num_hiddens=8"):
        LearnedPositionalEncoding(8)(np.zeros((1, 3, 6), "float32"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_hiddens": 0}, "num_hiddens=0"),
        ({"num_hiddens": 8, "max_len": 0}, "max_len=0"),
        ({"num_hiddens": 8, "dropout": 1.0}, "dropout=1.0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        LearnedPositionalEncoding(**kwargs)


def test_keras_mask_passes_through_and_dropout_only_in_training():
    layer = LearnedPositionalEncoding(8, dropout=0.5, seed=2)
    mask = layer.compute_mask(None, ops.convert_to_tensor([[True, False]]))
    assert ops.convert_to_numpy(mask).tolist() == [[True, False]]
    x = np.zeros((4, 10, 8), "float32")
    a = ops.convert_to_numpy(layer(x, training=False))
    b = ops.convert_to_numpy(layer(x, training=True))
    assert not np.allclose(a, b)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x, training=False)), a)
