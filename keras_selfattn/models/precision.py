"""Lower-precision products for a served translator: bfloat16, and int8 weights.

`lower_precision_model` returns a float32 copy of a `Seq2Seq` in which the
product layers (`PRODUCT_LAYERS`: the dense projections and the recurrent
cells) of the chosen products (`PRODUCTS`) compute under Keras'
``"mixed_bfloat16"`` policy and give float32: their weights stay float32
variables, cast to bfloat16 at use, the product runs in bfloat16 with its
bias (and a dense layer's ``relu`` or ``tanh``), which a graph fuses into one
oneDNN product that accumulates, adds and activates in float32 and rounds
once; everything after it stays float32: a GRU cell's gates
(`_products_in_bfloat16`), the additive attention's ``tanh`` over every key,
the softmaxes, residual sums, layer norms and the search. (Element-wise work
in bfloat16 is slower on a CPU: TensorFlow converts each element.) The
output layer's product is not a Keras layer call in a search
(`TiedEmbedding` holds ``E^T`` before the loop): `output_kernel_in` gives its
kernel in the chosen precision, once per request.

int8: `quantize_int8` gives int8 weights with one float32 scale per output
channel (symmetric, ``scale = max|w| / 127``), `dequantize` turns them back
into bfloat16 at use; a served search dequantizes once per request, before its
loop (the weights are constant), so each step runs the bfloat16 product. Keras'
own ``model.quantize("int8")`` is not used: under TensorFlow's CPU kernels its
int8 product is slower than float32 (benchmarks/served_precision.py).
`int8_weights_model` gives the float32 copy whose product kernels hold the
int8-rounded values, which computes what an int8 export computes (to measure
its translations before exporting).
"""

import contextlib
import fnmatch
import functools

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_selfattn.decoding.once import variables_read_as
from keras_selfattn.models import saving

__all__ = [
    "FUSED_ACTIVATIONS",
    "PRECISIONS",
    "PRODUCTS",
    "PRODUCT_LAYERS",
    "Int8Weights",
    "dequantize",
    "int8_weights_model",
    "lower_precision_model",
    "output_kernel_in",
    "product_kernels",
    "product_layers",
    "quantize_int8",
]

PRECISIONS = ("float32", "bfloat16", "int8")

# Product group -> the layer paths (fnmatch patterns) that compute it; the
# product layers (`PRODUCT_LAYERS`) inside them compute in bfloat16.
PRODUCTS = {
    # self-attention Q/K/V and output projections, the feed-forward network
    "encoder": ("encoder_block_*",),
    # the recurrent kernels, Bahdanau's query/key projections, the attentional
    # output, and the bridge that gives the first recurrent state its dtype
    "decoder": ("bridge", "decoder"),
    "deep_output": ("deep_output",),
    # the output layer: taken by `output_kernel_in` in a search
    "output": ("target_embedding", "logits"),
}


# The layers that compute a product: a matrix product with its bias and
# activation, or a recurrent cell's step (its gates are sums of its two
# products). In a bfloat16 search each computes in bfloat16 and gives float32.
PRODUCT_LAYERS = (
    keras.layers.Dense,
    keras.layers.EinsumDense,
    keras.layers.GRUCell,
    keras.layers.LSTMCell,
)


def _check_products(products):
    products = tuple(products)
    unknown = [name for name in products if name not in PRODUCTS]
    if unknown:
        raise ValueError(
            f"products must be names among {sorted(PRODUCTS)}. Received: "
            f"products={products!r}"
        )
    return products


def product_layers(model, products):
    """``{path: layer}`` of ``model``'s layers that compute ``products``."""
    products = _check_products(products)
    patterns = [pattern for name in products for pattern in PRODUCTS[name]]
    return {
        layer.path: layer
        for layer in model._flatten_layers(include_self=False)
        if layer.path and any(fnmatch.fnmatchcase(layer.path, p) for p in patterns)
    }


def lower_precision_model(model, products):
    """A float32 copy of ``model`` whose ``products`` compute in bfloat16.

    Each product layer (`PRODUCT_LAYERS`) of the layers computing ``products``
    runs under ``"mixed_bfloat16"`` and gives float32 (`_products_in_bfloat16`);
    every other op stays float32.

    Args:
        model: a `Seq2Seq`.
        products: names from `PRODUCTS`; ``"output"`` is taken by
            `output_kernel_in` in a search, not here.

    Returns:
        The copy (``model`` is unchanged). For inference only: it is not saved.
    """
    products = _check_products(products)
    copy = saving.with_dtype_policy(model, "float32")
    if copy is model:  # already float32: a copy all the same
        copy = type(model).from_config(model.get_config())
        copy.set_weights(model.get_weights())
    for layer in product_layers(copy, [p for p in products if p != "output"]).values():
        for inner in layer._flatten_layers(include_self=True):
            if isinstance(inner, PRODUCT_LAYERS):
                _products_in_bfloat16(inner)
    return copy


def _products_in_bfloat16(layer):
    """``layer`` computes its products in bfloat16 and everything else in
    float32, giving float32 outputs (its states too, for a recurrent cell).

    The layer runs under ``"mixed_bfloat16"``, so Keras reads its inputs and
    weights in bfloat16 (a search casts the weights once, before its loop).
    Dense and GRU cells then take their products with the bias in bfloat16
    (a Dense its ``relu`` or ``tanh`` too: `FUSED_ACTIVATIONS`), the form
    TensorFlow's graph optimizer fuses into one oneDNN product; a GRU's gates
    and any other activation are applied in float32 on the product's float32
    value (TensorFlow's CPU kernels convert each element of a bfloat16
    element-wise op that is not fused). EinsumDense adds its bias in float32.
    Any other product layer (an LSTM cell, a LoRA or quantized Dense) runs its
    whole call in bfloat16 and gives float32.
    """
    layer.dtype_policy = "mixed_bfloat16"
    call = _float32_around_products(layer)
    if call is None:
        whole = layer.call

        @functools.wraps(whole)
        def call(*args, **kwargs):
            return keras.tree.map_structure(_as_float32, whole(*args, **kwargs))

    layer.call = call


def _float32_around_products(layer):
    """The call of ``layer`` with only its products in bfloat16, or None for a
    layer that has no such call here."""
    plain = not getattr(layer, "lora_enabled", False) and not getattr(
        layer, "quantization_mode", None
    )
    if isinstance(layer, keras.layers.GRUCell) and plain:
        return functools.partial(_gru_step, layer)
    if isinstance(layer, keras.layers.Dense) and plain:
        return functools.partial(_dense, layer, None)
    if isinstance(layer, keras.layers.EinsumDense) and plain:
        return functools.partial(_dense, layer, layer.equation)
    return None


def _bias_and_activation(layer, product):
    """``activation(product + bias)`` in float32 (the bias was read in bfloat16)."""
    outputs = _as_float32(product)
    if layer.bias is not None:
        outputs = ops.add(outputs, _as_float32(layer.bias))
    if layer.activation is not None:
        outputs = layer.activation(outputs)
    return outputs


# Activations a bfloat16 Dense applies inside its product: TensorFlow's graph
# optimizer fuses ``activation(matmul + bias)`` into one oneDNN product for
# these (benchmarks/RESULTS.md, "Served precision and shortlist": with the
# weights held as constants, oneDNN then keeps their packed form).
FUSED_ACTIVATIONS = (
    keras.activations.linear,
    keras.activations.relu,
    keras.activations.tanh,
)


def _read_back(inputs):
    """``inputs`` (bfloat16), or the bfloat16 tensor it was read back from.

    A bfloat16 product's float32 output that the next product reads again in
    bfloat16 (the feed-forward network's and the deep output's two products; the
    attention's query of the bridge's or the attentional output's result; Keras
    casts a ``"mixed_bfloat16"`` layer's inputs) is ``bfloat16 -> float32 ->
    bfloat16``: the same values, two casts. In a graph the second product
    takes the first one's bfloat16 result instead. Exact: every bfloat16 value
    is a float32 value.
    """
    if not isinstance(inputs, tf.Tensor) or tf.executing_eagerly():
        return inputs
    if inputs.dtype != tf.bfloat16 or inputs.op.type != "Cast":
        return inputs
    float32 = inputs.op.inputs[0]
    if float32.op.type == "Cast" and float32.op.inputs[0].dtype == tf.bfloat16:
        return float32.op.inputs[0]
    return inputs


def _dense(layer, equation, inputs, training=None):
    """A Dense (``equation`` None) or EinsumDense call, its product in bfloat16:
    a Dense with its bias and a `FUSED_ACTIVATIONS` activation in the product,
    rounded to bfloat16 once where a graph fuses them, then float32."""
    inputs = _read_back(inputs)
    if equation is not None:
        return _bias_and_activation(layer, ops.einsum(equation, inputs, layer.kernel))
    activation = layer.activation
    if activation is not None and activation not in FUSED_ACTIVATIONS:
        return _bias_and_activation(layer, ops.matmul(inputs, layer.kernel))
    rows = ops.shape(inputs)[:-1]
    if len(rows) != 1:  # one matrix of rows: the form the fusion takes
        inputs = ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))
    product = ops.matmul(inputs, layer.kernel)
    if layer.bias is not None:
        product = ops.add(product, layer.bias)
    if activation is not None:
        product = activation(product)
    if len(rows) != 1:
        product = ops.reshape(product, (*rows, ops.shape(product)[-1]))
    return _as_float32(product)


def _gru_step(cell, inputs, states, training=False):
    """One `keras.layers.GRUCell` step (inference: no dropout), its two
    products in bfloat16 with their biases, its gates in float32.

    The inputs and the previous state arrive in bfloat16 (Keras casts a
    ``"mixed_bfloat16"`` layer's inputs), which is what the products take;
    each product's bias is added in bfloat16 (a graph fuses the sum into the
    product: one rounding); the new state is computed in float32 from them.
    """
    h_prev = states[0] if keras.tree.is_nested(states) else states
    units = cell.units
    bias = cell.bias if cell.use_bias else None
    x = ops.matmul(inputs, cell.kernel)
    if bias is not None:
        x = ops.add(x, bias[0] if cell.reset_after else bias)
    x_z, x_r, x_h = ops.split(_as_float32(x), 3, axis=-1)
    recurrent_kernel = cell.recurrent_kernel
    if cell.reset_after:
        inner = ops.matmul(h_prev, recurrent_kernel)
        if bias is not None:
            inner = ops.add(inner, bias[1])
        r_z, r_r, r_h = ops.split(_as_float32(inner), 3, axis=-1)
    else:
        r_z, r_r = ops.split(
            _as_float32(ops.matmul(h_prev, recurrent_kernel[:, : 2 * units])), 2, -1
        )
    z = cell.recurrent_activation(x_z + r_z)
    r = cell.recurrent_activation(x_r + r_r)
    h_prev = _as_float32(h_prev)
    if cell.reset_after:
        r_h = r * r_h
    else:
        reset = ops.cast(r * h_prev, recurrent_kernel.dtype)
        r_h = _as_float32(ops.matmul(reset, recurrent_kernel[:, 2 * units :]))
    h = z * h_prev + (1.0 - z) * cell.activation(x_h + r_h)
    return h, [h] if keras.tree.is_nested(states) else h


def _as_float32(value):
    dtype = getattr(value, "dtype", None)
    if dtype is None or not keras.backend.is_float_dtype(dtype):
        return value
    return keras.ops.cast(value, "float32")


def quantize_int8(kernel):
    """``(int8 kernel, float32 scales)``: symmetric, one scale per output channel.

    ``kernel`` (..., out) float; ``scales`` (out,) with ``kernel ~= q * scales``.
    A column of zeros gets scale 1.
    """
    kernel = np.asarray(kernel, np.float32)
    reduce = tuple(range(kernel.ndim - 1))
    peak = np.max(np.abs(kernel), axis=reduce)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    quantized = np.clip(np.rint(kernel / scales), -127, 127).astype(np.int8)
    return quantized, scales


def dequantize(quantized, scales, dtype=tf.bfloat16):
    """``quantized * scales`` in ``dtype`` (TensorFlow ops, for a graph)."""
    scales = tf.cast(scales, tf.float32)
    return tf.cast(tf.cast(quantized, tf.float32) * scales, dtype)


def output_kernel_in(kernel, precision):
    """A float32 output kernel (D, V) in ``precision`` for the search's product.

    ``"bfloat16"`` casts; ``"int8"`` rounds to int8 with per-column scales and
    dequantizes to bfloat16 (what the export's stored int8 kernel gives back:
    gather a shortlist's columns before dequantizing, it is fewer).
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision must be one of {PRECISIONS}. Received: precision={precision!r}"
        )
    if precision == "float32":
        return tf.cast(kernel, tf.float32)
    if precision == "bfloat16":
        return tf.cast(kernel, tf.bfloat16)
    quantized, scales = quantize_int8(np.asarray(kernel))
    return dequantize(quantized, scales)


def _product_kernels(layer):
    """The product weights of ``layer`` (kernels and embeddings, no biases)."""
    names = ("kernel", "recurrent_kernel", "embeddings")
    return [w for w in layer.weights if w.path.rsplit("/", 1)[-1] in names]


def product_kernels(model, products):
    """The product weights (kernels, embeddings) of ``model``'s ``products``,
    each once."""
    found = {}
    for layer in product_layers(model, products).values():
        for weight in _product_kernels(layer):
            found.setdefault(id(weight), weight)
    return list(found.values())


def _quantized(weight):
    """``(int8, scales, rows)`` of a weight: an embedding's output channels are
    its rows (the tied output layer's), a kernel's its last axis."""
    value = keras.ops.convert_to_numpy(weight)
    rows = weight.path.endswith("embeddings")
    quantized, scales = quantize_int8(value.T if rows else value)
    return (quantized.T if rows else quantized), scales, rows


class Int8Weights(tf.Module):
    """A model's product kernels as int8 with per-channel float32 scales.

    What an int8 export stores in place of the float32 kernels (half the
    bytes of bfloat16): a search reads each kernel through `held`, which
    dequantizes them all once per request, before its loop, to float32 values
    (the layers that compute in bfloat16 cast them once more, before the loop:
    `keras_selfattn.decoding.once.weights_cast_once`). The values are
    `int8_weights_model`'s, so its translations are the export's.

    Args:
        model: a `Seq2Seq`.
        products: names from `PRODUCTS`.
    """

    def __init__(self, model, products):
        super().__init__(name="int8_weights")
        self._variables_of = product_kernels(model, _check_products(products))
        self.products = tuple(products)
        self.int8 = []
        self.scales = []
        self._rows = []
        for weight in self._variables_of:
            quantized, scales, rows = _quantized(weight)
            name = weight.path.replace("/", "__")
            self.int8.append(tf.Variable(quantized, trainable=False, name=name))
            self.scales.append(
                tf.Variable(scales, trainable=False, name=name + "__scales")
            )
            self._rows.append(rows)

    @property
    def paths(self):
        """The model weights held as int8, by path."""
        return [weight.path for weight in self._variables_of]

    @property
    def nbytes(self):
        """The bytes of the int8 weights and their scales."""
        return sum(int(v.shape.num_elements()) for v in self.int8) + 4 * sum(
            int(v.shape.num_elements()) for v in self.scales
        )

    @contextlib.contextmanager
    def held(self):
        """Inside, the model's product kernels read as their int8 values
        dequantized here, once (graph code: once per request)."""
        pairs = []
        for weight, quantized, scales, rows in zip(
            self._variables_of, self.int8, self.scales, self._rows, strict=True
        ):
            if rows:  # per-row scales
                value = tf.cast(quantized, tf.float32) * scales[:, None]
            else:
                value = dequantize(quantized, scales, tf.float32)
            pairs.append((weight, value))
        with variables_read_as(pairs):
            yield


def int8_weights_model(model, products):
    """`lower_precision_model`, its ``products``' kernels rounded through int8.

    The copy computes what an int8 export computes: each kernel's values are
    those of `quantize_int8` then `dequantize` (`Int8Weights.held`), products
    in bfloat16.
    """
    copy = lower_precision_model(model, products)
    for weight in product_kernels(copy, products):
        quantized, scales, rows = _quantized(weight)
        scales = scales[:, None] if rows else scales
        weight.assign(quantized.astype(np.float32) * scales)
    return copy
