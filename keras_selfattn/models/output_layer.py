"""A search's output layer: a request's vocabulary shortlist, products in bfloat16.

`OutputLayer` is the output spec a served or translating search takes
(`keras_selfattn.decoding.decode`'s ``output``): bound to a request's source ids
before the loop, once, it takes the output layer's columns for the request's
shortlist (`shortlist_ops.shortlist_ids` of its source ids) in the product's
precision, and the search forms each step's logits over those columns only:
the log-softmax and the argmax or top-k run over the kept pieces (about a
third of the vocabulary on Multi30k), and the chosen positions are mapped back
to vocabulary ids (a gather of the shortlist's ids) for the tokens fed back,
the outputs and the end test. Exact on what it keeps: a step's argmax is the
full argmax whenever that one is kept (log-probabilities normalize over the
kept pieces only). TensorFlow ops.
"""

import dataclasses
from typing import Any

import numpy as np

from keras_selfattn.decoding.output import SearchLogits
from keras_selfattn.models import precision as precision_lib
from keras_selfattn.models import shortlist_ops
from keras_selfattn.reserved_ids import PAD_ID

__all__ = [
    "INT8_PRODUCTS",
    "LOWER_PRECISION_PRODUCTS",
    "QUANTIZATIONS",
    "SEARCH_PRECISIONS",
    "OutputLayer",
    "check_search_options",
    "search_output",
]

SEARCH_PRECISIONS = ("float32", "bfloat16")
# Weights a search may hold in fewer bits (`precision.Int8Weights`).
QUANTIZATIONS = ("int8",)
# The product groups (`precision.PRODUCTS`) a bfloat16 search computes in
# bfloat16: all of them (each was faster in bfloat16 on a CPU with avx512_bf16,
# benchmarks/RESULTS.md "Served precision and shortlist"); the output layer's
# through `OutputLayer`, the others in their product layers
# (`precision.lower_precision_model`).
LOWER_PRECISION_PRODUCTS = ("encoder", "decoder", "deep_output", "output")
# The product groups whose kernels an int8 search holds as int8: the same.
INT8_PRODUCTS = LOWER_PRECISION_PRODUCTS


def check_search_options(precision="float32", quantize=None):
    """``(precision, quantize)`` checked; a one-line ValueError naming the bad one.

    ``quantize``: None, or ``"int8"``: the products' kernels held as int8 with
    per-channel scales (`precision.Int8Weights`), computed in ``precision``.
    """
    if not isinstance(precision, str) or precision not in SEARCH_PRECISIONS:
        raise ValueError(
            f"precision must be one of {SEARCH_PRECISIONS}. Received: "
            f"precision={precision!r}"
        )
    if quantize is not None and (
        not isinstance(quantize, str) or quantize not in QUANTIZATIONS
    ):
        raise ValueError(
            f"quantize must be None or one of {QUANTIZATIONS}. Received: "
            f"quantize={quantize!r}"
        )
    return precision, quantize


@dataclasses.dataclass(frozen=True, eq=False)
class OutputLayer:
    """A search's output layer: a vocabulary shortlist, the product's precision.

    Args:
        shortlist: None (every target piece), or ``(candidates, always)`` int32
            arrays (`keras_selfattn.text.shortlist.ShortlistTable`'s
            ``candidates`` and ``always``).
        precision: the output product's, ``"float32"`` or ``"bfloat16"``.
        bucketed: whether a shortlist's width is padded to one of a few sizes
            (`shortlist_ops.padded_ids`; the padding's logits are masked), so
            that an XLA search compiles few shapes. The tokens are the same.
    """

    shortlist: Any = None
    precision: str = "float32"
    bucketed: bool = False

    def __post_init__(self):
        check_search_options(self.precision)

    def graph_key(self):
        """None: a graph holding a table is not cached by `decode`."""

    def bind(self, model, source_ids):
        """The `SearchLogits` of a request's ``source_ids``: the output layer's
        columns taken (for the shortlist) and cast (for the precision) once."""
        vocab_size = model.target_vocab_size
        ids, least_width = None, vocab_size
        if self.shortlist is not None:
            candidates, always = self.shortlist
            ids = shortlist_ops.shortlist_ids(
                source_ids, candidates, always, vocab_size
            )
            if self.bucketed:
                ids = shortlist_ops.padded_ids(ids, vocab_size, PAD_ID)
            least_width = int(np.unique(np.asarray(always)).size)
        kernel, bias = shortlist_ops.output_layer_weights(model, ids)
        kernel = precision_lib.output_kernel_in(kernel, self.precision)

        def logits_of(hidden):
            return shortlist_ops.shortlist_logits(
                hidden, kernel, bias, model.deep_output
            )

        return SearchLogits(vocab_size, max(least_width, 1), logits_of, ids)


def search_output(shortlist=None, precision="float32", bucketed=False):
    """The `OutputLayer` of ``shortlist`` and ``precision`` (``bucketed``: the
    shortlist's width padded for XLA); None (the model's own output layer) with
    neither."""
    if shortlist is None and precision == "float32":
        return None
    return OutputLayer(shortlist, precision, bucketed)
