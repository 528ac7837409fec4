"""Lower-precision products: the product layers of the chosen groups compute in
bfloat16, everything else (element-wise work, softmaxes, the search) in
float32; int8 weights with per-channel scales against a NumPy reference; bad
names refused in one line."""

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.decoding import beam_search_decode, greedy_decode
from keras_selfattn.models import ModelConfig, build_seq2seq, precision

ALL_BUT_OUTPUT = [name for name in precision.PRODUCTS if name != "output"]


# A model small enough to build in a moment, every part present.
SIZES = {
    "num_hiddens": 16,
    "num_heads": 2,
    "num_layers": 1,
    "ffn_hiddens": 32,
    "decoder_units": 16,
    "embedding_dim": 16,
}


@pytest.fixture(scope="module")
def model():
    config = ModelConfig(
        **SIZES, tie_embeddings=True, deep_output_hiddens=24, attentional_output=True
    )
    return build_seq2seq(30, 40, config, seed=1)


SOURCE = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], np.int32)


def test_product_layers_in_bfloat16_the_rest_float32(model):
    copy = precision.lower_precision_model(model, ["decoder", "deep_output"])
    chosen = precision.product_layers(copy, ["decoder", "deep_output"])
    assert sorted(chosen) == ["bridge", "decoder", "deep_output"]
    inside = [
        layer.path
        for path in chosen
        for layer in chosen[path]._flatten_layers(include_self=True)
        if isinstance(layer, precision.PRODUCT_LAYERS)
    ]
    for path in ("decoder/cell/gru_cell_0", "deep_output/inner", "bridge/state_0"):
        assert path in inside
    assert "decoder/cell/attention/query_dense" in inside
    for layer in copy._flatten_layers(include_self=False):
        expected = "bfloat16" if layer.path in inside else "float32"
        assert layer.compute_dtype == expected, layer.path
        for weight in layer.weights:  # variables stay float32
            assert weight.dtype == "float32"
    assert copy.decoder.compute_dtype == "float32"  # the layers around them
    assert copy.encoder_blocks[0].ffn_inner.compute_dtype == "float32"  # not chosen
    assert model.deep_output.inner.compute_dtype == "float32"  # original unchanged
    np.testing.assert_array_equal(
        copy.deep_output.inner.kernel.numpy(), model.deep_output.inner.kernel.numpy()
    )
    # A product layer gives float32 (its product ran in bfloat16).
    x = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
    out = copy.deep_output.inner(x)
    assert out.dtype == "float32"
    rounded = tf.cast(tf.cast(x, tf.bfloat16), tf.float32) @ tf.cast(
        tf.cast(copy.deep_output.inner.kernel, tf.bfloat16), tf.float32
    )
    np.testing.assert_allclose(
        out, tf.nn.relu(rounded + copy.deep_output.inner.bias), atol=0.02
    )
    # rows in more axes: one matrix of rows, the same values in their shape
    stacked = copy.deep_output.inner(np.stack([x, x[::-1]]))
    assert stacked.shape == (2, 3, 24) and stacked.dtype == "float32"
    np.testing.assert_array_equal(stacked[0], out)
    np.testing.assert_array_equal(stacked[1], out.numpy()[::-1])


def test_a_decoder_step_runs_its_element_wise_work_in_float32(model):
    """Only the product layers compute in bfloat16: the additive attention's
    tanh over the keys, its softmax, the layer norm and the step's outputs and
    states are float32 ops."""
    copy = precision.lower_precision_model(model, ALL_BUT_OUTPUT)
    state = copy.initial_decoder_state(SOURCE)
    assert all(s.dtype == tf.float32 for s in state)
    step = tf.function(copy.decode_step, autograph=False)
    graph = step.get_concrete_function(tf.constant([1, 1]), state).graph
    kinds = {}
    for op in graph.get_operations():
        if op.type in (
            "Tanh",
            "Sigmoid",
            "Softmax",
            "AddV2",
            "Mean",
            "MatMul",
            "BiasAdd",
        ):
            kinds[op.name] = (op.type, op.outputs[0].dtype.name)
    element_wise = {k: v for k, v in kinds.items() if v[0] != "MatMul"}
    attention = {k: v for k, v in element_wise.items() if k.startswith("attention_")}
    assert attention and {v[1] for v in attention.values()} == {"float32"}, attention
    norm = {k: v for k, v in element_wise.items() if "/norm" in k}
    assert norm and {v[1] for v in norm.values()} == {"float32"}, norm
    # the recurrent cell: its two products with their biases in bfloat16 (the
    # form a graph fuses into one product), its gates in float32
    gru = [v for k, v in kinds.items() if k.startswith("gru_cell")]
    assert sorted(t for t, d in gru if d == "bfloat16") == [
        "BiasAdd",
        "BiasAdd",
        "MatMul",
        "MatMul",
    ], gru
    assert {"Sigmoid", "Tanh", "AddV2"} <= {t for t, d in gru if d == "float32"}, gru
    # every bfloat16 op is a product, its bias or a dense layer's relu or tanh,
    # each fed by the one before it
    ops_by_name = {op.name: op for op in graph.get_operations()}
    after = {"BiasAdd": {"MatMul"}, "Relu": {"BiasAdd"}, "Tanh": {"BiasAdd"}}
    for op in graph.get_operations():
        if op.outputs and op.outputs[0].dtype == tf.bfloat16 and op.type in after:
            source = ops_by_name[op.inputs[0].op.name]
            assert source.type in after[op.type], (op.name, source.type)
    logits, states = step(tf.constant([1, 1]), state)
    assert logits.dtype == tf.float32
    assert all(s.dtype == tf.float32 for s in states)


def _round_trips(graph):
    """The graph's ``bfloat16 -> float32 -> bfloat16`` cast pairs that an op
    reads (Keras casts a layer's inputs before its call; one left unread is
    pruned)."""
    return [
        op.name
        for op in graph.get_operations()
        if op.type == "Cast"
        and op.outputs[0].consumers()
        and op.outputs[0].dtype == tf.bfloat16
        and op.inputs[0].op.type == "Cast"
        and op.inputs[0].op.inputs[0].dtype == tf.bfloat16
    ]


def test_a_product_reading_a_product_takes_its_bfloat16_result(model, monkeypatch):
    """The second product of the feed-forward network and of the deep output
    reads the first one's bfloat16 result, not its float32 copy cast back: no
    round trip is left in the encoder or a decoder step, and the values are
    those of the graph with the two casts, bit for bit."""
    copy = precision.lower_precision_model(model, ALL_BUT_OUTPUT)
    tokens = tf.constant([1, 1])

    def traced():
        encode = tf.function(copy.initial_decoder_state, autograph=False)
        state = encode(tf.constant(SOURCE))
        step = tf.function(copy.decode_step, autograph=False)
        logits, states = step(tokens, state)
        graphs = [
            encode.get_concrete_function(tf.constant(SOURCE)).graph,
            step.get_concrete_function(tokens, state).graph,
        ]
        return graphs, [t.numpy() for t in (*state, logits, *states)]

    graphs, values = traced()
    assert [_round_trips(g) for g in graphs] == [[], []]
    monkeypatch.setattr(precision, "_read_back", lambda inputs: inputs)
    graphs_with_casts, values_with_casts = traced()
    # the check above can fail: without the read-back both graphs hold round trips
    assert all(_round_trips(g) for g in graphs_with_casts)
    assert len(values) == len(values_with_casts)
    for value, with_casts in zip(values, values_with_casts, strict=True):
        np.testing.assert_array_equal(value, with_casts)


def _bf16(array):
    """``array`` rounded to bfloat16, as float32 (TensorFlow's rounding)."""
    return tf.cast(tf.cast(array, tf.bfloat16), tf.float32).numpy()


def _bf16_product(a, b):
    """``a @ b`` as this host's TensorFlow computes it in bfloat16, as float32.

    With bfloat16 units (avx512_bf16, amx_bf16) oneDNN accumulates in float32
    and rounds once; without them TensorFlow's emulated product also rounds its
    partial sums, up to a few bfloat16 steps away. The product is TensorFlow's
    either way; what the tests check is what the layers do around it."""
    product = tf.matmul(tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16))
    return tf.cast(product, tf.float32).numpy()


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("reset_after", [True, False])
def test_gru_step_products_in_bfloat16_gates_in_float32(reset_after):
    """A GRU cell's step in a bfloat16 copy against NumPy: the two products of
    bfloat16-rounded inputs, state and kernels, each rounded to bfloat16 and
    its bias (read in bfloat16) added in bfloat16 (run eagerly: a graph fuses
    the sum into the product and rounds once), the gates in float32. The
    products are TensorFlow's own in bfloat16 (`_bf16_product`)."""
    import keras

    cell = keras.layers.GRUCell(8, reset_after=reset_after, seed=4)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6)).astype(np.float32)
    h = rng.normal(size=(3, 8)).astype(np.float32)
    cell.build((3, 6))
    cell.bias.assign(rng.normal(size=cell.bias.shape).astype(np.float32))
    precision._products_in_bfloat16(cell)
    got, state = cell(x, [h])
    assert got.dtype == "float32" and state[0].dtype == "float32"
    kernel, recurrent = _bf16(cell.kernel.numpy()), _bf16(cell.recurrent_kernel.numpy())
    bias = _bf16(cell.bias.numpy())
    xb, hb = _bf16(x), _bf16(h)
    if reset_after:
        gates_x = _bf16(_bf16_product(xb, kernel) + bias[0])
        gates_h = _bf16(_bf16_product(hb, recurrent) + bias[1])
        z = _sigmoid(gates_x[:, :8] + gates_h[:, :8])
        r = _sigmoid(gates_x[:, 8:16] + gates_h[:, 8:16])
        candidate = np.tanh(gates_x[:, 16:] + r * gates_h[:, 16:])
    else:
        gates_x = _bf16(_bf16_product(xb, kernel) + bias)
        gates_h = _bf16_product(hb, recurrent[:, :16])
        z = _sigmoid(gates_x[:, :8] + gates_h[:, :8])
        r = _sigmoid(gates_x[:, 8:16] + gates_h[:, 8:])
        candidate = np.tanh(gates_x[:, 16:] + _bf16_product(r * hb, recurrent[:, 16:]))
    expected = z * hb + (1 - z) * candidate
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    full = keras.layers.GRUCell(8, reset_after=reset_after)
    full.build((3, 6))
    full.set_weights([w.numpy() for w in cell.weights])
    np.testing.assert_allclose(got, full(x, [h])[0], atol=0.05)  # close to float32


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_searches_run_with_float32_scores(model, search):
    copy = precision.lower_precision_model(model, ALL_BUT_OUTPUT)
    if search == "greedy":
        ours, full = (greedy_decode(m, SOURCE, 6) for m in (copy, model))
    else:
        ours, full = (beam_search_decode(m, SOURCE, 2, 6) for m in (copy, model))
    assert ours["scores"].dtype == tf.float32
    assert ours["ids"].shape[0] == 2
    # an untrained model's scores are close to uniform: bfloat16 moves them little
    np.testing.assert_allclose(ours["scores"], full["scores"], rtol=0.05, atol=0.05)


def test_step_logits_close_to_float32(model):
    copy = precision.lower_precision_model(model, ALL_BUT_OUTPUT)
    expected = model({"source": SOURCE, "target_in": SOURCE}, training=False).numpy()
    got = copy({"source": SOURCE, "target_in": SOURCE}, training=False).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=0.05)
    assert not np.array_equal(got, expected)  # bfloat16 did run


def test_quantize_int8_against_numpy():
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(7, 5)).astype(np.float32)
    kernel[:, 2] = 0.0
    q, scales = precision.quantize_int8(kernel)
    assert q.dtype == np.int8 and scales.shape == (5,)
    peak = np.abs(kernel).max(axis=0)
    np.testing.assert_allclose(scales[[0, 1, 3, 4]], peak[[0, 1, 3, 4]] / 127)
    assert scales[2] == 1.0 and not q[:, 2].any()
    assert np.abs(q).max() == 127
    back = precision.dequantize(q, scales, tf.float32).numpy()
    assert np.all(np.abs(back - kernel) <= scales / 2 + 1e-7)
    assert precision.dequantize(q, scales).dtype == tf.bfloat16


def test_int8_weights_model(model):
    copy = precision.int8_weights_model(model, ["deep_output", "output"])
    before = model.deep_output.inner.kernel.numpy()
    after = copy.deep_output.inner.kernel.numpy()
    scales = np.abs(before).max(axis=0) / 127
    assert np.all(np.abs(after - before) <= scales / 2 + 1e-6)
    assert len(np.unique(np.round(after / scales))) <= 255
    emb_before = model.target_embedding.embeddings.numpy()
    emb_after = copy.target_embedding.embeddings.numpy()
    row_scales = np.abs(emb_before).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(emb_after - emb_before) <= row_scales / 2 + 1e-6)
    # a product not named keeps its weights
    np.testing.assert_array_equal(
        copy.encoder_blocks[0].ffn_inner.kernel.numpy(),
        model.encoder_blocks[0].ffn_inner.kernel.numpy(),
    )


def test_output_kernel_in():
    kernel = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    assert precision.output_kernel_in(kernel, "float32").dtype == tf.float32
    assert precision.output_kernel_in(kernel, "bfloat16").dtype == tf.bfloat16
    int8 = precision.output_kernel_in(kernel, "int8")
    assert int8.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(int8, tf.float32), kernel, atol=0.05)


def test_bad_names(model):
    with pytest.raises(ValueError, match="products=\\('softmax',\\)") as caught:
        precision.lower_precision_model(model, ["softmax"])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="precision='int4'"):
        precision.output_kernel_in(np.zeros((2, 2), np.float32), "int4")


def test_int8_weights_hold_what_the_int8_model_computes(model):
    """`Int8Weights`: int8 and per-channel scales (NumPy reference); inside
    `held`, the model reads the dequantized kernels and computes what
    `int8_weights_model`'s copy computes; outside, its own float32 weights."""
    products = ["encoder", "decoder", "deep_output", "output"]
    int8 = precision.Int8Weights(model, products)
    kernel = model.deep_output.inner.kernel.numpy()
    at = int8.paths.index(model.deep_output.inner.kernel.path)
    q, scales = int8.int8[at].numpy(), int8.scales[at].numpy()
    assert q.dtype == np.int8 and q.shape == kernel.shape
    np.testing.assert_allclose(scales, np.abs(kernel).max(axis=0) / 127, rtol=1e-6)
    embeddings = model.target_embedding.embeddings.numpy()
    at = int8.paths.index(model.target_embedding.embeddings.path)
    np.testing.assert_allclose(
        int8.scales[at].numpy(), np.abs(embeddings).max(axis=1) / 127, rtol=1e-6
    )
    assert len(set(int8.paths)) == len(int8.paths)  # each weight once
    assert int8.nbytes == sum(v.numpy().size for v in int8.int8) + 4 * sum(
        v.numpy().size for v in int8.scales
    )
    inputs = {"source": SOURCE, "target_in": SOURCE}
    reference = precision.int8_weights_model(model, products)
    for layer in reference._flatten_layers(include_self=False):
        layer.dtype_policy = "float32"  # the held values, computed in float32
    expected = reference(inputs, training=False).numpy()
    with int8.held():
        got = model(inputs, training=False).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    own = model(inputs, training=False).numpy()
    assert not np.allclose(own, got, atol=1e-6)  # outside: the float32 weights


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        {"rnn_type": "lstm", "decoder_layers": 2, "attention_heads": 2},
        {"attention_score": "general", "position": "relative", "decoder_layers": 2},
        {"attentional_output": False, "decoder_residual": False},
    ],
    ids=["lstm_two_layers_two_heads", "general_relative", "plain_output"],
)
def test_bfloat16_products_in_other_architectures(options):
    """Every decoder and encoder the configuration offers runs with its product
    layers in bfloat16: the teacher-forced logits and both searches give
    float32 close to the float32 model's."""
    model = build_seq2seq(30, 40, ModelConfig(**SIZES, **options), seed=2)
    copy = precision.lower_precision_model(model, ALL_BUT_OUTPUT)
    assert any(layer.compute_dtype == "bfloat16" for layer in copy._flatten_layers())
    inputs = {"source": SOURCE, "target_in": SOURCE}
    got = copy(inputs, training=False).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, model(inputs, training=False), atol=0.05)
    for ours, full in (
        (greedy_decode(copy, SOURCE, 6), greedy_decode(model, SOURCE, 6)),
        (
            beam_search_decode(copy, SOURCE, 2, 6),
            beam_search_decode(model, SOURCE, 2, 6),
        ),
    ):
        assert ours["scores"].dtype == tf.float32
        np.testing.assert_allclose(ours["scores"], full["scores"], rtol=0.05, atol=0.05)
