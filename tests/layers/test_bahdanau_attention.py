"""Tests of BahdanauAttention: the shared harness, NumPy references, masks, shapes."""

import inspect
import re

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import BahdanauAttention
from tests.harness import check_docstring, run_layer_test

B, T, S = 2, 5, 4
RNG = np.random.default_rng(0)
QUERY = RNG.normal(size=(B, S, 3)).astype("float32")
KEYS = RNG.normal(size=(B, T, 6)).astype("float32")
VALUES = RNG.normal(size=(B, T, 7)).astype("float32")


def numpy_attention(layer, query, keys, values=None, mask=None):
    """The layer's scores written out in float64 NumPy, with the layer's weights.

    query (B, Dq) or (B, S, Dq); mask: bool broadcastable to (B, S, T), True keeps.
    A query whose keys are all masked gets zero weights and a zero context.
    """
    kernel = {}
    for name in ("query_dense", "key_dense", "score_dense"):
        if hasattr(layer, name):
            kernel[name] = ops.convert_to_numpy(getattr(layer, name).kernel).astype(
                np.float64
            )
    q = np.asarray(query, np.float64)
    single = q.ndim == 2
    q = q[:, None] if single else q  # (B, S, Dq)
    k = np.asarray(keys, np.float64)
    v = k if values is None else np.asarray(values, np.float64)
    if layer.score == "additive":
        features = np.tanh(
            (q @ kernel["query_dense"])[:, :, None, :]
            + (k @ kernel["key_dense"])[:, None, :, :]
        )  # (B, S, T, units)
        e = (features @ kernel["score_dense"])[..., 0]
    elif layer.score == "dot":
        e = q @ k.transpose(0, 2, 1)
    elif layer.score == "scaled_dot":
        e = q @ k.transpose(0, 2, 1) / np.sqrt(k.shape[-1])
    else:  # general: q^T W k
        w_general = ops.convert_to_numpy(layer.general_kernel).astype(np.float64)
        e = q @ (k @ w_general).transpose(0, 2, 1)
    keep = np.ones(e.shape, bool) if mask is None else np.broadcast_to(mask, e.shape)
    e = np.where(keep, e, -np.inf)
    e_max = np.max(np.where(keep, e, -1e300), axis=-1, keepdims=True)
    w = np.where(keep, np.exp(e - e_max), 0.0)
    denom = w.sum(-1, keepdims=True)
    w = np.divide(w, denom, out=np.zeros_like(w), where=denom > 0)
    context = w @ v
    if single:
        return context[:, 0], w[:, 0]
    return context, w


def lens_mask(valid_lens, num_keys=T):
    """(B,) lengths -> (B, 1, T) bool, d2l semantics."""
    return (np.arange(num_keys)[None, :] < np.asarray(valid_lens)[:, None])[:, None, :]


def run_docstring_example(cls):
    doc = inspect.getdoc(cls)
    code = re.search(r"Example:\s*```python\n(.*?)```", doc, re.DOTALL).group(1)
    example = compile(code, f"<{cls.__name__} example>", "exec")
    exec(example, {})  # noqa: S102 (runs the docstring's own example)


# --------------------------------------------------------------------- harness
@pytest.mark.slow
def test_harness_additive_many_queries(tmp_path):
    """(B, S, Dq) queries, T != S, Dv != Dk, valid_lens, dropout on the weights."""
    run_layer_test(
        BahdanauAttention,
        {"units": 8, "dropout": 0.1, "seed": 3},
        {
            "query": QUERY,
            "keys": KEYS,
            "values": VALUES,
            "valid_lens": np.array([3, 5], dtype="int32"),
        },
        expected_output_shapes=[(B, S, 7), (B, S, T)],
        expected_num_trainable_weights=3,
        tmp_path=tmp_path,
    )


@pytest.mark.slow
def test_harness_general_single_query(tmp_path):
    """Luong's general score, one (B, Dq) query per sequence, keys as values."""
    run_layer_test(
        BahdanauAttention,
        {"score": "general"},
        {"query": QUERY[:, 0], "keys": KEYS},
        expected_output_shapes=[(B, 6), (B, T)],
        expected_num_trainable_weights=1,
        tmp_path=tmp_path,
    )


def test_docstring_documents_every_argument_and_example_runs():
    check_docstring(BahdanauAttention)
    run_docstring_example(BahdanauAttention)


# ------------------------------------------------------------------ numerics
@pytest.mark.parametrize("score", ["additive", "dot", "scaled_dot", "general"])
@pytest.mark.parametrize("single_query", [False, True])
def test_matches_numpy_reference(score, single_query):
    kwargs = {"units": 8} if score == "additive" else {}
    layer = BahdanauAttention(score=score, **kwargs)
    # The dot scores need Dq == Dk: use 6-wide queries everywhere.
    query = RNG.normal(size=(B, S, 6)).astype("float32")
    query = query[:, 0] if single_query else query
    valid_lens = np.array([2, 5])
    context, weights = layer(query, KEYS, values=VALUES, valid_lens=valid_lens)
    ref_context, ref_weights = numpy_attention(
        layer, query, KEYS, VALUES, mask=lens_mask(valid_lens)
    )
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(context), ref_context, atol=1e-5)


def test_per_query_valid_lens_match_numpy():
    layer = BahdanauAttention(units=8)
    valid_lens = np.array([[1, 2, 3, 4], [5, 4, 3, 0]])  # (B, S)
    context, weights = layer(QUERY, KEYS, valid_lens=valid_lens)
    mask = np.arange(T)[None, None, :] < valid_lens[:, :, None]
    ref_context, ref_weights = numpy_attention(layer, QUERY, KEYS, mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(context), ref_context, atol=1e-5)


def test_single_query_equals_slice_of_many():
    layer = BahdanauAttention(units=8)
    valid_lens = np.array([3, 5])
    many_context, many_weights = layer(QUERY, KEYS, VALUES, valid_lens=valid_lens)
    for s in range(S):
        context, weights = layer(QUERY[:, s], KEYS, VALUES, valid_lens=valid_lens)
        np.testing.assert_allclose(
            ops.convert_to_numpy(context),
            ops.convert_to_numpy(many_context)[:, s],
            atol=1e-6,
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(weights),
            ops.convert_to_numpy(many_weights)[:, s],
            atol=1e-6,
        )


@pytest.mark.parametrize("score", ["additive", "general", "dot"])
def test_projected_keys_give_the_same_result(score):
    layer = BahdanauAttention(units=8, score=score)
    query = RNG.normal(size=(B, 6)).astype("float32")
    with pytest.raises(ValueError, match="not built"):
        layer.project_keys(KEYS)
    expected = layer(query, KEYS, valid_lens=np.array([4, 2]))
    projected = layer.project_keys(KEYS)
    got = layer(query, KEYS, valid_lens=np.array([4, 2]), projected_keys=projected)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(
            ops.convert_to_numpy(g), ops.convert_to_numpy(e), atol=1e-6
        )


# ------------------------------------------------------------------- masking
def test_valid_lens_equal_keys_mask_and_keras_mask():
    """valid_lens == explicit keys_mask == the Keras mask of keys (Embedding)."""
    ids = np.array([[4, 2, 7, 0, 0], [1, 3, 5, 6, 2]])
    valid_lens = (ids != 0).sum(-1)
    embedding = keras.layers.Embedding(10, 6, mask_zero=True)
    layer = BahdanauAttention(units=8)
    keys = ops.convert_to_numpy(embedding(ids))  # plain array: no mask attached

    by_lens = layer(QUERY, keys, valid_lens=valid_lens)
    by_mask = layer(QUERY, keys, keys_mask=ids != 0)

    query_in = keras.Input((None, 3))
    ids_in = keras.Input((None,), dtype="int32")
    model = keras.Model([query_in, ids_in], layer(query_in, embedding(ids_in)))
    by_keras_mask = model.predict([QUERY, ids], verbose=0)

    _, ref_weights = numpy_attention(layer, QUERY, keys, mask=lens_mask(valid_lens))
    for outputs in (by_mask, by_keras_mask):
        for expected, got in zip(by_lens, outputs):
            np.testing.assert_allclose(
                ops.convert_to_numpy(got), ops.convert_to_numpy(expected), atol=1e-6
            )
    np.testing.assert_allclose(ops.convert_to_numpy(by_lens[1]), ref_weights, atol=1e-5)
    assert np.all(ops.convert_to_numpy(by_keras_mask[1])[0, :, 3:] == 0)


def test_valid_lens_and_keys_mask_are_anded():
    layer = BahdanauAttention(units=8)
    keys_mask = np.array([[True, False, True, True, True]] * B)
    _, weights = layer(QUERY, KEYS, valid_lens=np.array([4, 2]), keys_mask=keys_mask)
    _, ref = numpy_attention(
        layer, QUERY, KEYS, mask=lens_mask([4, 2]) & keys_mask[:, None, :]
    )
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
def test_fully_masked_row_gives_zeros_not_nan(dtype):
    layer = BahdanauAttention(units=8, dtype=dtype)
    context, weights = layer(QUERY, KEYS, valid_lens=np.array([0, 5]))
    context, weights = ops.convert_to_numpy(context), ops.convert_to_numpy(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    assert np.all(context[0] == 0) and np.all(weights[0] == 0)
    np.testing.assert_allclose(weights[1].sum(-1), 1.0, atol=1e-2)


# -------------------------------------------------------------------- shapes
def test_symbolic_shapes_with_t_different_from_s():
    layer = BahdanauAttention(units=8)
    query = keras.Input((S, 3))
    keys = keras.Input((T, 6))
    values = keras.Input((T, 7))
    context, weights = layer(query, keys, values)
    assert tuple(context.shape) == (None, S, 7)
    assert tuple(weights.shape) == (None, S, T)
    # Unknown lengths, one query.
    context, weights = layer(keras.Input((3,)), keras.Input((None, 6)))
    assert tuple(context.shape) == (None, 6) and tuple(weights.shape) == (None, None)
    spec = layer.compute_output_spec(
        keras.KerasTensor((B, S, 3)),
        keras.KerasTensor((B, T, 6)),
        keras.KerasTensor((B, T, 7)),
    )
    assert [tuple(x.shape) for x in spec] == [(B, S, 7), (B, S, T)]
    assert layer.compute_output_shape((B, S, 3), (B, T, 6)) == ((B, S, 6), (B, S, T))
    # The symbolic shapes are those of an eager call.
    context, weights = layer(QUERY, KEYS, VALUES)
    assert tuple(context.shape) == (B, S, 7) and tuple(weights.shape) == (B, S, T)


# ------------------------------------------------------------------ dropout
def test_dropout_active_only_in_training():
    layer = BahdanauAttention(units=8, dropout=0.5, seed=7)
    inference = [ops.convert_to_numpy(x) for x in layer(QUERY, KEYS, training=False)]
    again = [ops.convert_to_numpy(x) for x in layer(QUERY, KEYS, training=False)]
    training = [ops.convert_to_numpy(x) for x in layer(QUERY, KEYS, training=True)]
    np.testing.assert_array_equal(inference[0], again[0])
    assert not np.allclose(training[0], inference[0])
    # The returned weights are the ones before dropout.
    np.testing.assert_allclose(training[1], inference[1], atol=1e-6)


def test_config_round_trip_keeps_every_argument():
    layer = BahdanauAttention(
        units=4, score="additive", dropout=0.25, kernel_initializer="he_normal", seed=5
    )
    revived = BahdanauAttention.from_config(layer.get_config())
    assert revived.get_config() == layer.get_config()
    assert revived.seed == 5 and revived.dropout == 0.25
    assert isinstance(revived.kernel_initializer, keras.initializers.HeNormal)


# ------------------------------------------------------------ bad arguments
@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"units": 0}, r"units must be a positive integer.*Received: units=0"),
        ({"units": -3}, r"Received: units=-3"),
        ({"units": 2.5}, r"Received: units=2\.5"),
        ({"units": "8"}, r"Received: units='8'"),
        (
            {},
            r"units must be a positive integer.*score='additive'.*Received: units=None",
        ),
        (
            {"units": 8, "score": "concat"},
            r"score must be one of.*Received: score='concat'",
        ),
        (
            {"units": 8, "dropout": 1.0},
            r"dropout must be a float in \[0, 1\).*Received: dropout=1\.0",
        ),
        ({"units": 8, "dropout": -0.1}, r"Received: dropout=-0\.1"),
        (
            {"units": 8, "seed": "x"},
            r"seed must be None or an integer.*Received: seed='x'",
        ),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        BahdanauAttention(**kwargs)


def test_dot_score_needs_equal_sizes():
    with pytest.raises(
        ValueError, match=r"score='dot' needs queries and keys of the same size"
    ):
        BahdanauAttention(score="dot")(QUERY, KEYS)


# ------------------------------------------------------------ multi-head
def numpy_multi_head_additive(layer, query, keys, values, mask):
    """RNMT+'s multi-head additive attention written out head by head (float64).

    Head h scores with features[h*d:(h+1)*d] . v[h*d:(h+1)*d] (d = units / heads),
    normalizes over the keys on its own and reads values[..., h*dv:(h+1)*dv].
    """
    kq, kk, kv = (
        ops.convert_to_numpy(getattr(layer, name).kernel).astype(np.float64)
        for name in ("query_dense", "key_dense", "score_dense")
    )
    q = np.asarray(query, np.float64)[:, :, None, :]  # (B, S, 1, Dq)
    k = np.asarray(keys, np.float64)[:, None, :, :]  # (B, 1, T, Dk)
    v = np.asarray(values, np.float64)
    features = np.tanh(q @ kq + k @ kk)  # (B, S, T, units)
    d, dv = layer.units // layer.heads, v.shape[-1] // layer.heads
    contexts, all_weights = [], []
    for h in range(layer.heads):
        e = features[..., h * d : (h + 1) * d] @ kv[h * d : (h + 1) * d, 0]
        keep = np.broadcast_to(mask, e.shape)
        w = np.where(
            keep, np.exp(e - np.where(keep, e, -1e300).max(-1, keepdims=True)), 0
        )
        w = w / w.sum(-1, keepdims=True)
        contexts.append(w @ v[..., h * dv : (h + 1) * dv])
        all_weights.append(w)
    return np.concatenate(contexts, -1), np.mean(all_weights, 0)


def test_multi_head_additive_matches_numpy_head_by_head():
    layer = BahdanauAttention(units=8, heads=4)
    values = RNG.normal(size=(B, T, 12)).astype("float32")
    valid_lens = np.array([2, 5])
    context, weights = layer(QUERY, KEYS, values=values, valid_lens=valid_lens)
    ref_context, ref_weights = numpy_multi_head_additive(
        layer, QUERY, KEYS, values, lens_mask(valid_lens)
    )
    assert context.shape == (B, S, 12) and weights.shape == (B, S, T)
    np.testing.assert_allclose(ops.convert_to_numpy(context), ref_context, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_weights, atol=1e-5)
    # The heads differ: one softmax per head, not one shared.
    single = BahdanauAttention(units=8)
    single(QUERY, KEYS, values=values)
    single.set_weights(layer.get_weights())
    one_head, _ = single(QUERY, KEYS, values=values, valid_lens=valid_lens)
    assert not np.allclose(ops.convert_to_numpy(one_head), ref_context, atol=1e-3)


def test_multi_head_single_query_equals_slice_of_many():
    layer = BahdanauAttention(units=8, heads=2)
    many, many_weights = layer(QUERY, KEYS, valid_lens=np.array([3, 5]))
    one, one_weights = layer(QUERY[:, 1], KEYS, valid_lens=np.array([3, 5]))
    np.testing.assert_allclose(
        ops.convert_to_numpy(one), ops.convert_to_numpy(many)[:, 1], atol=1e-6
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(one_weights),
        ops.convert_to_numpy(many_weights)[:, 1],
        atol=1e-6,
    )


@pytest.mark.slow
def test_harness_multi_head_additive(tmp_path):
    run_layer_test(
        BahdanauAttention,
        {"units": 8, "heads": 2, "dropout": 0.1, "seed": 3},
        {"query": QUERY, "keys": KEYS, "values": VALUES[..., :6]},
        expected_output_shapes=[(B, S, 6), (B, S, T)],
        expected_num_trainable_weights=3,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (
            {"units": 8, "heads": 3},
            r"units must be divisible by heads.*units=8, heads=3",
        ),
        (
            {"units": 8, "heads": 0},
            r"heads must be a positive integer.*Received: heads=0",
        ),
        ({"score": "dot", "heads": 2}, r"heads > 1 needs score='additive'.*heads=2"),
    ],
)
def test_bad_heads_raise_value_error(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        BahdanauAttention(**kwargs)


def test_value_size_must_divide_into_heads():
    with pytest.raises(ValueError, match=r"divisible by heads=2.*values_shape=.*7"):
        BahdanauAttention(units=8, heads=2)(QUERY, KEYS, values=VALUES)


def test_multi_head_single_query_in_a_graph_with_unknown_batch():
    """A decoder step traces the attention with an unknown batch size."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("traces with tf.function (a TensorFlow graph)")
    import tensorflow as tf

    layer = BahdanauAttention(units=8, heads=2)
    layer(QUERY[:, 0], KEYS)
    traced = tf.function(
        lambda q, k: layer(q, k),
        input_signature=[
            tf.TensorSpec((None, 3), "float32"),
            tf.TensorSpec((None, None, 6), "float32"),
        ],
    )
    context, weights = traced(QUERY[:, 0], KEYS)
    eager, eager_weights = layer(QUERY[:, 0], KEYS)
    np.testing.assert_allclose(
        np.asarray(weights), ops.convert_to_numpy(eager_weights), atol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(context), ops.convert_to_numpy(eager), atol=1e-6
    )
    assert tuple(weights.shape) == (B, T)
