import inspect
import re

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import MultiHeadSelfAttention
from tests.harness import check_docstring, jit_compiled, run_layer_test


def numpy_reference(layer, x, key_mask=None):
    """Multi-head attention from the layer's weights, in float64 NumPy.

    key_mask: bool (B, Tq, Tk) or None; True keeps a key.
    """
    weights = {
        w.path.split("/")[-2] + "/" + w.name: ops.convert_to_numpy(w)
        for w in layer.weights
    }
    qkv_kernel = weights["query_key_value/kernel"].astype(np.float64)
    out_kernel = weights["output/kernel"].astype(np.float64)
    B, T, _ = x.shape
    H, D = layer.num_heads, layer.head_size
    qkv = (x.astype(np.float64) @ qkv_kernel).reshape(B, T, 3, H, D)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, T, D)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    if key_mask is not None:
        logits = np.where(key_mask[:, None], logits, -np.inf)
    with np.errstate(invalid="ignore"):
        w = np.exp(logits - logits.max(-1, keepdims=True))
        w = w / w.sum(-1, keepdims=True)
    w = np.nan_to_num(w)  # a fully masked row: zeros
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D) @ out_kernel
    return out, w


def lens_mask(valid_lens, T):
    valid_lens = np.asarray(valid_lens)
    if valid_lens.ndim == 1:
        valid_lens = np.repeat(valid_lens[:, None], T, axis=1)
    return np.arange(T)[None, None, :] < valid_lens[:, :, None]


X = np.random.default_rng(0).normal(size=(2, 5, 12)).astype("float32")


@pytest.mark.parametrize("with_lens", [False, True])
def test_harness(tmp_path, with_lens):
    inputs = {"inputs": X}
    if with_lens:
        inputs["valid_lens"] = np.array([5, 3], "int32")
    run_layer_test(
        MultiHeadSelfAttention,
        {"num_hiddens": 8, "num_heads": 2},
        inputs,
        expected_output_shapes=[(2, 5, 8), (2, 2, 5, 5)],
        expected_num_trainable_weights=2,
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


def test_docstring_documents_every_argument():
    check_docstring(MultiHeadSelfAttention)


def test_book_example_eager_and_functional():
    """d2l 11.5: num_hiddens, num_heads = 100, 5; X ones (2, 4, 100), lens [3, 2]."""
    num_hiddens, num_heads = 100, 5
    attention = MultiHeadSelfAttention(num_hiddens, num_heads, 0.5)
    batch_size, num_queries, valid_lens = 2, 4, np.array([3, 2])
    X = np.ones((batch_size, num_queries, num_hiddens), "float32")
    assert tuple(attention(X, valid_lens, training=False).shape) == (
        batch_size,
        num_queries,
        num_hiddens,
    )

    x_in = keras.Input((None, num_hiddens))
    lens_in = keras.Input((), dtype="int32")
    model = keras.Model([x_in, lens_in], attention(x_in, valid_lens=lens_in))
    assert model.output.shape == (None, None, num_hiddens)
    assert model.predict([X, valid_lens], verbose=0).shape == (2, 4, 100)


@pytest.mark.parametrize(
    "valid_lens", [None, [5, 3], [[1, 2, 3, 4, 5], [2, 2, 0, 1, 3]]]
)
def test_matches_numpy_reference(valid_lens):
    layer = MultiHeadSelfAttention(12, 3)
    lens = None if valid_lens is None else np.array(valid_lens, "int32")
    out, w = layer(X, valid_lens=lens, return_attention_scores=True)
    ref_out, ref_w = numpy_reference(
        layer, X, None if lens is None else lens_mask(lens, 5)
    )
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(w), ref_w, atol=1e-6)


def test_matches_keras_multi_head_attention_with_copied_weights():
    num_hiddens, heads, d_in = 12, 3, X.shape[-1]
    ours = MultiHeadSelfAttention(
        num_hiddens, heads, use_bias=True, bias_initializer="random_normal"
    )
    valid_lens = np.array([4, 2], "int32")
    ours_out, ours_w = ours(X, valid_lens=valid_lens, return_attention_scores=True)

    peer = keras.layers.MultiHeadAttention(
        heads, key_dim=num_hiddens // heads, output_shape=num_hiddens
    )
    peer(X, X)
    qkv_kernel = ops.convert_to_numpy(ours.query_key_value_dense.kernel).reshape(
        d_in, 3, heads, -1
    )
    qkv_bias = ops.convert_to_numpy(ours.query_key_value_dense.bias).reshape(
        3, heads, -1
    )
    out_kernel = ops.convert_to_numpy(ours.output_dense.kernel).reshape(
        heads, -1, num_hiddens
    )
    peer.set_weights(
        [
            qkv_kernel[:, 0],
            qkv_bias[0],
            qkv_kernel[:, 1],
            qkv_bias[1],
            qkv_kernel[:, 2],
            qkv_bias[2],
            out_kernel,
            ops.convert_to_numpy(ours.output_dense.bias),
        ]
    )
    peer_out, peer_w = peer(
        X, X, attention_mask=lens_mask(valid_lens, 5), return_attention_scores=True
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours_out), ops.convert_to_numpy(peer_out), atol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours_w), ops.convert_to_numpy(peer_w), atol=1e-6
    )


def test_valid_lens_keras_mask_and_explicit_mask_agree():
    ids = np.array([[5, 3, 7, 2, 0, 0], [4, 1, 0, 0, 0, 0]], "int32")
    valid_lens = np.array([4, 2], "int32")
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    attention = MultiHeadSelfAttention(8, 2)

    ids_in = keras.Input((None,), dtype="int32")
    masked_model = keras.Model(ids_in, attention(embedding(ids_in)))
    by_mask = masked_model.predict(ids, verbose=0)

    x = embedding(ids)
    by_lens = ops.convert_to_numpy(attention(x, valid_lens=valid_lens))
    by_explicit = ops.convert_to_numpy(
        attention(x, attention_mask=lens_mask(valid_lens, 6))
    )
    np.testing.assert_allclose(by_mask, by_lens, atol=1e-6)
    np.testing.assert_allclose(by_explicit, by_lens, atol=1e-6)
    # Padding content does not matter: change the padded embeddings, same output.
    noisy = ops.convert_to_numpy(x).copy()
    noisy[0, 4:] = 100.0
    noisy[1, 2:] = -50.0
    again = ops.convert_to_numpy(attention(noisy, valid_lens=valid_lens))
    np.testing.assert_allclose(again[0, :4], by_lens[0, :4], atol=1e-5)
    np.testing.assert_allclose(again[1, :2], by_lens[1, :2], atol=1e-5)


def test_keras_mask_beside_valid_lens_is_combined():
    """With valid_lens passed too, Keras fills `inputs_mask`; both masks apply (AND)."""
    ids = np.array([[5, 3, 7, 2, 0, 0]], "int32")
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    attention = MultiHeadSelfAttention(8, 2)
    ids_in = keras.Input((None,), dtype="int32")
    lens_in = keras.Input((), dtype="int32")
    model = keras.Model(
        [ids_in, lens_in], attention(embedding(ids_in), valid_lens=lens_in)
    )
    combined = model.predict([ids, np.array([6], "int32")], verbose=0)
    by_lens = ops.convert_to_numpy(attention(embedding(ids), valid_lens=np.array([4])))
    np.testing.assert_allclose(combined, by_lens, atol=1e-6)


def test_causal_mask_hides_the_future():
    attention = MultiHeadSelfAttention(8, 2)
    base = ops.convert_to_numpy(attention(X, use_causal_mask=True))
    changed = X.copy()
    changed[:, 3:] += 10.0
    after = ops.convert_to_numpy(attention(changed, use_causal_mask=True))
    np.testing.assert_allclose(after[:, :3], base[:, :3], atol=1e-6)
    assert not np.allclose(after[:, 3:], base[:, 3:])
    _, w = attention(X, use_causal_mask=True, return_attention_scores=True)
    assert np.all(np.triu(ops.convert_to_numpy(w)[0, 0], k=1) == 0)


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_fully_masked_rows_give_zeros_not_nan(dtype):
    attention = MultiHeadSelfAttention(8, 2, dtype=dtype)
    big = X * 300.0  # logits far beyond float16's range before scaling
    out, w = attention(
        big, valid_lens=np.array([0, 2], "int32"), return_attention_scores=True
    )
    out, w = (
        ops.convert_to_numpy(ops.cast(out, "float32")),
        ops.convert_to_numpy(ops.cast(w, "float32")),
    )
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    assert np.all(w[0] == 0)  # every key of sequence 0 hidden
    np.testing.assert_allclose(w[1].sum(-1), 1.0, atol=1e-2)
    assert np.all(w[1, :, :, 2:] == 0)


def test_mixed_precision_within_stated_tolerance_of_float32():
    """float16 within 2e-3, bfloat16 within 2e-2 (absolute) of float32, unit-scale X."""
    ref = MultiHeadSelfAttention(16, 4)
    expected = ops.convert_to_numpy(ref(X, valid_lens=np.array([5, 2])))
    for policy, atol in (("mixed_float16", 2e-3), ("mixed_bfloat16", 2e-2)):
        layer = MultiHeadSelfAttention(16, 4, dtype=policy)
        layer(X)
        layer.set_weights(ref.get_weights())
        got = ops.convert_to_numpy(
            ops.cast(layer(X, valid_lens=np.array([5, 2])), "float32")
        )
        np.testing.assert_allclose(got, expected, atol=atol, err_msg=policy)


def test_dropout_only_in_training():
    attention = MultiHeadSelfAttention(8, 2, dropout=0.5, seed=1)
    a = ops.convert_to_numpy(attention(X, training=False))
    b = ops.convert_to_numpy(attention(X, training=False))
    c = ops.convert_to_numpy(attention(X, training=True))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    _, w = attention(X, training=True, return_attention_scores=True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(w).sum(-1), 1.0, atol=1e-5
    )  # scores are pre-dropout


def test_symbolic_scores_shape_with_unknown_length():
    x_in = keras.Input((None, 12))
    y, w = MultiHeadSelfAttention(8, 2)(x_in, return_attention_scores=True)
    assert y.shape == (None, None, 8) and w.shape == (None, 2, None, None)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"num_hiddens": 10, "num_heads": 3},
            (
                "num_hiddens must be divisible by num_heads. "
                "Received: num_hiddens=10, num_heads=3"
            ),
        ),
        ({"num_hiddens": 0, "num_heads": 1}, "num_hiddens=0"),
        ({"num_hiddens": 8, "num_heads": -2}, "num_heads=-2"),
        ({"num_hiddens": 8, "num_heads": 2, "dropout": -0.1}, "dropout=-0.1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(
        ValueError, match=message.replace(".", r"\.").replace("(", r"\(")
    ):
        MultiHeadSelfAttention(**kwargs)


def test_bad_valid_lens_rank():
    with pytest.raises(ValueError, match="valid_lens.shape=\\(2, 5, 5\\)"):
        MultiHeadSelfAttention(8, 2)(X, valid_lens=np.ones((2, 5, 5), "int32"))


def test_projection_kernels_are_drawn_independently():
    """A shared initializer would make the output kernel a copy of Q/K/V's values."""
    layer = MultiHeadSelfAttention(16, 4)
    layer(X)
    qkv = ops.convert_to_numpy(layer.query_key_value_dense.kernel).ravel()
    out = ops.convert_to_numpy(layer.output_dense.kernel).ravel()
    n = min(qkv.size, out.size)
    correlation = np.corrcoef(qkv[:n], out[:n])[0, 1]
    assert abs(correlation) < 0.5, correlation


# ------------------------------------------------------------------ input checks
@pytest.mark.parametrize(
    "valid_lens, shown",
    [
        (np.array([3], "int32"), r"\(1,\)"),  # would broadcast over the batch
        (np.array([3, 2, 1], "int32"), r"\(3,\)"),
        (np.ones((2, 4), "int32"), r"\(2, 4\)"),  # per-query lengths for T=5
        (np.ones((2, 5, 5), "int32"), r"\(2, 5, 5\)"),
        (np.array([True, False]), "dtype=bool"),
    ],
)
def test_valid_lens_of_the_wrong_shape_are_refused_by_name(valid_lens, shown):
    with pytest.raises(ValueError, match=f"valid_lens.*Received: valid_lens.*{shown}"):
        MultiHeadSelfAttention(8, 2)(X, valid_lens=valid_lens)


@pytest.mark.parametrize("shape", [(1, 5, 5), (2, 5, 4), (2, 5)])
def test_attention_mask_of_the_wrong_shape_is_refused_by_name(shape):
    pattern = r"attention_mask must have shape \(batch, T, T\) = \(2, 5, 5\)"
    with pytest.raises(ValueError, match=pattern + r".*" + re.escape(str(shape))):
        MultiHeadSelfAttention(8, 2)(X, attention_mask=np.ones(shape, bool))


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only tf.function traces with unknown sizes (JAX shapes are static)",
)
def test_sizes_known_only_at_run_time_broadcast_as_documented():
    """A graph traced with an unknown batch cannot check it: NumPy broadcasting."""
    import tensorflow as tf

    layer = MultiHeadSelfAttention(8, 2)
    layer(X)
    run = tf.function(
        lambda x, v: layer(x, valid_lens=v),
        input_signature=[
            tf.TensorSpec([None, None, 12]),
            tf.TensorSpec([None], tf.int32),
        ],
    )
    np.testing.assert_allclose(
        run(X, np.array([3, 2], "int32")),
        layer(X, valid_lens=np.array([3, 2])),
        atol=1e-6,
    )
    np.testing.assert_allclose(  # batch 1: the same length for every row
        run(X, np.array([3], "int32")),
        layer(X, valid_lens=np.array([3, 3])),
        atol=1e-6,
    )
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(X, np.array([3, 2, 1], "int32"))


def test_out_of_range_and_nan_lengths_have_a_defined_result():
    """Lengths past T keep every key; NaN and negatives hide every key (zeros)."""
    layer = MultiHeadSelfAttention(8, 2)
    full = ops.convert_to_numpy(layer(X))
    long = np.array([2**20, 5], "int32")
    if keras.backend.backend() == "tensorflow":
        long = np.array([2**33, 5], "int64")  # JAX (no x64) narrows int64 itself
    out, weights = layer(X, valid_lens=long, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(weights)[0].sum(-1), 1.0, 1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(out), full, atol=1e-6)
    for lens in (np.array([np.nan, 5.0], "float32"), np.array([-3, 5], "int32")):
        out, weights = layer(X, valid_lens=lens, return_attention_scores=True)
        weights = ops.convert_to_numpy(weights)
        assert np.all(weights[0] == 0)
        assert np.all(np.isfinite(ops.convert_to_numpy(out)))
        np.testing.assert_allclose(weights[1].sum(-1), 1.0, atol=1e-6)
    # The same under XLA, where the values are known only at run time.
    jitted = jit_compiled(
        lambda x, v: layer(x, valid_lens=v, return_attention_scores=True)[1]
    )
    weights = ops.convert_to_numpy(jitted(X, np.array([np.nan, 2.0**40], "float32")))
    assert np.all(weights[0] == 0)
    np.testing.assert_allclose(weights[1].sum(-1), 1.0, atol=1e-6)


# Every constructor argument.
OPTIONS = [
    name
    for name in inspect.signature(MultiHeadSelfAttention.__init__).parameters
    if name not in ("self", "kwargs")
]


def test_options_are_plain_attributes_listed_by_the_config():
    """As keras.layers.MultiHeadAttention: each option is an attribute of the
    instance under its argument's name, normalized, and get_config lists it."""
    layer = MultiHeadSelfAttention(
        np.int64(12), 3, dropout=0.1, seed=np.int32(4), rotary_max_wavelength=500
    )
    config = layer.get_config()
    for name in OPTIONS:
        assert name in vars(layer), name  # not a property, not a _private copy
        value = getattr(layer, name)
        if name.endswith("_initializer"):
            assert isinstance(value, keras.initializers.Initializer), name
            value = keras.initializers.serialize(value)
        assert config[name] == value, name
    assert type(layer.num_hiddens) is int and type(layer.seed) is int
    assert layer.rotary_max_wavelength == 500.0 and layer.head_size == 4
    # A changed option is a new layer, from the config.
    changed = MultiHeadSelfAttention.from_config({**config, "num_heads": 2})
    assert (changed.num_heads, changed.head_size) == (2, 6)
    assert changed.get_config() == {**config, "num_heads": 2, "name": changed.name}


def _copy(layer_cls, source, **kwargs):
    layer = layer_cls(12, 3, **kwargs)
    layer(X)
    layer.set_weights(source.get_weights())
    return layer


def test_a_subclass_overrides_the_logits_alone():
    """Zero logits: every kept key weighs the same, queries without keys stay 0."""

    class Uniform(MultiHeadSelfAttention):
        def attention_logits(self, query, key):
            logits = super().attention_logits(query, key)
            return ops.zeros_like(logits)

    base = MultiHeadSelfAttention(12, 3)
    base(X)
    layer = _copy(Uniform, base)
    lens = np.array([0, 3], "int32")
    out, w = layer(X, valid_lens=lens, return_attention_scores=True)
    w = ops.convert_to_numpy(w)
    assert np.all(w[0] == 0)
    np.testing.assert_allclose(w[1, :, :, :3], 1 / 3, atol=1e-7)
    assert np.all(w[1, :, :, 3:] == 0)
    # The output is the mean of the kept values through the output projection.
    qkv_kernel, out_kernel = (ops.convert_to_numpy(v) for v in base.get_weights())
    values = (X[1] @ qkv_kernel).reshape(5, 3, 3, 4)[:, 2]  # (T, H, D)
    expected = np.broadcast_to(values[:3].mean(0).reshape(-1), (5, 12)) @ out_kernel
    np.testing.assert_allclose(ops.convert_to_numpy(out)[1], expected, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(out)[0], 0.0, atol=0
    )  # no key, no bias: zeros


def test_a_subclass_overrides_the_mask_alone():
    class AlwaysCausal(MultiHeadSelfAttention):
        def compute_attention_mask(self, inputs, **kwargs):
            kwargs["use_causal_mask"] = True
            return super().compute_attention_mask(inputs, **kwargs)

    base = MultiHeadSelfAttention(12, 3)
    base(X)
    layer = _copy(AlwaysCausal, base)
    lens = np.array([4, 2], "int32")
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(X, valid_lens=lens)),
        ops.convert_to_numpy(base(X, valid_lens=lens, use_causal_mask=True)),
    )


def test_queries_without_keys_give_zeros_whatever_the_weights_step_does():
    """A query with no key gets zeros in `compute_attention`, not in the softmax."""

    class Unmasked(MultiHeadSelfAttention):
        def attention_weights(self, logits, attention_mask=None):
            return super().attention_weights(logits, None)  # ignores the mask

    base = MultiHeadSelfAttention(12, 3)
    base(X)
    layer = _copy(Unmasked, base)
    lens = np.array([0, 2], "int32")
    out, w = layer(X, valid_lens=lens, return_attention_scores=True)
    assert np.all(ops.convert_to_numpy(w)[0] == 0)
    assert np.all(ops.convert_to_numpy(out)[0] == 0)
    full_out, full_w = base(X, return_attention_scores=True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(w)[1], ops.convert_to_numpy(full_w)[1], atol=1e-7
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(out)[1], ops.convert_to_numpy(full_out)[1], atol=1e-6
    )


def test_a_subclass_overrides_how_the_weights_are_applied():
    class NoDropoutOnValues(MultiHeadSelfAttention):
        def attend(self, weights, value, training=None):
            return super().attend(weights, value, training=False)

    base = MultiHeadSelfAttention(12, 3, dropout=0.5, seed=1)
    base(X)
    layer = _copy(NoDropoutOnValues, base, dropout=0.5, seed=1)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(X, training=True)),
        ops.convert_to_numpy(base(X, training=False)),
    )


FUSED_BACKEND = keras.backend.backend() in ("jax", "torch")


class AlwaysFused(MultiHeadSelfAttention):
    """Runs `fused_attention` whenever the weights are not asked for, on every
    backend (TensorFlow's layer keeps its three steps; the op is tested here)."""

    def _fused_attention_applies(self, return_attention_scores, training):
        return not return_attention_scores


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts the calls of ``keras.ops.dot_product_attention`` (still computing)."""
    calls = []
    original = ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("mask"))
        return original(*args, **kwargs)

    monkeypatch.setattr(ops, "dot_product_attention", counting)
    return calls


T = X.shape[1]
EXPLICIT_MASK = np.tril(np.ones((T, T), bool))[None].repeat(2, 0)
EXPLICIT_MASK[1, 2] = False  # query 2 of sequence 1 has no key at all
FUSED_MASK_CASES = {
    "none": ({}, None),
    "lens (B,)": ({"valid_lens": np.array([0, 3], "int32")}, lens_mask([0, 3], T)),
    "lens (B, T)": (
        {"valid_lens": np.array([[1, 2, 3, 4, 5], [2, 2, 0, 1, 3]], "int32")},
        lens_mask([[1, 2, 3, 4, 5], [2, 2, 0, 1, 3]], T),
    ),
    "keras mask": (
        {"mask": np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool)},
        np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool)[:, None].repeat(T, 1),
    ),
    "explicit": ({"attention_mask": EXPLICIT_MASK}, EXPLICIT_MASK),
    "causal": ({"use_causal_mask": True}, np.tril(np.ones((2, T, T), bool))),
    "causal and lens": (
        {"use_causal_mask": True, "valid_lens": np.array([4, 0], "int32")},
        np.tril(np.ones((2, T, T), bool)) & lens_mask([4, 0], T),
    ),
}


@pytest.mark.parametrize("case", sorted(FUSED_MASK_CASES))
@pytest.mark.parametrize("compiled", [False, True])
def test_fused_path_keeps_every_mask_semantic(case, compiled, fused_calls):
    """Without scores the layer runs `keras.ops.dot_product_attention`: the NumPy
    reference's output, the explicit path's output, zeros for queries with no key."""
    kwargs, key_mask = FUSED_MASK_CASES[case]
    layer = AlwaysFused(12, 3)
    layer.build(X.shape)  # weights made outside the compiled function

    def attend(x):
        return layer(x, **kwargs)

    fused = ops.convert_to_numpy((jit_compiled(attend) if compiled else attend)(X))
    assert len(fused_calls) >= 1
    explicit, _ = layer(X, return_attention_scores=True, **kwargs)
    np.testing.assert_allclose(fused, ops.convert_to_numpy(explicit), atol=1e-6)
    reference, _ = numpy_reference(layer, X, key_mask)
    np.testing.assert_allclose(fused, reference, atol=1e-5)
    if key_mask is not None:
        no_key = ~key_mask.any(-1)  # (B, Tq)
        assert np.all(fused[no_key] == 0)  # zeros (no bias), not the values' mean
        assert no_key.any() == (case not in ("causal",))


def _cudnn_layout_check():
    """JAX's own check of what cuDNN's fused attention accepts (private API), or
    None where this jax has another one."""
    import inspect

    try:
        from jax._src.cudnn import fused_attention_stablehlo as cudnn
    except ImportError:
        return None
    names = ("check_layout", "combine_bias_and_mask", "_normalize_layout")
    if not all(hasattr(cudnn, name) for name in names):
        return None
    others = set(inspect.signature(cudnn.check_layout).parameters)
    others -= {"query", "key", "value", "bias", "layout"}

    def check(query, key, value, mask):
        bias = cudnn.combine_bias_and_mask(None, mask, query.dtype)
        cudnn.check_layout(
            query,
            key,
            value,
            bias,
            layout=cudnn._normalize_layout("BTNH"),
            **dict.fromkeys(others),
        )

    return check


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="the mask cuDNN takes through JAX"
)
@pytest.mark.parametrize(
    "case",
    sorted(case for case, (_, mask) in FUSED_MASK_CASES.items() if mask is not None),
)
def test_fused_mask_is_one_cudnn_takes_on_jax(case, fused_calls):
    """On JAX the op gets the mask as (B, 1, Tq, Tk), which cuDNN's fused attention
    takes (JAX's layout check passes; the (B, 1, 1, Tk) key mask of a padded batch
    fails it and sends a GPU to XLA's unfused attention)."""
    import jax.numpy as jnp

    check = _cudnn_layout_check()
    if check is None:
        pytest.skip("this jax has no cuDNN layout check to ask")
    kwargs, key_mask = FUSED_MASK_CASES[case]
    layer = AlwaysFused(12, 3)
    layer(X, **kwargs)
    (mask,) = fused_calls
    assert tuple(mask.shape) == (2, 1, T, T)
    np.testing.assert_array_equal(ops.convert_to_numpy(mask)[:, 0], key_mask)
    heads = jnp.zeros((2, T, 3, 4), "bfloat16")
    check(heads, heads, heads, mask)
    with pytest.raises(ValueError, match="seq length"):
        check(heads, heads, heads, mask[:, :, :1])


def test_fused_path_matches_keras_multi_head_attention():
    """Both without scores (the peer through dot_product_attention), copied
    weights."""
    heads, num_hiddens = 3, 12
    ours = AlwaysFused(num_hiddens, heads)
    ours(X)
    peer = keras.layers.MultiHeadAttention(
        heads, key_dim=num_hiddens // heads, use_bias=False
    )
    peer(X, X)
    qkv_kernel = ops.convert_to_numpy(ours.query_key_value_dense.kernel).reshape(
        X.shape[-1], 3, heads, -1
    )
    out_kernel = ops.convert_to_numpy(ours.output_dense.kernel).reshape(heads, -1, 12)
    peer.set_weights([qkv_kernel[:, 0], qkv_kernel[:, 1], qkv_kernel[:, 2], out_kernel])
    valid_lens = np.array([4, 2], "int32")
    for kwargs, peer_kwargs in (
        ({"valid_lens": valid_lens}, {"attention_mask": lens_mask(valid_lens, T)}),
        ({"use_causal_mask": True}, {"use_causal_mask": True}),
    ):
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours(X, **kwargs)),
            ops.convert_to_numpy(peer(X, X, **peer_kwargs)),
            atol=1e-5,
        )


def test_rotary_fused_path_matches_the_explicit_path(fused_calls):
    layer = AlwaysFused(12, 3, use_rotary=True)
    lens = np.array([4, 0], "int32")
    fused = ops.convert_to_numpy(layer(X, valid_lens=lens))
    assert len(fused_calls) == 1
    explicit, _ = layer(X, valid_lens=lens, return_attention_scores=True)
    np.testing.assert_allclose(fused, ops.convert_to_numpy(explicit), atol=1e-6)
    assert np.all(fused[1] == 0)


class OwnWeights(MultiHeadSelfAttention):
    def attention_weights(self, logits, attention_mask=None):
        return super().attention_weights(logits, attention_mask)


# Where the fused op runs (on a backend with a fused kernel), and where the
# three steps must: (make the layer, call keywords, fused).
FUSED_CHOICES = {
    "plain": (lambda: MultiHeadSelfAttention(8, 2), {}, True),
    "dropout-inference": (
        lambda: MultiHeadSelfAttention(8, 2, dropout=0.5),
        {"training": False},
        True,
    ),
    "dropout-training": (
        lambda: MultiHeadSelfAttention(8, 2, dropout=0.5),
        {"training": True},
        False,
    ),
    "no-dropout-training": (
        lambda: MultiHeadSelfAttention(8, 2, dropout=0.0),
        {"training": True},
        True,
    ),
    "scores": (
        lambda: MultiHeadSelfAttention(8, 2),
        {"return_attention_scores": True},
        False,
    ),
    "relative": (
        lambda: MultiHeadSelfAttention(8, 2, max_relative_position=2),
        {},
        False,
    ),
    "float16": (lambda: MultiHeadSelfAttention(8, 2, dtype="mixed_float16"), {}, False),
    "bfloat16": (
        lambda: MultiHeadSelfAttention(8, 2, dtype="mixed_bfloat16"),
        {},
        True,
    ),
    "subclass-step": (lambda: OwnWeights(8, 2), {}, False),
}


@pytest.mark.parametrize(
    "make, call_kwargs, fused", FUSED_CHOICES.values(), ids=FUSED_CHOICES.keys()
)
def test_fused_path_only_where_it_computes_the_same(
    make, call_kwargs, fused, fused_calls
):
    make()(X, **call_kwargs)
    assert bool(fused_calls) == (fused and FUSED_BACKEND)


@pytest.mark.parametrize(
    "make, call_kwargs, fused", FUSED_CHOICES.values(), ids=FUSED_CHOICES.keys()
)
def test_fused_path_choice_on_a_backend_with_a_fused_kernel(
    make, call_kwargs, fused, fused_calls, monkeypatch
):
    """The same choice with this backend counted as one with a fused kernel (as
    JAX and torch are): the fused op runs exactly where it computes what the three
    steps compute, and there gives their result."""
    from keras_selfattn.layers import multi_head_self_attention

    backend = keras.backend.backend()
    monkeypatch.setattr(
        multi_head_self_attention, "_FUSED_ATTENTION_BACKENDS", frozenset({backend})
    )
    layer = make()
    output = layer(X, **call_kwargs)
    assert bool(fused_calls) == fused
    if not fused:
        return
    output = ops.convert_to_numpy(output)
    monkeypatch.setattr(
        multi_head_self_attention, "_FUSED_ATTENTION_BACKENDS", frozenset()
    )
    steps = ops.convert_to_numpy(layer(X, **call_kwargs))
    assert len(fused_calls) == 1  # the three steps this time
    tolerance = 5e-2 if layer.compute_dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(
        output.astype("float32"), steps.astype("float32"), atol=tolerance
    )


def test_inputs_without_a_feature_axis_are_refused_by_name():
    with pytest.raises(ValueError, match=r"inputs.shape=\(2, 5\)"):
        MultiHeadSelfAttention(8, 2)(np.zeros((2, 5), "float32"))
