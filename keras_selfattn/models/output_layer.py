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

from keras_selfattn.choices import QUANTIZATIONS, SEARCH_PRECISIONS  # re-exported
from keras_selfattn.decoding.output import SearchLogits
from keras_selfattn.models import precision as precision_lib
from keras_selfattn.models import shortlist_ops
from keras_selfattn.reserved_ids import PAD_ID
from keras_selfattn.search_settings import check_precision

__all__ = [
    "INT8_PRODUCTS",
    "LOWER_PRECISION_PRODUCTS",
    "QUANTIZATIONS",
    "SEARCH_PRECISIONS",
    "OutputLayer",
    "search_output",
]

# The product groups (`precision.PRODUCTS`) a bfloat16 search computes in
# bfloat16: all of them (each was faster in bfloat16 on a CPU with avx512_bf16,
# benchmarks/RESULTS.md "Served precision and shortlist"); the output layer's
# through `OutputLayer`, the others in their product layers
# (`precision.lower_precision_model`).
LOWER_PRECISION_PRODUCTS = ("encoder", "decoder", "deep_output", "output")
# The product groups whose kernels an int8 search holds as int8: the same.
INT8_PRODUCTS = LOWER_PRECISION_PRODUCTS


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
        check_precision(self.precision)

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
