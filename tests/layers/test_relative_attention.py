"""Relative position representations (Shaw et al. 2018) and rotary embeddings (RoPE)
inside MultiHeadSelfAttention: NumPy references of the papers' equations, and the
property that makes them relative (shifting every position changes nothing)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.layers import MultiHeadSelfAttention, PositionalEncoding
from keras_selfattn.layers.relative_positions import (
    relative_position_indices,
    rotary_embedding,
)
from tests.harness import check_docstring, run_layer_test

# The layer under test: MultiHeadSelfAttention with its position options.
Attention = MultiHeadSelfAttention

X = np.random.default_rng(0).normal(size=(2, 5, 12)).astype("float32")


def _np(tensor):
    return np.asarray(ops.convert_to_numpy(tensor), dtype=np.float64)


def lens_mask(valid_lens, T):
    valid_lens = np.asarray(valid_lens)
    if valid_lens.ndim == 1:
        valid_lens = np.repeat(valid_lens[:, None], T, axis=1)
    return np.arange(T)[None, None, :] < valid_lens[:, :, None]


def rotate(x, positions, base=10000.0):
    """RoPE (Su et al. 2021, eq. 13-15) with explicit 2x2 rotation matrices: x (T,
    D)."""
    T, D = x.shape
    out = np.zeros_like(x)
    for t in range(T):
        for m in range(D // 2):
            theta = positions[t] * base ** (-2 * m / D)
            R = np.array(
                [[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]
            )
            out[t, 2 * m : 2 * m + 2] = R @ x[t, 2 * m : 2 * m + 2]
    return out


def numpy_reference(layer, x, key_mask=None):
    """Shaw et al. 2018 eq. 2-5 (and RoPE when the layer uses it), loops over i, j, in
    float64.

    e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z);  alpha = softmax_j(e_ij);
    z_i = sum_j alpha_ij (x_j W^V + a^V_ij);  a_ij = w_clip(j - i, k).
    """
    B, T, _ = x.shape
    H, D = layer.num_heads, layer.head_size
    kernel = _np(layer.query_key_value_dense.kernel).reshape(-1, 3, H, D)
    out_kernel = _np(layer.output_dense.kernel)
    z = np.zeros((B, T, H, D))
    weights = np.zeros((B, H, T, T))
    for b in range(B):
        for h in range(H):
            q, kk, v = (x[b].astype(np.float64) @ kernel[:, n, h] for n in range(3))
            if layer.use_rotary:
                q, kk = rotate(q, np.arange(T)), rotate(kk, np.arange(T))
            mask = None if key_mask is None else key_mask[b]
            z[b, :, h], weights[b, h] = _reference_head(layer, q, kk, v, mask)
    return z.reshape(B, T, H * D) @ out_kernel, weights


def _reference_head(layer, q, kk, v, key_mask):
    """One head of `numpy_reference` on one sequence: z (T, D), alpha (T, T)."""
    T, D = q.shape
    k = layer.max_relative_position
    if k is not None:
        table_k, table_v = _np(layer.relative_key), _np(layer.relative_value)
    e = np.zeros((T, T))
    for i in range(T):
        for j in range(T):
            a_k = table_k[np.clip(j - i, -k, k) + k] if k is not None else 0.0
            e[i, j] = q[i] @ (kk[j] + a_k) / np.sqrt(D)
    if key_mask is not None:
        e = np.where(key_mask, e, -np.inf)
    z, weights = np.zeros((T, D)), np.zeros((T, T))
    for i in range(T):
        if not np.isfinite(e[i]).any():
            continue  # every key hidden: zero weights, zero context
        alpha = np.exp(e[i] - e[i].max())
        alpha /= alpha.sum()
        weights[i] = alpha
        for j in range(T):
            a_v = table_v[np.clip(j - i, -k, k) + k] if k is not None else 0.0
            z[i] += alpha[j] * (v[j] + a_v)
    return z, weights


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_harness(tmp_path, options):
    run_layer_test(
        Attention,
        {"num_hiddens": 8, "num_heads": 2, **options},
        {"inputs": X, "valid_lens": np.array([5, 3], "int32")},
        expected_output_shapes=[(2, 5, 8), (2, 2, 5, 5)],
        expected_num_trainable_weights=4 if "max_relative_position" in options else 2,
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


def test_docstring_documents_every_argument():
    check_docstring(Attention)


def test_relative_indices_are_clipped_offsets():
    rows = ops.convert_to_numpy(relative_position_indices(4, 4, 2))
    offsets = np.arange(4)[None, :] - np.arange(4)[:, None]
    np.testing.assert_array_equal(rows, np.clip(offsets, -2, 2) + 2)


def test_tables_are_named_shaped_and_random():
    layer = Attention(12, 3, max_relative_position=3)
    layer(X)
    names = sorted(w.path.split("/")[-1] for w in layer.trainable_weights)
    assert {"relative_key", "relative_value"} <= set(names)
    for table in (layer.relative_key, layer.relative_value):
        assert tuple(table.shape) == (7, 4)
        values = _np(table)
        assert np.std(values) > 0.05 and not np.allclose(values[0], values[1])
    assert not np.allclose(_np(layer.relative_key), _np(layer.relative_value))


@pytest.mark.parametrize(
    "valid_lens", [None, [5, 3], [[1, 2, 3, 4, 5], [2, 2, 0, 1, 3]]]
)
@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_matches_numpy_reference_of_the_paper(options, valid_lens):
    layer = Attention(12, 3, **options)
    lens = None if valid_lens is None else np.array(valid_lens, "int32")
    out, w = layer(X, valid_lens=lens, return_attention_scores=True)
    ref_out, ref_w = numpy_reference(
        layer, X, None if lens is None else lens_mask(lens, 5)
    )
    np.testing.assert_allclose(_np(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w, atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_causal_mask_matches_reference_and_hides_the_future(options):
    layer = Attention(12, 3, **options)
    out = _np(layer(X, use_causal_mask=True))
    ref, _ = numpy_reference(
        layer, X, np.tril(np.ones((5, 5), bool))[None].repeat(2, 0)
    )
    np.testing.assert_allclose(out, ref, atol=1e-5)
    changed = X.copy()
    changed[:, 3:] += 5.0
    np.testing.assert_allclose(
        _np(layer(changed, use_causal_mask=True))[:, :3], out[:, :3], atol=1e-5
    )


def shifted(x, shift, seed=7):
    """x placed after ``shift`` junk positions; returns the padded inputs and their key
    mask."""
    junk = (
        np.random.default_rng(seed)
        .normal(size=(x.shape[0], shift, x.shape[2]))
        .astype("float32")
        * 3
    )
    padded = np.concatenate([junk, x], axis=1)
    mask = np.concatenate(
        [np.zeros((x.shape[0], shift), bool), np.ones(x.shape[:2], bool)], axis=1
    )
    return padded, mask


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"max_relative_position": 8}, {"use_rotary": True}],
    ids=["relative2", "relative8", "rotary"],
)
@pytest.mark.parametrize("causal", [False, True])
def test_shifting_every_position_leaves_the_output_unchanged(options, causal):
    """The same tokens at positions s..s+T-1 (earlier positions masked out as keys,
    via the Keras mask) give the same outputs as at 0..T-1: only offsets count."""
    layer = Attention(12, 3, **options)
    base = _np(layer(X, use_causal_mask=causal))
    for shift in (1, 3, 11):
        padded, mask = shifted(X, shift)
        out = _np(layer(padded, mask=mask, use_causal_mask=causal))
        np.testing.assert_allclose(
            out[:, shift:], base, atol=2e-5, err_msg=f"shift={shift}"
        )
    # ...and the layer does see order: reversing the tokens changes every output but the
    # (relative) middle one differs too; a plain layer would just permute its outputs.
    reversed_out = _np(layer(X[:, ::-1], use_causal_mask=causal))[:, ::-1]
    assert not np.allclose(reversed_out, base, atol=1e-3)


def test_absolute_encoding_fails_the_same_shift_test():
    """The shift test has teeth: sinusoidal positions + plain attention change under a
    shift."""
    pe, layer = PositionalEncoding(12, max_len=32), MultiHeadSelfAttention(12, 3)
    base = _np(layer(pe(X)))
    padded, mask = shifted(X, 3)
    out = _np(layer(pe(padded), mask=mask))
    assert not np.allclose(out[:, 3:], base, atol=1e-3)


def test_rotary_scores_depend_only_on_the_offset():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(1, 6, 2, 8)).astype("float32")
    k = rng.normal(size=(1, 6, 2, 8)).astype("float32")
    scores = [
        np.einsum(
            "bqhd,bkhd->bhqk",
            _np(rotary_embedding(q, start=s)),
            _np(rotary_embedding(k, start=s)),
        )
        for s in (0, 5, 40)
    ]
    np.testing.assert_allclose(scores[1], scores[0], atol=1e-4)
    np.testing.assert_allclose(scores[2], scores[0], atol=1e-4)
    np.testing.assert_allclose(
        _np(rotary_embedding(q))[0, :, 1],
        rotate(q[0, :, 1].astype(np.float64), np.arange(6)),
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_valid_lens_and_keras_mask_agree(options):
    ids = np.array([[5, 3, 7, 2, 0, 0], [4, 1, 0, 0, 0, 0]], "int32")
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    attention = Attention(8, 2, **options)
    ids_in = keras.Input((None,), dtype="int32")
    by_mask = keras.Model(ids_in, attention(embedding(ids_in))).predict(ids, verbose=0)
    by_lens = _np(attention(embedding(ids), valid_lens=np.array([4, 2], "int32")))
    np.testing.assert_allclose(by_mask, by_lens, atol=1e-5)


@pytest.mark.parametrize("dtype", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_fully_masked_rows_give_zeros_and_stay_close(dtype):
    ref = Attention(16, 4, max_relative_position=3)
    expected = _np(ref(X, valid_lens=np.array([5, 2])))
    layer = Attention(16, 4, max_relative_position=3, dtype=dtype)
    layer(X)
    layer.set_weights(ref.get_weights())
    assert keras.backend.standardize_dtype(layer.relative_key.dtype) == "float32"
    got = _np(ops.cast(layer(X, valid_lens=np.array([5, 2])), "float32"))
    np.testing.assert_allclose(
        got, expected, atol=2e-3 if dtype == "mixed_float16" else 3e-2
    )
    out, w = layer(
        X * 300.0, valid_lens=np.array([0, 2], "int32"), return_attention_scores=True
    )
    out, w = _np(ops.cast(out, "float32")), _np(ops.cast(w, "float32"))
    assert np.all(np.isfinite(out)) and np.all(w[0] == 0)


def test_old_configs_still_load_and_new_options_serialize():
    old = Attention(8, 2).get_config()
    for key in (
        "max_relative_position",
        "relative_initializer",
        "use_rotary",
        "rotary_max_wavelength",
    ):
        old.pop(key)
    revived = Attention.from_config(old)
    assert revived.max_relative_position is None and revived.use_rotary is False
    revived(X)
    assert sorted(
        w.path.split("/")[-2] + "/" + w.path.split("/")[-1] for w in revived.weights
    ) == ["output/kernel", "query_key_value/kernel"]
    config = Attention(
        8, 2, max_relative_position=4, rotary_max_wavelength=500.0
    ).get_config()
    assert (
        config["max_relative_position"] == 4
        and config["rotary_max_wavelength"] == 500.0
    )


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 3}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_options_only_add_to_the_plain_layer(options):
    """Same projection weights: with zero tables (relative) the output is the plain
    layer's exactly; the plain layer has no position weights at all."""
    plain, layer = Attention(12, 3), Attention(12, 3, **options)
    plain(X), layer(X)
    assert [w.path.split("/")[-2:] for w in plain.weights] == [
        ["query_key_value", "kernel"],
        ["output", "kernel"],
    ]
    layer.query_key_value_dense.set_weights(plain.query_key_value_dense.get_weights())
    layer.output_dense.set_weights(plain.output_dense.get_weights())
    lens = np.array([5, 3], "int32")
    expected = _np(plain(X, valid_lens=lens))
    if "max_relative_position" in options:
        layer.relative_key.assign(np.zeros(layer.relative_key.shape, "float32"))
        layer.relative_value.assign(np.zeros(layer.relative_value.shape, "float32"))
        np.testing.assert_allclose(_np(layer(X, valid_lens=lens)), expected, atol=1e-6)
    else:
        # Rotation of position 0 is the identity: a query that sees only key 0 is
        # unchanged.
        first = np.array([1, 1], "int32")
        np.testing.assert_allclose(
            _np(layer(X, valid_lens=first))[:, 0],
            _np(plain(X, valid_lens=first))[:, 0],
            atol=1e-6,
        )
        assert not np.allclose(_np(layer(X, valid_lens=lens)), expected, atol=1e-3)


@pytest.mark.parametrize(
    "options",
    [{"max_relative_position": 2}, {"use_rotary": True}],
    ids=["relative", "rotary"],
)
def test_xla_and_attention_mask_match_eager(options):
    layer = Attention(12, 3, **options)
    rng = np.random.default_rng(1)
    explicit = rng.random((2, 5, 5)) > 0.3
    eager = _np(layer(X, attention_mask=explicit, use_causal_mask=True))
    ref, _ = numpy_reference(layer, X, explicit & np.tril(np.ones((5, 5), bool))[None])
    np.testing.assert_allclose(eager, ref, atol=1e-5)
    x_in = keras.Input((5, 12))
    m_in = keras.Input((5, 5), dtype="bool")
    model = keras.Model(
        [x_in, m_in], layer(x_in, attention_mask=m_in, use_causal_mask=True)
    )
    model.compile(jit_compile=True)
    np.testing.assert_allclose(
        model.predict([X, explicit], verbose=0), eager, atol=1e-5
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_relative_position": 0}, "max_relative_position=0"),
        ({"max_relative_position": 2.5}, "max_relative_position=2.5"),
        (
            {"num_hiddens": 6, "num_heads": 2, "use_rotary": True},
            "num_hiddens=6, num_heads=2",
        ),
        (
            {"use_rotary": True, "max_relative_position": 2},
            "use_rotary=True, max_relative_position=2",
        ),
        ({"rotary_max_wavelength": 0.0}, "rotary_max_wavelength=0.0"),
    ],
)
def test_bad_arguments(kwargs, message):
    kwargs = {"num_hiddens": 8, "num_heads": 2, **kwargs}
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        Attention(**kwargs)
