"""Values a decoding loop computes once, before it, and reads at every step.

One mechanism: `holding` puts values in a per-thread store for the time a loop
is built, keyed by the object they belong to and a name; `held` reads them back
(None outside). The model's variables read in a compute dtype other than their
own (a mixed policy) are held cast (`weights_cast_once`): a
``keras.StatelessScope`` returns them for every read inside the loop, as the
JAX path maps values onto variables. A layer holds what it derives from its
weights the same way (`TiedEmbedding.output_kernel_held`). A graph built to be
served holds them as constants instead (`weights_as_constants`).
"""

import contextlib
import threading

import keras
import numpy as np
from keras import ops

from keras_selfattn.decoding.keras_internals import variable_reads
from keras_selfattn.decoding.tensors import on_tensorflow

_HELD = threading.local()


def held(owner, name):
    """The value held for ``owner``'s ``name`` by an enclosing `holding`, or None."""
    return getattr(_HELD, "values", {}).get((id(owner), name))


@contextlib.contextmanager
def holding(entries):
    """Inside, `held(owner, name)` returns ``value`` for each of the
    ``(owner, name, value)`` ``entries``.

    Each owner outlives the context (the caller holds it), so its id is a safe key.
    """
    previous = getattr(_HELD, "values", {})
    added = {(id(owner), name): value for owner, name, value in entries}
    _HELD.values = {**previous, **added}
    try:
        yield
    finally:
        _HELD.values = previous


class _HeldVariables(keras.StatelessScope):
    """A variable's read returns the value held for it (`holding` its
    ``"value"``; a NumPy array becomes a graph constant where it is read),
    else what an enclosing scope gives."""

    def get_current_value(self, variable):
        value = super().get_current_value(variable)  # an update made inside
        if value is None:
            value = held(variable, "value")
            if isinstance(value, np.ndarray):
                value = ops.convert_to_tensor(value)
        if value is None and self.original_scope is not None:
            value = self.original_scope.get_current_value(variable)  # nested
        return value


def _compute_dtypes(model):
    """``(variable, dtype)`` of the float variables that every layer owning them
    reads in one compute dtype other than their own (autocast, a mixed policy)."""
    seen = {}
    for variable, own, reads in variable_reads(model):
        seen.setdefault(id(variable), (variable, own, set()))[2].add(reads)
    return [
        (variable, next(iter(reads)))
        for variable, own, reads in seen.values()
        if len(reads) == 1 and own not in reads
    ]


# Above this many bytes of cast weights a served graph reads them as tensors,
# not constants: a GraphDef holds at most 2 GB.
CONSTANT_WEIGHTS_BYTES = 256 * 2**20


@contextlib.contextmanager
def weights_as_constants():
    """Inside, graphs built for serving hold the weights that
    `weights_cast_once` casts as constants, not as tensors cast per request.

    For a served SavedModel only (its weights never change): oneDNN keeps the
    packed form of a constant product kernel from one call to the next, where
    it repacks a tensor's at every step (benchmarks/RESULTS.md, "Served
    precision and shortlist"). The values are the same; the scores equal to
    bfloat16 rounding (the graph optimizer folds and fuses what it can around
    a constant). Not for a graph a caller may reuse after changing the model's
    weights.
    """
    previous = getattr(_HELD, "constants", False)
    _HELD.constants = True
    try:
        yield
    finally:
        _HELD.constants = previous


def _cast_value(variable, dtype, constants):
    """``variable`` read in ``dtype``: a tensor, or with ``constants`` a NumPy
    array (its value read now; `_HeldVariables` makes it a constant)."""
    if not constants or held(variable, "value") is not None:
        return ops.cast(variable.value, dtype)  # held already: int8 weights
    import tensorflow as tf

    with tf.init_scope():  # outside the graph being built: the variable's value
        return ops.convert_to_numpy(ops.cast(variable.value, dtype))


@contextlib.contextmanager
def weights_cast_once(model):
    """TensorFlow: the model's variables read as values cast before the loop.

    Under a mixed policy (``mixed_bfloat16``, ``mixed_float16``) a layer reads
    its float32 variables cast to its compute dtype at every call, so inside
    the decoding loop every step would cast every decoder weight again (the
    output layer's embedding the largest). Here each such variable is read and
    cast once; the loop takes the cast tensor as an invariant (inside
    `weights_as_constants`, a constant of the cast value). The values are those
    the layers cast, so the results are the same bit for bit
    (tests/test_decoding_graphs.py; as constants, the tokens:
    tests/test_constant_weights.py).
    """
    casts = _compute_dtypes(model) if on_tensorflow() else []
    if not casts:
        yield
        return
    constants = getattr(_HELD, "constants", False) and (
        sum(np.prod(v.shape) * np.dtype(d).itemsize for v, d in casts)
        <= CONSTANT_WEIGHTS_BYTES
    )
    entries = [(v, "value", _cast_value(v, d, constants)) for v, d in casts]
    with holding(entries), _HeldVariables():
        yield


@contextlib.contextmanager
def variables_read_as(pairs):
    """Inside, each ``(variable, value)`` of ``pairs`` reads as ``value`` (a
    tensor computed once, outside the loops built inside): the int8 weights of
    a served search, dequantized once per request
    (`keras_selfattn.models.precision.Int8Weights`)."""
    entries = [(variable, "value", value) for variable, value in pairs]
    with holding(entries), _HeldVariables():
        yield


@contextlib.contextmanager
def before_the_loop(model):
    """The context a TensorFlow decoding loop is built in: its weights cast
    once (`weights_cast_once`), then what the model computes once for its
    steps (its optional ``decoding_invariants()``, `Seq2Seq.decoding_invariants`),
    from those cast weights. Nothing on JAX, whose XLA program hoists by itself."""
    invariants = getattr(model, "decoding_invariants", None)
    if invariants is None or not on_tensorflow():
        invariants = contextlib.nullcontext
    with weights_cast_once(model), invariants():
        yield
