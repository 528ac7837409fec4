"""What a search ranks at each step: `SearchLogits`, and `WholeVocabulary`.

A search's output layer travels with the search, as an argument of `decode`,
never as the model's state. `decode` takes an output *spec* (an object with
``bind(model, source_ids)`` and ``graph_key()``; `WholeVocabulary` is the
default); the loop binds it once per request, before the loop, and the
strategy forms every step's logits with the bound `SearchLogits`
(`SearchStrategy.log_probabilities`), which also maps the positions a strategy
chooses back to vocabulary ids. The whole vocabulary is the model's own output
layer, positions are ids; a vocabulary shortlist
(`keras_selfattn.models.output_layer`) gives logits over its kept pieces only,
so the log-softmax and the argmax or top-k run over that width.
"""

import numpy as np
from keras import ops

from keras_selfattn.decoding.tensors import NEG
from keras_selfattn.reserved_ids import PAD_ID

__all__ = ["SearchLogits", "WholeVocabulary"]


class SearchLogits:
    """A search's output layer, bound to one request's sources.

    Args:
        width: int, the static upper bound of the logits' width (the
            vocabulary size).
        least_width: int, a static lower bound of it (a beam keeps at most
            this many candidates per hypothesis).
        logits_of: None (the model's own output layer: `Seq2Seq.decode_step`)
            or a function (rows, D) decoder outputs -> float32 (rows, W) logits.
        ids: None (position == vocabulary id), or int32 (W,) the vocabulary id
            of each position.
    """

    def __init__(self, width, least_width, logits_of=None, ids=None):
        self.width = int(width)
        self.least_width = int(least_width)
        self.logits_of = logits_of
        self.ids = ids
        if ids is None:
            values = np.zeros([self.width], "float32")
            values[PAD_ID] = NEG
            self.no_padding = ops.convert_to_tensor(values)
        else:
            self.no_padding = ops.where(ops.equal(ids, PAD_ID), NEG, 0.0)

    def vocabulary_ids(self, positions):
        """int32 vocabulary ids of ``positions`` (any shape) in the logits."""
        positions = ops.cast(positions, "int32")
        if self.ids is None:
            return positions
        return ops.take(self.ids, positions, axis=0)


class WholeVocabulary:
    """The default output spec: the model's own output layer, every target piece."""

    def graph_key(self):
        return ()

    def bind(self, model, source_ids):
        size = model.target_vocab_size
        return SearchLogits(size, size)
