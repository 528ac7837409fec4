"""A served graph holds the weights its searches cast as constants
(`once.weights_as_constants`): the loops read constants of the cast values,
and the tokens are those of the cast tensors; int8 weights read dequantized
stay tensors; a float32 model has nothing to hold; above the size limit the
weights stay tensors."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.decoding import beam_search_decode, greedy_decode, once
from keras_selfattn.models import ModelConfig, build_seq2seq, precision
from tests.models import test_precision
from tests.test_decoding import SOURCE

SIZES = {**test_precision.SIZES, "dropout": 0.0}
PRODUCTS = ["encoder", "decoder", "deep_output"]


@pytest.fixture(scope="module")
def model():
    """A tiny model whose output layer is sharpened (as tests/test_decoding.py's),
    so that no two hypotheses are within bfloat16 rounding of each other: the
    tokens of two bfloat16 searches that round differently are then the same."""
    keras.utils.set_random_seed(3)  # set before the per-test seed: a module fixture
    config = ModelConfig(**SIZES, tie_embeddings=False, deep_output_hiddens=24)
    model = build_seq2seq(12, 11, config, seed=3)
    kernel, bias = model.logits_dense.get_weights()
    model.logits_dense.set_weights([kernel * 6.0, bias])
    return model


@pytest.fixture(scope="module")
def bfloat16_copy(model):
    return precision.lower_precision_model(model, PRODUCTS)


def _traced(model, constants, held=None):
    """Greedy and beam searches of ``model`` traced as a served graph traces
    them; with ``held``, inside that context (int8 weights)."""

    def served(search):
        def function(source):
            with (
                held() if held is not None else contextlib.nullcontext(),
                once.weights_as_constants() if constants else contextlib.nullcontext(),
            ):
                return search(source)

        return tf.function(function)

    return [
        served(lambda s: greedy_decode(model, s, 6)),
        served(lambda s: beam_search_decode(model, s, 3, 6)),
    ]


def _constant_shapes(function, dtype):
    """The shapes of the ``dtype`` constants of two axes or more in the
    loops (the nested functions) of ``function``'s graph."""
    graph = function.get_concrete_function(tf.constant(SOURCE)).graph
    shapes = set()
    for nested in graph.as_graph_def().library.function:
        for node in nested.node_def:
            if node.op == "Const" and node.attr["dtype"].type == dtype.as_datatype_enum:
                dims = tuple(d.size for d in node.attr["value"].tensor.tensor_shape.dim)
                if len(dims) >= 2:
                    shapes.add(dims)
    return shapes


def _results(functions):
    return [f(tf.constant(SOURCE)) for f in functions]


# bfloat16's relative rounding step (8 bits of mantissa).
BFLOAT16_STEP = 2.0**-8


def _assert_same(ours, reference):
    """The same tokens; the scores equal to bfloat16 rounding. The two graphs
    round differently (a graph optimizer folds a constant's slices and fuses
    what it can around the products: a bfloat16 sum is rounded once or twice),
    a score sums six steps' log-probabilities, and the sharpened output layer
    scales each step's difference by 6: up to about 3% apart, measured."""
    for mine, theirs in zip(ours, reference, strict=True):
        for key in ("ids", "lengths"):
            np.testing.assert_array_equal(mine[key].numpy(), theirs[key].numpy())
        np.testing.assert_allclose(
            mine["scores"].numpy(),
            theirs["scores"].numpy(),
            rtol=8 * BFLOAT16_STEP,
            atol=1e-3,
        )


# Slow: every search loop traced (8 CPU-s).
@pytest.mark.slow
def test_the_loops_read_the_cast_kernels_as_constants(bfloat16_copy):
    kernels = {
        tuple(w.shape)
        for w in precision.product_kernels(bfloat16_copy, ["decoder", "deep_output"])
    }
    with_constants = _traced(bfloat16_copy, constants=True)
    without = _traced(bfloat16_copy, constants=False)
    for function in with_constants:
        assert kernels <= _constant_shapes(function, tf.bfloat16), kernels
    for function in without:
        assert not kernels & _constant_shapes(function, tf.bfloat16)
    _assert_same(_results(with_constants), _results(without))


# Slow: the searches traced with int8 weights (about 10 CPU-s).
@pytest.mark.slow
def test_int8_weights_read_dequantized_stay_tensors(model):
    """An int8 search holds its kernels dequantized per request: those reads are
    not replaced by constants of the float32 variables."""
    copy = precision.lower_precision_model(model, PRODUCTS)
    int8 = precision.Int8Weights(copy, PRODUCTS)
    with_constants = _traced(copy, constants=True, held=int8.held)
    without = _traced(copy, constants=False, held=int8.held)
    _assert_same(_results(with_constants), _results(without))
    kernels = {tuple(w.shape) for w in precision.product_kernels(copy, PRODUCTS)}
    for function in with_constants:
        assert not kernels & _constant_shapes(function, tf.bfloat16)
    # the int8 search differs from the bfloat16 one: the int8 values are read
    plain = _results(_traced(copy, constants=True))
    assert any(
        not np.array_equal(a["scores"].numpy(), b["scores"].numpy())
        for a, b in zip(plain, _results(with_constants), strict=True)
    )


def test_a_float32_model_has_no_cast_weights_to_hold(model):
    for function in _traced(model, constants=True):
        assert not _constant_shapes(function, tf.bfloat16)
        kernel = tuple(model.deep_output.inner.kernel.shape)
        assert kernel not in _constant_shapes(function, tf.float32)


def test_above_the_size_limit_the_weights_stay_tensors(bfloat16_copy, monkeypatch):
    monkeypatch.setattr(once, "CONSTANT_WEIGHTS_BYTES", 0)
    kernel = tuple(bfloat16_copy.deep_output.inner.kernel.shape)
    for function in _traced(bfloat16_copy, constants=True):
        assert kernel not in _constant_shapes(function, tf.bfloat16)
