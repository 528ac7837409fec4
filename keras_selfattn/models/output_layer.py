"""A search's output layer: a request's vocabulary shortlist, products in bfloat16.

`search_output_layer` is the context a served or translating search runs in:
before the loop, once per request, it takes the output layer's columns for the
request's shortlist (`shortlist_ops.shortlist_ids` of its source ids) in the
product's precision; at each step the model's `Seq2Seq.decode_step` forms its
logits over those columns only (`Seq2Seq.search_output_layer`) and spreads them
over the vocabulary, ``_NOT_KEPT`` elsewhere. The searches (greedy, beam) read
full-width logits as always, so a search over the shortlist is exact on what it
keeps: its argmax is the full argmax whenever that one is kept. TensorFlow ops.
"""

import contextlib

import tensorflow as tf

from keras_selfattn.models import precision as precision_lib
from keras_selfattn.models import shortlist_ops

__all__ = [
    "LOWER_PRECISION_PRODUCTS",
    "SEARCH_PRECISIONS",
    "check_search_options",
    "search_logits",
    "search_output_layer",
]

SEARCH_PRECISIONS = ("float32", "bfloat16")
# The product groups (`precision.PRODUCTS`) a bfloat16 search computes in
# bfloat16: all of them (each was faster in bfloat16 on a CPU with avx512_bf16,
# benchmarks/RESULTS.md "Served precision and shortlist"); the output layer's
# through `search_logits`, the others as Keras layers under mixed_bfloat16.
LOWER_PRECISION_PRODUCTS = ("encoder", "decoder", "deep_output", "output")

# The logit of a piece the shortlist leaves out: no softmax weight, never chosen
# (the searches' own "minus infinity" is -1e9; this stays finite in sums).
_NOT_KEPT = -1e9


def check_search_options(precision="float32", quantize=None):
    """``(precision, quantize)`` checked; a one-line ValueError naming the bad one.

    ``quantize``: None only; int8 weights in a served search are not built yet.
    """
    if precision not in SEARCH_PRECISIONS:
        raise ValueError(
            f"precision must be one of {SEARCH_PRECISIONS}. Received: "
            f"precision={precision!r}"
        )
    if quantize is not None:
        if quantize == "int8":
            raise ValueError(
                "quantize='int8' is not available yet (int8 weights in the search); "
                "use precision='bfloat16'. Received: quantize='int8'"
            )
        raise ValueError(f"quantize must be None. Received: quantize={quantize!r}")
    return precision, quantize


def _spread(ids, vocab_size):
    """(V,) int32: each vocabulary id's position in ``ids``, ``len(ids)`` if absent."""
    size = tf.shape(ids)[0]
    return tf.scatter_nd(ids[:, None], tf.range(size) - size, [vocab_size]) + size


def search_logits(model, source_ids=None, shortlist=None, precision="float32"):
    """``logits_of(decoder_output)`` for a search over ``source_ids``.

    Args:
        model: a `Seq2Seq`.
        source_ids: int (B, T) the request's source ids (for the shortlist).
        shortlist: None, or ``(candidates, always)`` int32 arrays
            (`keras_selfattn.text.shortlist.ShortlistTable`'s ``candidates`` and
            ``always``).
        precision: the output product's, ``"float32"`` or ``"bfloat16"``.

    Returns:
        A function of (B, D) decoder outputs -> float32 (B, V) logits.
    """
    check_search_options(precision)
    kernel, bias = shortlist_ops.output_layer_weights(model)
    vocab_size = model.target_vocab_size
    positions = None
    if shortlist is not None:
        candidates, always = shortlist
        ids = shortlist_ops.shortlist_ids(source_ids, candidates, always, vocab_size)
        kernel, bias = shortlist_ops.gather_output_layer(kernel, bias, ids)
        positions = _spread(ids, vocab_size)
    kernel = precision_lib.output_kernel_in(kernel, precision)

    def logits_of(hidden):
        logits = shortlist_ops.shortlist_logits(hidden, kernel, bias, model.deep_output)
        if positions is None:
            return logits
        not_kept = tf.fill([tf.shape(logits)[0], 1], tf.constant(_NOT_KEPT))
        return tf.gather(tf.concat([logits, not_kept], axis=1), positions, axis=1)

    return logits_of


@contextlib.contextmanager
def search_output_layer(model, source_ids=None, shortlist=None, precision="float32"):
    """A context: the searches built inside use `search_logits`' output layer.

    Nothing changes with neither a shortlist nor a lower precision.
    """
    if shortlist is None and precision == "float32":
        yield
        return
    logits_of = search_logits(model, source_ids, shortlist, precision)
    with model.search_output_layer(logits_of):
        yield
